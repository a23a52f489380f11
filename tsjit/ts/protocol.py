"""The pipeline protocol table: what every PipelineType x SignalingThreads does on each operation.

This module is the one home of the mbarrier protocol.
It is pure data plus small pure functions and imports nothing from the device language, the
back end or the runtime.  Its readers:

* the lowering (:mod:`tsjit.ts.lower_pipeline`) emits one code fragment per :data:`Action`;
* the interleaving model (:mod:`tsjit.ts.verify.exhaustive_model`) turns the same actions into
  the transitions it explores;
* the count checks (:mod:`tsjit.ts.verify.counts`, P1/P2) sum the arrivals of :func:`signals`;
* the config checks (:class:`tsjit.ts.pipeline.PipelineConfig`) and the structural checks read
  the per-type facts of :class:`TypeRow`.

A pipeline type is a row (:data:`ROWS`): the kind of each side (:class:`SideKind`) and the facts
that follow from it.  :func:`actions` gives, for a config and one schedule operation, the
barrier actions in program order:

(the vocabulary -- ``Probe``, ``WaitParity``, ``ArmTx``, ``Arrive``, ``CommitUmma``, ``SetStage``,
``Advance``; who acts, on which CTAs, gated to which -- is :mod:`tsjit.ts.protocol_actions`, re-exported
here).  What an ``ArmTx`` announces when several tasks fill one stage is :mod:`tsjit.ts.tx_bytes`.

Cursors (:class:`Cursor`): each side of a ring has an opening cursor (acquire / wait) and a
closing one (commit / release).  Without ``advance_on_acquire`` / ``advance_on_wait`` the closing
operation advances and the opening cursor follows it (``Advance.open_follows``); with it, each
advances on its own.  The producer starts at phase 1, the consumer at phase 0.

Hopper status: AsyncAsync and TmaAsync are lowered for sm_90a.  In a cluster of C > 1 CTAs,
``SignalingThreads.CtaLeader`` makes a side leader-only (:func:`leader_only`; the wait side
reads ``consumer_wait_signaling_threads`` when set, the split consumer):

* a leader-only consumer waits on the leader only and releases from the leader to every CTA's
  empty barrier (counted once); every CTA's TMA copies land on the leader's stage and barrier
  (``multicast_mask`` to rank 0), which only the leader arms, with all C CTAs' bytes; thread
  producers arrive on the leader's full barrier (``mapa`` + cluster arrive, C x the group);
* a leader-only producer acquires on the leader only and arms (TMA: remote ``arrive.expect_tx``)
  or arrives on every CTA's full barrier; every CTA's consumers release to the leader's empty
  barrier (C x the group);
* cursors advance on every CTA (a gated action is skipped, not its cursor update): a CTA that keeps
  working the ring -- a producer whose copies land on the leader's stage, which skips its arming --
  stays in step with the leader; a task working on a leader-only side elsewhere would use a stage no
  barrier guards there, and check SG2 (:mod:`tsjit.ts.verify.leader_tasks`) keeps it on CTA 0.

The Blackwell rows follow the Task Scheduling reference's protocol; the UMMA rows (TmaUmma,
UmmaAsync, AsyncUmma, UmmaUmma) are lowered for sm_100a / sm_100f (``CommitUmma``: an elected
thread of the task's first warp issues ``tcgen05.commit``, the thread that issued the MMAs), and
ClcFetchAsync (CTA 0 of the cluster fetches for every CTA).  On the Hopper rows ``CtaLeader`` gates a
side to the cluster's leader (:func:`leader_only`); on the UMMA rows of a 2-CTA pair (``V = 2``) it
gates the MMA warp's side to the pair leader (:func:`pair_leader_only`, ``Gate.PairLeader``), and a
TmaUmma stage's completion is leader-routed (:func:`copies_to_pair_leader`).
"""
from __future__ import annotations

import enum
from dataclasses import dataclass

from tsjit.ts.cluster_layout import (cluster_size, mcast_lanes, multicast_peer_rank,  # noqa: F401 (re-exported)
                                     multicast_peers, pair_size)
