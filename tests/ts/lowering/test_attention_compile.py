"""The TS attention kernel compiles and verifies for sm_90a without a GPU (issue 16, CPU evidence): every
configuration (head_dim 64/128/256, causal or not, sliding window, variable length, bf16/fp16, each consumer
schedule) assembles with 0 spills; the PTX has the QK^T wgmma from shared memory, the PV wgmma with A from
registers, 4-D TMA loads (and stores, where O is not stored from registers), setmaxnreg, ftz exp2 and (ping-pong)
the named-barrier turns; where cuobjdump exists, the SASS has HGMMA, UTMALDG, USETMAXREG and no LDL/STL, and keeps
the softmax under the PV wgmma; the TaskManager proves each configuration SAFE in under 2 s; the ops module imports
without torch; ``tsjit.ops.attention`` has issue 16's signature.

Cubins are assembled by the default assembler (``TSJIT_ASSEMBLER`` unset: ``auto``), which must keep setmaxnreg:
nvPTXCompiler where its wheel is installed, else ptxas (the H200's image).  nvJitLink drops setmaxnreg (C7504)
and every configuration spills with it (BENCHMARKS.md, "nvPTXCompiler")."""
import os
import re
import subprocess
import sys
import tempfile

import pytest

import tsjit
from tsjit.examples import attention
from blackwell.toolchain import cuobjdump as find_cuobjdump   # PATH, TSJIT_CUOBJDUMP or the test extras' wheel

from .verification_time import verification_seconds


@pytest.fixture(autouse=True)
def _default_assembler(monkeypatch):
    monkeypatch.delenv("TSJIT_ASSEMBLER", raising=False)


SCHEDULES = {"one-tile": (False, False), "overlapped": (True, False), "pingpong": (True, True)}


def compile_attention(head_dim, causal, dtype=tsjit.BFloat16, block_n=None, stages=None, store_lse=True,
                      schedule="pingpong", q_stages=None, **options):
    overlap, pingpong = SCHEDULES[schedule]
    return attention.compile_config(head_dim, causal, dtype, block_n=block_n, stages=stages, store_lse=store_lse,
                                    overlap=overlap, pingpong=pingpong, q_stages=q_stages, **options)


# the default schedule (pipelined, ping-pong) for every head_dim and mask in bf16; the masks and layouts that change the code (window,
# variable length: tile table, cu_seqlens, direct stores); the other schedules and fp16 on a subset (the schedules
# depend neither on the dtype nor on the mask)
CONFIGS = [(d, causal, tsjit.BFloat16, "pingpong", {}) for d in (64, 128, 256) for causal in (False, True)]
CONFIGS += [(128, True, tsjit.BFloat16, "pingpong", dict(window=True)),
            (128, False, tsjit.BFloat16, "pingpong", dict(varlen=True)),
            (64, True, tsjit.Float16, "pingpong", dict(varlen=True, window=True)),
            (128, False, tsjit.BFloat16, "pingpong", dict(block_n=160, q_stages=1)),
            (64, True, tsjit.BFloat16, "pingpong", dict(warpgroups=2)),
            (64, False, tsjit.BFloat16, "pingpong", dict(warpgroups=3, block_n=96)),
            (128, True, tsjit.BFloat16, "pingpong", dict(rescale_threshold=8.0)),
            (64, False, tsjit.BFloat16, "overlapped", dict(rescale_threshold=0.0)),
            (128, False, tsjit.BFloat16, "pingpong", dict(block_n=160, o_in_q=True)),
            (128, True, tsjit.BFloat16, "pingpong", dict(block_n=160, o_in_q=True)),     # LONG_KV_CONFIG, causal
            (64, True, tsjit.BFloat16, "pingpong", dict(o_in_q=True)),
            (128, False, tsjit.BFloat16, "pingpong", dict(block_n=176, q_stages=1, o_in_q=True))]   # LONG_KV_FULL
CONFIGS += [(d, causal, tsjit.BFloat16, schedule, {}) for d, causal in ((128, True), (64, False))
            for schedule in ("one-tile", "overlapped")]
CONFIGS += [(128, False, tsjit.Float16, "pingpong", {})]


def config_id(config):
    d, causal, dtype, schedule, options = config
    return "-".join([f"d{d}", "causal" if causal else "full", dtype.name, schedule, *sorted(options)])


