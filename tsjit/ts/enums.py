"""Enums of the Task Scheduling model that the host side needs.

``ScheduleStage``      the kind of one recorded schedule step; ``str()`` gives the short
                       tag of the schedule-table printout.
``ScheduleStageType``  the section a step belongs to: Head (before the domain loop),
                       Loop (inside it), Tail (after it).  ``LoopFirstIter`` and
                       ``LoopLastIter`` exist for raw schedule lists and normalise to
                       ``Loop`` plus a guard.
``LoopGuard``          the per-iteration guard of a raw Loop entry (Always/FirstIter/LastIter).
``BlockCondition``     the condition of a captured guard block: FirstIter, LastIter,
                       Every, WhenTrue, WhenFalse, Skippable.
``WorkAttr``           verifier-visible work attribute (IntFlag: NONE, AUXILIARY).
``WorkRole``           consumer or producer side of a work method.

``PipelineType``       ``<producer kind><consumer kind>`` of a pipeline (AsyncAsync, TmaAsync, ...).
``SignalingThreads``   who runs a side's barrier operations (IntFlag: All, CtaLeader, TaskWarpLeader).
``PipelineOp``         how a producer's data arrives (AsyncThread, AsyncLoad, TmaLoad, TCGen05Mma, ClcLoad).

This module is the reference's ``task_scheduling.enums``: ``from tsjit.ts.enums import PipelineType,
SignalingThreads, WorkAttr`` works as a ported program writes it.  The protocol table of each pipeline
type lives in :mod:`tsjit.ts.protocol`.
"""
from __future__ import annotations

import enum

__all__ = ["ScheduleStage", "ScheduleStageType", "LoopGuard", "BlockCondition",
           "WorkAttr", "WorkRole", "PIPELINE_OPS", "PipelineType", "SignalingThreads", "PipelineOp"]


class WorkRole(enum.Enum):
    """Which side of a resource a step or work method acts on."""

    Consumer = "consumer"
    Producer = "producer"

    def __str__(self) -> str:
        return self.value


class WorkAttr(enum.IntFlag):
    """Attributes of a work method that the verifier reads.

    ``AUXILIARY`` marks helper work with no payload access (initialising a task-local
    value, bookkeeping): it is exempt from the bracketing, ordering and race checks and
    may sit anywhere in a schedule.
    """

    NONE = 0
    AUXILIARY = 1


class ScheduleStage(enum.Enum):
    """The kind of one recorded schedule step.

    ``str(stage)`` is the tag the schedule table prints; arrows mark the barrier
    direction (``->ConsWai`` waits on the full barrier, ``ProdCmt->`` signals it).
    """

    ConsumerAuxWork = "ConsAux"
    ConsumerTryWait = "ConsTrW"
    ConsumerWait = "->ConsWai"
    ConsumerWork = "ConsWrk"
    ConsumerRelease = "<-ConsRel"
    ProducerAuxWork = "ProdAux"
    ProducerTryAcquire = "ProdTrA"
    ProducerAcquire = "ProdAcq<-"
    ProducerWork = "ProdWrk"
    ProducerCommit = "ProdCmt->"

    def __str__(self) -> str:
        return self.value

    @property
    def tag(self) -> str:
        """The short printout tag (same as ``str(stage)``)."""
        return self.value

    @property
    def role(self) -> WorkRole:
        return WorkRole.Consumer if self.name.startswith("Consumer") else WorkRole.Producer

    @property
    def is_consumer(self) -> bool:
        return self.role is WorkRole.Consumer

    @property
    def is_producer(self) -> bool:
        return self.role is WorkRole.Producer

    @property
    def is_work(self) -> bool:
        """True for the four work stages (plain and auxiliary)."""
        return self in _WORK_STAGES

    @property
    def is_aux(self) -> bool:
        return self in (ScheduleStage.ConsumerAuxWork, ScheduleStage.ProducerAuxWork)

    @property
    def is_pipeline_op(self) -> bool:
        """True for acquire/try_acquire/commit/wait/try_wait/release."""
        return not self.is_work

    @property
    def op_name(self) -> str | None:
        """The proxy method that records this stage (``"acquire"``), or None for work."""
        return _OP_BY_STAGE.get(self)

    @staticmethod
    def for_work(role: WorkRole, work_attrs: "WorkAttr") -> "ScheduleStage":
        """The work stage of a method with this role and these attributes."""
        aux = bool(work_attrs & WorkAttr.AUXILIARY)
        if role is WorkRole.Consumer:
            return ScheduleStage.ConsumerAuxWork if aux else ScheduleStage.ConsumerWork
        return ScheduleStage.ProducerAuxWork if aux else ScheduleStage.ProducerWork


