"""A Blackwell UMMA kernel (sm_100a: TMEM alloc, TMA, tcgen05.mma x4, commit to an mbarrier,
tcgen05.ld 32x32b, dealloc) run by the CPU interpreter against float64 numpy, and a planted bug:
A loaded without the swizzle its descriptor says."""
import numpy as np
import pytest

import tsjit
from interpret.tensor_tcgen05_kernels import umma_tile
from tsjit.errors import InterpretError
from tsjit.interpret import numerics

BF16 = tsjit.BFloat16


@pytest.fixture(autouse=True)
def blackwell_interpreter(monkeypatch):
    monkeypatch.setenv("TSJIT_INTERPRET", "1")
    monkeypatch.setenv("TSJIT_TARGET", "sm_100a")


def run(n=128, a_swizzle="128B", ws=0):
    rng = np.random.default_rng()
    a = numerics.encode(rng.standard_normal((128, 64)), BF16)
    b = numerics.encode(rng.standard_normal((n, 64)), BF16)
    a_map = tsjit.TensorMap(tsjit.to_device(a, BF16), (128, 64), swizzle=a_swizzle)
    b_map = tsjit.TensorMap(tsjit.to_device(b, BF16), (n, 64), swizzle="128B")
    out = tsjit.empty((128, n), tsjit.Float32).fill_bytes(0xFF)
    umma_tile[(1,), (128,)](a_map, b_map, out, N=n, WS=ws)
    want = numerics.decode(a, BF16).astype(np.float64) @ numerics.decode(b, BF16).astype(np.float64).T
    return np.linalg.norm(np.nan_to_num(out.numpy() - want, nan=1e30)) / np.linalg.norm(want)


@pytest.mark.parametrize("n", [64, 256])
def test_umma_through_tmem_is_a_at_b(n):
    assert run(n) < 1e-6


@pytest.mark.parametrize("n", [64, 256])
def test_weight_stationary_umma_with_m_128_is_a_at_b(n):
    """tcgen05.mma.ws, M = 128: Layout D, as the plain MMA (PTX ISA §9.7.16.10.5)."""
    assert run(n, ws=128) < 1e-6


def test_weight_stationary_umma_with_m_64_is_refused_naming_its_undocumented_layout():
    with pytest.raises(InterpretError, match=r"M = 64 is not modelled.*Layout E for M = 64 is given only as a figure"):
        run(128, ws=64)


def test_a_tiles_loaded_without_the_descriptors_swizzle_give_wrong_numbers():
    assert run(a_swizzle="none") > 0.3


@tsjit.kernel
def leaks_tmem(out):
    slot = tsjit.shared_array(tsjit.Uint32, (1,), align=4)
    if tsjit.warp_idx() == 0:
        tsjit.tcgen05.alloc(slot, 64)
    tsjit.syncthreads()
    out[tsjit.thread_idx().x] = slot[0]


def test_a_cta_that_exits_with_tmem_allocated_is_reported():
    with pytest.raises(InterpretError, match="still allocated .64 columns at column 0"):
        leaks_tmem[(1,), (64,)](np.zeros(64, np.uint32))


def test_the_blackwell_gemm_tutorial_runs_under_the_interpreter():
    """tsjit/examples/bw_gemm.py (TmaUmma ring, UMMA into TMEM, commit-released stages, TMEM epilogue)."""
    from tsjit.examples import bw_gemm
    from tsjit.runtime.arrays import bfloat16_bits_to_float32
    rng = np.random.default_rng()
    m, n, k = 128, 256, 192
    a = numerics.encode(rng.standard_normal((m, k)), BF16)
    b = numerics.encode(rng.standard_normal((n, k)), BF16)
    c = tsjit.empty((m, n), BF16).fill_bytes(0xFF)
    a_map = tsjit.TensorMap(tsjit.to_device(a, BF16), (bw_gemm.BM, bw_gemm.BK), swizzle="128B")
    b_map = tsjit.TensorMap(tsjit.to_device(b, BF16), (bw_gemm.BN, bw_gemm.BK), swizzle="128B")
    bw_gemm.gemm_tutorial3[(1, 1), (bw_gemm.threads_for("sm_100a"),)](a_map, b_map, c, k)
    got = bfloat16_bits_to_float32(c.numpy()).astype(np.float64)
    want = numerics.decode(a, BF16).astype(np.float64) @ numerics.decode(b, BF16).astype(np.float64).T
    assert np.linalg.norm(got - want) / np.linalg.norm(want) < 4e-3


def _tutorial3_tma_epilogue_error(n: int, c_swizzle: str = "128B") -> float:
    from tsjit.examples import bw_gemm
    from tsjit.runtime.arrays import bfloat16_bits_to_float32
    rng = np.random.default_rng()
    m, k = 128, 128
    a = numerics.encode(rng.standard_normal((m, k)), BF16)
    b = numerics.encode(rng.standard_normal((n, k)), BF16)
    c = tsjit.empty((m, n), BF16).fill_bytes(0xFF)
    a_map = tsjit.TensorMap(tsjit.to_device(a, BF16), (bw_gemm.BM, bw_gemm.BK), swizzle="128B")
    b_map = tsjit.TensorMap(tsjit.to_device(b, BF16), (bw_gemm.BN, bw_gemm.BK), swizzle="128B")
    c_map = tsjit.TensorMap(c, bw_gemm.C_BOX, swizzle=c_swizzle)
    grid = ((n + bw_gemm.BN - 1) // bw_gemm.BN, 1)
    bw_gemm.gemm_tutorial3[grid, (bw_gemm.threads_for("sm_100a"),)](a_map, b_map, c_map, k, EPILOGUE="tma")
    got = bfloat16_bits_to_float32(c.numpy()).astype(np.float64)
    want = numerics.decode(a, BF16).astype(np.float64) @ numerics.decode(b, BF16).astype(np.float64).T
    assert np.isfinite(got).all(), "elements the TMA stores did not write (still the 0xFFFF poison)"
    return np.linalg.norm(got - want) / np.linalg.norm(want)


@pytest.mark.parametrize("n", [512, 320])
def test_the_blackwell_gemm_tutorial_with_the_tma_epilogue_runs_under_the_interpreter(n):
    """EPILOGUE="tma": TMEM -> tcgen05.ld.16x256b -> bf16 -> stmatrix into 128B-swizzled boxes -> TMA store;
    two CTAs along N (n = 320: the second tile is ragged, TMA clips its columns 320..511)."""
    assert _tutorial3_tma_epilogue_error(n) < 4e-3


def test_a_tma_epilogue_stored_without_the_staging_swizzle_gives_wrong_numbers():
    """The stmatrix addresses are the 128B swizzle: a store map without it scrambles each row's chunks."""
    assert _tutorial3_tma_epilogue_error(512, c_swizzle="none") > 0.3
