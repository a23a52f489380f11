"""Lowering a verified :class:`~tsjit.ts.task_manager.TaskManager` into kernel code.

``run(manager)`` is called from inside a ``@tsjit.kernel`` (``manager.run()``) and emits,
into the kernel being compiled:

* one warp-range branch per task: ``if warp_start <= warp_idx < warp_end`` (warp-uniform);
* the task's schedule, straight-line: Head steps, the domain loop as a real loop (start,
  end and step may be run-time values; ``Task.get_domain`` gives a per-tile end), Tail
  steps; FirstIter / LastIter / Every / WhenTrue / WhenFalse blocks as real guards;
* each work step as an inlined call of the resource's work method, compiled by the
  frontend from its own source with ``self`` bound to the resource and a
  :class:`~tsjit.ts.resources.StageInfo` whose ``label`` is a compile-time string (so
  ``if stage_info.label == ...`` folds);
* task-local variables as SSA values: a consumer work's return defines a new version, a
  routed producer input reads the latest one; guarded joins and the loop back edge get
  phis whose entry value is the variable's default.

Pipeline operations (acquire/commit/wait/release) are lowered by :mod:`.lower_pipeline`
(cursors are more SSA values of the task's scope); ``Task.num_registers`` becomes a
``setmaxnreg`` at the top of the task's branch.
"""
from __future__ import annotations


from tsjit.backend import emit
from tsjit.errors import CompilationError, VerificationError, warn
from tsjit.frontend import ssa
from tsjit.frontend.frame import current_generator
from tsjit.lang import bounded_wait
from tsjit.lang import builtins as B
from tsjit.lang import dtypes as dt
from tsjit.lang.values import Value, as_value, cast_to, compare, constant
from tsjit.lang import sync
from tsjit.lang.memory import shared_pointer
from tsjit.ts import lower_debug, lower_pipeline
from tsjit.ts import lower_tmem as tmem
from tsjit.ts.diagnostics import VerificationWarning
from tsjit.ts.enums import BlockCondition, ScheduleStage
from tsjit.ts.resources import ResourceContext, StageInfo
from tsjit.ts.schedule import DomainLoop, GuardBlock, Step, WorkTileLoop

_WORK_STAGES = {ScheduleStage.ConsumerWork, ScheduleStage.ProducerWork, ScheduleStage.ConsumerAuxWork,
                ScheduleStage.ProducerAuxWork}


def setup(manager) -> None:
    """Place every pipelined resource's mbarriers in the dynamic shared-memory block and initialize
    them (one elected thread, ``fence.mbarrier_init``, CTA barrier).  Every thread of the CTA must
    call ``setup_resources_and_tasks()``."""
    if current_generator() is None or not emit.active():
        raise CompilationError("TaskManager.setup_resources_and_tasks() must be called inside a @tsjit.kernel")
    storages = lower_pipeline.allocate(manager)
    tmem_allocation = tmem.allocate(manager)       # warp 0: tcgen05.alloc (sm_100a), before the barrier below
    _check_shared_memory(manager, gen_km=emit.current())
    lower_pipeline.initialize(storages, clustered=any(st.cluster > 1 for st in storages.values()))
    if tmem_allocation is not None and not storages:
        B.syncthreads()
    manager.lowering_state = {"storages": storages, "tmem": tmem_allocation,
                              "tmem_base": tmem.read_base(tmem_allocation) if tmem_allocation else None}
    return None


