"""Lowering of mbarrier pipelines: cursors, the six operations and the producer tail.

Storage (:mod:`tsjit.ts.lower_pipeline_storage`, re-exported here: :class:`PipelineStorage`,
:func:`place_allocator`, :func:`allocate`, :func:`initialize`): each pipelined resource gets
2 x S 8-byte mbarriers in the kernel's single dynamic shared-memory block (full[0..S) then
empty[0..S)), initialised by thread 0 with the arrival counts of the ring (full:
``producer_group.size``, empty: ``consumer_group.size``, times the cluster size when releases
reach every CTA), then ``fence.mbarrier_init`` and a CTA barrier (a cluster barrier under a cluster).

Cursors live in registers of the task that owns them, as SSA values of the task's scope:
``(index, phase)`` per side and per advance point.  The producer starts at phase 1 (a fresh
barrier's "previous" phase counts as complete, so the first acquire passes), the consumer
at phase 0.  Advancing adds the interleave stride; wrapping past S subtracts S and flips the
phase.  Default advance points: producer at commit, consumer at release;
``advance_on_acquire`` / ``advance_on_wait`` advance the opening cursor instead and keep a
lagging closing cursor.

Operations (PTX ISA §9.7.13.15): what each operation does is the protocol table's
(:func:`tsjit.ts.protocol.actions`); :func:`emit_operation` emits one fragment per action:
``Probe`` a kept ``try_wait.parity``, ``WaitParity`` a parity-wait loop (skipped when the
side's preceding probe succeeded), ``ArmTx`` ``mbarrier.arrive.expect_tx`` by an elected lane
(of every warp, or of the task's first warp), ``Arrive`` ``mbarrier.arrive`` from every thread
or from lane 0 of each warp (after ``bar.warp.sync``; on every CTA of the cluster with remote
arrives: a producer's release at cluster scope, a consumer's at CTA scope,
:func:`~tsjit.lang.sync.mbarrier_release_cluster`) or ``cp.async.mbarrier.arrive.noinc``
for AsyncLoad, ``SetStage`` / ``Advance`` the cursor updates.  The producer tail
(:func:`tsjit.ts.protocol.tail_actions`) waits on the empty barrier of every stage a producing task may
still have in flight, so no arrival lands after the CTA exits.  Barrier init counts are the table's
:class:`~tsjit.ts.protocol.Ring` counts.

Pipeline groups (:mod:`tsjit.ts.group`): a member's full and empty barriers are arrays of its
group's ((N + 1) x S, placed by ``SmemAllocator.add_pipeline_group``; each array initialised once
with the group's counts), a Merge member's release cursor is the group's, and a collapsed
operation's fan-out signals once (:mod:`tsjit.ts.group_protocol`).
"""
from __future__ import annotations

import dataclasses

from tsjit.errors import CompilationError
from tsjit.lang import bounded_wait
from tsjit.lang.async_copy import cp_async_mbarrier_arrive
from tsjit.lang import builtins as B
from tsjit.lang import dtypes as dt
from tsjit.lang import sync
from tsjit.lang import tcgen05
from tsjit.lang.values import Value, cast_to, compare, constant, select
from tsjit.ts import protocol, tx_bytes
from tsjit.ts.enums import ScheduleStage
from tsjit.ts.group_protocol import cursor_owner, member_actions
from tsjit.ts.lower_pipeline_storage import (PipelineStorage, allocate, initialize,  # noqa: F401 (re-exported)
                                           place_allocator)
from tsjit.ts.protocol import (Advance, Arrive, ArmTx, BarrierKind, CommitUmma, Ctas, Cursor, Gate, Probe, SetStage,
                               WaitParity, Who)


