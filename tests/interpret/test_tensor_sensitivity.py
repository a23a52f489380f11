"""Planted tensor-side bugs in the Hopper GEMM (tsjit/examples/gemm.py at 256 x 256 x 128) run by the
CPU interpreter: each gives wrong numbers (or an interpreter report), as it would on the GPU.  The
unplanted GEMM is the reference run (both B layouts and the 2x1 cluster are in tests/gpu/test_gemm_ts_gpu.py
under gpu_or_interpret)."""
import numpy as np
import pytest

import tsjit
from tsjit.errors import InterpretError
from tsjit.examples import gemm
from tsjit.runtime.arrays import bfloat16_bits_to_float32

M = N = 256
K = 128


@pytest.fixture(autouse=True)
def interpreted(monkeypatch):
    monkeypatch.setenv("TSJIT_INTERPRET", "1")
    monkeypatch.setenv("TSJIT_DISABLE_CACHE", "1")


def run_gemm(*, a_swizzle="128B", c_swizzle="128B", kernel=gemm.gemm_ts):
    """(relative error of C, C) of the GEMM with the given tensor-map swizzles (the kernel's wgmma
    descriptors and stmatrix epilogue always assume 128B)."""
    rng = np.random.default_rng()
    a = gemm.bf16_round(rng.standard_normal((M, K)).astype(np.float32))
    b = gemm.bf16_round(rng.standard_normal((N, K)).astype(np.float32))
    da, db = tsjit.to_device(a, dtype=tsjit.BFloat16), tsjit.to_device(b, dtype=tsjit.BFloat16)
    c = tsjit.empty((M, N), tsjit.BFloat16).fill_bytes(0xFF)
    a_map = tsjit.TensorMap(da, (gemm.BM, gemm.BK), swizzle=a_swizzle)
    b_map = tsjit.TensorMap(db, (256, gemm.BK), swizzle="128B")
    c_map = tsjit.TensorMap(c, (64, 64), swizzle=c_swizzle)
    kernel[(2,), (gemm.THREADS,)](a_map, b_map, c, c_map, M, N, K, 256, 3, 8, 1, "tma", "K")
    got = bfloat16_bits_to_float32(c.numpy()).astype(np.float64)
    want = a.astype(np.float64) @ b.astype(np.float64).T
    return np.linalg.norm(np.nan_to_num(got - want, nan=1e30)) / np.linalg.norm(want)


def test_the_unplanted_gemm_is_right():
    assert run_gemm() < 4e-3


def test_a_tiles_loaded_without_the_swizzle_the_descriptors_assume_give_wrong_numbers():
    assert run_gemm(a_swizzle="none") > 0.3


def test_a_staging_tile_stored_without_its_swizzle_scrambles_c():
    assert run_gemm(c_swizzle="none") > 0.3


def test_a_wgmma_descriptor_off_by_one_stage_gives_wrong_numbers_or_a_report(monkeypatch):
    def next_stage_tiles(self, stage, warpgroup):
        planted = (stage + 1) % self.pipeline_config.num_stages          # the bug: the next ring stage
        return self.a_tiles[planted, warpgroup], "K", self.b_tiles[planted], self.b_major
    monkeypatch.setattr(gemm.ABStages, "operand_tiles", next_stage_tiles)
    planted = tsjit.kernel(gemm.gemm_ts.fn)             # a fresh kernel: gemm_ts may be compiled already
    try:
        error = run_gemm(kernel=planted)
    except InterpretError as report:                  # the race / uninitialized-read detectors may see it first
        assert "stage" in str(report) or "race" in str(report) or "uninitialized" in str(report), report
        return
    assert error > 0.3
