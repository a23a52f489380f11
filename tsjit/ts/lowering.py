"""Lowering a verified :class:`~tsjit.ts.task_manager.TaskManager` into kernel code.

``setup(manager)`` and ``run(manager, lowered)`` are called from inside a ``@tsjit.kernel``
(``manager.setup_resources_and_tasks()``, ``manager.run()``); ``run`` emits, into the kernel:

* one warp-range branch per task: ``if warp_start <= warp_idx < warp_end`` (warp-uniform; with
  ``run_only_on_cta_id=k`` also ``and cluster_ctarank == k``);
* the task's schedule, straight-line: Head steps, the domain loop as a real loop (start,
  end and step may be run-time values; ``Task.get_domain`` gives a per-tile end), Tail
  steps; FirstIter / LastIter / Every / WhenTrue / WhenFalse blocks as real guards;
* each work step as an inlined call of the resource's work method, compiled by the
  frontend from its own source with ``self`` bound to the resource and a
  :class:`~tsjit.ts.memory_resource.StageInfo` whose ``label`` is a compile-time string (so
  ``if stage_info.label == ...`` folds);
* task-local variables as SSA values: a consumer work's return defines a new version, a
  routed producer input reads the latest one; guarded joins and the loop back edge get
  phis whose entry value is the variable's default.

Pipeline operations (acquire/commit/wait/release) are lowered by :mod:`.lower_pipeline`
(cursors are more SSA values of the task's scope); ``Task.num_registers`` becomes a
``setmaxnreg`` at the top of the task's branch.

All code is built through :class:`tsjit.frontend.structured.Structured` (``if_then``, ``guard``,
``arms``, the counted and while loops the frontend's own ``for`` / ``while`` use, ``inline_work``,
``require_launch``); the loop guards are read by :meth:`tsjit.ts.schedule.Guard.holds_on`, as in
the simulations.  ``setup`` returns a :class:`LoweringResult` that ``run`` takes back.
"""
from __future__ import annotations


from dataclasses import dataclass

from tsjit.errors import CompilationError, VerificationError, warn
from tsjit.frontend import structured
from tsjit.lang import bounded_wait
from tsjit.lang import builtins as B
from tsjit.lang import dtypes as dt
from tsjit.lang.values import Value, as_value, cast_to, compare, constant, logical_not
from tsjit.lang import sync, warpgroup
from tsjit.lang.memory import shared_pointer
from tsjit.ts import lower_debug, lower_pipeline
from tsjit.ts import lower_tmem as tmem
from tsjit.ts.diagnostics import VerificationWarning
from tsjit.ts.enums import BlockCondition, ScheduleStage
from tsjit.ts.memory_resource import ResourceContext, StageInfo
from tsjit.ts.schedule import DomainLoop, GuardBlock, Step, Trip, WorkTileLoop

_WORK_STAGES = {ScheduleStage.ConsumerWork, ScheduleStage.ProducerWork, ScheduleStage.ConsumerAuxWork,
                ScheduleStage.ProducerAuxWork}


@dataclass(frozen=True)
class LoweringResult:
    """What ``setup_resources_and_tasks()`` placed, for ``run()``: ``storages`` maps each pipelined
    resource to its :class:`~tsjit.ts.lower_pipeline.PipelineStorage`; ``smem_base`` is the byte
    offset of the SMEM allocator's region in the dynamic shared-memory block (None without one);
    ``tmem`` / ``tmem_base`` the TMEM allocation (:mod:`tsjit.ts.lower_tmem`) and its base address
    (None without one)."""

    storages: dict
    smem_base: int | None
    tmem: object = None
    tmem_base: object = None

    @property
    def clustered(self) -> bool:
        """Some ring spans more than one CTA (the kernel ends with a cluster barrier)."""
        return any(st.cluster > 1 for st in self.storages.values())


def setup(manager) -> LoweringResult:
    """Place every pipelined resource's mbarriers in the dynamic shared-memory block and initialize
    them (one elected thread, ``fence.mbarrier_init``, CTA barrier).  Every thread of the CTA must
    call ``setup_resources_and_tasks()``; warp 0 allocates the TMEM the resources declare (sm_100a).
    Returns the :class:`LoweringResult` ``run`` needs.

    Raises:
        CompilationError: called outside a ``@tsjit.kernel``; a pipeline this target cannot lower.
        VerificationError: the kernel's shared memory exceeds the capacity (M1).
    """
    ctx = structured.context("TaskManager.setup_resources_and_tasks()")
    base = lower_pipeline.place_allocator(ctx, manager)
    storages = lower_pipeline.allocate(ctx, manager, base)
    tmem_allocation = tmem.allocate(ctx, manager)       # warp 0: tcgen05.alloc (sm_100a), before the barrier below
    _check_shared_memory(manager, ctx.smem_bytes)
    clustered = any(st.cluster > 1 for st in storages.values())
    lower_pipeline.initialize(ctx, storages, clustered=clustered)
    if tmem_allocation is not None and not storages:
        B.syncthreads()
    return LoweringResult(storages, base, tmem_allocation,
                          tmem.read_base(tmem_allocation) if tmem_allocation else None)