class Cursors:
    """The cursor keys of one (task, resource, side) in the task's scope (a Merge member's release
    cursor is its group's: :func:`tsjit.ts.group_protocol.cursor_owner`).  ``numbers`` numbers the
    cursor owners (resources, groups) in a fixed order: the keys must not depend on addresses."""

    def __init__(self, resource, side: str, numbers: dict):
        def key(owner):
            return f"pipe:{owner.name}#{numbers.setdefault(id(owner), len(numbers))}:{side}"
        base = key(resource)
        shared = key(cursor_owner(resource, side == "producer", Cursor.Close))
        self.open_index, self.open_phase = base + ":open.i", base + ":open.p"
        self.close_index, self.close_phase = shared + ":close.i", shared + ":close.p"
        self.stage = base + ":stage"
        self.probe = base + ":try"


def _lane(task, stride: int):
    """The interleave lane of ``task``: its warp's offset when it has ``stride`` warps (warp lanes), else
    ``domain start % stride`` when its domain loop walks by ``stride`` from a compile-time start
    (domain lanes; check P6)."""
    if stride == 1:
        return 0
    if task.num_warps == stride:
        return cast_to(B.warp_idx() - task.warp_start, dt.Int32)
    loop = task.schedule.domain_loop
    if loop is not None and isinstance(loop.start, int) and isinstance(loop.step, int) and loop.step == stride:
        return loop.start % stride
    raise CompilationError(
        f"task '{task.name}': an interleaved pipeline (stride {stride}) needs a task of exactly {stride} warps "
        f"(warp lanes), or a domain loop with a compile-time start and step {stride} (domain lanes); this task "
        f"has {task.num_warps} warps")


def init_cursors(task, storages: dict, scope: dict) -> dict:
    """Put every cursor this task uses into ``scope``; returns {(resource, side): Cursors}."""
    used = {}
    for step in task.schedule.steps:
        if step.resource in storages:
            side = "producer" if step.stage.name.startswith("Producer") else "consumer"
            used[(step.resource, side)] = None
    numbers = {id(resource): n for n, resource in enumerate(storages)}
    for (resource, side) in used:
        cfg = storages[resource].config
        cur = Cursors(resource, side, numbers)
        strides = cfg.interleave_strides
        open_stride = strides[0] if side == "producer" else strides[2]
        lane = _lane(task, open_stride)
        phase = 1 if side == "producer" else 0
        for idx_key, ph_key in ((cur.open_index, cur.open_phase), (cur.close_index, cur.close_phase)):
            scope[idx_key] = cast_to(lane, dt.Int32) if isinstance(lane, Value) else constant(lane, dt.Int32)
            scope[ph_key] = constant(phase, dt.Int32)
        scope[cur.stage] = scope[cur.open_index]
        used[(resource, side)] = cur
    return used


def _advance(scope, idx_key, ph_key, stride: int, stages: int) -> None:
    nxt = scope[idx_key] + stride
    wrapped = compare(">=", nxt, stages)
    scope[idx_key] = select(wrapped, nxt - stages, nxt)
    scope[ph_key] = scope[ph_key] ^ cast_to(wrapped, dt.Int32)


def _blocking_wait(ctx, bar, phase, scope, probe_key) -> None:
    """Parity-wait ``bar``, skipped when the side's preceding probe (``scope[probe_key]``) succeeded."""
    probe = scope.pop(probe_key, None) if probe_key is not None else None
    if probe is None:
        sync.mbarrier_wait(bar, phase)
        return
    ctx.if_then(compare("==", probe, 0), lambda: sync.mbarrier_wait(bar, phase), "pipe.wait", "pipe.waited")


def _async_load_arrive(bar) -> None:
    """AsyncLoad producers: each thread's arrival lands when its cp.async copies have completed."""
    cp_async_mbarrier_arrive(bar)


def _arrive_everywhere(bar, cluster: int, consumer: bool = False) -> None:
    """Arrive on ``bar`` of this CTA, and on the same barrier of every other CTA of the cluster
    (a producer with cluster-scope releases; a ``consumer`` releases at CTA scope,
    :func:`tsjit.lang.sync.mbarrier_release_cluster`: the cluster-scope release costs a
    ``MEMBAR.ALL.GPU`` per arrive)."""
    if cluster == 1:
        sync.mbarrier_arrive(bar)
        return
    rank = B.cluster_ctarank()
    ranks = [(rank + peer) % cluster for peer in range(cluster)]
    if consumer:
        sync.mbarrier_release_cluster(bar, ranks)
        return
    for peer in ranks:
        sync.mbarrier_arrive_cluster(bar, peer)


