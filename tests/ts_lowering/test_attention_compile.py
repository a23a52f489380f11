"""The TS attention kernel compiles and verifies for sm_90a without a GPU (issue 16, CPU evidence): every
configuration (head_dim 64/128, causal or not, bf16/fp16) assembles with 0 spills; the PTX has the QK^T
wgmma from shared memory, the PV wgmma with A from registers, 4-D TMA loads/stores and setmaxnreg; the
TaskManager verifies the program quickly; the ops module imports without torch."""
import re

import pytest

import tsjit
from tsjit.examples import attention
from .verification_time import verification_seconds


def compile_attention(head_dim, causal, dtype=tsjit.BFloat16, block_n=None, stages=None, store_lse=True):
    default_n, default_stages = attention.DEFAULT_CONFIG[head_dim]
    block_n = block_n or default_n
    stages = stages or default_stages
    q = tsjit.tensormap_spec(dtype, (1, attention.BLOCK_M, 1, attention.BOX), swizzle="128B")
    kv = tsjit.tensormap_spec(dtype, (1, block_n, 1, attention.BOX), swizzle="128B")
    o = tsjit.tensormap_spec(dtype, (1, 64, 1, attention.BOX), swizzle="128B")
    lse = tsjit.spec((2, 16, 1000), tsjit.Float32)
    return tsjit.compile(attention.attention_forward, q, kv, kv, o, lse, 1000, 1000, 16, 2, 0.18, head_dim,
                         block_n, stages, causal, store_lse)


@pytest.mark.parametrize("dtype", [tsjit.BFloat16, tsjit.Float16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("head_dim", [64, 128])
def test_attention_compiles_without_spills(head_dim, causal, dtype):
    kernel = compile_attention(head_dim, causal, dtype)
    meta = kernel.metadata
    assert kernel.cubin[:4] == b"\x7fELF"
    assert meta["spill_stores_bytes"] == 0 and meta["spill_loads_bytes"] == 0 and meta["stack_frame_bytes"] == 0
    ptx = kernel.ptx
    kind = "bf16" if dtype is tsjit.BFloat16 else "f16"
    qk = re.findall(rf"wgmma\.mma_async\.sync\.aligned\.m64n128k16\.f32\.{kind}\.{kind} \{{[^}}]*\}}, %rd", ptx)
    pv = re.findall(rf"wgmma\.mma_async\.sync\.aligned\.m64n{head_dim}k16\.f32\.{kind}\.{kind} \{{[^}}]*\}}, "
                    rf"\{{%r", ptx)
    assert len(qk) == head_dim // 16, "QK^T: one m64n128k16 per 16 columns of head_dim, A from shared memory"
    assert len(pv) == 128 // 16, "PV: one wgmma per 16 keys, A (P) from registers"
    assert "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes" in ptx
    assert "cp.async.bulk.tensor.4d.global.shared::cta.tile.bulk_group" in ptx
    assert re.search(r"setmaxnreg\.dec\.sync\.aligned\.u32\s+24;", ptx)
    assert re.search(r"setmaxnreg\.inc\.sync\.aligned\.u32\s+240;", ptx)
    assert "ex2.approx" in ptx


def test_attention_block_n_64_and_no_lse_compile():
    kernel = compile_attention(128, True, block_n=64, stages=3, store_lse=False)
    assert kernel.metadata["spill_stores_bytes"] == 0
    assert "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16" in kernel.ptx
    assert "st.global.f32" not in kernel.ptx          # no LSE stores


def test_attention_schedule_verifies_quickly(monkeypatch):
    """The whole TaskManager construction (all checks, the exhaustive one included) inside a compile."""
    durations = verification_seconds(monkeypatch, lambda: compile_attention(64, True, block_n=64, stages=2))   # a configuration no other test compiles
    assert durations and max(durations) < 2.0, durations


def test_too_many_stages_is_rejected_by_m1():
    with pytest.raises(tsjit.VerificationError) as err:
        compile_attention(128, False, stages=4)
    assert err.value.check == "M1"


def test_ops_module_imports_without_torch():
    import tsjit.ops
    from tsjit.ops.attention import SUPPORTED_HEAD_DIMS
    assert callable(tsjit.ops.attention) and tsjit.ops.attention.__doc__
    assert SUPPORTED_HEAD_DIMS == (64, 128)
