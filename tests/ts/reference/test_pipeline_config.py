"""Reference section ``PipelineConfig``: the positional field order and defaults, the interleave
properties, and each factory called positionally in the reference's parameter order.

Hopper configurations are compiled for sm_90a inside a kernel; the four UMMA rings are compiled for
sm_100a (the three that tsjit's Blackwell GEMMs use also run interpreted: test_umma_pipelines.py).
"""
import dataclasses
from dataclasses import dataclass

import numpy as np
import pytest

import tsjit
from tsjit import ts
from tsjit.errors import UsageTypeError, VerificationError
from tsjit.ts import (Agent, CooperativeGroup, PipelineConfig, PipelineOp, PipelineType,
                      SignalingThreads)
from reference_names import SINGLE_CTA

conformance = pytest.mark.conformance
All, CtaLeader = SignalingThreads.All, SignalingThreads.CtaLeader


def group(n):
    return CooperativeGroup(Agent.Thread, n)


REFERENCE_FIELDS = [
    ("num_stages", dataclasses.MISSING), ("num_bytes", dataclasses.MISSING),
    ("producer_group", dataclasses.MISSING), ("consumer_group", dataclasses.MISSING),
    ("pipeline_type", dataclasses.MISSING), ("barrier_ptr", None), ("cta_layout_vmnk", None),
    ("producer_signaling_threads", All), ("consumer_signaling_threads", All),
    ("consumer_wait_signaling_threads", None), ("umma_consumer_producer_op", PipelineOp.AsyncThread),
    ("advance_on_wait", False), ("advance_on_acquire", False), ("num_bytes_per_warp_per_cta", None),
    ("mcast_mode_mn", (1, 1)), ("interleave_stride", 1), ("async_producer_op", PipelineOp.AsyncThread),
]


@conformance("A1", "PipelineConfig constructor / field order")
@conformance("A1", "field mcast_mode_mn")
@conformance("A1", "field umma_consumer_producer_op")
@conformance("A1", "field async_producer_op")
@conformance("§1.4", "async_producer_op / umma_consumer_producer_op = AsyncLoad")
def test_fields_in_the_reference_order_with_its_defaults():
    assert [(f.name, f.default) for f in dataclasses.fields(PipelineConfig)] == REFERENCE_FIELDS


def test_positional_construction_in_the_reference_order():
    cfg = PipelineConfig(4, 8192, group(1), group(128), PipelineType.TmaAsync)
    assert (cfg.num_stages, cfg.num_bytes, cfg.pipeline_type) == (4, 8192, PipelineType.TmaAsync)
    assert cfg.producer_op is PipelineOp.TmaLoad and cfg.mcast_mode_mn == (1, 1)
    aa = PipelineConfig(2, 0, group(32), group(32), PipelineType.AsyncAsync,
                        async_producer_op=PipelineOp.AsyncLoad)
    assert aa.producer_op is PipelineOp.AsyncLoad


def test_the_old_type_first_order_says_what_to_write():
    with pytest.raises(UsageTypeError, match="num_stages, num_bytes, producer_group"):
        PipelineConfig(PipelineType.TmaAsync, 4, group(1), group(128), 8192)


@conformance("A1", "field barrier_ptr", reason="tsjit places every pipeline's barriers in its dynamic "
             "shared-memory block; barrier_ptr other than None is a P3 error saying so")
@conformance("§1.4", "barrier_ptr", reason="tsjit places every pipeline's barriers itself; a barrier_ptr is a P3 error saying so")
def test_barrier_ptr_other_than_none_is_refused_with_the_reason():
    with pytest.raises(VerificationError, match="barrier_ptr") as err:
        PipelineConfig.create_tma_async_pipeline_cfg(2, 4096, group(1), group(128), SINGLE_CTA, All, All, 12345)
    assert err.value.check == "P3"


