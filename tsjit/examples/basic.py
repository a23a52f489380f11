"""Plain (not warp-specialized) example kernels.

Each kernel has a ``run_*`` helper that builds fresh random inputs, poisons the output,
launches, and returns (result, float64 numpy reference) so tests, the demo and the
benchmarks check the same thing.
"""
from __future__ import annotations

import numpy as np

import tsjit

COPY_VECTOR = 8  # Int16 elements per 16-byte access


@tsjit.kernel
def vector_add(x, y, out, n):
    """out[i] = x[i] + y[i] for i < n; one thread per element."""
    i = tsjit.block_idx().x * tsjit.block_dim().x + tsjit.thread_idx().x
    if i < n:
        out[i] = x[i] + y[i]


@tsjit.kernel
def saxpy(alpha, x, y, out, n):
    """out = alpha * x + y (Float32), one fused multiply-add per element."""
    i = tsjit.block_idx().x * tsjit.block_dim().x + tsjit.thread_idx().x
    if i < n:
        out[i] = tsjit.math.fma(alpha, x[i], y[i])


@tsjit.kernel
def copy_grid_stride(src, dst, n, VEC: tsjit.Constexpr[int]):
    """Grid-stride copy: each thread moves VEC contiguous elements (16 bytes for Int16 x 8) per step;
    the tail (n not a multiple of VEC) is copied element by element."""
    tid = tsjit.block_idx().x * tsjit.block_dim().x + tsjit.thread_idx().x
    stride = tsjit.grid_dim().x * tsjit.block_dim().x
    n_vec = n // VEC
    for v in range(tid, n_vec, stride):
        dst.store_vector(v * VEC, src.load_vector(v * VEC, VEC))
    for i in range(n_vec * VEC + tid, n, stride):
        dst[i] = src[i]


@tsjit.func
def warp_reduce_sum(value):
    for offset in tsjit.range_constexpr(5):
        value = value + tsjit.shuffle_xor(value, 16 >> offset)
    return value


@tsjit.kernel
def block_reduce_sum(x, total, n, THREADS: tsjit.Constexpr[int]):
    """total[0] += sum(x): per-thread grid-stride partial sums, warp shuffles, a shared-memory
    stage across warps, one atomic per block."""
    tid = tsjit.thread_idx().x
    partial = tsjit.Float32(0)
    for i in range(tsjit.block_idx().x * THREADS + tid, n, tsjit.grid_dim().x * THREADS):
        partial += x[i]
    partial = warp_reduce_sum(partial)
    warps = tsjit.shared_array(tsjit.Float32, THREADS // 32)
    lane = tsjit.lane_idx()
    warp = tid // 32
    if lane == 0:
        warps[warp] = partial
    tsjit.syncthreads()
    if warp == 0:
        v = warps[lane] if lane < THREADS // 32 else tsjit.Float32(0)
        v = warp_reduce_sum(v)
        if lane == 0:
            tsjit.atomic_add(tsjit.address_of(total, 0), v)


@tsjit.kernel
def naive_matmul(a, b, c, M, N, K):
    """c[m, n] = sum_k a[m, k] * b[k, n] in Float32, one thread per output element."""
    n = tsjit.block_idx().x * tsjit.block_dim().x + tsjit.thread_idx().x
    m = tsjit.block_idx().y * tsjit.block_dim().y + tsjit.thread_idx().y
    if m < M and n < N:
        acc = tsjit.Float32(0)
        for k in range(K):
            acc = tsjit.math.fma(a[m, k], b[k, n], acc)
        c[m, n] = acc


def _cdiv(a: int, b: int) -> int:
    return (a + b - 1) // b


def run_vector_add(n: int = 1 << 20, rng=None):
    rng = rng or np.random.default_rng()
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    out = tsjit.empty(n, tsjit.Float32).fill_bytes(0xFF)
    vector_add[(_cdiv(n, 256),), (256,)](tsjit.to_device(x), tsjit.to_device(y), out, n)
    return out.numpy(), x.astype(np.float64) + y.astype(np.float64)


def run_saxpy(n: int = 1 << 20, rng=None):
    rng = rng or np.random.default_rng()
    alpha = float(rng.standard_normal())
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    out = tsjit.empty(n, tsjit.Float32).fill_bytes(0xFF)
    saxpy[(_cdiv(n, 256),), (256,)](alpha, tsjit.to_device(x), tsjit.to_device(y), out, n)
    return out.numpy(), np.float64(np.float32(alpha)) * x.astype(np.float64) + y.astype(np.float64)


def run_copy(n: int = 1 << 24, blocks: int = 1024, threads: int = 256, rng=None):
    rng = rng or np.random.default_rng()
    src = rng.integers(-2**15, 2**15, size=n, dtype=np.int16)
    dst = tsjit.empty(n, tsjit.Int16).fill_bytes(0xA5)
    copy_grid_stride[(blocks,), (threads,)](tsjit.to_device(src), dst, n, COPY_VECTOR)
    return dst.numpy(), src


def run_block_reduce(n: int = 1 << 22, blocks: int = 264, threads: int = 256, rng=None):
    rng = rng or np.random.default_rng()
    x = rng.standard_normal(n).astype(np.float32)
    total = tsjit.zeros(1, tsjit.Float32)
    block_reduce_sum[(blocks,), (threads,)](tsjit.to_device(x), total, n, threads)
    return total.numpy()[0], x.astype(np.float64).sum()


def run_naive_matmul(M: int = 257, N: int = 130, K: int = 70, rng=None):
    rng = rng or np.random.default_rng()
    a = rng.standard_normal((M, K)).astype(np.float32)
    b = rng.standard_normal((K, N)).astype(np.float32)
    c = tsjit.empty((M, N), tsjit.Float32).fill_bytes(0xFF)
    naive_matmul[(_cdiv(N, 16), _cdiv(M, 16)), (16, 16)](tsjit.to_device(a), tsjit.to_device(b), c, M, N, K)
    return c.numpy(), a.astype(np.float64) @ b.astype(np.float64)
