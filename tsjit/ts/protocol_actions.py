"""The action vocabulary of the pipeline protocol table (:mod:`tsjit.ts.protocol`): who acts, on which
barrier and cursor, on which CTAs, and the actions themselves, as plain data.

``Probe``       ``mbarrier.try_wait.parity`` once, result kept (try_acquire / try_wait)
``WaitParity``  block until the phase with the cursor's parity completes (skipped when the
                preceding probe of the same side succeeded)
``ArmTx``       ``mbarrier.arrive.expect_tx(nbytes)``: one arrival plus the bytes the copies bring
``Arrive``      ``mbarrier.arrive`` (or ``cp.async.mbarrier.arrive.noinc`` for AsyncLoad)
``CommitUmma``  ``tcgen05.commit`` to the barrier (the hardware arrives when the MMAs finish)
``SetStage``    the following work steps see this cursor's stage
``Advance``     cursor += stride, wrap at S flipping the phase

Who acts (:class:`Who`): all threads, one lane per warp, an elected thread of the first warp, an
elected thread per warp, or the CTA leader only.  Which CTAs an arrival lands on (:class:`Ctas`):
the local one, every CTA of the cluster, the multicast peers, the pair leader, or the cluster's leader
CTA.  Which CTAs execute an action (:class:`Gate`): every CTA, or the cluster's leader (rank 0) only.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass

from tsjit.ts.cluster_layout import cluster_size, mcast_lanes, pair_size
from tsjit.ts.enums import ScheduleStage

__all__ = ["Who", "BarrierKind", "Cursor", "Ctas", "Gate", "Probe", "WaitParity", "ArmTx", "Arrive",
           "landing_factor", "CommitUmma", "SetStage", "Advance", "OPERATIONS"]


class Who(enum.Enum):
    """The threads that execute one action."""

    AllThreads = "all threads"
    LanePerWarp = "one lane per warp"
    ElectedInFirstWarp = "an elected thread of the first warp"
    ElectedPerWarp = "an elected thread per warp"
    CtaLeader = "the CTA leader only"

    def arrivals(self, warps: int) -> int:
        """Arrivals one signalling unit (a task, or one lane of an interleaved task) with
        ``warps`` warps makes on one barrier."""
        if self is Who.AllThreads:
            return 32 * warps
        if self in (Who.LanePerWarp, Who.ElectedPerWarp):
            return warps
        return 1


class BarrierKind(enum.Enum):
    Full = "full"
    Empty = "empty"


class Cursor(enum.Enum):
    Open = "open"            # acquire / wait
    Close = "close"          # commit / release


class Ctas(enum.Enum):
    """Which CTAs' copy of the barrier an arrival lands on."""

    Local = "local"
    AllInCluster = "every CTA of the cluster"
    MulticastPeers = "the CTAs of its TMA multicast row and column"
    PairLeader = "the leader CTA of the pair"
    ClusterLeader = "CTA 0 of the cluster"

    def factor(self, config) -> int:
        """For an action every CTA performs (Arrive, CommitUmma): how many CTAs' actions land on
        one CTA's barrier; the symmetric one-CTA model multiplies the arrivals by it."""
        if self is Ctas.Local:
            return 1
        if self is Ctas.PairLeader:
            return pair_size(config)
        if self is Ctas.MulticastPeers:
            return mcast_lanes(config)[0]
        return cluster_size(config)


class Gate(enum.Enum):
    """Which CTAs of the cluster execute an action (``SignalingThreads.CtaLeader``: the leader only)."""

    Everywhere = "every CTA"
    Leader = "the cluster's leader CTA (rank 0) only"
    PairLeader = "the leader CTA of each 2-CTA pair (rank % V == 0) only"


@dataclass(frozen=True)
class Probe:
    barrier: BarrierKind
    cursor: Cursor
    gate: Gate = Gate.Everywhere


@dataclass(frozen=True)
class WaitParity:
    barrier: BarrierKind
    cursor: Cursor
    who: Who = Who.AllThreads
    after_probe: bool = True         # skipped when the side's preceding probe succeeded
    gate: Gate = Gate.Everywhere


@dataclass(frozen=True)
class ArmTx:
    barrier: BarrierKind
    cursor: Cursor
    nbytes: int
    who: Who
    ctas: Ctas = Ctas.Local
    gate: Gate = Gate.Everywhere

    def landing(self, config) -> int:
        """CTAs' arming actions that land on one CTA's barrier (see :func:`landing_factor`)."""
        return landing_factor(self, config)


@dataclass(frozen=True)
class Arrive:
    barrier: BarrierKind
    cursor: Cursor
    who: Who
    ctas: Ctas = Ctas.Local
    on_copy_completion: bool = False  # cp.async.mbarrier.arrive.noinc (AsyncLoad)
    gate: Gate = Gate.Everywhere

    def landing(self, config) -> int:
        """CTAs' arrivals that land on one CTA's barrier (see :func:`landing_factor`)."""
        return landing_factor(self, config)


def landing_factor(action, config) -> int:
    """For an ``Arrive`` / ``ArmTx``: how many CTAs' executions of it land on one CTA's barrier (the
    barrier the waiting side watches).  Gated to the leader: 1 (only the leader acts, on every CTA's
    barrier or its own); otherwise :meth:`Ctas.factor` (every CTA acts: C on a cluster-wide or
    leader-routed arrival, the multicast peers, the pair)."""
    if action.gate is Gate.Leader:
        return 1
    return action.ctas.factor(config)


@dataclass(frozen=True)
class CommitUmma:
    """``tcgen05.commit`` to the barrier; ``ctas``: whose commits land on one barrier (Local: one
    commit, possibly multicast by the pair leader; AllInCluster: every CTA's)."""

    barrier: BarrierKind
    cursor: Cursor
    ctas: Ctas = Ctas.Local
    gate: Gate = Gate.Everywhere


@dataclass(frozen=True)
class SetStage:
    cursor: Cursor


@dataclass(frozen=True)
class Advance:
    cursor: Cursor
    stride: int
    open_follows: bool = False       # the opening cursor is set to the advanced closing one


#: the schedule operations the table answers for.
OPERATIONS = (ScheduleStage.ProducerTryAcquire, ScheduleStage.ProducerAcquire,
              ScheduleStage.ProducerCommit, ScheduleStage.ConsumerTryWait,
              ScheduleStage.ConsumerWait, ScheduleStage.ConsumerRelease)