@pytest.mark.parametrize("head_dim,causal,dtype,schedule,options", CONFIGS, ids=[config_id(c) for c in CONFIGS])
def test_attention_compiles_without_spills(monkeypatch, head_dim, causal, dtype, schedule, options):
    """Each configuration: the TaskManager proves it SAFE in under 2 s (all checks, the exhaustive one included:
    a fresh kernel object and the disk cache off, so the program is built again whatever compiled before), 0
    spills, the PTX below and, where cuobjdump exists, the SASS: HGMMA, UTMALDG, USETMAXREG, UTMASTG exactly
    where O is stored by TMA, no LDL/STL."""
    managers = []
    monkeypatch.setattr(attention, "MANAGER_OBSERVERS", [managers.append])
    monkeypatch.setattr(attention, "attention_forward", tsjit.kernel(attention.attention_forward.fn))
    kernels = []
    durations = verification_seconds(monkeypatch, lambda: kernels.append(
        compile_attention(head_dim, causal, dtype, schedule=schedule, **options)))
    assert durations and max(durations) < 2.0, durations
    assert managers and all(m.exhaustive_result.verdict == "SAFE" for m in managers)
    kernel = kernels[0]
    meta = kernel.metadata
    assert kernel.cubin[:4] == b"\x7fELF"
    assert meta["spill_stores_bytes"] == 0 and meta["spill_loads_bytes"] == 0 and meta["stack_frame_bytes"] == 0
    assert meta["assembler_notes"] == [], meta["tool_version"]      # setmaxnreg kept (no C7504), nothing else lost
    ptx = kernel.ptx
    kind = "bf16" if dtype is tsjit.BFloat16 else "f16"
    block_n = options.get("block_n") or attention.DEFAULT_CONFIG[head_dim][0]
    qk = re.findall(rf"wgmma\.mma_async\.sync\.aligned\.m64n{block_n}k16\.f32\.{kind}\.{kind} \{{[^}}]*\}}, %rd",
                    ptx)
    pv = re.findall(rf"wgmma\.mma_async\.sync\.aligned\.m64n{head_dim}k16\.f32\.{kind}\.{kind} \{{[^}}]*\}}, "
                    rf"\{{%r", ptx)
    overlap, pingpong = SCHEDULES[schedule]
    # QK^T: one m64nNk16 per 16 columns of head_dim, A from shared memory; the pipelined schedule's peeled first
    # KV tile has a second copy before the loop
    assert len(qk) == (2 if overlap else 1) * head_dim // 16
    # one PV wgmma per 16 keys, A (P) from registers; the overlapped loop has a second copy after the loop
    assert len(pv) == (2 if overlap else 1) * block_n // 16
    turns = re.findall(r"bar\.(sync|arrive)\s+(\d+|%r\d+), 256;", ptx)
    assert bool(turns) == pingpong
    assert "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes" in ptx
    direct = options.get("varlen", False) or head_dim == 256
    assert ("cp.async.bulk.tensor.4d.global.shared::cta.tile.bulk_group" in ptx) != direct, \
        "O by TMA stores, or from registers for variable-length batches and head_dim 256"
    warpgroups = options.get("warpgroups") or attention.DEFAULT_WARPGROUPS[head_dim]
    producer, consumer = attention.REGISTERS[warpgroups]       # 40 / 232 with two consumer warpgroups, 32 / 160
    assert re.search(rf"setmaxnreg\.dec\.sync\.aligned\.u32\s+{producer};", ptx)
    assert re.search(rf"setmaxnreg\.inc\.sync\.aligned\.u32\s+{consumer};", ptx)
    # conditional rescaling: a warp-uniform vote on whether the maxima move
    threshold = options.get("rescale_threshold", attention.DEFAULT_RESCALE_THRESHOLD[head_dim])
    assert ("vote.sync.any.pred" in ptx) == (threshold >= 0)
    assert "ex2.approx.ftz.f32" in ptx and "ex2.approx.f32" not in ptx, "exp2 with flushed subnormals: one MUFU"
    sass = disassemble(kernel.cubin)
    if sass is not None:
        assert not re.search(r"\b(LDL|STL)\b", sass), "local memory (spills) in the SASS"
        assert len(re.findall(r"\bHGMMA\.64x\d+x16\.F32\b", sass)) >= len(qk) + len(pv)
        assert re.search(r"\bUTMALDG\b", sass) and len(re.findall(r"\bUSETMAXREG\b", sass)) >= 2
        assert bool(re.search(r"\bUTMASTG\b", sass)) != direct