_WORK_STAGES = frozenset({ScheduleStage.ConsumerAuxWork, ScheduleStage.ConsumerWork,
                          ScheduleStage.ProducerAuxWork, ScheduleStage.ProducerWork})

#: proxy method name -> the pipeline stage it records.
PIPELINE_OPS: dict[str, ScheduleStage] = {
    "try_acquire": ScheduleStage.ProducerTryAcquire,
    "acquire": ScheduleStage.ProducerAcquire,
    "commit": ScheduleStage.ProducerCommit,
    "try_wait": ScheduleStage.ConsumerTryWait,
    "wait": ScheduleStage.ConsumerWait,
    "release": ScheduleStage.ConsumerRelease,
}
_OP_BY_STAGE = {stage: name for name, stage in PIPELINE_OPS.items()}


class ScheduleStageType(enum.Enum):
    """The section of a schedule step.

    Head steps run before the domain loop (``loop_offset`` = loop start), Loop steps
    inside it, Tail steps after it (``loop_offset`` = last index).  ``LoopFirstIter`` and
    ``LoopLastIter`` only appear in raw schedule lists and normalise to ``Loop`` with a
    ``LoopGuard``.
    """

    Head = "Head"
    Loop = "Loop"
    LoopFirstIter = "LoopFirstIter"
    LoopLastIter = "LoopLastIter"
    Tail = "Tail"

    def __str__(self) -> str:
        return self.value


class LoopGuard(enum.Enum):
    """Per-iteration guard of a raw Loop entry."""

    Always = "Always"
    FirstIter = "FirstIter"
    LastIter = "LastIter"

    def __str__(self) -> str:
        return self.value


class BlockCondition(enum.Enum):
    """Condition of a captured guard block (see :class:`tsjit.ts.schedule.Guard`).

    ``FirstIter``/``LastIter``/``Every`` depend on the domain-loop trip index only;
    ``WhenTrue``/``WhenFalse`` on the run-time value of a task-local variable;
    ``Skippable`` on the work tile's ``skip_if`` predicate.
    """

    FirstIter = "first_iter"
    LastIter = "last_iter"
    Every = "every"
    WhenTrue = "when_true"
    WhenFalse = "when_false"
    Skippable = "skippable"

    def __str__(self) -> str:
        return self.value

    @property
    def is_loop_guard(self) -> bool:
        """True when the condition needs an enclosing domain loop."""
        return self in (BlockCondition.FirstIter, BlockCondition.LastIter, BlockCondition.Every)

    @property
    def is_data_dependent(self) -> bool:
        return self in (BlockCondition.WhenTrue, BlockCondition.WhenFalse)


class PipelineType(enum.Enum):
    """``<producer kind><consumer kind>`` of the barrier protocol; ``tsjit.ts.protocol.ROWS`` holds each
    row (``PipelineType.X.row``, attached there)."""

    AsyncAsync = "AsyncAsync"
    TmaAsync = "TmaAsync"
    TmaUmma = "TmaUmma"
    UmmaAsync = "UmmaAsync"
    AsyncUmma = "AsyncUmma"
    UmmaUmma = "UmmaUmma"
    ClcFetchAsync = "ClcFetchAsync"


class SignalingThreads(enum.IntFlag):
    """Who executes a side's barrier operations: every thread, the cluster's leader CTA, or the
    first warp of a multi-warp TMA producer task.  Legal: All, CtaLeader, TaskWarpLeader,
    CtaLeader | TaskWarpLeader."""

    All = 1
    CtaLeader = 2
    TaskWarpLeader = 4

    def is_valid_combination(self) -> bool:
        """Whether this value is one of the legal combinations (callable on a value, or on the class with
        the value: ``SignalingThreads.is_valid_combination(v)``)."""
        return int(self) in (1, 2, 4, 6)

    def has_cta_leader(self) -> bool:
        """Whether only the cluster's leader CTA signals (``CtaLeader`` is set)."""
        return bool(int(self) & int(SignalingThreads.CtaLeader))

    def has_task_warp_leader(self) -> bool:
        """Whether only the task's first warp signals (``TaskWarpLeader`` is set)."""
        return bool(int(self) & int(SignalingThreads.TaskWarpLeader))


class PipelineOp(enum.Enum):
    """How the producer's data arrives: thread stores (AsyncThread), ``cp.async`` with
    ``cp.async.mbarrier.arrive.noinc`` (AsyncLoad), TMA, tcgen05 MMA, CLC."""

    AsyncThread = "AsyncThread"
    AsyncLoad = "AsyncLoad"
    TmaLoad = "TmaLoad"
    TCGen05Mma = "TCGen05Mma"
    ClcLoad = "ClcLoad"