def _elected_expect_tx(ctx, bar, nbytes: int, arm=sync.mbarrier_arrive_expect_tx) -> None:
    """One elected lane of the warp arms ``bar`` (``arm(bar, nbytes)``: the local or the cluster-wide arm)."""
    ctx.if_then(sync.elect_one(), lambda: arm(bar, nbytes), "tma.arm", "tma.armed")


def _first_warp_expect_tx(ctx, bar, nbytes: int, task, arm=sync.mbarrier_arrive_expect_tx) -> None:
    ctx.if_then(compare("==", B.warp_idx(), task.warp_start), lambda: _elected_expect_tx(ctx, bar, nbytes, arm),
             "tma.leader", "tma.leader.done")


class _Emission:
    """What the action emitters of one operation need: the ring, the cursors, the task."""

    def __init__(self, ctx, step, task, storage: PipelineStorage, cursors: Cursors, scope: dict):
        self.ctx = ctx
        self.step, self.task, self.storage, self.cursors, self.scope = step, task, storage, cursors, scope
        self.side = "producer" if step is None or step.stage.is_producer else "consumer"

    def keys(self, cursor: Cursor) -> tuple[str, str]:
        c = self.cursors
        return (c.open_index, c.open_phase) if cursor is Cursor.Open else (c.close_index, c.close_phase)

    def barrier(self, action):
        return self.storage.barrier(action.barrier, self.scope[self.keys(action.cursor)[0]])

    def phase(self, action):
        return self.scope[self.keys(action.cursor)[1]]

    def signal_warps(self, stride: int) -> int:
        """Warps of this task that signal one stage."""
        return protocol.warps_per_stage(self.task.num_warps, stride)

    def side_warps(self, stride: int) -> int:
        """Warps of every task that signal one stage on this side (P1's sum: several consumer tasks may
        release one ring; each one's arrivals count), this task's own when no step says so."""
        return self.storage.signal_warps.get(self.side, self.signal_warps(stride))

    def side_tasks(self) -> str:
        """The names of the tasks signalling this side, for messages."""
        names = self.storage.signal_tasks.get(self.side) or (self.task.name,)
        return ", ".join(repr(n) for n in names)


def _leader_cta(gate: Gate = Gate.Leader, config=None):
    """The CTAs a gated action runs on (Boolean Value): ``cluster rank == 0`` (``Gate.Leader``, a ``CtaLeader``
    side), or ``cluster rank % V == 0`` (``Gate.PairLeader``, the leader of each 2-CTA pair)."""
    rank = B.cluster_ctarank()
    if gate is Gate.PairLeader:
        return compare("==", rank % protocol.pair_size(config), 0)
    return compare("==", rank, 0)


def _gated(em: _Emission, action, emit) -> None:
    """``emit()`` on every CTA, or (``Gate.Leader`` / ``Gate.PairLeader``) only on the leader CTA."""
    if action.gate is not Gate.Everywhere:
        em.ctx.if_then(_leader_cta(action.gate, em.storage.config), emit, "cta.leader", "cta.leader.done")
    else:
        emit()


def _emit_probe(action: Probe, em: _Emission) -> None:
    def probe(scope):
        scope[em.cursors.probe] = cast_to(sync.mbarrier_try_wait(em.barrier(action), em.phase(action)), dt.Int32)
    if action.gate is not Gate.Everywhere:
        # the other CTAs skip the gated wait that follows: their probe reads as succeeded
        em.scope[em.cursors.probe] = constant(1, dt.Int32)
        em.ctx.guard(_leader_cta(action.gate, em.storage.config), em.scope, probe, label="cta.leader.probe")
    else:
        probe(em.scope)


