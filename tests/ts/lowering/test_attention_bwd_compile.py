"""The TS attention backward (tsjit.examples.attention_bwd) compiles and verifies for sm_90a without a GPU: head_dim 64
/ 128, causal or not, bf16 / fp16 each assemble with 0 spills (the default assembler, nvPTXCompiler or ptxas;
``.minnctapersm 1`` keeps setmaxnreg: without it ptxas ignores it, C7508, and spills), the TaskManager proves each
SAFE, and the PTX has the five wgmmas of a step (S^T and dP^T from shared memory, dV and dK with A from registers, dQ
with both operands transposed from shared memory), the fp32 reductions of dQ, 4-D TMA loads, setmaxnreg and ftz exp2;
where cuobjdump exists the SASS has HGMMA, REDG, UTMALDG, USETMAXREG, no LDL/STL and a few wgmma waits per step (not
serialized). An unsupported head_dim is a CompilationError."""
import re

import pytest

import tsjit
from tsjit.examples import attention_bwd
from tsjit.examples.attention_config import REGISTERS

from .test_attention_compile import disassemble
from .verification_time import verification_seconds


@pytest.fixture(autouse=True)
def _default_assembler(monkeypatch):
    """The default assembler (``auto``: nvPTXCompiler, else ptxas), which keeps setmaxnreg."""
    monkeypatch.delenv("TSJIT_ASSEMBLER", raising=False)


CONFIGS = [(64, False, tsjit.BFloat16), (64, True, tsjit.BFloat16), (128, False, tsjit.BFloat16),
           (128, True, tsjit.BFloat16), (128, True, tsjit.Float16)]


@pytest.mark.parametrize("head_dim,causal,dtype", CONFIGS,
                         ids=[f"d{d}-{'causal' if c else 'full'}-{t.name}" for d, c, t in CONFIGS])
