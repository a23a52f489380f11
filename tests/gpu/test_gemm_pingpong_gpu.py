"""The ping-pong GEMM (tsjit.ops.gemm_pingpong, issue 15) on the GPU and under the CPU interpreter
(``gpu_or_interpret``), every variant (a ring per warpgroup; one shared ring with 64- or 128-row
halves): relative Frobenius error < 1e-2 against float64 on fresh random bf16 inputs,
outputs poisoned (NaN) before the launch, B as (N, K) and as (K, N), TMA and direct epilogues, square
and ragged shapes (a last 64-row half beyond M, N not a multiple of the tile), and few CTAs, so each
warpgroup takes many turns (every CTA works through many tiles).

The interpreter runs every variant of every case: the small cases as they are, each GPU-sized case at its
reduced case (:data:`REDUCED`); one GEMM costs seconds there."""
import dataclasses

import numpy as np
import pytest

import tsjit
from tsjit import env
from tsjit.lang.epilogue import FusedEpilogue
from tsjit.ops import configs
from tsjit.ops.gemm_pingpong import extra_arguments, kernel_for, threads_for
from tsjit.runtime import driver
from tsjit.runtime.arrays import bfloat16_bits_to_float32, float_to_bfloat16_bits

pytestmark = pytest.mark.gpu_or_interpret

# (M, N, K, BN, layout, sms, epilogue): the small cases (the interpreter runs them as they are)
INTERPRETED = {(256, 256, 128, 128, "NK", None, "tma"), (256, 256, 128, 128, "KN", None, "tma"),
               (300, 200, 136, 64, "NK", 1, "tma"), (130, 264, 72, 256, "KN", 2, "direct"),
               (200, 136, 64, 128, "NK", 1, "direct")}


def _bf16(x):
    return bfloat16_bits_to_float32(float_to_bfloat16_bits(x.astype(np.float32)))


def run_pingpong(M, N, K, block_n, layout, sms=None, epilogue="tma", schedule="pingpong", block_m=128, lag=1,
                 rng=None):
    """C = A @ B (B given (N, K) for ``layout="NK"``, (K, N) for ``"KN"``) with the ping-pong program (or
    another ``schedule``: the deferred epilogue's, tests/gpu/test_gemm_deferred_gpu.py) on a grid of
    ``min(tiles, sms)`` CTAs; returns (C as float64, float64 reference)."""
    rng = rng or np.random.default_rng()
    a = _bf16(rng.standard_normal((M, K)))
    b = _bf16(rng.standard_normal((N, K) if layout == "NK" else (K, N)))
    da = tsjit.to_device(a, dtype=tsjit.BFloat16)
    db = tsjit.to_device(b, dtype=tsjit.BFloat16)
    c = tsjit.empty((M, N), tsjit.BFloat16).fill_bytes(0xFF)          # NaN everywhere
    problem = configs.Problem(M, N, K, y_major="K" if layout == "NK" else "MN", tma_output=epilogue == "tma")
    cfg = dataclasses.replace(configs.make_config(problem, block_m, block_n, 1, schedule=schedule), mma_lag=lag)
    assert cfg.epilogue == epilogue and cfg.schedule == schedule
    a_map = tsjit.TensorMap(da, (cfg.load_rows, cfg.block_k), swizzle="128B")
    b_map = tsjit.TensorMap(db, (block_n, cfg.block_k) if layout == "NK" else (cfg.block_k, 64), swizzle="128B")
    c_map = tsjit.TensorMap(c, (64, 64), swizzle="128B") if epilogue == "tma" else a_map
    dummy = tsjit.to_device(np.zeros((1,), np.float32))
    dummy2 = tsjit.to_device(np.zeros((1, 1), np.float32))
    tiles = -(-M // block_m) * -(-N // block_n)
    grid = min(tiles, sms or (132 if env.interpret() else driver.device_properties().sm_count))
    kernel_for(cfg)[(grid,), (threads_for(cfg),)](
        a_map, b_map, c, c_map, dummy, dummy2, dummy, dummy, dummy, dummy, M, N, K, 1, 1.0, 0.0, block_m, block_n,
        cfg.stages, "K", problem.y_major, epilogue, cfg.staged_columns, 1, False, cfg.group_m, FusedEpilogue(),
        *extra_arguments(cfg))
    got = bfloat16_bits_to_float32(c.numpy()).astype(np.float64)
    b64 = b.astype(np.float64)
    return got, a.astype(np.float64) @ (b64.T if layout == "NK" else b64)


#: the GPU-sized cases -> the interpreter's (the same tile width, B layout and epilogue; few tiles, K of a few
#: K tiles, a small grid so each CTA still takes several tiles where the GPU case does)
REDUCED = {(2048, 2048, 2048, 256, "NK", None, "tma"): (256, 512, 256, 256, "NK", None, "tma"),
           (2048, 2048, 2048, 128, "KN", None, "tma"): (256, 256, 256, 128, "KN", None, "tma"),
           (3000, 5000, 1000, 256, "NK", None, "tma"): (200, 264, 200, 256, "NK", None, "tma"),
           (3000, 5000, 1000, 192, "KN", None, "tma"): (200, 200, 200, 192, "KN", None, "tma"),
           (1000, 3000, 784, 128, "NK", None, "tma"): (130, 136, 200, 128, "NK", None, "tma"),
           (1000, 3000, 776, 128, "KN", 7, "direct"): (200, 264, 136, 128, "KN", 2, "direct"),
           (4096, 4096, 4096, 256, "KN", None, "tma"): (128, 512, 512, 256, "KN", None, "tma"),
           (257, 520, 4104, 64, "NK", 3, "tma"): (257, 64, 520, 64, "NK", 2, "tma")}


def _case(M, N, K, block_n, layout, sms, epilogue):
    """The case to run: on the GPU as given; under the interpreter its reduced case (:data:`REDUCED`)."""
    case = (M, N, K, block_n, layout, sms, epilogue)
    return REDUCED.get(case, case) if env.interpret() else case


CASES = sorted(INTERPRETED, key=str) + [
    (2048, 2048, 2048, 256, "NK", None, "tma"), (2048, 2048, 2048, 128, "KN", None, "tma"),
    (3000, 5000, 1000, 256, "NK", None, "tma"), (3000, 5000, 1000, 192, "KN", None, "tma"),
    (1000, 3000, 784, 128, "NK", None, "tma"), (1000, 3000, 776, 128, "KN", 7, "direct"),
    (4096, 4096, 4096, 256, "KN", None, "tma"), (257, 520, 4104, 64, "NK", 3, "tma")]


VARIANTS = [("pingpong", 128, 1), ("pingpong-shared", 128, 1), ("pingpong-shared", 128, 2),
            ("pingpong-shared", 256, 1), ("pingpong-shared", 256, 2)]


@pytest.mark.parametrize("schedule,block_m,lag", VARIANTS)
@pytest.mark.parametrize("M,N,K,block_n,layout,sms,epilogue", CASES)
def test_pingpong_gemm_matches_float64(M, N, K, block_n, layout, sms, epilogue, schedule, block_m, lag):
    case = (M, N, K, block_n, layout, sms, epilogue)
    M, N, K, block_n, layout, sms, epilogue = _case(*case)
    if block_m == 256:          # 128-row halves: at most 128 columns (a 128-register accumulator)
        block_n = min(block_n, 128)
    got, ref = run_pingpong(M, N, K, block_n, layout, sms, epilogue, schedule, block_m, lag)
    assert np.isfinite(got).all(), "unwritten (NaN) outputs"
    err = np.linalg.norm(got - ref) / np.linalg.norm(ref)
    assert err < 1e-2, err