def _emit_wait(action: WaitParity, em: _Emission) -> None:
    """A parity wait (gated as the action says); ``Who.CtaLeader`` (the CLC producer) in a cluster: CTA 0
    only, the CTA whose empty barriers every CTA's consumers release to."""
    bar, phase = em.barrier(action), em.phase(action)
    if action.after_probe:
        def wait():
            _gated(em, action, lambda: _blocking_wait(em.ctx, bar, phase, em.scope, em.cursors.probe))
    else:
        def wait():
            _gated(em, action, lambda: sync.mbarrier_wait(bar, phase))
    if action.who is Who.CtaLeader and em.storage.cluster > 1:
        em.ctx.if_then(_leader_cta(), wait, "cta0.wait", "cta0.waited")
    else:
        wait()


def _emit_arm_tx(action: ArmTx, em: _Emission) -> None:
    bar = em.barrier(action)
    if action.who is Who.CtaLeader:
        # CLC: CTA 0 arms the full barrier of every CTA with the 16-byte response
        # (try_cancel.multicast::cluster::all writes it into each): lane j < cluster arms CTA j's
        cluster = em.storage.cluster

        def arm_cluster():
            if cluster == 1:
                _elected_expect_tx(em.ctx, bar, action.nbytes)
                return
            lane = cast_to(B.lane_idx(), dt.Int32)
            em.ctx.if_then(compare("<", lane, cluster),
                           lambda: sync.mbarrier_arrive_expect_tx_cluster(bar, lane, action.nbytes),
                           "clc.arm", "clc.armed")

        def on_cta0():
            if em.task.num_warps > 1:
                em.ctx.if_then(compare("==", B.warp_idx(), em.task.warp_start), arm_cluster, "clc.warp",
                               "clc.warp.done")
            else:
                arm_cluster()
        if cluster > 1:
            em.ctx.if_then(_leader_cta(), on_cta0, "clc.cta0", "clc.cta0.done")
        else:
            on_cta0()
        return
    if action.ctas is Ctas.AllInCluster:
        cluster = em.storage.cluster

        def arm(bar_, nbytes):
            rank = B.cluster_ctarank()
            for peer in range(cluster):
                sync.mbarrier_arrive_expect_tx_cluster(bar_, (rank + peer) % cluster, nbytes)
    elif action.ctas is Ctas.Local:
        arm = sync.mbarrier_arrive_expect_tx
    else:
        raise CompilationError(f"resource '{em.storage.resource.name}': arming expect_tx on {action.ctas.value} is "
                               f"not lowered for {em.ctx.target_name}")
    if action.who is Who.ElectedInFirstWarp and em.task.num_warps > 1:
        # TaskWarpLeader: every warp waited on empty; only the task's first warp arms the full
        # barrier, with the bytes all of the task's warps' copies deliver (num_bytes).
        _gated(em, action, lambda: _first_warp_expect_tx(em.ctx, bar, action.nbytes, em.task, arm))
    elif action.who in (Who.ElectedPerWarp, Who.ElectedInFirstWarp):
        _gated(em, action, lambda: _elected_expect_tx(em.ctx, bar, action.nbytes, arm))
    else:
        raise CompilationError(f"resource '{em.storage.resource.name}': arming expect_tx by {action.who.value} "
                               f"is not lowered for this target")