from tsjit.ts.enums import PipelineOp, PipelineType, ScheduleStage, SignalingThreads  # noqa: F401 (re-exported)
from tsjit.ts.protocol_actions import (OPERATIONS, Advance, ArmTx, Arrive, BarrierKind,  # noqa: F401 (re-exported)
                                       CommitUmma, Ctas, Cursor, Gate, Probe, SetStage, WaitParity, Who,
                                       landing_factor)

__all__ = ["PipelineType", "SignalingThreads", "PipelineOp", "SideKind", "TypeRow", "ROWS", "row",
           "Who", "BarrierKind", "Cursor", "Ctas", "Gate", "Probe", "WaitParity", "ArmTx", "Arrive",
           "CommitUmma", "SetStage", "Advance", "Ring", "ring", "actions", "tail_actions",
           "thread_arrival_who", "warps_per_stage", "cluster_size", "pair_size", "Signal",
           "signals", "producer_arm_who", "OPERATIONS", "multicast_peers",
           "multicast_peer_rank", "landing_factor", "leader_only", "pair_leader_only", "copies_to_pair_leader"]


class SideKind(enum.Enum):
    """What signals one side of a ring."""

    Threads = "threads"      # mbarrier.arrive by threads (or cp.async ...arrive.noinc)
    Tma = "tma"              # arrive.expect_tx, then the TMA copies' complete_tx
    Umma = "umma"            # tcgen05.commit: the hardware arrives when the MMAs finish
    Clc = "clc"              # the CLC try_cancel response (16 bytes per CTA)


@dataclass(frozen=True)
class TypeRow:
    """The per-type facts of one :class:`PipelineType`.

    Attributes:
        producer, consumer: :class:`SideKind` of each side.
        lowered: the lowering emits this type (the Hopper rows for sm_90a and later; the UMMA rows
            for sm_100a / sm_100f, where :attr:`needs_sm100`).
        interleave_roles: roles that may have ``interleave_stride > 1`` (check P6).
        interleave_single_cta: interleave only without a cluster (TmaAsync).
        paired_side: the thread side whose arrivals go to the pair leader (x V), or None.
    """

    pipeline_type: PipelineType
    producer: SideKind
    consumer: SideKind
    lowered: bool = False
    interleave_roles: tuple = ()
    interleave_single_cta: bool = False
    paired_side: str | None = None

    @property
    def producer_arms_tx(self) -> bool:
        """The producer arms the full barrier with transaction bytes (needs ``num_bytes > 0``)."""
        return self.producer in (SideKind.Tma, SideKind.Clc)

    @property
    def producer_hardware_async(self) -> bool:
        """The producer's data lands asynchronously (TMA, MMA, CLC): check D1 applies."""
        return self.producer is not SideKind.Threads

    @property
    def consumer_synchronous(self) -> bool:
        """Consumer threads read and release the stage themselves (ping-pong capable)."""
        return self.consumer is SideKind.Threads

    @property
    def allows_async_load(self) -> bool:
        """``producer_op=AsyncLoad`` is meaningful (thread producers only)."""
        return self.producer is SideKind.Threads

    @property
    def allows_task_warp_leader(self) -> bool:
        """``producer_signaling_threads`` may contain TaskWarpLeader (TMA producers only)."""
        return self.producer is SideKind.Tma

    @property
    def needs_sm100(self) -> bool:
        """A tcgen05 (UMMA) or CLC side: Blackwell hardware only."""
        return SideKind.Umma in (self.producer, self.consumer) or self.producer is SideKind.Clc


_ALL_ROLES = ("acquire", "commit", "wait", "release")
ROWS: dict = {row_.pipeline_type: row_ for row_ in (
    TypeRow(PipelineType.AsyncAsync, SideKind.Threads, SideKind.Threads, True, _ALL_ROLES),
    TypeRow(PipelineType.TmaAsync, SideKind.Tma, SideKind.Threads, True, _ALL_ROLES,
            interleave_single_cta=True),
    TypeRow(PipelineType.TmaUmma, SideKind.Tma, SideKind.Umma, True, _ALL_ROLES),
    TypeRow(PipelineType.UmmaAsync, SideKind.Umma, SideKind.Threads, True, ("wait", "release"),
            paired_side="consumer"),
    TypeRow(PipelineType.AsyncUmma, SideKind.Threads, SideKind.Umma, True, ("acquire", "commit"),
            paired_side="producer"),
    TypeRow(PipelineType.UmmaUmma, SideKind.Umma, SideKind.Umma, True),
    TypeRow(PipelineType.ClcFetchAsync, SideKind.Clc, SideKind.Threads, True),
)}


