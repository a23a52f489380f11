"""What the exhaustive checker explores: tasks compiled to processes of synchronising ops.

The schedules are expanded by :mod:`tsjit.ts.verify.exhaustive_expand` and then
compiled here into a :class:`Process` per task (one per warp for warp-lane interleaved
tasks) -- a list of :class:`Op`, each one *synchronising*
transition exactly as ``tsjit/ts/lower_pipeline.py`` emits it:

each pipeline operation is the list of barrier actions of the protocol table
(:func:`tsjit.ts.protocol.actions`, the same list the lowering emits), folded into one op:

* ``WaitParity`` becomes the op's guard (skipped after a successful probe), ``Probe`` its
  probe of a barrier;
* ``CommitUmma`` (``tcgen05.commit``) is asynchronous: the op issues a :class:`Copy` that
  lands its arrival later, and the reads of the MMAs issued since the process's previous
  commit (its UMMA consumer works) stay active until then; one process's commits land in
  order;
* ``ArmTx`` / ``Arrive`` become its arrivals ``(barrier, n, bytes)``, with
  ``n`` the :class:`~tsjit.ts.protocol.Who`'s arrivals for the process's warps, times the
  CTAs whose arrivals land on one barrier under the symmetric reduction of a cluster, or, when
  the CTAs differ, on the barriers of the CTAs the action reaches, every CTA modelled with its
  own processes, barriers and regions (:mod:`tsjit.ts.verify.exhaustive_cluster`);
* ``SetStage`` / ``Advance`` move the statically known cursors;
* the producer tail (:func:`tsjit.ts.protocol.tail_actions`) and PDL ``wait_griddep`` /
  ``launch_griddep`` are ops of their own.

Cursor arithmetic (index, phase, advance-on-acquire/-wait, interleave lanes and strides)
is done here, statically, because it only depends on the position in the sequence.  Each
barrier is modelled exactly: parity, arrivals still pending in the current phase (reset
to the configured count when the phase completes) and the transaction count.

Everything between two ops is *local* to the thread and is folded into the op before it
(so a run of work steps costs no transitions): the data accesses of those work steps form
the op's ``segment``, active from that op to the next one.  This gives every access the
widest window the synchronisation allows, so two accesses can overlap in some
interleaving exactly when no barrier orders them.  A TMA producer work spawns a
:class:`Copy` instead: an asynchronous write of the stage, in flight from the op that
opens its segment until the copy's own completion transition (``complete_tx``).

Accesses: consumer work reads, producer work writes, the current stage of a pipelined
resource; work on a non-pipelined resource with an SMEM allocation accesses the whole
allocation; a work on a resource whose fields reference a pipelined resource ``U``
(``GmemTiles.smem``) also reads the stage of ``U`` the task waited for in the same loop
iteration (or Head / Tail), or writes the stage it acquired when it produces ``U``.
Auxiliary work and WorkQueue bookkeeping access nothing.  Regions conflict when they
are the same stage, or when their allocator byte ranges overlap (alias groups), see
:mod:`tsjit.ts.verify.exhaustive_regions`.

Pipeline groups: a member's barriers of a shared kind are its group's (one :class:`Barrier` owned
by the group, its count the group's), a Merge member's release cursor is the group's, and only the
first step of a collapsed operation's fan-out signals (:mod:`tsjit.ts.group_protocol`, the same
rules the lowering follows).
"""
from __future__ import annotations

from tsjit.ts import protocol, tx_bytes
from tsjit.ts.enums import ScheduleStage
from tsjit.ts.group_protocol import barrier_array, cursor_owner, member_actions
from tsjit.ts.pipeline import PipelineConfig
from tsjit.ts.protocol import (Advance, Arrive, ArmTx, BarrierKind, CommitUmma, Cursor, Gate, Probe, SetStage,
                               WaitParity)
from tsjit.ts.verify.async_reads import InFlight, work_events
from tsjit.ts.verify.exhaustive_cluster import acts_on, cluster_plan, copy_landing, targets
from tsjit.ts.verify.exhaustive_expand import Variant, expand_task
from tsjit.ts.verify.exhaustive_probes import fold_probes
from tsjit.ts.verify.exhaustive_program import (Access, Barrier, Copy, Op, Process,  # noqa: F401 (re-exported)
                                                Program)
from tsjit.ts.verify.exhaustive_regions import RegionTable, stage_parts
from tsjit.ts.verify.work_fields import names_field