def test_async_load_on_the_wrong_type_names_the_field():
    with pytest.raises(VerificationError, match="async_producer_op=AsyncLoad applies to AsyncAsync"):
        PipelineConfig(2, 4096, group(1), group(128), PipelineType.TmaAsync,
                       async_producer_op=PipelineOp.AsyncLoad)


@conformance("A1", "property producer_acquire_interleave_stride")
@conformance("A1", "property producer_commit_interleave_stride")
@conformance("A1", "property consumer_wait_interleave_stride")
@conformance("A1", "property consumer_release_interleave_stride")
@conformance("§1.4", "stride properties")
def test_interleave_properties():
    cfg = PipelineConfig.create_async_umma_pipeline_cfg(
        4, group(1), group(1), SINGLE_CTA, All, All, None, PipelineOp.AsyncThread, None, True, True,
        (2, 4, 1, 2))
    assert cfg.interleave_strides == (2, 4, 1, 2)
    assert (cfg.producer_acquire_interleave_stride, cfg.producer_commit_interleave_stride,
            cfg.consumer_wait_interleave_stride, cfg.consumer_release_interleave_stride) == (2, 4, 1, 2)
    assert cfg.max_interleave_stride == 4 and cfg.has_interleaved_stride
    flat = PipelineConfig.create_async_async_pipeline_cfg(2, group(32), group(32))
    assert flat.max_interleave_stride == 1 and not flat.has_interleaved_stride


# -- every factory, positionally, in the reference's parameter order -------------------------
@conformance("A1", "create_async_async_pipeline_cfg")
def test_async_async_factory_positional():
    cfg = PipelineConfig.create_async_async_pipeline_cfg(
        4, group(64), group(64), SINGLE_CTA, All, All, None, PipelineOp.AsyncLoad, True, 2)
    assert cfg == PipelineConfig(4, 0, group(64), group(64), PipelineType.AsyncAsync, cta_layout_vmnk=SINGLE_CTA,
                                 async_producer_op=PipelineOp.AsyncLoad, advance_on_acquire=True,
                                 interleave_stride=2)


@conformance("A1", "create_tma_async_pipeline_cfg")
def test_tma_async_factory_positional():
    cfg = PipelineConfig.create_tma_async_pipeline_cfg(
        2, 16384, group(2), group(256), SINGLE_CTA, SignalingThreads.TaskWarpLeader, All, None, 1, 8192)
    assert (cfg.pipeline_type, cfg.num_bytes, cfg.num_bytes_per_warp_per_cta) == (PipelineType.TmaAsync, 16384, 8192)
    assert cfg.producer_signaling_threads is SignalingThreads.TaskWarpLeader


@conformance("A1", "create_tma_umma_pipeline_cfg")
def test_tma_umma_factory_positional():
    cfg = PipelineConfig.create_tma_umma_pipeline_cfg(
        3, 32768, group(1), group(1), (1, 2, 1, 1), All, All, None, True, 1, (1, 0), 16384)
    assert (cfg.pipeline_type, cfg.advance_on_wait, cfg.mcast_mode_mn, cfg.num_bytes_per_warp_per_cta) == (
        PipelineType.TmaUmma, True, (1, 0), 16384)
    assert PipelineConfig.create_tma_umma_pipeline_cfg(2, 1024, group(1), group(1), SINGLE_CTA).mcast_mode_mn == (1, 1)


@conformance("A1", "create_umma_async_pipeline_cfg")
def test_umma_async_factory_positional():
    cfg = PipelineConfig.create_umma_async_pipeline_cfg(2, group(1), group(128), SINGLE_CTA, All, All, None, 1)
    assert cfg.pipeline_type is PipelineType.UmmaAsync and cfg.producer_op is PipelineOp.TCGen05Mma


@conformance("A1", "create_async_umma_pipeline_cfg")
def test_async_umma_factory_positional():
    cfg = PipelineConfig.create_async_umma_pipeline_cfg(
        2, group(128), group(1), SINGLE_CTA, All, All, All, PipelineOp.AsyncLoad, None, False, False, 1)
    assert cfg.pipeline_type is PipelineType.AsyncUmma
    assert cfg.umma_consumer_producer_op is PipelineOp.AsyncLoad and cfg.producer_op is PipelineOp.AsyncLoad
    assert cfg.consumer_wait_signaling_threads is All