def row(config) -> TypeRow:
    """The :class:`TypeRow` of a PipelineConfig (or of a PipelineType)."""
    ptype = config if isinstance(config, PipelineType) else config.pipeline_type
    return ROWS[ptype]


# ``PipelineType.X.row``: the enum lives below this table (tsjit.ts.enums), so the table attaches it here.
PipelineType.row = property(row, doc="This type's row of the protocol table (:data:`ROWS`).")


# -- the ring ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Ring:
    """The barrier set of one pipeline: ``2 x stages`` mbarriers, full[0..S) then empty[0..S).

    ``full_count`` / ``empty_count`` are the arrivals that complete one phase of one CTA's
    barrier, as initialised on the device; ``cluster`` the CTAs the ring spans; ``owner`` the
    resource (a pipeline group later).
    """

    owner: object
    stages: int
    full_count: int
    empty_count: int
    cluster: int

    def count(self, kind: BarrierKind) -> int:
        return self.full_count if kind is BarrierKind.Full else self.empty_count


def _thread_release_ctas(config) -> Ctas:
    """Where a thread consumer's release lands (see :func:`actions`): under TMA multicast, the CTAs
    whose copies filled this CTA's stage (CUTLASS: lane j < cluster size of each warp arrives on
    CTA j, filtered to the multicast row and column).  On the Hopper rows in a cluster: a
    ``CtaLeader`` consumer releases from the leader to every CTA (both sides leader-only: its own);
    consumers release to the leader's barrier when the producer is ``CtaLeader`` (leader-routed)."""
    r = row(config)
    if r.pipeline_type is PipelineType.ClcFetchAsync:
        return Ctas.ClusterLeader
    if r.paired_side == "consumer":
        return Ctas.PairLeader if pair_size(config) > 1 else Ctas.Local
    if cluster_size(config) == 1:
        return Ctas.Local
    producer_leader, consumer_leader = leader_only(config, "producer"), leader_only(config, "release")
    if consumer_leader:
        return Ctas.Local if producer_leader else Ctas.AllInCluster
    if producer_leader:
        return Ctas.ClusterLeader
    if r.pipeline_type is PipelineType.TmaAsync and mcast_lanes(config)[0] > 1:
        return Ctas.MulticastPeers
    return Ctas.AllInCluster


def leader_only(config, side: str) -> bool:
    """Whether ``side`` (``"producer"``: acquire / commit; ``"wait"``: try_wait / wait, from
    ``consumer_wait_signaling_threads`` when set; ``"release"``) of a Hopper-row ring runs on the
    cluster's leader CTA only: ``SignalingThreads.CtaLeader`` in a cluster of more than one CTA.
    (The Blackwell rows route by their own rules: pairs, the CLC leader.)"""
    if row(config).needs_sm100 or cluster_size(config) == 1:
        return False
    if side == "producer":
        threads = config.producer_signaling_threads
    elif side == "wait" and config.consumer_wait_signaling_threads is not None:
        threads = config.consumer_wait_signaling_threads
    else:
        threads = config.consumer_signaling_threads
    return bool(threads & SignalingThreads.CtaLeader)


def pair_leader_only(config, side: str) -> bool:
    """Whether ``side`` (as :func:`leader_only`) of a UMMA ring over 2-CTA pairs (``V > 1``) runs on the
    pair leader only: ``SignalingThreads.CtaLeader`` on the side the MMA warp drives (a UMMA side).  The
    pair leader's MMA warp issues the ``cta_group::2`` MMAs and commits for both CTAs; the peer CTA's
    copy of the task skips its barrier operations (the reference's ``cluster_rank % V == 0`` gate)."""
    r = row(config)
    if not r.needs_sm100 or pair_size(config) == 1:
        return False
    kind = r.producer if side == "producer" else r.consumer
    if kind is not SideKind.Umma:
        return False
    if side == "producer":
        threads = config.producer_signaling_threads
    elif side == "wait" and config.consumer_wait_signaling_threads is not None:
        threads = config.consumer_wait_signaling_threads
    else:
        threads = config.consumer_signaling_threads
    return bool(threads & SignalingThreads.CtaLeader)