__all__ = ["Barrier", "Access", "Copy", "Op", "Process", "Program", "compile_program"]

S = ScheduleStage
_PIPELINE_OPS = {S.ProducerAcquire, S.ProducerCommit, S.ConsumerWait, S.ConsumerRelease,
                 S.ProducerTryAcquire, S.ConsumerTryWait}


def _copies_to_leader(cfg) -> bool:
    """Every CTA's TMA copies land on the leader's stage (a leader-only waiting consumer, producers
    everywhere: the leader arms for all of them)."""
    return (protocol.leader_only(cfg, "wait") and not protocol.leader_only(cfg, "producer")) or \
        protocol.copies_to_pair_leader(cfg)


def _side_runs_here(cfg, producer: bool, cta) -> bool:
    """Whether the works of ``cfg``'s producer (or consumer) side run on ``cta``: not on the peer CTA of a
    2-CTA pair whose UMMA side is ``CtaLeader`` (``Gate.PairLeader``): that copy of the task skips the
    opening wait and, by the reference's convention, its work bodies do nothing there (the pair leader
    issues the MMAs of both CTAs)."""
    if cta is None:
        return True
    opening = S.ProducerAcquire if producer else S.ConsumerWait
    wait = next(a for a in protocol.actions(cfg, opening) if isinstance(a, WaitParity))
    return wait.gate is not Gate.PairLeader or acts_on(wait, cfg, cta)


def ring_config(resource) -> PipelineConfig | None:
    """The resource's PipelineConfig (None without one, or for a stand-in object)."""
    config = getattr(resource, "pipeline_config", None)
    return config if isinstance(config, PipelineConfig) else None


# -- pipeline cursors --------------------------------------------------------------------------
class _Cursor:
    """Index/phase of one side of one resource in one process (mirrors lower_pipeline)."""

    def __init__(self, lane: int, phase: int):
        self.open = [lane, phase]
        self.close = [lane, phase]
        self.stage = None            # set by acquire / wait
        self.arms = None             # CTAs the last ArmTx reached (None: this CTA, or symmetric)

    def work_slot(self) -> int:
        """The stage a work step touches: the one last opened by this process, else (a
        split consumer/producer that only closes) the one its closing cursor is at."""
        return self.stage if self.stage is not None else self.close[0]

    @staticmethod
    def advance(pair, stride, stages):
        nxt = pair[0] + stride
        if nxt >= stages:
            pair[0], pair[1] = nxt - stages, pair[1] ^ 1
        else:
            pair[0] = nxt


def _is_pdl(step, name: str) -> bool:
    return step.label == name or type(step.resource).__name__ == (
        "PdlWaitBarrier" if name == "wait_griddep" else "PdlLaunchBarrier")


def _lane_for(task, resource, stride: int, warp: int | None) -> int:
    if stride <= 1:
        return 0
    if task.num_warps == stride:
        return warp or 0
    loop = task.schedule.domain_loop
    step = getattr(loop, "step", None)
    if isinstance(step, int) and step == stride and isinstance(loop.start, int):
        return loop.start % stride
    return 0


def _splits_into_warps(task) -> bool:
    for step in task.schedule.steps:
        cfg = ring_config(step.resource)
        if cfg is None or step.stage not in _PIPELINE_OPS:
            continue
        strides = cfg.interleave_strides
        stride = strides[0] if step.stage.is_producer else strides[2]
        if stride > 1 and task.num_warps == stride:
            return True
    return False


def _instance(es) -> tuple:
    """Which tile / loop iteration / section an expanded step belongs to."""
    return (es.tile, es.iteration, es.step.section)


def referenced_rings(resource) -> list:
    """Pipelined resources a resource's fields point at (``GmemTiles.smem``)."""
    out = []
    for value in list(getattr(resource, "__dict__", {}).values()):
        if value is not resource and hasattr(value, "task_local_variables") \
                and ring_config(value) is not None:
            if all(value is not o for o in out):
                out.append(value)
    return out


