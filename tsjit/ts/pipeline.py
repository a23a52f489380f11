"""Pipeline configurations (inventory §1.4): the mbarrier protocol guarding one resource.

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

from tsjit.errors import VerificationError
from tsjit.ts.protocol import PipelineOp, PipelineType, SignalingThreads, TypeRow, row

__all__ = ["PipelineType", "SignalingThreads", "PipelineOp", "Agent", "CooperativeGroup", "PipelineConfig"]


class Agent(enum.Enum):
    """The unit a :class:`CooperativeGroup` counts."""

    Thread = "thread"
    Warp = "warp"
    ThreadBlock = "threadblock"
    ThreadBlockCluster = "cluster"


@dataclass(frozen=True)
class CooperativeGroup:
    """An arrival count: ``size`` agents of kind ``agent`` (mbarrier arrivals per phase)."""

    agent: Agent = Agent.Thread
    size: int = 1

    def __post_init__(self):
        if not isinstance(self.size, int) or self.size < 1:
            raise VerificationError(f"CooperativeGroup size must be a positive int, got {self.size!r}", "P3")

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


@dataclass(frozen=True)
class PipelineConfig:
    """The barrier protocol of one pipelined resource (build it with a ``create_*`` factory).

    Attributes:
        pipeline_type: :class:`PipelineType`.
        num_stages: ring depth S (>= 1); storage is 2 x S 8-byte mbarriers.
        num_bytes: transaction bytes one stage's TMA copies deliver (TMA / CLC producers), else 0.
        producer_group, consumer_group: arrival counts of the full / empty barriers.
        producer_signaling_threads, consumer_signaling_threads: :class:`SignalingThreads`.
        consumer_wait_signaling_threads: separate signalling for waits (split consumer) or None.
        advance_on_acquire: acquire advances the producer cursor (commit uses a lagging one).
        advance_on_wait: wait advances the consumer cursor (release uses a lagging one).
        interleave_stride: int or (acquire, commit, wait, release) lanes sharing the ring.
        producer_op: :class:`PipelineOp` of the producer.
        mcast_mode_mn: TMA multicast mode (1,0), (0,1), (1,1), or None.
        num_bytes_per_warp_per_cta: for aggregate / leader-routed TMA byte checks (P2), or None.
        cta_layout_vmnk: cluster shape (V, M, N, K) or None (single CTA).

    Raises:
        VerificationError (P3): an impossible combination, naming the field and values.
    """

    pipeline_type: PipelineType
    num_stages: int
    producer_group: CooperativeGroup
    consumer_group: CooperativeGroup
    num_bytes: int = 0
    producer_signaling_threads: SignalingThreads = SignalingThreads.All
    consumer_signaling_threads: SignalingThreads = SignalingThreads.All
    consumer_wait_signaling_threads: SignalingThreads | None = None
    advance_on_acquire: bool = False
    advance_on_wait: bool = False
    interleave_stride: object = 1
    producer_op: PipelineOp = PipelineOp.AsyncThread
    mcast_mode_mn: tuple | None = None
    num_bytes_per_warp_per_cta: int | None = None
    cta_layout_vmnk: tuple | None = None
    barrier_ptr: object = field(default=None, compare=False)

    def __post_init__(self):
        t = self.pipeline_type
        if not isinstance(t, PipelineType):
            raise VerificationError(f"pipeline_type must be a PipelineType, got {t!r}", "P3")
        if not isinstance(self.num_stages, int) or self.num_stages < 1:
            raise VerificationError(f"num_stages must be a positive int, got {self.num_stages!r}", "P3")
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
        if self.producer_op is PipelineOp.AsyncLoad and not protocol.allows_async_load:
            raise VerificationError(f"producer_op=AsyncLoad is only valid for AsyncAsync and AsyncUmma, not "
                                    f"{t.value}", "P3")
        needs_bytes = protocol.producer_arms_tx
        if needs_bytes and (not isinstance(self.num_bytes, int) or self.num_bytes <= 0):
            raise VerificationError(f"{t.value} needs num_bytes > 0 (the bytes one stage's copies deliver), "
                                    f"got {self.num_bytes!r}", "P3")
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
        return _stride_tuple(self.interleave_stride)

    @property
    def max_interleave_stride(self) -> int:
        return max(self.interleave_strides)

    @property
    def has_interleaved_stride(self) -> bool:
        return self.max_interleave_stride > 1

    @property
    def barrier_bytes(self) -> int:
        """Shared memory of the barriers: 2 x num_stages x 8 bytes."""
        return 16 * self.num_stages

    # -- factories -----------------------------------------------------------------------------
    @classmethod
    def create_async_async_pipeline_cfg(cls, num_stages: int, producer_group: CooperativeGroup,
                                        consumer_group: CooperativeGroup, *, producer_op=PipelineOp.AsyncThread,
                                        advance_on_acquire=False, advance_on_wait=False, interleave_stride=1,
                                        cta_layout_vmnk=None, **kw) -> "PipelineConfig":
        """Threads -> threads: producers arrive on full[i], consumers on empty[i]."""
        return cls(PipelineType.AsyncAsync, num_stages, producer_group, consumer_group, producer_op=producer_op,
                   advance_on_acquire=advance_on_acquire, advance_on_wait=advance_on_wait,
                   interleave_stride=interleave_stride, cta_layout_vmnk=cta_layout_vmnk, **kw)

    @classmethod
    def create_tma_async_pipeline_cfg(cls, num_stages: int, num_bytes: int, producer_group: CooperativeGroup,
                                      consumer_group: CooperativeGroup, *, num_bytes_per_warp_per_cta=None,
                                      mcast_mode_mn=None, cta_layout_vmnk=None, interleave_stride=1,
                                      advance_on_wait=False, **kw) -> "PipelineConfig":
        """TMA -> threads: the producer arms full[i] with ``arrive.expect_tx(num_bytes)``; TMA completes it."""
        return cls(PipelineType.TmaAsync, num_stages, producer_group, consumer_group, num_bytes=num_bytes,
                   producer_op=PipelineOp.TmaLoad, num_bytes_per_warp_per_cta=num_bytes_per_warp_per_cta,
                   mcast_mode_mn=mcast_mode_mn, cta_layout_vmnk=cta_layout_vmnk,
                   interleave_stride=interleave_stride, advance_on_wait=advance_on_wait, **kw)

    @classmethod
    def create_tma_umma_pipeline_cfg(cls, num_stages: int, num_bytes: int, producer_group: CooperativeGroup,
                                     consumer_group: CooperativeGroup, *, advance_on_wait=False, mcast_mode_mn=None,
                                     cta_layout_vmnk=None, **kw) -> "PipelineConfig":
        """TMA -> tcgen05 MMA (sm_100a)."""
        return cls(PipelineType.TmaUmma, num_stages, producer_group, consumer_group, num_bytes=num_bytes,
                   producer_op=PipelineOp.TmaLoad, advance_on_wait=advance_on_wait, mcast_mode_mn=mcast_mode_mn,
                   cta_layout_vmnk=cta_layout_vmnk, **kw)

    @classmethod
    def create_umma_async_pipeline_cfg(cls, num_stages: int, producer_group: CooperativeGroup,
                                       consumer_group: CooperativeGroup, *, cta_layout_vmnk=None,
                                       **kw) -> "PipelineConfig":
        """tcgen05 commit -> threads (TMEM accumulator hand-off, sm_100a)."""
        return cls(PipelineType.UmmaAsync, num_stages, producer_group, consumer_group,
                   producer_op=PipelineOp.TCGen05Mma, cta_layout_vmnk=cta_layout_vmnk, **kw)

    @classmethod
    def create_async_umma_pipeline_cfg(cls, num_stages: int, producer_group: CooperativeGroup,
                                       consumer_group: CooperativeGroup, *, producer_op=PipelineOp.AsyncThread,
                                       advance_on_acquire=False, advance_on_wait=False,
                                       consumer_wait_signaling_threads=None, **kw) -> "PipelineConfig":
        """Threads / cp.async -> tcgen05 MMA (sm_100a)."""
        return cls(PipelineType.AsyncUmma, num_stages, producer_group, consumer_group, producer_op=producer_op,
                   advance_on_acquire=advance_on_acquire, advance_on_wait=advance_on_wait,
                   consumer_wait_signaling_threads=consumer_wait_signaling_threads, **kw)

    @classmethod
    def create_umma_umma_pipeline_cfg(cls, num_stages: int, producer_group: CooperativeGroup,
                                      consumer_group: CooperativeGroup, **kw) -> "PipelineConfig":
        """tcgen05 -> tcgen05 (sm_100a); no interleave."""
        if kw.get("interleave_stride", 1) != 1:
            raise VerificationError("UmmaUmma pipelines cannot be interleaved", "P3")
        return cls(PipelineType.UmmaUmma, num_stages, producer_group, consumer_group,
                   producer_op=PipelineOp.TCGen05Mma, **kw)

    @classmethod
    def create_clc_fetch_async_pipeline_cfg(cls, num_stages: int, producer_group: CooperativeGroup,
                                            consumer_group: CooperativeGroup, *, cluster_size: int = 1,
                                            **kw) -> "PipelineConfig":
        """CLC response (16 bytes per CTA) -> threads (sm_100a dynamic persistent scheduling)."""
        kw.setdefault("producer_signaling_threads", SignalingThreads.CtaLeader)
        return cls(PipelineType.ClcFetchAsync, num_stages, producer_group, consumer_group,
                   num_bytes=16 * cluster_size, producer_op=PipelineOp.ClcLoad, **kw)