def copies_to_pair_leader(config) -> bool:
    """A TmaUmma ring over 2-CTA pairs: each CTA's TMA copies fill its own stage but complete on the pair
    leader's full barrier (``cp.async.bulk.tensor ... .cta_group::2``, PTX ISA 9.1 §9.7.9.27), which only
    the leader arms, with the bytes of both CTAs (``num_bytes_per_warp_per_cta x V``)."""
    return row(config).pipeline_type is PipelineType.TmaUmma and pair_size(config) > 1


def _gate(config, side: str) -> Gate:
    if pair_leader_only(config, side):
        return Gate.PairLeader
    return Gate.Leader if leader_only(config, side) else Gate.Everywhere


def ring(config, owner=None) -> Ring:
    """The :class:`Ring` of ``config``.

    On the Hopper rows the groups count one CTA's signalling threads (check P1); the barrier
    counts multiply them by the CTAs whose arrivals land on one barrier (:func:`landing_factor`):
    a release from every CTA to every CTA (or, for a ``CtaLeader`` producer, to the leader) makes
    the empty barriers expect ``cluster x consumer_group.size``; a producer commit routed to a
    ``CtaLeader`` consumer's CTA makes the full barriers expect ``cluster x producer_group.size``;
    a leader-only side counts its own CTA.  Under TMA multicast (a lane per multicast peer) and on
    the Blackwell rows the groups count their CTAs already.
    """
    full, empty = config.producer_group.size, config.consumer_group.size
    r = row(config)
    if not r.needs_sm100:
        commit = [a for a in actions(config, ScheduleStage.ProducerCommit) if isinstance(a, Arrive)]
        if commit and commit[0].ctas is not Ctas.PairLeader:
            full *= commit[0].landing(config)
        release = [a for a in actions(config, ScheduleStage.ConsumerRelease) if isinstance(a, Arrive)]
        if release[0].ctas is not Ctas.MulticastPeers:
            empty *= release[0].landing(config)
    return Ring(owner, config.num_stages, full, empty, cluster_size(config))


# -- who arrives ------------------------------------------------------------------------------------
def warps_per_stage(num_warps: int, stride: int) -> int:
    """Warps of one task that signal one stage: ``num_warps / stride`` for a warp-lane task of an
    interleaved ring (each warp its own lane), else all of them."""
    if stride > 1 and num_warps >= stride and num_warps % stride == 0:
        return num_warps // stride
    return num_warps


def thread_arrival_who(group_size: int, warps: int) -> tuple[Who, bool]:
    """How a thread side arrives when ``warps`` warps signal one stage whose barrier expects
    ``group_size`` arrivals: every thread (``group_size == 32 x warps``) or one lane per warp
    (``group_size == warps``).  Returns ``(who, exact)``; without an exact match the closer
    one, with ``exact`` False (the lowering refuses it, the model shows its consequence)."""
    if group_size == 32 * warps:
        return Who.AllThreads, True
    if group_size == warps:
        return Who.LanePerWarp, True
    lane = abs(group_size - warps) < abs(group_size - 32 * warps)
    return (Who.LanePerWarp if lane else Who.AllThreads), False


def producer_arm_who(config) -> Who:
    """Who arms a TMA / CLC producer's full barrier: CTA 0's elected thread (CLC), the first warp of the
    task (``TaskWarpLeader``), or an elected lane of every producer warp."""
    if row(config).producer is SideKind.Clc:
        return Who.CtaLeader
    if config.producer_signaling_threads & SignalingThreads.TaskWarpLeader:
        return Who.ElectedInFirstWarp
    return Who.ElectedPerWarp