def disassemble(cubin):
    """The SASS of ``cubin`` (``cuobjdump --dump-sass``), or None where cuobjdump is not found."""
    tool = find_cuobjdump()
    if tool is None:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "attention.cubin")
        with open(path, "wb") as fh:
            fh.write(cubin)
        return subprocess.run([tool, "--dump-sass", path], capture_output=True, text=True, check=True).stdout


def test_softmax_exp2_runs_under_the_pv_wgmma_in_sass():
    """In the overlapped loop every exp2 of the tile (MUFU.EX2) sits between the wait for S (DEPBAR <= 1) and
    the wait for the previous PV (DEPBAR <= 0): ptxas hoists that wait above them unless a memory operation that
    depends on them precedes it (KTiles.softmax's never-taken store)."""
    tool = find_cuobjdump()
    if tool is None:
        pytest.skip("cuobjdump not found (PATH, TSJIT_CUOBJDUMP, or pip install -e '.[test]', which installs it)")
    sass = disassemble(compile_attention(128, False).cubin)
    assert not re.search(r"\b(LDL|STL)\b", sass)
    waits = [m.start() for m in re.finditer(r"WARPGROUP\.DEPBAR\.LE gsb0, 0x1", sass)]
    assert waits, "the overlapped loop waits for S with one wgmma group still in flight"
    loop = sass[waits[0]:]
    loop = loop[:loop.index("WARPGROUP.DEPBAR.LE gsb0, 0x0")]
    assert len(re.findall(r"MUFU\.EX2", loop)) >= 128 // 2, "the tile's 64 exp2 per thread precede the PV wait"


def test_attention_block_n_64_one_q_stage_and_no_lse_compile():
    kernel = compile_attention(128, True, block_n=64, stages=3, store_lse=False, q_stages=1)
    assert kernel.metadata["spill_stores_bytes"] == 0
    assert "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16" in kernel.ptx
    assert "st.global.f32" not in kernel.ptx          # no LSE stores


@pytest.mark.parametrize("head_dim,causal,options", [
    (64, True, dict(block_n=64, stages=2)),                            # configurations no other test compiles
    (256, False, dict(window=True, schedule="one-tile")),
    (128, True, dict(varlen=True, window=True, q_stages=1)),
    (128, True, dict(block_n=160, o_in_q=True, store_lse=False))])     # the long-KV default's schedule, no LSE
def test_attention_schedule_verifies_safe_quickly(monkeypatch, head_dim, causal, options):
    """The whole TaskManager construction (all checks, the exhaustive one included) inside a compile: SAFE in
    under 2 s."""
    managers = []
    monkeypatch.setattr(attention, "MANAGER_OBSERVERS", [managers.append])
    durations = verification_seconds(monkeypatch, lambda: compile_attention(head_dim, causal, **options))
    assert durations and max(durations) < 2.0, durations
    assert managers and all(m.exhaustive_result.verdict == "SAFE" for m in managers)


def test_too_many_stages_is_rejected_by_m1():
    with pytest.raises(tsjit.VerificationError) as err:
        compile_attention(128, False, stages=4)
    assert err.value.check == "M1"


def test_ops_module_imports_without_torch():
    import tsjit.ops
    from tsjit.ops.attention import SUPPORTED_HEAD_DIMS
    assert callable(tsjit.ops.attention) and tsjit.ops.attention.__doc__
    assert SUPPORTED_HEAD_DIMS == (64, 128, 256)


def test_ops_attention_has_the_signature_of_issue_16():
    """``tsjit.ops.attention(q, k, v, *, causal=False, scale=None, window=None, cu_seqlens_q=None, cu_seqlens_k=None,
    max_seqlen_q=None, max_seqlen_k=None, return_lse=False, out=None)`` as issue 16 gives it, in that order; the
    keyword-only options after these (``lse_out``, the tuning options, the fp8 scales) come later."""
    import inspect
    import tsjit.ops
    params = list(inspect.signature(tsjit.ops.attention).parameters.values())
    assert [(p.name, p.kind) for p in params[:3]] == [(n, inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in "qkv"]
    expected = dict(causal=False, scale=None, window=None, cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=None,
                    max_seqlen_k=None, return_lse=False, out=None)
    given = params[3:3 + len(expected)]
    assert [(p.name, p.default) for p in given] == list(expected.items())
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params[3:])


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
    assert "a CPU build of torch, CPU tensors and TSJIT_INTERPRET=1" in message, message   # the way without a GPU
    assert "torch" in tsjit.ops.attention.__doc__.split("Args:")[1].split("k, v:")[0]