def _emit_arrive(action: Arrive, em: _Emission) -> None:
    cfg, name = em.storage.config, em.storage.resource.name
    group = (cfg.producer_group if em.side == "producer" else cfg.consumer_group).size
    stride = cfg.interleave_strides[1 if em.side == "producer" else 3]
    warps = em.side_warps(stride)
    bar = em.barrier(action)
    if action.on_copy_completion:
        if group != warps * 32:
            raise CompilationError(
                f"[P1] resource '{name}': an AsyncLoad producer arrives from every thread (its own "
                f"cp.async copies) of task(s) {em.side_tasks()}; set producer_group size to {warps * 32}, "
                f"got {group}")
        if action.ctas is not Ctas.Local:
            raise CompilationError(
                f"resource '{name}': an AsyncLoad producer's arrivals (cp.async.mbarrier.arrive.noinc) land on its "
                f"own CTA's barrier only, but with SignalingThreads.CtaLeader in a cluster they would have to reach "
                f"{action.ctas.value}; use producer_op=PipelineOp.AsyncThread, or drop CtaLeader")
        _gated(em, action, lambda: _async_load_arrive(bar))
        return
    if action.ctas is Ctas.ClusterLeader and em.storage.cluster == 1:
        action = protocol.Arrive(action.barrier, action.cursor, action.who)     # CTA 0 is this CTA
    # a consumer's arrivals only release the stage it read (CTA-scope release); a producer's publish its data
    consumer = em.side == "consumer"

    def remote(bar_, rank_):
        if consumer:
            sync.mbarrier_release_cluster(bar_, [rank_])
        else:
            sync.mbarrier_arrive_cluster(bar_, rank_)
    if action.ctas is Ctas.MulticastPeers:
        _multicast_release(em, bar, group, warps)
        return
    if action.ctas not in (Ctas.Local, Ctas.AllInCluster, Ctas.ClusterLeader, Ctas.PairLeader):
        raise CompilationError(f"resource '{name}': {em.side} arrivals on {action.ctas.value} are not lowered "
                               f"for {em.ctx.target_name}")
    shared_by_tasks = cfg.protocol.producer is protocol.SideKind.Clc   # every task's threads release (P1)
    if action.ctas is Ctas.PairLeader:
        group //= protocol.pair_size(cfg)     # the group counts both CTAs' arrivals on the leader's barrier
    if not shared_by_tasks and not protocol.thread_arrival_who(group, warps)[1]:
        raise CompilationError(
            f"[P1] resource '{name}': the {em.side} group has {group} arrivals but task(s) {em.side_tasks()} "
            f"signal each stage from {warps} warp(s) ({warps * 32} threads) in all; set the CooperativeGroup "
            f"size to {warps * 32} (every thread arrives) or {warps} (one lane per warp)")
    if action.ctas is Ctas.ClusterLeader:
        def signal():
            remote(bar, 0)
    elif action.ctas is Ctas.PairLeader:
        def signal():      # the leader of this CTA's 2-CTA pair (remote arrive; arrival counts x V)
            rank = cast_to(B.cluster_ctarank(), dt.Int32)
            remote(bar, rank - rank % protocol.pair_size(cfg))
    else:
        cluster = em.storage.cluster if action.ctas is Ctas.AllInCluster else 1

        def signal():
            _arrive_everywhere(bar, cluster, consumer)
    if action.who is Who.AllThreads:
        _gated(em, action, signal)
        return

    def lane0():
        B.syncwarp()
        em.ctx.if_then(compare("==", B.lane_idx(), 0), signal, "arrive.lane0", "arrive.done")
    _gated(em, action, lane0)


def _multicast_release(em: _Emission, bar, group: int, warps: int) -> None:
    """A TmaAsync release under TMA multicast: in each consumer warp, lane ``j`` (< the lanes of
    :func:`tsjit.ts.protocol.multicast_peers`) arrives on the empty barrier of the ``j``-th CTA whose
    copies fill this CTA's stage (``mapa`` + ``mbarrier.arrive.release.cluster``)."""
    cfg = em.storage.config
    lanes = len(protocol.multicast_peers(cfg, 0))
    if group != warps * lanes:
        raise CompilationError(
            f"resource '{em.storage.resource.name}': under TMA multicast {cfg.mcast_mode_mn} each consumer warp "
            f"arrives from {lanes} lanes (one per CTA filling its stage), so the consumer group of task(s) "
            f"{em.side_tasks()} ({warps} warp(s) in all) must have {warps * lanes} arrivals, got {group} [P1]")
    B.syncwarp()
    lane = cast_to(B.lane_idx(), dt.Int32)
    rank = cast_to(B.cluster_ctarank(), dt.Int32)
    em.ctx.if_then(compare("<", lane, lanes),
                   lambda: sync.mbarrier_release_cluster(bar, [protocol.multicast_peer_rank(cfg, lane, rank, select)]),
                   "arrive.peers", "arrive.peers.done")