class _TaskLowering:
    """Emits one task's schedule.  ``scope`` maps slot keys to the current SSA value of each variable."""

    def __init__(self, manager, task, gen):
        self.manager = manager
        self.task = task
        self.gen = gen
        self.km = gen.km
        self.slots = {}
        self.task_cache = task.make_task_cache() if hasattr(task, "make_task_cache") else None
        self.loop = None  # (iv Value, start, end, step) inside the domain loop
        self.storages = getattr(manager, "lowering_state", {}).get("storages", {})
        self.cursors = {}
        self.queue = getattr(task, "work_queue", None)
        self.context = _resource_context(manager)

    # -- variables ------------------------------------------------------------------------
    def key(self, variable) -> str:
        return f"{variable.name}@{id(variable):x}" if getattr(variable, "name", None) else f"var@{id(variable):x}"

    def init_variables(self, scope: dict) -> None:
        for variable in self.task.local_variables:
            default = variable.make_default()
            scope[self.key(variable)] = _typed(default, variable)

    # -- nodes --------------------------------------------------------------------------
    def emit_nodes(self, nodes, scope: dict, offset) -> None:
        for node in nodes:
            if self.gen.dead:
                return
            if isinstance(node, Step):
                self.emit_step(node, scope, offset)
            elif isinstance(node, DomainLoop):
                self.emit_domain_loop(node, scope)
            elif isinstance(node, GuardBlock):
                self.emit_guard(node, scope, offset)
            elif isinstance(node, WorkTileLoop):
                self.emit_work_tile_loop(node, scope)
            else:
                raise CompilationError(f"internal: unknown schedule node {type(node).__name__}")

    def stage_info(self, step: Step, offset, scope) -> StageInfo:
        start, end, step_value = self.loop[1:] if self.loop else self.head_bounds(scope)
        stage_idx, barrier, in_flight = None, None, 0
        storage = self.storages.get(step.resource)
        if storage is not None:
            stage_idx = 0
            side = "producer" if step.stage.name.startswith("Producer") else "consumer"
            cursors = self.cursors.get((step.resource, side))
            if cursors is not None:
                stage_idx, barrier = lower_pipeline.stage_barrier(step, storage, cursors, scope)
                if side == "producer" and storage.config.advance_on_acquire:
                    in_flight = lower_pipeline.stages_in_flight(storage, cursors, scope)
        return StageInfo(offset, start, end, step_value, stage_idx, step.label, barrier, self.work_tile(scope),
                         in_flight, self.context, self.task_cache)

    def head_bounds(self, scope) -> tuple:
        """(start, end, step) of the task's domain loop for steps before it (Head): the end of a
        ``get_domain`` domain is evaluated for the current tile."""
        loop = self.task.schedule.domain_loop
        if loop is None:
            return None, None, None
        end = loop.end
        if loop.end_provider is not None:
            tile = self.work_tile(scope)
            coords = tuple(tile.coords) if tile is not None else tuple(B.block_idx())
            end = self.gen.inline(loop.end_provider, [self.task, coords], {}, None)
        return loop.start, end, loop.step

    def wait_context(self, step, side: str, stage) -> dict:
        """What a TSJIT_DEBUG=1 hang report says about a wait emitted for ``step`` (lang.bounded_wait):
        the task, the step, the barrier (empty for producers, full for consumers), the stage index, and
        the domain loop's offset and iteration (computed only on the timeout path)."""
        loop = self.loop

        def iteration():
            if loop is None:
                return None
            offset, start, _, stride = loop
            return (offset - start) // stride
        return dict(task=self.task.describe(), operation=step.describe(), resource=step.resource.name,
                    barrier=f"{step.resource.name}.{'empty' if side == 'producer' else 'full'}", stage=stage,
                    loop_offset=loop[0] if loop else None, iteration=iteration)

    def work_tile(self, scope):
        queue = self.queue
        return scope.get(self.key(queue.work_tile)) if queue is not None else None

    def emit_step(self, step: Step, scope: dict, offset) -> None:
        if step.stage not in _WORK_STAGES and getattr(step.resource, "is_work_queue", False) \
                and getattr(step.resource, "pipeline_config", None) is None:
            return  # a static persistent queue has no barriers: its wait/release are bookkeeping only
        if step.stage not in _WORK_STAGES:
            storage = self.storages.get(step.resource)
            if storage is None:
                raise CompilationError(
                    f"task '{self.task.name}' step #{step.id}: {step.stage.name} on '{step.resource.name}': the "
                    f"resource has no pipeline storage (call manager.setup_resources_and_tasks() first)",
                    step.location)
            side = "producer" if step.stage.name.startswith("Producer") else "consumer"
            cursors = self.cursors[(step.resource, side)]
            lower_debug.annotate_step(self.task, step, lower_debug.step_stage(step, cursors, scope), self.loop)
            described = self.wait_context(step, side, scope[cursors.open_index]) if bounded_wait.enabled() else {}
            with bounded_wait.wait_context(**described):
                lower_pipeline.emit_operation(step, self.task, storage, cursors, scope)
            return
        kwargs = dict(step.constexpr_kwargs)
        for param, token in step.inputs.items():
            kwargs[param] = scope[self.key(token.variable)]
        info = self.stage_info(step, offset, scope)
        lower_debug.annotate_step(self.task, step, info.stage_idx, self.loop)
        try:
            result = self.gen.inline(step.function, [step.resource, info], kwargs, None)
        except CompilationError as exc:
            raise exc.with_caller(step.location) if step.location is not None else exc
        outputs = tuple(step.outputs)
        if not outputs:
            return
        results = result if len(outputs) > 1 else (result,)
        if not isinstance(results, tuple) or len(results) != len(outputs):
            raise CompilationError(
                f"task '{self.task.name}' step #{step.id}: work '{step.label}' of '{step.resource.name}' must return "
                f"{len(outputs)} value(s) for {[v.name for v in outputs]}", step.location)
        for variable, value in zip(outputs, results):
            if isinstance(value, Value) and isinstance(variable.dtype, dt.DType) and value.dtype is not variable.dtype \
                    and value.dtype.is_float and not variable.dtype.is_float:
                raise CompilationError(
                    f"work '{step.label}' of '{step.resource.name}' returns a {value.dtype.name} for "
                    f"'{variable.name}', declared {variable.dtype.name}", step.location)
            if isinstance(value, Value) and isinstance(variable.dtype, dt.DType) and not value.dtype.is_float \
                    and not variable.dtype.is_float and value.dtype.bits > variable.dtype.bits:
                raise CompilationError(
                    f"work '{step.label}' of '{step.resource.name}' returns a {value.dtype.name} for "
                    f"'{variable.name}', declared {variable.dtype.name}: storing it would drop the high bits. "
                    f"Convert it in the work body (tsjit.{variable.dtype.name}(value)) or declare "
                    f"TaskLocalVariable({value.dtype.name})", step.location)
            scope[self.key(variable)] = _typed(value, variable)

    def emit_guard(self, node: GuardBlock, scope: dict, offset) -> None:
        cond = self.guard_condition(node.guard, scope, offset)
        if not isinstance(cond, Value):
            if cond:
                self.emit_nodes(node.body, scope, offset)
            return
        b = self.km.builder
        then_block, skip_block = self.gen.new_block("guard.then"), self.gen.new_block("guard.skip")
        b.cbranch(cond.ir, then_block, skip_block)
        before = dict(scope)
        b.position_at_end(then_block)
        inner = dict(scope)
        self.emit_nodes(node.body, inner, offset)
        edges = [ssa.Edge(b.block, inner), ssa.Edge(skip_block, before)]
        join = self.gen.new_block("guard.end")
        scope.update(ssa.merge_scopes(b, edges, join))

    def guard_condition(self, guard, scope, offset):
        c = guard.condition
        if c is BlockCondition.Skippable:
            skip = scope[self.key(self.queue.skip_work_tile)]
            return Value(self.km.builder.not_(cast_to(as_value(skip), dt.Boolean).ir), dt.Boolean) \
                if isinstance(skip, Value) else not skip
        if c in (BlockCondition.WhenTrue, BlockCondition.WhenFalse):
            value = scope[self.key(guard.variable)]
            truth = compare("!=", value, 0)
            return truth if c is BlockCondition.WhenTrue else Value(self.km.builder.not_(truth.ir), dt.Boolean)
        if self.loop is None:
            raise CompilationError(f"task '{self.task.name}': {c.name} guard outside the domain loop")
        _, start, end, step = self.loop
        trip = (offset - start) // step
        if c is BlockCondition.FirstIter:
            return compare("==", offset, start)
        if c is BlockCondition.LastIter:
            return compare(">=", offset + step, end) if not isinstance(step, int) or step > 0 \
                else compare("<=", offset + step, end)
        if c is BlockCondition.Every:
            first = guard.start or 0
            return (trip >= first) & (((trip - first) % guard.period) == 0)
        raise CompilationError(f"task '{self.task.name}': {c.name} blocks are lowered by the persistent layer")

    def emit_work_tile_loop(self, node: WorkTileLoop, scope: dict) -> None:
        """``while work_tile.is_valid``: the persistent loop; ``skip_if`` is evaluated once per tile."""
        queue = node.queue
        tile_key = self.key(queue.work_tile)
        b = self.km.builder
        preheader = b.block
        header = self.gen.new_block("worktile.header")
        b.branch(header)
        b.position_at_end(header)
        records = ssa.loop_header_phis(b, scope, set(scope), preheader)
        valid = scope[tile_key].is_valid
        header_scope = dict(scope)
        body, exit_block = self.gen.new_block("worktile.body"), self.gen.new_block("worktile.exit")
        b.cbranch(cast_to(as_value(valid), dt.Boolean).ir if isinstance(valid, Value) else
                  as_value(bool(valid)).ir, body, exit_block)
        b.position_at_end(body)
        inner = dict(scope)
        if node.skip_if is not None:
            skip = node.skip_if(queue, inner[tile_key])
            inner[self.key(queue.skip_work_tile)] = _typed(skip, queue.skip_work_tile)
        _emit_sections(self, node.body, inner, self.head_offset)    # Head / Loop / Tail of each tile
        ssa.complete_loop_phis(b, records, inner, b.block)
        b.branch(header)
        b.position_at_end(exit_block)
        scope.clear()
        scope.update(header_scope)

    def emit_domain_loop(self, loop: DomainLoop, scope: dict) -> None:
        start, step = loop.start, loop.step
        end = loop.end
        if loop.end_provider is not None:
            tile = self.work_tile(scope)
            coords = tuple(tile.coords) if tile is not None else tuple(B.block_idx())
            end = self.gen.inline(loop.end_provider, [self.task, coords], {}, None)
        index_dtype = dt.Int32
        for v in (start, end, step):
            if isinstance(v, Value) and v.dtype.bits == 64:
                index_dtype = dt.Int64
        start_v, end_v, step_v = (cast_to(as_value(v, index_dtype), index_dtype) for v in (start, end, step))
        b = self.km.builder
        preheader = b.block
        header = self.gen.new_block("domain.header")
        b.branch(header)
        b.position_at_end(header)
        records = ssa.loop_header_phis(b, scope, set(scope), preheader)
        iv_phi = b.phi(start_v.ir.type, name="loop_offset")
        iv_phi.add_incoming(start_v.ir, preheader)
        iv = Value(iv_phi, index_dtype)
        if isinstance(step, int):
            cond = compare("<" if step > 0 else ">", iv, end_v)
        else:
            cond = Value(b.select(compare(">", step_v, 0).ir, compare("<", iv, end_v).ir,
                                  compare(">", iv, end_v).ir), dt.Boolean)
        header_scope = dict(scope)
        body, exit_block = self.gen.new_block("domain.body"), self.gen.new_block("domain.exit")
        br = b.cbranch(cond.ir, body, exit_block)
        b.position_at_end(body)
        outer = self.loop
        self.loop = (iv, start_v, end_v, step if isinstance(step, int) else step_v)
        inner = dict(scope)
        self.emit_nodes(loop.body, inner, iv)
        self.loop = outer
        next_iv = b.add(iv_phi, step_v.ir, name="loop_offset.next")
        ssa.complete_loop_phis(b, records, inner, b.block)
        iv_phi.add_incoming(next_iv, b.block)
        back = b.branch(header)
        if loop.unroll:
            self.km.loop_unroll_hints.append((back, int(loop.unroll)))
        b.position_at_end(exit_block)
        scope.clear()
        scope.update(header_scope)
        # Tail steps see the last index of the domain.
        self.tail_offset = end_v - 1 if isinstance(step, int) and step == 1 else \
            start_v + ((end_v - start_v - 1) // step_v) * step_v
        self.loop = (self.tail_offset, start_v, end_v, step if isinstance(step, int) else step_v)
        del br


def _check_shared_memory(manager, gen_km) -> None:
    """M1 over everything the kernel placed in its dynamic shared-memory block: resource buffers made
    with ``tsjit.shared_array`` and the pipeline barriers (the allocator's own report covers only what
    resources declared through ``get_smem_requirements``)."""
    capacity = manager.smem_capacity_bytes
    used = gen_km.smem_bytes
    if used > capacity:
        barrier_bytes = sum(getattr(r.pipeline_config, "barrier_bytes", 0) for r in manager.resources
                            if getattr(r, "pipeline_config", None) is not None)
        message = (f"the kernel's shared memory ({used} B: buffers {used - barrier_bytes} B + barriers "
                   f"{barrier_bytes} B) exceeds the capacity of {capacity} B; use fewer stages, smaller tiles, or "
                   f"alias buffers that are not live at the same time")
        if manager.options.skip_validation:  # demoted like every other check (TaskManager._fail)
            warn(f"[M1] {message}", VerificationWarning)
        else:
            raise VerificationError(message, check="M1")


def _resource_context(manager):
    """``StageInfo.context``: the allocator region's base pointer and the TMEM pointer, or None when the
    kernel uses neither."""
    allocator = getattr(manager, "smem_allocator", None)
    allocations = getattr(allocator, "allocations", None) or ()
    base = next((a.block_base for a in allocations if getattr(a, "block_base", None) is not None), None)
    tmem_base = getattr(getattr(manager, "options", None), "tmem_ptr_i32", None)
    if tmem_base is None:
        tmem_base = getattr(manager, "lowering_state", {}).get("tmem_base")
    if base is None and tmem_base is None:
        return None
    return ResourceContext(smem_base=shared_pointer(base, dt.Uint8, 1024) if base is not None else None,
                           tmem_ptr_i32=tmem_base)


def _typed(value, variable):
    """``value`` as the variable's type: scalars are converted to its DType (None = zero); composite
    variables (e.g. a WorkQueue's WorkTileInfo) keep their structure."""
    dtype = variable.dtype
    if isinstance(dtype, dt.DType):
        return cast_to(as_value(0 if value is None else value, dtype), dtype)
    return value


def run(manager) -> None:
    """Emit every task of ``manager`` into the kernel being compiled (see module docstring).

    Raises:
        CompilationError: called outside a ``@tsjit.kernel``, or a schedule needs a layer this
            build does not lower (pipelines, work-tile loops).
    """
    gen = current_generator()
    if gen is None or not emit.active():
        raise CompilationError("TaskManager.run() must be called inside a @tsjit.kernel function")
    km = gen.km
    b = km.builder
    # The CTA is exactly the tasks' warps: the launcher refuses any other block (issue 9 §2).
    km.launch_requirements = km.launch_requirements.merged(threads=manager.total_warps * 32)
    if any(task.num_registers for task in manager.tasks):
        # setmaxnreg needs the register count at kernel entry, which ptxas derives from .maxntid
        # (without it: "C7508 setmaxnreg ignored").
        km.annotate("maxntidx", manager.total_warps * 32)
    warp = B.warp_idx()
    join = gen.new_block("tasks.end")
    for task in manager.tasks:
        in_range = compare(">=", warp, task.warp_start) & compare("<", warp, task.warp_end)
        body, next_block = gen.new_block(f"task.{task.name}"), gen.new_block(f"task.{task.name}.skip")
        b.cbranch(in_range.ir, body, next_block)
        b.position_at_end(body)
        lowering = _TaskLowering(manager, task, gen)
        lower_debug.task_comment(task)
        kind, registers = manager.register_request(task)
        if kind is not None:
            sync.setmaxnreg(registers, increase=(kind == "inc"))
        scope: dict = {}
        lowering.init_variables(scope)
        lowering.cursors = lower_pipeline.init_cursors(task, lowering.storages, scope)
        start = task.schedule.domain_loop.start if task.schedule.domain_loop is not None else 0
        lowering.tail_offset = None
        head_offset = start if isinstance(start, (int, Value)) else constant(0)
        lowering.head_offset = head_offset
        _emit_sections(lowering, task.schedule.body, scope, head_offset)
        if not gen.dead:
            lower_pipeline.producer_tail(task, lowering.storages, lowering.cursors, scope)
        if not gen.dead:
            b.branch(join)
        gen.dead = False
        b.position_at_end(next_block)
    b.branch(join)
    b.position_at_end(join)
    state = getattr(manager, "lowering_state", {})
    if any(st.cluster > 1 for st in state.get("storages", {}).values()):
        sync.cluster_sync()   # no CTA leaves while a peer may still multicast into or arrive on it
    tmem.free(state.get("tmem"), state.get("tmem_base"))   # warp 0: tcgen05.dealloc after every task


def _emit_sections(lowering: _TaskLowering, nodes, scope, head_offset) -> None:
    """Head steps use the loop start as ``loop_offset``; steps after the loop use the last index."""
    offset = head_offset
    for node in nodes:
        lowering.emit_nodes([node], scope, offset)
        if isinstance(node, DomainLoop):
            offset = lowering.tail_offset