# -- the operations ---------------------------------------------------------------------------------
def actions(config, stage: ScheduleStage, warps: int = 1, arm_bytes: int | None = None) -> tuple:
    """The barrier actions of one operation, in program order.

    Args:
        config: the ring's PipelineConfig.
        stage: one of :data:`OPERATIONS`.
        warps: warps of the acting task (or lane) that signal one stage; it decides whether a
            thread side arrives from every thread or from one lane per warp.
        arm_bytes: the bytes each ``ArmTx`` of this acquire announces when they are the acting task's
            own (:func:`tsjit.ts.tx_bytes.arm_bytes`: per-work bytes); None: ``num_bytes``.

    Raises:
        RuntimeError: ``stage`` is not a pipeline operation (an internal error).
    """
    S = ScheduleStage
    r = row(config)
    s_acq, s_commit, s_wait, s_release = config.interleave_strides
    full, empty, open_, close = BarrierKind.Full, BarrierKind.Empty, Cursor.Open, Cursor.Close
    producer_gate, wait_gate = _gate(config, "producer"), _gate(config, "wait")
    if stage is S.ProducerTryAcquire:
        return (Probe(empty, open_, producer_gate),)
    if stage is S.ConsumerTryWait:
        return (Probe(full, open_, wait_gate),)
    if stage is S.ProducerAcquire:
        who = Who.CtaLeader if r.producer is SideKind.Clc else Who.AllThreads
        out = [WaitParity(empty, open_, who, gate=producer_gate)]
        if r.producer_arms_tx:
            ctas = Ctas.AllInCluster if r.producer is SideKind.Clc else Ctas.Local
            arm_gate = producer_gate
            if producer_gate is Gate.Leader and wait_gate is Gate.Everywhere:
                ctas = Ctas.AllInCluster     # the leader arms every CTA's full barrier (its multicast copies)
            elif wait_gate is Gate.Leader:
                arm_gate = Gate.Leader       # every CTA's copies land on the leader's barrier: it arms them all
            if copies_to_pair_leader(config):
                arm_gate = Gate.PairLeader   # both CTAs' copies complete on the pair leader's barrier
            nbytes = config.num_bytes if arm_bytes is None else arm_bytes
            out.append(ArmTx(full, open_, nbytes, producer_arm_who(config), ctas, arm_gate))
        out.append(SetStage(open_))
        if config.advance_on_acquire:
            out.append(Advance(open_, s_acq))
        return tuple(out)
    if stage is S.ProducerCommit:
        out = []
        if r.producer is SideKind.Threads:
            ctas = Ctas.PairLeader if r.paired_side == "producer" and pair_size(config) > 1 \
                else Ctas.Local
            if producer_gate is Gate.Leader and wait_gate is Gate.Everywhere:
                ctas = Ctas.AllInCluster     # the leader filled every CTA's stage
            elif producer_gate is Gate.Everywhere and wait_gate is Gate.Leader:
                ctas = Ctas.ClusterLeader    # every CTA filled part of the leader's stage
            if config.producer_op is PipelineOp.AsyncLoad:
                out.append(Arrive(full, close, Who.AllThreads, ctas, on_copy_completion=True, gate=producer_gate))
            else:
                who, _ = thread_arrival_who(config.producer_group.size, warps)
                out.append(Arrive(full, close, who, ctas, gate=producer_gate))
        elif r.producer is SideKind.Umma:
            # the (pair leader's) MMA warp commits once, multicast to the pair: one per barrier
            out.append(CommitUmma(full, close, Ctas.Local, producer_gate))
        out.append(Advance(close, s_commit, open_follows=not config.advance_on_acquire))
        return tuple(out)
    if stage is S.ConsumerWait:
        out = [WaitParity(full, open_, gate=wait_gate), SetStage(open_)]
        if config.advance_on_wait:
            out.append(Advance(open_, s_wait))
        return tuple(out)
    if stage is S.ConsumerRelease:
        if r.consumer is SideKind.Umma:
            ctas = Ctas.AllInCluster if cluster_size(config) > 1 else Ctas.Local
            signal = CommitUmma(empty, close, ctas, _gate(config, "release"))
        else:
            ctas = _thread_release_ctas(config)
            who = Who.LanePerWarp if ctas is Ctas.MulticastPeers else \
                thread_arrival_who(config.consumer_group.size, warps)[0]
            signal = Arrive(empty, close, who, ctas, gate=_gate(config, "release"))
        return (signal, Advance(close, s_release, open_follows=not config.advance_on_wait))
    raise RuntimeError(f"internal error, please report: {stage} is not a pipeline operation")