def _commit_mask(action: CommitUmma, config, cluster: int):
    """The ``tcgen05.commit`` multicast mask: every CTA of the cluster (``AllInCluster``), both CTAs of this
    CTA's pair (``Local`` over 2-CTA pairs: ``0b11 << pair leader``, a run-time Int32), or None (this CTA)."""
    v = protocol.pair_size(config)
    if action.ctas is Ctas.AllInCluster and cluster > 1:
        return (1 << cluster) - 1
    if v > 1:
        rank = cast_to(B.cluster_ctarank(), dt.Int32)
        return constant((1 << v) - 1, dt.Int32) << (rank - rank % v)
    return None


def _emit_commit_umma(action: CommitUmma, em: _Emission) -> None:
    """``tcgen05.commit`` to the barrier from an elected thread of the task's first warp: the thread that
    issued the MMAs (work bodies issue them under ``tsjit.elect_one()`` in that warp), since a commit
    tracks the tcgen05 operations of its own thread (PTX ISA 9.1 §9.7.16.12.1).  ``AllInCluster``: the
    arrival is multicast to the barrier of every CTA of the cluster (each CTA's commit lands on all).
    Over 2-CTA pairs (V = 2) the commit is ``.cta_group::2`` (the MMAs' group) and multicast to both CTAs of
    the pair at least; ``Gate.PairLeader``: only the pair leader (which issued the MMAs) commits."""
    bar = em.barrier(action)
    cfg = em.storage.config
    group = protocol.pair_size(cfg)

    def commit():
        mask = _commit_mask(action, cfg, em.storage.cluster)
        em.ctx.if_then(sync.elect_one(), lambda: tcgen05.commit(bar, cta_group=group, multicast_mask=mask),
                       "umma.commit", "umma.committed")

    def in_first_warp():
        if em.task.num_warps == 1:
            commit()
        else:
            em.ctx.if_then(compare("==", B.warp_idx(), em.task.warp_start), commit, "umma.warp", "umma.warp.done")
    _gated(em, action, in_first_warp)


def _emit_set_stage(action: SetStage, em: _Emission) -> None:
    em.scope[em.cursors.stage] = em.scope[em.keys(action.cursor)[0]]


def _emit_advance(action: Advance, em: _Emission) -> None:
    idx_key, ph_key = em.keys(action.cursor)
    _advance(em.scope, idx_key, ph_key, action.stride, em.storage.stages)
    if action.open_follows:
        c = em.cursors
        em.scope[c.open_index], em.scope[c.open_phase] = em.scope[c.close_index], em.scope[c.close_phase]


_EMITTERS = {Probe: _emit_probe, WaitParity: _emit_wait, ArmTx: _emit_arm_tx, Arrive: _emit_arrive,
             CommitUmma: _emit_commit_umma, SetStage: _emit_set_stage, Advance: _emit_advance}


def emit_operation(ctx, step, task, storage: PipelineStorage, cursors: Cursors, scope: dict) -> None:
    """Emit pipeline operation ``step`` (acquire, try_acquire, commit, wait, try_wait, release): one code
    fragment per action of the protocol table (:func:`tsjit.ts.protocol.actions`)."""
    if step.stage not in protocol.OPERATIONS:
        raise CompilationError(f"internal: {step.stage} is not a pipeline operation")
    em = _Emission(ctx, step, task, storage, cursors, scope)
    cfg = storage.config
    stride = cfg.interleave_strides[1 if step.stage.is_producer else 3]
    warps = em.signal_warps(stride)
    arm = tx_bytes.arm_bytes(cfg, storage.resource, task, step, warps) if step.stage is ScheduleStage.ProducerAcquire \
        else None
    # who arrives (every thread or one lane per warp) follows from all signalling tasks' warps, as in P1
    for action in member_actions(step, protocol.actions(cfg, step.stage, em.side_warps(stride), arm)):
        if _thread_sync_follows_tcgen05(cfg, action):
            tcgen05.fence_before_thread_sync()
        _EMITTERS[type(action)](action, em)
        if _tcgen05_follows_thread_sync(cfg, action):
            tcgen05.fence_after_thread_sync()