@conformance("A1", "create_umma_umma_pipeline_cfg")
def test_umma_umma_factory_positional():
    cfg = PipelineConfig.create_umma_umma_pipeline_cfg(2, group(1), group(1), SINGLE_CTA, All, All, None)
    assert cfg.pipeline_type is PipelineType.UmmaUmma


@conformance("A1", "create_clc_fetch_async_pipeline_cfg")
def test_clc_fetch_async_factory_takes_num_bytes():
    cfg = PipelineConfig.create_clc_fetch_async_pipeline_cfg(2, 32, group(1), group(128), (1, 2, 1, 1))
    assert (cfg.pipeline_type, cfg.num_bytes) == (PipelineType.ClcFetchAsync, 32)
    assert cfg.producer_signaling_threads is CtaLeader and cfg.producer_op is PipelineOp.ClcLoad
    with pytest.raises(UsageTypeError, match="num_bytes"):
        PipelineConfig.create_clc_fetch_async_pipeline_cfg(2, group(1), group(128))


# -- compiled: positional factories inside a kernel, sm_90a -----------------------------------
@dataclass(kw_only=True)
class Ring(ts.MemoryResource):
    """A shared-memory ring of CHUNK Float32 per stage, filled by threads."""

    x: object
    chunk: int
    allocation: object = None
    stage: ts.TaskLocalVariable = ts.TaskLocalVariable.uninitialized()

    def __post_init__(self):
        self.allocation = ts.SmemAllocation(f"{self.name}.buffers", dtype=tsjit.Float32,
                                            count=self.pipeline_config.num_stages * self.chunk)
        self.stage = ts.TaskLocalVariable(tsjit.Int32, default=0)

    def get_smem_requirements(self):
        return [self.allocation]

    @ts.producer_work
    def fill(self, stage_info):
        buf = self.allocation.tensor((self.pipeline_config.num_stages, self.chunk))[stage_info.stage_idx]
        buf[tsjit.thread_idx().x] = self.x[stage_info.loop_offset * self.chunk + tsjit.thread_idx().x]

    @ts.consumer_work(returns=stage)
    def take(self, stage_info):
        return stage_info.stage_idx


@dataclass(kw_only=True)
class Out(ts.MemoryResource):
    y: object
    ring: object

    @ts.producer_work
    def write(self, stage_info, *, stage):
        chunk = self.ring.chunk
        lane = tsjit.thread_idx().x - 32
        buf = self.ring.allocation.tensor((self.ring.pipeline_config.num_stages, chunk))[stage]
        self.y[stage_info.loop_offset * chunk + lane] = buf[lane] * 2.0


def ring_kernel(make_config, task_options=None, manager_options=None):
    """A one-warp producer / one-warp consumer kernel ``y = 2 * x`` over ``chunks`` chunks of 32,
    through a 2-stage Ring whose PipelineConfig ``make_config()`` builds inside the kernel."""
    task_options, manager_options = dict(task_options or {}), dict(manager_options or {})

    @tsjit.kernel
    def ring_copy(x, y, chunks):
        ring = Ring(name="ring", pipeline_config=make_config(), x=x, chunk=32)
        out = Out(name="out", y=y, ring=ring)

        @ts.schedule
        def produce(r: Ring):
            with ts.domain_loop(0, chunks, 1):
                r.acquire()
                r.fill()
                r.commit()

        @ts.schedule
        def consume(r: Ring, o: Out):
            with ts.domain_loop(0, chunks, 1):
                r.wait()
                stage = r.take()
                o.write(stage=stage)
                r.release()

        producer = ts.Task([], [ring], 0, 1, schedule=produce(ring), name="producer", **task_options)
        consumer = ts.Task([ring], [out], 1, 1, schedule=consume(ring, out), name="consumer", **task_options)
        manager = ts.TaskManager([producer, consumer], {out: [ring]}, verbose=False, **manager_options)
        manager.setup_resources_and_tasks()
        manager.run()
    return ring_copy