def tail_actions(config) -> tuple:
    """The producer tail after a producing task's schedule: wait on the empty barrier of every
    stage it may still have in flight (``S / stride`` waits), so no arrival lands after exit
    (on the leader CTA only when the producer is ``CtaLeader``: only its barriers get releases)."""
    cursor = Cursor.Close if config.advance_on_acquire else Cursor.Open
    stride = config.interleave_strides[0]
    step = (WaitParity(BarrierKind.Empty, cursor, after_probe=False, gate=_gate(config, "producer")),
            Advance(cursor, stride))
    return step * (config.num_stages // stride)


# -- what the count checks sum ---------------------------------------------------------------------
@dataclass(frozen=True)
class Signal:
    """One way a side's barrier may receive its arrivals per stage (check P1).

    ``role``: the operation whose tasks signal (acquire / commit / release); ``who``: the
    signalling threads (their :meth:`Who.arrivals` per task or lane), or None for a fixed
    ``count``; ``factor``: CTAs whose arrivals land on one barrier; ``formula``: how the
    expected count is formed, for messages.
    """

    role: str
    who: Who | None
    factor: int
    formula: str
    count: int = 0


def signals(config, side: str) -> tuple:
    """The arrival options of ``side`` (``"producer"``: full barrier, ``"consumer"``: empty
    barrier) that check P1 accepts; the first is the preferred one."""
    r = row(config)
    v, cluster = pair_size(config), cluster_size(config)
    if side == "producer":
        if r.producer is SideKind.Threads:
            scale = v if r.paired_side == "producer" else 1
            suffix = f" x V={v}" if scale > 1 else ""
            out = [Signal("commit", Who.AllThreads, scale, f"every thread: warps x 32{suffix}")]
            if config.producer_op is not PipelineOp.AsyncLoad:
                out.append(Signal("commit", Who.LanePerWarp, scale,
                                  f"one lane per warp: warps x 1{suffix}"))
            return tuple(out)
        if r.producer is SideKind.Tma:
            if producer_arm_who(config) is Who.ElectedInFirstWarp:
                return (Signal("acquire", Who.ElectedInFirstWarp, 1,
                               "TaskWarpLeader: 1 arming warp per task"),)
            return (Signal("acquire", Who.ElectedPerWarp, 1,
                           "one elected lane per producer warp arms expect_tx"),)
        if r.producer is SideKind.Umma:
            return (Signal("commit", None, 1, "one tcgen05.commit", 1),)
        return (Signal("acquire", None, 1, "one CLC query (CTA 0)", 1),)
    leader = bool(config.consumer_signaling_threads & SignalingThreads.CtaLeader)
    if r.consumer is SideKind.Umma:
        if r.pipeline_type is PipelineType.TmaUmma:
            count = cluster // v if leader or v > 1 else cluster
            formula = (f"one tcgen05.commit per pair leader: cluster {cluster} / V {v}" if leader or v > 1
                       else f"one tcgen05.commit per CTA of the cluster ({cluster})")
            return (Signal("release", None, 1, formula, count),)
        return (Signal("release", None, 1, "one tcgen05.commit", 1),)
    if r.producer is SideKind.Clc:
        return (Signal("release", Who.AllThreads, cluster,
                       f"every thread of every CTA: warps x 32 x cluster {cluster}"),)
    if r.pipeline_type is PipelineType.TmaAsync:
        lanes, lanes_text = mcast_lanes(config)
        if lanes > 1 and _thread_release_ctas(config) is not Ctas.MulticastPeers:
            # a CtaLeader side routes the release (leader to all, or all to the leader): no multicast lanes
            lanes, lanes_text = 1, "1 lane (a CtaLeader side routes the release, no multicast lanes)"
        out = [Signal("release", Who.LanePerWarp, lanes, f"warps x {lanes_text}")]
        if lanes == 1 or leader:
            out.insert(0, Signal("release", Who.AllThreads, 1,
                                 "all-thread mode: every consumer thread, warps x 32"))
        return tuple(out)
    scale = v if r.paired_side == "consumer" else 1
    suffix = f" x V={v}" if scale > 1 else ""
    return (Signal("release", Who.AllThreads, scale, f"every thread: warps x 32{suffix}"),
            Signal("release", Who.LanePerWarp, scale, f"one lane per warp: warps x 1{suffix}"))