def _umma_side(cfg, barrier: BarrierKind) -> bool:
    """The arrivals on ``barrier`` of this ring come from tcgen05.commit (an UMMA side signals it)."""
    row = cfg.protocol
    signalling = row.producer if barrier is BarrierKind.Full else row.consumer
    return signalling is protocol.SideKind.Umma


def _tcgen05_follows_thread_sync(cfg, action) -> bool:
    """A wait on a barrier that a UMMA ring's threads or MMAs use: tcgen05 operations after it (MMAs into
    the freed accumulator, tcgen05.ld of the finished one) need ``tcgen05.fence::after_thread_sync``
    (PTX ISA 9.1 §9.7.16.6.3)."""
    return isinstance(action, WaitParity) and cfg.protocol.needs_sm100 and \
        protocol.SideKind.Umma in (cfg.protocol.producer, cfg.protocol.consumer)


def _thread_sync_follows_tcgen05(cfg, action) -> bool:
    """A thread arrival on a ring whose other side is UMMA: the arriving threads' tcgen05.ld / st (an
    epilogue reading the accumulator) are ordered before it by ``tcgen05.fence::before_thread_sync``."""
    return isinstance(action, Arrive) and _umma_side(cfg, BarrierKind.Full if action.barrier is BarrierKind.Empty
                                                     else BarrierKind.Empty)


def stage_barrier(step, storage: PipelineStorage, cursors: Cursors, scope: dict):
    """(stage index, barrier) a work step sees: full[i] for producer work, empty[i] for consumer work."""
    index = scope[cursors.stage]
    producer = step.stage.name.startswith("Producer")
    return index, (storage.full(index) if producer else storage.empty(index))


def stages_in_flight(storage: PipelineStorage, cursors: Cursors, scope: dict):
    """Producer stages acquired and not yet committed (``advance_on_acquire``): the distance from the
    commit cursor to the acquire cursor, counting the phase bit as the ring's wrap (Int32)."""
    stages = storage.config.num_stages
    opened = scope[cursors.open_index] + scope[cursors.open_phase] * stages
    closed = scope[cursors.close_index] + scope[cursors.close_phase] * stages
    return ((opened - closed + 2 * stages) % (2 * stages)) // storage.config.producer_acquire_interleave_stride


def producer_tail(ctx, task, storages: dict, cursors_by_key: dict, scope: dict) -> None:
    """Drain: wait on the empty barrier of each stage still in flight (:func:`tsjit.ts.protocol.tail_actions`)."""
    for (resource, side), cursors in cursors_by_key.items():
        if side != "producer" or not any(s.stage is ScheduleStage.ProducerAcquire and s.resource is resource
                                         for s in task.schedule.steps):
            continue
        em = _Emission(ctx, None, task, storages[resource], cursors, scope)
        config = storages[resource].config
        acquire_who = next(a.who for a in protocol.actions(config, ScheduleStage.ProducerAcquire)
                           if isinstance(a, WaitParity))
        for action in protocol.tail_actions(config):
            if not isinstance(action, WaitParity):
                _EMITTERS[type(action)](action, em)
                continue
            action = dataclasses.replace(action, who=acquire_who)     # drained where the acquires waited
            with bounded_wait.wait_context(
                    task=task.describe(), resource=resource.name, barrier=f"{resource.name}.{action.barrier.value}",
                    operation=f"{resource.name!r} ProducerAcquire of the producer tail (the drain after the schedule "
                              f"waits for every stage to be released)", stage=scope[em.keys(action.cursor)[0]]):
                _EMITTERS[type(action)](action, em)