class _Compiler:
    """Builds one Program from expanded step lists."""

    def __init__(self, manager_tasks, graph, counts, variant, regions: RegionTable,
                 check_pdl: bool = True, collapse_probes: bool = True):
        self.check_pdl = check_pdl
        self.collapse_probes = collapse_probes
        self.tasks = manager_tasks
        self.graph = graph
        self.counts = counts
        self.variant = variant
        self.regions = regions
        self.barriers: list[Barrier] = []
        self.barrier_ids: dict = {}
        self.copies: list[Copy] = []
        self.parts = stage_parts(manager_tasks, ring_config)
        self.plan = cluster_plan(manager_tasks, ring_config, _PIPELINE_OPS)

    def barrier(self, resource, kind, slot: int, cta: int | None = None) -> int:
        kind = kind.value if isinstance(kind, BarrierKind) else kind
        owner, count = barrier_array(resource, BarrierKind(kind))   # a group member's may be shared
        key = (id(owner), kind, slot, cta)
        if key not in self.barrier_ids:
            self.barrier_ids[key] = len(self.barriers)
            self.barriers.append(Barrier(len(self.barriers), owner, kind, slot, count, cta))
        return self.barrier_ids[key]

    def compile(self) -> list:
        shells = []
        for cta in self.plan.ctas:
            for task in self.tasks:
                if cta is not None and task.run_only_on_cta_id not in (None, cta):
                    continue
                lanes = range(task.num_warps) if _splits_into_warps(task) else [None]
                for lane in lanes:
                    shells.append((task, lane, cta))
        signal_warps = {cta: self._signal_warps([(t, l) for t, l, c in shells if c == cta])
                        for cta in self.plan.ctas}
        processes = []
        for index, (task, lane, cta) in enumerate(shells):
            steps = expand_task(task, self.counts[id(task)], self.variant)
            processes.append(self._compile_process(index, task, lane, steps, signal_warps[cta], cta))
        return processes

    # warps signalling one stage of each (resource, side), over every process doing it
    def _signal_warps(self, shells) -> dict:
        warps: dict = {}
        for task, lane in shells:
            w = 1 if lane is not None else task.num_warps
            seen = set()
            for step in task.schedule.steps:
                cfg = ring_config(step.resource)
                if cfg is None or step.stage not in (S.ProducerCommit, S.ConsumerRelease):
                    continue
                key = (id(step.resource), step.stage.is_producer)
                if key not in seen:
                    seen.add(key)
                    warps[key] = warps.get(key, 0) + w
        modes = {}
        for (rid, producer), total in warps.items():
            resource = next(r for t, _ in shells for r in t.resources if id(r) == rid)
            lanes = resource.pipeline_config.interleave_strides[1 if producer else 3]
            modes[(rid, producer)] = max(1, total // lanes)
        return modes

    def _compile_process(self, index, task, lane, steps, modes, cta) -> Process:
        warps = 1 if lane is not None else task.num_warps
        proc = Process(index, task, lane, warps, [], cta=cta)
        cursors: dict = {}
        shared_close: dict = {}         # (cursor owner, producer) -> the closing [index, phase] pair
        probe_keys: dict = {}
        segment: list = []
        spawns: list = []
        holder = {"op": None}           # the op whose segment is being filled
        umma_reads: list = []           # reads of the MMAs issued since the last tcgen05.commit
        umma_chain = [-1]               # this process's last tcgen05.commit completion
        in_flight = InFlight()          # wgmma groups / TMA stores not yet retired
        waited: dict = {}               # ring -> (tile, iteration, section) of its last wait

        def cursor(resource, producer: bool) -> _Cursor:
            key = (id(resource), producer)
            if key not in cursors:
                strides = resource.pipeline_config.interleave_strides
                stride = strides[0] if producer else strides[2]
                cursors[key] = _Cursor(_lane_for(task, resource, stride, lane),
                                       1 if producer else 0)
                # a Merge member's release cursor is its group's: one pair, moved by one release
                owner = cursor_owner(resource, producer, Cursor.Close)
                cursors[key].close = shared_close.setdefault((id(owner), producer), cursors[key].close)
            return cursors[key]

        def probe_key(resource, producer: bool) -> int:
            return probe_keys.setdefault((id(resource), producer), len(probe_keys))

        def flush(op):
            prev = holder["op"]
            if prev is None:
                proc.initial_segment, proc.initial_spawns = tuple(segment), tuple(spawns)
            else:
                prev.segment, prev.spawns = tuple(segment), tuple(spawns)
            segment.clear()
            spawns.clear()
            segment.extend(in_flight.active())
            holder["op"] = op
            proc.ops.append(op)

        def make_op(kind, es, resource, slot, **kw):
            return Op(kind, es.step if es else None, resource, slot,
                      es.iteration if es else None, es.tile if es else None, **kw)

        for es in steps:
            step, resource = es.step, es.step.resource
            cfg = ring_config(resource)
            stage = step.stage
            if stage in _PIPELINE_OPS and cfg is not None:
                op, commit = self._pipeline_op(es, cfg, resource, stage, cursor, probe_key, modes,
                                               warps, make_op, waited, cta, task)
                flush(op)
                if commit is not None:
                    umma_chain[0] = self._umma_completion(proc, commit, umma_reads, umma_chain[0], spawns)
                continue
            if self.check_pdl and stage.is_work and (_is_pdl(step, "wait_griddep")
                                                     or _is_pdl(step, "launch_griddep")):
                pdl = 1 if _is_pdl(step, "wait_griddep") else 2
                flush(make_op("pdl_wait" if pdl == 1 else "pdl_launch", es, resource, None,
                              pdl=pdl))
                continue
            if stage.is_work and not step.is_aux:
                start = len(segment)
                self._work_accesses(es, task, cursor, cursors, waited, warps, segment,
                                    spawns, proc)
                if cfg is not None and stage.is_consumer and \
                        cfg.protocol.consumer is protocol.SideKind.Umma:
                    umma_reads += [a for a in segment[start:] if a.mode == "read"]
                events = work_events(step, getattr(task, "num_warps", None))
                if events:
                    in_flight.apply(step, events, segment[start:])
        flush(None)
        proc.ops.pop()                   # the sentinel None appended by the last flush
        if self.collapse_probes:
            fold_probes(proc)
        self._producer_tail(task, proc, cursors, make_op, tuple(in_flight.active()))
        proc.probe_keys = len(probe_keys)
        queue = task.work_queue
        wtl = task.schedule.work_tile_loop
        if wtl is not None and queue is not None and ring_config(queue) is None:
            if not any(s.resource is queue and s.stage.is_work and not s.is_aux
                       and s.work_loop_slot is None for s in task.schedule.steps):
                proc.stuck = queue
        return proc

    def _pipeline_op(self, es, cfg, resource, stage, cursor, probe_key, modes, warps,
                     make_op, waited, cta, task):
        """One op from the protocol table's actions of ``stage`` (see the module docstring);
        ``cta``: the process's CTA when every CTA is modelled, else None."""
        producer = stage.is_producer
        cur = cursor(resource, producer)
        per_stage = modes.get((id(resource), producer), warps)
        fields: dict = {}
        arrivals: list = []
        slot = None
        arm = tx_bytes.arm_bytes(cfg, resource, task, es.step, warps) if stage is S.ProducerAcquire else None
        for action in member_actions(es.step, protocol.actions(cfg, stage, per_stage, arm)):
            pair = cur.open if action.cursor is Cursor.Open else cur.close
            if slot is None:             # the op's stage: where its first action's cursor is
                slot = pair[0]
            if not acts_on(action, cfg, cta):
                if isinstance(action, ArmTx):
                    # a non-leader CTA issues no copies either, except into a leader-only consumer's
                    # stage: every CTA's copies land on the leader's barrier (protocol, CtaLeader)
                    cur.arms = (copy_landing(cfg, cta),) if _copies_to_leader(cfg) else ()
                continue
            reach = targets(action, cfg, cta) if cta is not None else (None,)
            if isinstance(action, Probe):
                fields.update(probe_barrier=self.barrier(resource, action.barrier, pair[0], cta),
                              parity=pair[1], probe_key=probe_key(resource, producer))
            elif isinstance(action, WaitParity):
                fields.update(guard=self.barrier(resource, action.barrier, pair[0], cta),
                              parity=pair[1])
                if action.after_probe:
                    fields["probe_key"] = probe_key(resource, producer)
            elif isinstance(action, ArmTx):
                n = action.who.arrivals(warps)
                arrivals += [(self.barrier(resource, action.barrier, pair[0], c), n, n * action.nbytes)
                             for c in reach]
                cur.arms = reach
            elif isinstance(action, Arrive):
                # symmetric reduction: the leader CTA's view (a gated action lands once)
                n = action.who.arrivals(warps) * (action.landing(cfg) if cta is None else 1)
                arrivals += [(self.barrier(resource, action.barrier, pair[0], c), n, 0) for c in reach]
            elif isinstance(action, CommitUmma):
                n = action.ctas.factor(cfg) if cta is None else 1
                fields["umma_commit"] = [(self.barrier(resource, action.barrier, pair[0], c), n)
                                         for c in reach]
            elif isinstance(action, SetStage):
                cur.stage = pair[0]
                if not producer:
                    waited[id(resource)] = _instance(es)
            elif isinstance(action, Advance):
                _Cursor.advance(pair, action.stride, cfg.num_stages)
                if action.open_follows:
                    cur.open = list(cur.close)
        kind = {S.ProducerTryAcquire: "try_acquire", S.ConsumerTryWait: "try_wait",
                S.ProducerAcquire: "acquire", S.ProducerCommit: "commit", S.ConsumerWait: "wait",
                S.ConsumerRelease: "release"}[stage]
        commit = fields.pop("umma_commit", None)
        op = make_op(kind, es, resource, slot, arrivals=tuple(arrivals), **fields)
        return op, commit

    def _umma_completion(self, proc, commits, reads: list, after: int, spawns: list) -> int:
        """The completion of a ``tcgen05.commit`` (its ``(barrier, arrivals)`` per CTA reached):
        the reads of the MMAs issued since the last commit stay active until it lands (in order
        after the previous commit); returns its id."""
        pending = [(access, commits[0][0], 0) for access in reads]
        pending += [(None, barrier, arrivals) for barrier, arrivals in commits]
        reads.clear()
        for access, barrier, arrivals in pending:
            copy = Copy(len(self.copies), proc.index, barrier, 0, access, arrivals, after,
                        umma=True)
            self.copies.append(copy)
            spawns.append(copy)
            after = copy.id
        return after

    def _work_accesses(self, es, task, cursor, cursors, waited, warps, segment, spawns, proc):
        step, resource = es.step, es.step.resource
        cfg = ring_config(resource)
        producer = step.stage.is_producer
        if cfg is not None and not _side_runs_here(cfg, producer, proc.cta):
            return       # the pair leader's side: the peer CTA's copy of the task skips the work
        mode, role = ("write", "producer") if producer else ("read", "consumer")
        if cfg is not None:
            slot = cursor(resource, producer).work_slot()
            part = self.parts.get((id(resource), id(task))) if producer else None
            region = self.regions.stage_region(resource, slot, role, part, proc.cta)
            access = Access(mode, region, step, es.iteration, es.tile)
            if producer and cfg.protocol.producer_arms_tx:
                self._spawn_copies(es, cfg, resource, slot, access, warps, spawns, proc,
                                   cursor(resource, True).arms)
            else:
                segment.append(access)
                if not producer and proc.cta is not None and protocol.copies_to_pair_leader(cfg):
                    # a cta_group::2 MMA reads the stage of both CTAs of the pair
                    v = protocol.pair_size(cfg)
                    for peer in range(proc.cta - proc.cta % v, proc.cta - proc.cta % v + v):
                        if peer != proc.cta:
                            segment.append(Access(mode, self.regions.stage_region(resource, slot, role, part, peer),
                                                  step, es.iteration, es.tile))
        else:
            region = self.regions.resource_region(resource, role, proc.cta)
            if region is not None:
                segment.append(Access(mode, region, step, es.iteration, es.tile))
        for ring in referenced_rings(resource):
            # only inside the loop iteration (or Head / Tail) that waited on the ring: an
            # epilogue after the loop that keeps a reference to the ring reads registers
            if waited.get(id(ring)) == _instance(es) and (id(ring), False) in cursors:
                slot = cursors[(id(ring), False)].work_slot()
                region = self.regions.stage_region(ring, slot, "consumer", cta=proc.cta)
                segment.append(Access("read", region, step, es.iteration, es.tile))
            elif (id(ring), True) in cursors and any(
                    s.stage is S.ProducerAcquire and s.resource is ring
                    for s in task.schedule.steps) and (cfg is None or names_field(step, resource, ring)):
                # a ring's own work writes another ring only if its body names it (work_fields)
                slot = cursors[(id(ring), True)].work_slot()
                region = self.regions.stage_region(ring, slot, "producer", cta=proc.cta)
                segment.append(Access("write", region, step, es.iteration, es.tile))

    def _spawn_copies(self, es, cfg, resource, slot, access, warps, spawns, proc, arms):
        """Issue the TMA copy of one producer work step (its share of the stage's bytes); when
        every CTA is modelled, into each CTA the arming reached (``arms``: None for this CTA,
        ``()`` when this CTA did not arm)."""
        works = [s for s in proc.task.schedule.steps if s.resource is resource and
                 s.stage is S.ProducerWork and not s.is_aux and s.section is es.step.section]
        share = max(1, len(works))
        total, units = tx_bytes.stage_copy_bytes(cfg, warps)
        routed = proc.cta is not None and _copies_to_leader(cfg)
        in_own_stage = routed and protocol.copies_to_pair_leader(cfg)   # .cta_group::2: own stage, leader's barrier
        per_work = tx_bytes.work_bytes(resource)
        if per_work is not None and es.step.label in per_work:
            # per-work bytes: this work's copy brings its own (every CTA's into a leader-only consumer's)
            total, units, share = per_work[es.step.label] * tx_bytes.tx_cta_factor(cfg), 1, 1
        if routed:
            total //= tx_bytes.tx_cta_factor(cfg)     # this CTA's share of what the leader's barrier expects
        for cta in ((proc.cta,) if arms is None else arms):
            if (cta != proc.cta or routed) and not in_own_stage:
                # a copy into another CTA's stage; routed to the leader, each CTA fills its own part
                part = ("from CTA", proc.cta) if routed else self.regions.keys[access.region][3]
                access = Access(access.mode, self.regions.stage_region(resource, slot, "producer", part, cta),
                                access.step, access.iteration, access.tile)
            position = sum(1 for c in spawns if c.access.region == access.region) // units
            for unit in range(units):
                nbytes = total // units // share
                if position == share - 1:        # the last work of the stage gets the remainder
                    nbytes = total // units - nbytes * (share - 1)
                copy = Copy(len(self.copies), proc.index, self.barrier(resource, "full", slot, cta),
                            nbytes, access)
                self.copies.append(copy)
                spawns.append(copy)

    def _producer_tail(self, task, proc, cursors, make_op, in_flight: tuple):
        """Drain: ``S / stride`` waits on ``empty`` for each resource this task acquires; the
        asynchronous reads still in flight stay active over them (``in_flight``)."""
        done = set()
        for step in task.schedule.steps:
            resource = step.resource
            if step.stage is not S.ProducerAcquire or id(resource) in done:
                continue
            done.add(id(resource))
            cfg = resource.pipeline_config
            if ring_config(resource) is None or (id(resource), True) not in cursors:
                continue
            cur = cursors[(id(resource), True)]
            pairs = {Cursor.Open: list(cur.open), Cursor.Close: list(cur.close)}
            acquire_wait = next(a for a in protocol.actions(cfg, S.ProducerAcquire)
                                if isinstance(a, WaitParity))
            for action in protocol.tail_actions(cfg):
                pair = pairs[action.cursor]
                if isinstance(action, WaitParity) and acts_on(acquire_wait, cfg, proc.cta):
                    proc.ops.append(make_op("tail_wait", None, resource, pair[0],
                                            guard=self.barrier(resource, action.barrier, pair[0],
                                                               proc.cta),
                                            parity=pair[1], segment=in_flight))
                elif isinstance(action, Advance):
                    _Cursor.advance(pair, action.stride, cfg.num_stages)


def compile_program(tasks, graph, variant: Variant, counts: dict, regions: RegionTable,
                    notes: list, check_pdl: bool = True, collapse_probes: bool = True) -> Program:
    """Compile every task for ``variant`` (see the module docstring); ``collapse_probes=False``
    keeps every try_acquire / try_wait as its own op (the exact protocol, for comparisons)."""
    # a kernel with no wait_griddep at all does not read its predecessor's output through
    # PDL, so its launches have nothing to wait for
    check_pdl = check_pdl and any(s.stage.is_work and _is_pdl(s, "wait_griddep")
                                  for t in tasks for s in t.schedule.steps)
    compiler = _Compiler(tasks, graph, counts, variant, regions, check_pdl, collapse_probes)
    processes = compiler.compile()
    if compiler.plan.explicit:
        note = (f"every CTA of the {len(compiler.plan.ctas)}-CTA cluster is modelled (no symmetric "
                f"reduction: {compiler.plan.reason})")
        if note not in notes:
            notes.append(note)
    return Program(variant, processes, compiler.barriers, regions, compiler.copies,
                   list(notes), check_pdl)