class _LoopTrip(Trip):
    """The current trip of the domain loop being lowered, as run-time Values computed on demand
    (:meth:`~tsjit.ts.schedule.Guard.holds_on` reads the ones its guard needs)."""

    def __init__(self, offset, start, end, step):
        self._offset, self._start, self._end, self._step = offset, start, end, step

    @property
    def index(self):
        return (self._offset - self._start) // self._step

    @property
    def first(self):
        return compare("==", self._offset, self._start)

    @property
    def last(self):
        step = self._step
        return compare(">=", self._offset + step, self._end) if not isinstance(step, int) or step > 0 \
            else compare("<=", self._offset + step, self._end)


class _TaskLowering:
    """Emits one task's schedule.  ``scope`` maps slot keys to the current SSA value of each variable."""

    def __init__(self, manager, task, ctx: structured.Structured, lowered: LoweringResult):
        self.manager = manager
        self.task = task
        self.ctx = ctx
        self.slots = {}   # id(variable) -> its number in this task: scope keys must not depend on addresses
        self.task_cache = task.make_task_cache() if hasattr(task, "make_task_cache") else None
        self.loop = None  # (iv Value, start, end, step) inside the domain loop
        self.storages = lowered.storages
        self.cursors = {}
        self.queue = getattr(task, "work_queue", None)
        self.context = _resource_context(manager, lowered)

    # -- variables ------------------------------------------------------------------------
    def key(self, variable) -> str:
        number = self.slots.setdefault(id(variable), len(self.slots))
        return f"{getattr(variable, 'name', None) or 'var'}#{number}"

    def init_variables(self, scope: dict) -> None:
        for variable in self.task.local_variables:
            default = variable.make_default()
            scope[self.key(variable)] = _typed(default, variable)

    # -- nodes --------------------------------------------------------------------------
    def emit_nodes(self, nodes, scope: dict, offset) -> None:
        for node in nodes:
            if not self.ctx.reachable:
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
            end = self.ctx.inline_work(loop.end_provider, [self.task, coords])
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
            stage = lower_debug.step_stage(step, cursors, scope)
            lower_debug.annotate_step(self.ctx, self.task, step, stage, self.loop)
            described = self.wait_context(step, side, scope[cursors.open_index]) if bounded_wait.enabled() else {}
            # reports (interpreter deadlocks) name the schedule's line, not m.run()
            with self.ctx.at_source(step.location), bounded_wait.wait_context(**described):
                lower_pipeline.emit_operation(self.ctx, step, self.task, storage, cursors, scope)
            return
        kwargs = dict(step.constexpr_kwargs)
        for param, token in step.inputs.items():
            kwargs[param] = scope[self.key(token.variable)]
        info = self.stage_info(step, offset, scope)
        lower_debug.annotate_step(self.ctx, self.task, step, info.stage_idx, self.loop)
        result = self.ctx.inline_work(step.function, [step.resource, info], kwargs, step.location)
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
        self.ctx.guard(cond, scope, lambda inner: self.emit_nodes(node.body, inner, offset))

    def guard_condition(self, guard, scope, offset):
        c = guard.condition
        if c is BlockCondition.Skippable:
            return logical_not(scope[self.key(self.queue.skip_work_tile)])
        if c in (BlockCondition.WhenTrue, BlockCondition.WhenFalse):
            value = scope[self.key(guard.variable)]
            truth = compare("!=", value, 0)
            return truth if c is BlockCondition.WhenTrue else logical_not(truth)
        if not c.is_loop_guard:
            raise CompilationError(f"task '{self.task.name}': {c.name} blocks are lowered by the persistent layer")
        if self.loop is None:
            raise CompilationError(f"task '{self.task.name}': {c.name} guard outside the domain loop")
        _, start, end, step = self.loop
        return guard.holds_on(_LoopTrip(offset, start, end, step))

    def emit_work_tile_loop(self, node: WorkTileLoop, scope: dict) -> None:
        """``while work_tile.is_valid``: the persistent loop; ``skip_if`` is evaluated once per tile."""
        queue = node.queue
        tile_key = self.key(queue.work_tile)

        def body(inner):
            if node.skip_if is not None:
                skip = node.skip_if(queue, inner[tile_key])
                inner[self.key(queue.skip_work_tile)] = _typed(skip, queue.skip_work_tile)
            _emit_sections(self, node.body, inner, self.head_offset)    # Head / Loop / Tail of each tile
        self.ctx.while_loop(lambda s: s[tile_key].is_valid, scope, body, label="worktile")

    def emit_domain_loop(self, loop: DomainLoop, scope: dict) -> None:
        start, step = loop.start, loop.step
        end = loop.end
        if loop.end_provider is not None:
            tile = self.work_tile(scope)
            coords = tuple(tile.coords) if tile is not None else tuple(B.block_idx())
            end = self.ctx.inline_work(loop.end_provider, [self.task, coords])
        _, start_v, end_v, step_v = structured.loop_bounds(start, end, step, "a domain loop")
        step_arg = step if isinstance(step, int) else step_v
        outer = self.loop

        def body(iv, inner):
            self.loop = (iv, start_v, end_v, step_arg)
            self.emit_nodes(loop.body, inner, iv)
        self.ctx.counted_loop(start_v, end_v, step_arg, scope, body, label="domain", iv_name="loop_offset",
                              unroll=loop.unroll)
        self.loop = outer
        # Tail steps see the last index of the domain.
        self.tail_offset = end_v - 1 if isinstance(step, int) and step == 1 else \
            start_v + ((end_v - start_v - 1) // step_v) * step_v
        self.loop = (self.tail_offset, start_v, end_v, step if isinstance(step, int) else step_v)

def _check_shared_memory(manager, used: int) -> None:
    """M1 over everything the kernel placed in its dynamic shared-memory block: resource buffers made
    with ``tsjit.shared_array`` and the pipeline barriers (the allocator's own report covers only what
    resources declared through ``get_smem_requirements``)."""
    capacity = manager.smem_capacity_bytes
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


def _resource_context(manager, lowered: LoweringResult):
    """``StageInfo.context``: the allocator region's base pointer and the TMEM pointer, or None when the
    kernel uses neither."""
    base = lowered.smem_base
    tmem_base = getattr(getattr(manager, "options", None), "tmem_ptr_i32", None)
    if tmem_base is None:
        tmem_base = lowered.tmem_base
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


def run(manager, lowered: LoweringResult) -> None:
    """Emit every task of ``manager`` into the kernel being compiled (see module docstring);
    ``lowered`` is what :func:`setup` returned.

    Raises:
        CompilationError: called outside a ``@tsjit.kernel``, or a schedule needs a layer this
            build does not lower (pipelines, work-tile loops).
    """
    ctx = structured.context("TaskManager.run()")
    # The CTA is exactly the tasks' warps: the launcher refuses any other block (issue 9 §2).
    # setmaxnreg needs the register count at kernel entry, which ptxas derives from .maxntid
    # (without it: "C7508 setmaxnreg ignored").
    ctx.require_launch(threads=manager.total_warps * 32,
                       threads_at_entry=any(task.num_registers for task in manager.tasks))
    warp = B.warp_idx()

    def emit_task(task):
        with warpgroup.static_warp_range(task.warp_start, task.warp_end, f"task '{task.name}'"):
            emit_task_body(task)

    def emit_task_body(task):
        lowering = _TaskLowering(manager, task, ctx, lowered)
        lower_debug.task_comment(ctx, task)
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
        if ctx.reachable:
            lower_pipeline.producer_tail(ctx, task, lowering.storages, lowering.cursors, scope)

    def runs_here(task):
        """The task's warps, and (``run_only_on_cta_id=k``) only on cluster CTA ``k``."""
        cond = compare(">=", warp, task.warp_start) & compare("<", warp, task.warp_end)
        if task.run_only_on_cta_id is not None:
            cond = cond & compare("==", B.cluster_ctarank(), task.run_only_on_cta_id)
        return cond

    ctx.arms([(lambda task=task: runs_here(task), f"task.{task.name}", lambda task=task: emit_task(task))
              for task in manager.tasks], "tasks.end")
    if lowered.clustered:
        sync.cluster_sync()   # no CTA leaves while a peer may still multicast into or arrive on it
    tmem.free(ctx, lowered.tmem, lowered.tmem_base)   # warp 0: tcgen05.dealloc after every task


def _emit_sections(lowering: _TaskLowering, nodes, scope, head_offset) -> None:
    """Head steps use the loop start as ``loop_offset``; steps after the loop use the last index."""
    offset = head_offset
    for node in nodes:
        lowering.emit_nodes([node], scope, offset)
        if isinstance(node, DomainLoop):
            offset = lowering.tail_offset