async_async_positional = ring_kernel(lambda: ts.PipelineConfig.create_async_async_pipeline_cfg(
    2, ts.CooperativeGroup(ts.Agent.Thread, 32), ts.CooperativeGroup(ts.Agent.Thread, 32), (1, 1, 1, 1),
    ts.SignalingThreads.All, ts.SignalingThreads.All, None, ts.PipelineOp.AsyncThread, False, 1))


@conformance("§1.8", "get(alloc) / get_as_type(alloc, dtype, count)", reason="an SmemAllocation gives its typed view with alloc.tensor(shape, dtype) in device code")
def test_positional_async_async_ring_compiles_for_sm90a():
    x = np.zeros(256, np.float32)
    kernel = tsjit.compile(async_async_positional, x, x, 8, target="sm_90a")
    assert kernel.cubin[:4] == b"\x7fELF"
    assert kernel.ptx.count("mbarrier.init") == 4


@pytest.mark.gpu_or_interpret
def test_positional_async_async_ring_runs():
    chunks = 8
    x = np.random.default_rng().standard_normal(chunks * 32).astype(np.float32)
    y = tsjit.empty(chunks * 32, tsjit.Float32).fill_bytes(0x7F)
    async_async_positional[(1,), (64,)](tsjit.to_device(x), y, chunks)
    np.testing.assert_allclose(y.numpy(), x.astype(np.float64) * 2.0, rtol=1e-6)


# -- the UMMA factories on sm_100a: lowered; their tcgen05.commit is in the PTX ------------------------
_BLACKWELL = {
    "TmaUmma": lambda g: PipelineConfig.create_tma_umma_pipeline_cfg(2, 128, g(1), g(1), SINGLE_CTA),
    "UmmaAsync": lambda g: PipelineConfig.create_umma_async_pipeline_cfg(2, g(1), g(32), SINGLE_CTA),
    "AsyncUmma": lambda g: PipelineConfig.create_async_umma_pipeline_cfg(2, g(32), g(1), SINGLE_CTA),
    "UmmaUmma": lambda g: PipelineConfig.create_umma_umma_pipeline_cfg(2, g(1), g(1), SINGLE_CTA),
}


def _blackwell_ring(kind):
    return ring_kernel(lambda: _BLACKWELL[kind](lambda n: ts.CooperativeGroup(ts.Agent.Thread, n)),
                       manager_options=dict(skip_validation=True))


UMMA_UMMA_REASON = "no program of tsjit's runs an UMMA-to-UMMA ring yet: it compiles and assembles for sm_100a " \
                   "(tcgen05.commit on both sides), and its protocol is read back against the model " \
                   "(tests/ts/lowering/test_protocol_readback_blackwell.py)"


def _kinds():
    """The four UMMA types; UmmaUmma carries its rows here (the other three run in test_umma_pipelines.py)."""
    umma_umma = [conformance("A1", "create_umma_umma_pipeline_cfg", reason=UMMA_UMMA_REASON),
                 conformance("§1.4", "create_umma_umma_pipeline_cfg", reason=UMMA_UMMA_REASON)]
    return [pytest.param(kind, marks=umma_umma if kind == "UmmaUmma" else ()) for kind in sorted(_BLACKWELL)]


@pytest.mark.filterwarnings("ignore::tsjit.ts.VerificationWarning")
@pytest.mark.parametrize("kind", _kinds())
def test_umma_pipelines_compile_for_sm100a(kind):
    x = np.zeros(256, np.float32)
    kernel = tsjit.compile(_blackwell_ring(kind), x, x, 8, target="sm_100a")
    assert kernel.cubin[:4] == b"\x7fELF" and ".target sm_100a" in kernel.ptx
    assert "tcgen05.commit.cta_group::1.mbarrier::arrive::one" in kernel.ptx