def test_backward_compiles_safe_without_spills(monkeypatch, head_dim, causal, dtype):
    managers, kernels = [], []
    monkeypatch.setattr(attention_bwd, "BACKWARD_OBSERVERS", [managers.append])
    monkeypatch.setattr(attention_bwd, "attention_backward",
                        tsjit.kernel(attention_bwd.attention_backward.fn, min_blocks=1))
    durations = verification_seconds(monkeypatch, lambda: kernels.append(
        attention_bwd.compile_backward(head_dim, causal, dtype)))
    assert durations and max(durations) < 5.0, durations
    assert managers and all(m.exhaustive_result.verdict == "SAFE" for m in managers)
    kernel = kernels[0]
    meta = kernel.metadata
    assert (meta["spill_stores_bytes"], meta["spill_loads_bytes"], meta["stack_frame_bytes"]) == (0, 0, 0)
    ptx = kernel.ptx
    kind = "bf16" if dtype is tsjit.BFloat16 else "f16"
    m, d = attention_bwd.BWD_BLOCK_M, head_dim

    def mma(n, operands):
        return re.findall(rf"wgmma\.mma_async\.sync\.aligned\.m64n{n}k16\.f32\.{kind}\.{kind} \{{[^}}]*\}}, "
                          + operands, ptx)
    from_shared = mma(m, r"%rd\d+, %rd\d+, p, 1, 1, 0, 0;")            # S^T, dP^T: head_dim / 16 each, K-major
    from_registers = mma(d, r"\{%r\d+, %r\d+, %r\d+, %r\d+\}, %rd\d+, p, 1, 1, 1;")   # dV, dK: 4 each, B MN-major
    shared = attention_bwd.BWD_DQ_SHARED[head_dim]      # dQ: 64 columns over 128 keys, or all over 64 keys
    dq_columns, dq_keys = (d // 2, 128) if shared else (d, 64)
    transposed = mma(dq_columns, r"%rd\d+, %rd\d+, p, 1, 1, 1, 1;")    # dQ: A and B MN-major
    assert len(from_shared) == 2 * d // 16
    assert len(from_registers) == 2 * m // 16
    assert len(transposed) == dq_keys // 16
    if attention_bwd.BWD_DQ_TMA[head_dim]:      # one TMA reduction of the warpgroup's dQ tile per step
        assert ptx.count("cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group") == 1
    else:
        assert len(re.findall(r"\b(?:red|atom)\.global\.add\.f32", ptx)) == dq_columns // 2   # dQ's registers
    assert "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes" in ptx
    producer, consumer = REGISTERS[attention_bwd.BWD_WARPGROUPS]
    assert re.search(rf"setmaxnreg\.dec\.sync\.aligned\.u32\s+{producer};", ptx)
    assert re.search(rf"setmaxnreg\.inc\.sync\.aligned\.u32\s+{consumer};", ptx)
    assert ".minnctapersm 1" in ptx
    assert "ex2.approx.ftz.f32" in ptx
    sass = disassemble(kernel.cubin)
    if sass is not None:
        assert not re.search(r"\b(LDL|STL)\b", sass), "local memory (spills) in the SASS"
        assert len(re.findall(r"\bHGMMA\.64x\d+x16\.F32", sass)) >= 2 * d // 16 + 2 * m // 16 + 4
        assert re.search(r"\bUBLKRED\b|\bUTMAREDG\b", sass) if attention_bwd.BWD_DQ_TMA[head_dim] else \
            re.search(r"\bREDG\.E\.ADD\.F32", sass)
        # the wgmmas stay asynchronous: a handful of waits per step, not one per HGMMA (ptxas serializes them,
        # C7512, where the in-flight accumulators do not fit the registers: head_dim 128 without DQ_SHARED)
        assert len(re.findall(r"WARPGROUP\.DEPBAR\.LE", sass)) <= 6
        assert re.search(r"\bUTMALDG\b", sass) and len(re.findall(r"\bUSETMAXREG\b", sass)) >= 2


def test_backward_refuses_head_dim_256():
    with pytest.raises(tsjit.CompilationError, match="HEAD_DIM must be one of"):
        attention_bwd.compile_backward(256, False, stages=2)


@pytest.mark.parametrize("variant", ["atomics", "own_dq"])
@pytest.mark.parametrize("head_dim", [64, 128])
def test_dq_variants_compile_safe_without_spills(monkeypatch, head_dim, variant):
    """The other ways of adding dQ: one ``atom.global.add.f32`` per element (what the CPU interpreter runs: the
    default TMA reduction is inline PTX it does not model), and (head_dim 128) each warpgroup all of dQ over its own
    keys (dK waited for before dQ is issued, so the wgmmas are not serialized)."""
    if variant == "own_dq" and head_dim == 64:
        pytest.skip("head_dim 64 computes dQ over its own keys by default")
    managers = []
    monkeypatch.setattr(attention_bwd, "BACKWARD_OBSERVERS", [managers.append])
    monkeypatch.setenv("TSJIT_DISABLE_CACHE", "1")
    options = {"atomics": dict(dq_tma=False), "own_dq": dict(dq_shared=False, dq_tma=True)}[variant]
    kernel = attention_bwd.compile_backward(head_dim, True, **options)
    assert managers and all(m.exhaustive_result.verdict == "SAFE" for m in managers)
    meta = kernel.metadata
    assert (meta["spill_stores_bytes"], meta["spill_loads_bytes"], meta["stack_frame_bytes"]) == (0, 0, 0)
    columns = head_dim // 2 if attention_bwd.BWD_DQ_SHARED[head_dim] and variant != "own_dq" else head_dim
    if variant == "atomics":
        assert len(re.findall(r"atom\.global\.add\.f32", kernel.ptx)) == columns // 2
    else:                                          # one TMA reduction per 64 x 64 box of the warpgroup's dQ tile
        assert kernel.ptx.count("cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group") == columns // 64
    sass = disassemble(kernel.cubin)
    if sass is not None:                           # the wgmmas stay asynchronous (see the test above)
        assert len(re.findall(r"WARPGROUP\.DEPBAR\.LE", sass)) <= 6
