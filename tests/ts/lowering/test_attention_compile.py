"""The TS attention kernel compiles and verifies for sm_90a without a GPU (issue 16, CPU evidence): every
configuration (head_dim 64/128, causal or not, bf16/fp16, each consumer schedule) assembles with 0 spills;
the PTX has the QK^T wgmma from shared memory, the PV wgmma with A from registers, 4-D TMA loads/stores,
setmaxnreg and (ping-pong) the named-barrier turns; the TaskManager verifies the program quickly; the ops
module imports without torch.

Cubins are assembled with ptxas (``TSJIT_ASSEMBLER=ptxas``), the assembler tsjit uses on the H200's image:
nvJitLink 13.5 allocates fewer registers to the software-pipelined head_dim-128 loop and spills there."""
import re
import sys

import pytest

import tsjit
from tsjit.examples import attention
from .verification_time import verification_seconds


@pytest.fixture(autouse=True)
def _assemble_with_ptxas(monkeypatch):
    monkeypatch.setenv("TSJIT_ASSEMBLER", "ptxas")


SCHEDULES = {"one-tile": (False, False), "overlapped": (True, False), "pingpong": (True, True)}


def compile_attention(head_dim, causal, dtype=tsjit.BFloat16, block_n=None, stages=None, store_lse=True,
                      schedule="pingpong", q_stages=None):
    default_n, default_stages = attention.DEFAULT_CONFIG[head_dim]
    block_n = block_n or default_n
    stages = stages or default_stages
    q = tsjit.tensormap_spec(dtype, (1, attention.BLOCK_M, 1, attention.BOX), swizzle="128B")
    kv = tsjit.tensormap_spec(dtype, (1, block_n, 1, attention.BOX), swizzle="128B")
    o = tsjit.tensormap_spec(dtype, (1, 64, 1, attention.BOX), swizzle="128B")
    lse = tsjit.spec((2, 16, 1000), tsjit.Float32)
    overlap, pingpong = SCHEDULES[schedule]
    return tsjit.compile(attention.attention_forward, q, kv, kv, o, lse, 1000, 1000, 16, 2, 0.18, head_dim,
                         block_n, stages, causal, store_lse, overlap, pingpong,
                         q_stages or attention.DEFAULT_Q_STAGES[head_dim])


# the default schedule for every head_dim and mask in bf16; the other schedules and fp16 on a subset (the
# schedules depend neither on the dtype nor on the mask)
CONFIGS = [(d, causal, tsjit.BFloat16, "pingpong") for d in (64, 128) for causal in (False, True)]
CONFIGS += [(d, causal, tsjit.BFloat16, schedule) for d, causal in ((128, True), (64, False))
            for schedule in ("one-tile", "overlapped")]
CONFIGS += [(64, True, tsjit.Float16, "pingpong"), (128, False, tsjit.Float16, "pingpong")]


@pytest.mark.parametrize("head_dim,causal,dtype,schedule", CONFIGS,
                         ids=[f"d{d}-{'causal' if c else 'full'}-{t.name}-{s}" for d, c, t, s in CONFIGS])
def test_attention_compiles_without_spills(head_dim, causal, dtype, schedule):
    kernel = compile_attention(head_dim, causal, dtype, schedule=schedule)
    meta = kernel.metadata
    assert kernel.cubin[:4] == b"\x7fELF"
    assert meta["spill_stores_bytes"] == 0 and meta["spill_loads_bytes"] == 0 and meta["stack_frame_bytes"] == 0
    ptx = kernel.ptx
    kind = "bf16" if dtype is tsjit.BFloat16 else "f16"
    qk = re.findall(rf"wgmma\.mma_async\.sync\.aligned\.m64n128k16\.f32\.{kind}\.{kind} \{{[^}}]*\}}, %rd", ptx)
    pv = re.findall(rf"wgmma\.mma_async\.sync\.aligned\.m64n{head_dim}k16\.f32\.{kind}\.{kind} \{{[^}}]*\}}, "
                    rf"\{{%r", ptx)
    assert len(qk) == head_dim // 16, "QK^T: one m64n128k16 per 16 columns of head_dim, A from shared memory"
    overlap, pingpong = SCHEDULES[schedule]
    # one PV wgmma per 16 keys, A (P) from registers; the overlapped loop has a second copy after the loop
    assert len(pv) == (2 if overlap else 1) * 128 // 16
    turns = re.findall(r"bar\.(sync|arrive)\s+(\d+|%r\d+), 256;", ptx)
    assert bool(turns) == pingpong
    assert "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes" in ptx
    assert "cp.async.bulk.tensor.4d.global.shared::cta.tile.bulk_group" in ptx
    assert re.search(r"setmaxnreg\.dec\.sync\.aligned\.u32\s+24;", ptx)
    assert re.search(r"setmaxnreg\.inc\.sync\.aligned\.u32\s+240;", ptx)
    assert "ex2.approx" in ptx


def test_attention_block_n_64_one_q_stage_and_no_lse_compile():
    kernel = compile_attention(128, True, block_n=64, stages=3, store_lse=False, q_stages=1)
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


def test_attention_with_numpy_inputs_and_no_torch_is_a_launch_error_naming_q(monkeypatch):
    import numpy as np
    import tsjit.ops
    monkeypatch.setitem(sys.modules, "torch", None)      # `import torch` raises ImportError, as without torch
    q = np.zeros((1, 64, 1, 64), np.float16)
    with pytest.raises(tsjit.LaunchError) as err:
        tsjit.ops.attention(q, q, q)
    message = str(err.value)
    assert "argument 'q' is a numpy.ndarray" in message and "CUDA torch tensors" in message, message
    assert "torch is not installed" in message and "No module named" not in message
    assert "torch" in tsjit.ops.attention.__doc__.split("Args:")[1].split("k, v:")[0]
