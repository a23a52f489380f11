"""Pipeline configurations: the mbarrier protocol guarding one resource.

A :class:`PipelineConfig` is frozen data: the ring depth ``num_stages`` (2 x stages
mbarriers: full[0..S) then empty[0..S)), the expected transaction bytes per stage for TMA
producers, the arrival counts of each side (:class:`CooperativeGroup`), the producer /
consumer kinds (:class:`PipelineType`, ``<producer><consumer>``), who signals
(:class:`SignalingThreads`), the cursor advance points and interleave strides.  The seven
factory methods build valid configurations; ``__post_init__`` rejects impossible ones
(rule P3), naming the field and the values.

Hardware: AsyncAsync and TmaAsync lower on sm_90; the types with a tcgen05 (``Umma``) or
CLC side need sm_100a and are rejected by the lowering for sm_90a with a clear message.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field

from tsjit.errors import UsageTypeError, VerificationError
from tsjit.ts.diagnostics import definition_location
from tsjit.ts.protocol import PipelineOp, PipelineType, SideKind, SignalingThreads, TypeRow, row

__all__ = ["PipelineType", "SignalingThreads", "PipelineOp", "Agent", "CooperativeGroup", "PipelineConfig"]


class Agent(enum.Enum):
    """The unit a :class:`CooperativeGroup` counts."""

    Thread = "thread"
    Warp = "warp"
    ThreadBlock = "threadblock"
    ThreadBlockCluster = "cluster"


def _compile_time_hint(value) -> str:
    """What to change when ``value`` is a run-time device scalar (duck-typed: an LLVM ``ir`` and a
    ``dtype``, as ``tsjit.lang.values.Value``) where a pipeline needs a compile-time int."""
    if hasattr(value, "ir") and hasattr(value, "dtype") and not isinstance(value, int):
        return ("; it is a run-time value, but a pipeline's stages, arrival counts and bytes are fixed when the "
                "kernel compiles: pass a Python int, or declare that kernel parameter as tsjit.Constexpr[int]")
    return ""


@dataclass(frozen=True)
class CooperativeGroup:
    """An arrival count: ``size`` agents of kind ``agent`` (mbarrier arrivals per phase)."""

    agent: Agent = Agent.Thread
    size: int = 1

    def __post_init__(self):
        if not isinstance(self.size, int) or self.size < 1:
            raise VerificationError(f"CooperativeGroup size must be a positive int, got {self.size!r}"
                                    f"{_compile_time_hint(self.size)}", "P3")

    @property
    def arrivals(self) -> int:
        return self.size


def _stride_tuple(stride) -> tuple[int, int, int, int]:
    """Normalize ``interleave_stride`` to (producer acquire, producer commit, consumer wait, consumer release)."""
    if isinstance(stride, int) and not isinstance(stride, bool):
        return (stride,) * 4
    if isinstance(stride, tuple) and len(stride) == 4:
        return stride
    raise VerificationError(f"interleave_stride must be an int or a 4-tuple (acquire, commit, wait, release), "
                            f"got {stride!r}", "P3")


_ALL = SignalingThreads.All
_THREAD = PipelineOp.AsyncThread
#: the producer operation each producer kind implies (thread producers: chosen by a field).
_FIXED_PRODUCER_OP = {SideKind.Tma: PipelineOp.TmaLoad, SideKind.Umma: PipelineOp.TCGen05Mma,
                      SideKind.Clc: PipelineOp.ClcLoad}


@dataclass(frozen=True)
class PipelineConfig:
    """The barrier protocol of one pipelined resource (build it with a ``create_*`` factory).

    Fields, in the reference's positional order:
        num_stages: ring depth S (>= 1); storage is 2 x S 8-byte mbarriers.
        num_bytes: transaction bytes one stage's TMA / CLC copies deliver, else 0.
        producer_group, consumer_group: arrival counts of the full / empty barriers.
        pipeline_type: :class:`PipelineType`.
        barrier_ptr: pre-allocated barrier storage; must be None: tsjit places every
            pipeline's barriers in the kernel's dynamic shared-memory block itself.
        cta_layout_vmnk: cluster shape (V, M, N, K) or None (single CTA).
        producer_signaling_threads, consumer_signaling_threads: :class:`SignalingThreads`.
        consumer_wait_signaling_threads: separate signalling for waits (split consumer) or None.
        umma_consumer_producer_op: producer operation of AsyncUmma (AsyncThread / AsyncLoad).
        advance_on_wait: wait advances the consumer cursor (release uses a lagging one).
        advance_on_acquire: acquire advances the producer cursor (commit uses a lagging one).
        num_bytes_per_warp_per_cta: for aggregate / leader-routed TMA byte checks (P2), or None.
        mcast_mode_mn: TMA multicast mode (1, 0), (0, 1) or (1, 1) (default); None (a tsjit
            extension, the default of ``create_tma_async_pipeline_cfg``) means no multicast.
        interleave_stride: int or (acquire, commit, wait, release) lanes sharing the ring.
        async_producer_op: producer operation of AsyncAsync (AsyncThread / AsyncLoad).

    ``producer_op`` (a property) is the producer's :class:`PipelineOp` whatever the type.
    ``source_location`` (not a field) is where user code made the config, or None: checks P1 / P2
    point there.

    Raises:
        VerificationError (P3): an impossible combination, naming the field and values.
        UsageTypeError: the pre-reference positional order ``PipelineConfig(pipeline_type,
            num_stages, ...)``.
    """

    num_stages: int
    num_bytes: int
    producer_group: CooperativeGroup
    consumer_group: CooperativeGroup
    pipeline_type: PipelineType
    barrier_ptr: object = field(default=None, compare=False)
    cta_layout_vmnk: tuple | None = None
    producer_signaling_threads: SignalingThreads = _ALL
    consumer_signaling_threads: SignalingThreads = _ALL
    consumer_wait_signaling_threads: SignalingThreads | None = None
    umma_consumer_producer_op: PipelineOp = _THREAD
    advance_on_wait: bool = False
    advance_on_acquire: bool = False
    num_bytes_per_warp_per_cta: int | None = None
    mcast_mode_mn: tuple | None = (1, 1)
    interleave_stride: object = 1
    async_producer_op: PipelineOp = _THREAD

    def __post_init__(self):
        object.__setattr__(self, "source_location", definition_location())
        t = self.pipeline_type
        if isinstance(self.num_stages, PipelineType):
            raise UsageTypeError(
                f"PipelineConfig takes the reference's order (num_stages, num_bytes, producer_group, "
                f"consumer_group, pipeline_type, ...); got the pipeline type {self.num_stages!r} first. "
                f"Use a factory, e.g. PipelineConfig.create_tma_async_pipeline_cfg(num_stages, "
                f"num_bytes, producer_group, consumer_group).")
        if self.barrier_ptr is not None:
            raise VerificationError(
                f"barrier_ptr={self.barrier_ptr!r}: tsjit places every pipeline's mbarriers in the kernel's "
                f"dynamic shared-memory block itself (SmemAllocator); pass barrier_ptr=None and read "
                f"stage_info.barrier in the work bodies.", "P3")
        if not isinstance(t, PipelineType):
            raise VerificationError(f"pipeline_type must be a PipelineType, got {t!r}", "P3")
        if not isinstance(self.num_stages, int) or self.num_stages < 1:
            raise VerificationError(f"num_stages must be a positive int, got {self.num_stages!r}"
                                    f"{_compile_time_hint(self.num_stages)}", "P3")
        for name in ("producer_signaling_threads", "consumer_signaling_threads", "consumer_wait_signaling_threads"):
            value = getattr(self, name)
            if value is not None and not SignalingThreads.is_valid_combination(value):
                raise VerificationError(f"{name}={value!r} is not a legal combination; use All, CtaLeader, "
                                        f"TaskWarpLeader or CtaLeader|TaskWarpLeader", "P3")
        if self.consumer_signaling_threads & SignalingThreads.TaskWarpLeader:
            raise VerificationError("consumer_signaling_threads cannot contain TaskWarpLeader; it only applies to "
                                    "multi-warp TMA producers", "P3")
        protocol = row(t)
        if self.producer_signaling_threads & SignalingThreads.TaskWarpLeader and not protocol.allows_task_warp_leader:
            raise VerificationError(f"producer_signaling_threads=TaskWarpLeader needs a TMA producer; "
                                    f"{t.value} has a {protocol.producer.value} producer", "P3")
        for name, owner in (("async_producer_op", PipelineType.AsyncAsync),
                            ("umma_consumer_producer_op", PipelineType.AsyncUmma)):
            op = getattr(self, name)
            if op not in (PipelineOp.AsyncThread, PipelineOp.AsyncLoad):
                raise VerificationError(f"{name} must be PipelineOp.AsyncThread or PipelineOp.AsyncLoad, "
                                        f"got {op!r}", "P3")
            if op is PipelineOp.AsyncLoad and t is not owner:
                raise VerificationError(f"{name}=AsyncLoad applies to {owner.value} pipelines, not {t.value} "
                                        f"(producer_op=AsyncLoad is only valid for AsyncAsync and AsyncUmma)",
                                        "P3")
        needs_bytes = protocol.producer_arms_tx
        if needs_bytes and (not isinstance(self.num_bytes, int) or self.num_bytes <= 0):
            raise VerificationError(f"{t.value} needs num_bytes > 0 (the bytes one stage's copies deliver), "
                                    f"got {self.num_bytes!r}{_compile_time_hint(self.num_bytes)}", "P3")
        if not needs_bytes and self.num_bytes:
            raise VerificationError(f"num_bytes={self.num_bytes} is only meaningful for TMA/CLC producers; "
                                    f"{t.value} producers arrive without transaction bytes", "P3")
        strides = _stride_tuple(self.interleave_stride)
        for role, stride in zip(("acquire", "commit", "wait", "release"), strides):
            if not isinstance(stride, int) or stride < 1:
                raise VerificationError(f"interleave_stride for {role} must be an int >= 1, got {stride!r}", "P3")
            if self.num_stages % stride:
                raise VerificationError(f"interleave_stride {stride} ({role}) must divide num_stages="
                                        f"{self.num_stages}", "P3")
        if strides[0] != strides[1] and not self.advance_on_acquire:
            raise VerificationError(f"different acquire/commit strides {strides[:2]} need advance_on_acquire=True",
                                    "P3")
        if strides[2] != strides[3] and not self.advance_on_wait:
            raise VerificationError(f"different wait/release strides {strides[2:]} need advance_on_wait=True", "P3")
        if self.mcast_mode_mn is not None and tuple(self.mcast_mode_mn) not in ((1, 0), (0, 1), (1, 1)):
            raise VerificationError(f"mcast_mode_mn must be (1, 0), (0, 1) or (1, 1), got {self.mcast_mode_mn!r}",
                                    "P3")

    # -- derived -----------------------------------------------------------------------------
    @property
    def protocol(self) -> TypeRow:
        """This config's row of the protocol table (:mod:`tsjit.ts.protocol`)."""
        return row(self.pipeline_type)

    @property
    def interleave_strides(self) -> tuple[int, int, int, int]:
        """(producer_acquire, producer_commit, consumer_wait, consumer_release) strides."""
        return _stride_tuple(self.interleave_stride)

    @property
    def producer_acquire_interleave_stride(self) -> int:
        """Stride of the producer acquire cursor (``interleave_strides[0]``)."""
        return self.interleave_strides[0]

    @property
    def producer_commit_interleave_stride(self) -> int:
        """Stride of the producer commit cursor (``interleave_strides[1]``)."""
        return self.interleave_strides[1]

    @property
    def consumer_wait_interleave_stride(self) -> int:
        """Stride of the consumer wait cursor when ``advance_on_wait`` (``interleave_strides[2]``)."""
        return self.interleave_strides[2]

    @property
    def consumer_release_interleave_stride(self) -> int:
        """Stride of the consumer release cursor (``interleave_strides[3]``)."""
        return self.interleave_strides[3]

    @property
    def producer_op(self) -> PipelineOp:
        """The producer's operation: ``async_producer_op`` (AsyncAsync), ``umma_consumer_producer_op``
        (AsyncUmma), else TmaLoad / TCGen05Mma / ClcLoad by the producer kind."""
        if self.pipeline_type is PipelineType.AsyncAsync:
            return self.async_producer_op
        if self.pipeline_type is PipelineType.AsyncUmma:
            return self.umma_consumer_producer_op
        return _FIXED_PRODUCER_OP[row(self.pipeline_type).producer]

    @property
    def max_interleave_stride(self) -> int:
        """The largest role-specific interleave stride."""
        return max(self.interleave_strides)

    @property
    def has_interleaved_stride(self) -> bool:
        """Whether any role advances through the ring with a stride > 1."""
        return self.max_interleave_stride > 1

    @property
    def barrier_bytes(self) -> int:
        """Shared memory of the barriers: 2 x num_stages x 8 bytes."""
        return 16 * self.num_stages

    # -- factories (parameters in the reference's order; tsjit's extras are keyword-only) -----------
    @classmethod
    def create_async_async_pipeline_cfg(cls, num_stages: int, producer_group: CooperativeGroup,
                                        consumer_group: CooperativeGroup, cta_layout_vmnk=None,
                                        producer_signaling_threads: SignalingThreads = _ALL,
                                        consumer_signaling_threads: SignalingThreads = _ALL, barrier_ptr=None,
                                        producer_op: PipelineOp = _THREAD, advance_on_acquire: bool = False,
                                        interleave_stride=1, *, advance_on_wait: bool = False,
                                        **extra) -> "PipelineConfig":
        """Threads -> threads: producers arrive on full[i], consumers on empty[i].

        ``producer_op=AsyncLoad`` makes the producer's ``cp.async`` copies arrive on full[i]
        (``cp.async.mbarrier.arrive.noinc``).

        Sizing the groups: a group's ``size`` is the number of mbarrier arrivals per stage, so it
        counts who arrives, not the warps themselves.  For a producer task of P warps and a
        consumer task of C warps:

        * every thread arrives (the default ``SignalingThreads.All``):
          ``producer_group=CooperativeGroup(Agent.Thread, 32 * P)``,
          ``consumer_group=CooperativeGroup(Agent.Thread, 32 * C)``;
        * one lane per warp arrives (the lowering elects it and adds ``bar.warp.sync``):
          ``CooperativeGroup(Agent.Thread, P)`` or ``CooperativeGroup(Agent.Warp, P)``, and
          likewise ``C`` for the consumer;
        * ``producer_op=AsyncLoad``: every producer thread's copies arrive, so ``32 * P`` only.

        E.g. one producer warp and one consumer warp: ``CooperativeGroup(Agent.Thread, 32)`` for
        both.  Another size is refused by check P1, which names the counts that fit.

        Args:
            num_stages: ring depth (stages of the full/empty barrier pair), >= 1.
            producer_group, consumer_group: arrivals per stage on full[i] / empty[i], as above.
            cta_layout_vmnk: the cluster layout; ``None`` means one CTA (tsjit shorthand).
            producer_signaling_threads, consumer_signaling_threads: which threads of the task
                signal (:class:`SignalingThreads`).
            barrier_ptr: where the barriers live (``None``: the TaskManager places them).
            producer_op: how the producer's writes arrive (``PipelineOp``: Thread or AsyncLoad).
            advance_on_acquire, advance_on_wait: keep several stages open per task.
            interleave_stride: stage interleaving between the warps of a task.
            **extra: any other :class:`PipelineConfig` field, by keyword.
        """
        return cls(num_stages, 0, producer_group, consumer_group, PipelineType.AsyncAsync, barrier_ptr=barrier_ptr,
                   cta_layout_vmnk=cta_layout_vmnk, producer_signaling_threads=producer_signaling_threads,
                   consumer_signaling_threads=consumer_signaling_threads, async_producer_op=producer_op,
                   advance_on_acquire=advance_on_acquire, advance_on_wait=advance_on_wait,
                   interleave_stride=interleave_stride, **extra)

    @classmethod
    def create_tma_async_pipeline_cfg(cls, num_stages: int, num_bytes: int, producer_group: CooperativeGroup,
                                      consumer_group: CooperativeGroup, cta_layout_vmnk=None,
                                      producer_signaling_threads: SignalingThreads = _ALL,
                                      consumer_signaling_threads: SignalingThreads = _ALL, barrier_ptr=None,
                                      interleave_stride=1, num_bytes_per_warp_per_cta: int | None = None, *,
                                      mcast_mode_mn=None, advance_on_wait: bool = False,
                                      **extra) -> "PipelineConfig":
        """TMA -> threads: the producer arms full[i] with ``arrive.expect_tx(num_bytes)``; TMA completes it.

        Keyword-only extras (tsjit): ``mcast_mode_mn`` (default None: no multicast lanes in
        the arrival-count check), ``advance_on_wait``, any other field.
        """
        return cls(num_stages, num_bytes, producer_group, consumer_group, PipelineType.TmaAsync,
                   barrier_ptr=barrier_ptr, cta_layout_vmnk=cta_layout_vmnk,
                   producer_signaling_threads=producer_signaling_threads,
                   consumer_signaling_threads=consumer_signaling_threads, interleave_stride=interleave_stride,
                   num_bytes_per_warp_per_cta=num_bytes_per_warp_per_cta, mcast_mode_mn=mcast_mode_mn,
                   advance_on_wait=advance_on_wait, **extra)

    @classmethod
    def create_tma_umma_pipeline_cfg(cls, num_stages: int, num_bytes: int, producer_group: CooperativeGroup,
                                     consumer_group: CooperativeGroup, cta_layout_vmnk=None,
                                     producer_signaling_threads: SignalingThreads = _ALL,
                                     consumer_signaling_threads: SignalingThreads = _ALL, barrier_ptr=None,
                                     advance_on_wait: bool = False, interleave_stride=1, mcast_mode_mn=(1, 1),
                                     num_bytes_per_warp_per_cta: int | None = None,
                                     **extra) -> "PipelineConfig":
        """TMA -> tcgen05 MMA (sm_100a)."""
        return cls(num_stages, num_bytes, producer_group, consumer_group, PipelineType.TmaUmma,
                   barrier_ptr=barrier_ptr, cta_layout_vmnk=cta_layout_vmnk,
                   producer_signaling_threads=producer_signaling_threads,
                   consumer_signaling_threads=consumer_signaling_threads, advance_on_wait=advance_on_wait,
                   interleave_stride=interleave_stride, mcast_mode_mn=mcast_mode_mn,
                   num_bytes_per_warp_per_cta=num_bytes_per_warp_per_cta, **extra)

    @classmethod
    def create_umma_async_pipeline_cfg(cls, num_stages: int, producer_group: CooperativeGroup,
                                       consumer_group: CooperativeGroup, cta_layout_vmnk=None,
                                       producer_signaling_threads: SignalingThreads = _ALL,
                                       consumer_signaling_threads: SignalingThreads = _ALL, barrier_ptr=None,
                                       interleave_stride=1, **extra) -> "PipelineConfig":
        """tcgen05 commit -> threads (TMEM accumulator hand-off, sm_100a)."""
        return cls(num_stages, 0, producer_group, consumer_group, PipelineType.UmmaAsync, barrier_ptr=barrier_ptr,
                   cta_layout_vmnk=cta_layout_vmnk, producer_signaling_threads=producer_signaling_threads,
                   consumer_signaling_threads=consumer_signaling_threads, interleave_stride=interleave_stride,
                   **extra)

    @classmethod
    def create_async_umma_pipeline_cfg(cls, num_stages: int, producer_group: CooperativeGroup,
                                       consumer_group: CooperativeGroup, cta_layout_vmnk=None,
                                       producer_signaling_threads: SignalingThreads = _ALL,
                                       consumer_signaling_threads: SignalingThreads = _ALL,
                                       consumer_wait_signaling_threads: SignalingThreads | None = None,
                                       producer_op: PipelineOp = _THREAD, barrier_ptr=None,
                                       advance_on_wait: bool = False, advance_on_acquire: bool = False,
                                       interleave_stride=1, **extra) -> "PipelineConfig":
        """Threads / cp.async -> tcgen05 MMA (sm_100a); ``producer_op`` is stored as
        ``umma_consumer_producer_op``."""
        return cls(num_stages, 0, producer_group, consumer_group, PipelineType.AsyncUmma, barrier_ptr=barrier_ptr,
                   cta_layout_vmnk=cta_layout_vmnk, producer_signaling_threads=producer_signaling_threads,
                   consumer_signaling_threads=consumer_signaling_threads,
                   consumer_wait_signaling_threads=consumer_wait_signaling_threads,
                   umma_consumer_producer_op=producer_op, advance_on_wait=advance_on_wait,
                   advance_on_acquire=advance_on_acquire, interleave_stride=interleave_stride, **extra)

    @classmethod
    def create_umma_umma_pipeline_cfg(cls, num_stages: int, producer_group: CooperativeGroup,
                                      consumer_group: CooperativeGroup, cta_layout_vmnk=None,
                                      producer_signaling_threads: SignalingThreads = _ALL,
                                      consumer_signaling_threads: SignalingThreads = _ALL, barrier_ptr=None,
                                      **extra) -> "PipelineConfig":
        """tcgen05 -> tcgen05 (sm_100a); no interleave."""
        if extra.get("interleave_stride", 1) != 1:
            raise VerificationError("UmmaUmma pipelines cannot be interleaved", "P3")
        return cls(num_stages, 0, producer_group, consumer_group, PipelineType.UmmaUmma, barrier_ptr=barrier_ptr,
                   cta_layout_vmnk=cta_layout_vmnk, producer_signaling_threads=producer_signaling_threads,
                   consumer_signaling_threads=consumer_signaling_threads, **extra)

    @classmethod
    def create_clc_fetch_async_pipeline_cfg(cls, num_stages: int, num_bytes: int, producer_group: CooperativeGroup,
                                            consumer_group: CooperativeGroup | None = None, cta_layout_vmnk=None,
                                            producer_signaling_threads: SignalingThreads = SignalingThreads.CtaLeader,
                                            consumer_signaling_threads: SignalingThreads = _ALL, barrier_ptr=None,
                                            **extra) -> "PipelineConfig":
        """CLC response -> threads (sm_100a dynamic persistent scheduling).

        ``num_bytes`` is the fetch's transaction bytes per stage: 16 (one
        ``clusterlaunchcontrol.try_cancel`` response) per CTA of the cluster.

        Raises:
            UsageTypeError: the pre-reference form ``(num_stages, producer_group, consumer_group)``
                without ``num_bytes``.
        """
        if isinstance(num_bytes, CooperativeGroup):
            raise UsageTypeError(
                "create_clc_fetch_async_pipeline_cfg takes (num_stages, num_bytes, producer_group, "
                "consumer_group, ...): pass num_bytes=16 * cluster_size (one 16-byte CLC response per CTA) "
                "before the groups.")
        if consumer_group is None:
            raise UsageTypeError("create_clc_fetch_async_pipeline_cfg needs consumer_group (the threads that "
                                 "read each CLC response).")
        return cls(num_stages, num_bytes, producer_group, consumer_group, PipelineType.ClcFetchAsync,
                   barrier_ptr=barrier_ptr, cta_layout_vmnk=cta_layout_vmnk,
                   producer_signaling_threads=producer_signaling_threads,
                   consumer_signaling_threads=consumer_signaling_threads, **extra)
