"""Issue 15 probe (2026-12-03, helper i15f): what the realigning copy of 3000 x 5000 x 1000 costs
(``tsjit.ops.matmul`` copies Y's 2000-byte rows into 2048-byte rows first, :mod:`tsjit.ops.staging`), and
whether streaming loads (``ld.global.cs``: their lines are allocated evict-first, so reading the source does not
push the L2's other lines, dirty ones included, out to HBM) make it cheaper.

* the copy alone (Y: 5000 x 1000 bf16), each variant, after a dirty L2 flush (``zero_()`` of 256 MiB: what the
  GEMM benchmarks do before every call) and after a clean one (a read of the 256 MiB);
* the whole call against cuBLAS, each copy variant in turn per round, L2 flushed (dirty) before every call.

Medians of ``--reps``; every copy is checked exact, every product against float64 on a sampled 64 x 64 block.

    cd benchmarks && python gemm_realign_probe.py [--reps 15]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch
from llvmlite import ir

import tsjit
import tsjit.ops
from tsjit.backend import emit
from tsjit.lang import dtypes as dt
from tsjit.lang.values import Value
from tsjit.ops import staging
from tsjit.runtime.arrays import DeviceArray

from gemm import timed_ms                               # benchmarks/gemm.py (this folder is on sys.path)
from gemm_configs_probe import force_with              # clears the plan and launch caches
from gemm_session_probe import sampled_error


def load_streaming(ptr):
    """The 16 bytes at global ``ptr`` by ``ld.global.cs.v4.u32`` (PTX ISA 9.7.9.8 ld: ``.cs``, cache streaming,
    lines allocated evict-first), as four Int32."""
    builder = emit.current()
    raw = builder.inline_asm(ir.LiteralStructType([emit.I32] * 4), "ld.global.cs.v4.u32 {$0, $1, $2, $3}, [$4];",
                             "=r,=r,=r,=r,l", [ptr.ir])
    return tuple(Value(builder.builder.extract_value(raw, i), dt.Int32) for i in range(4))


@tsjit.kernel
def copy_rows_streaming(src, dst, rows, cols, total_rows, VEC: tsjit.Constexpr[int]):
    """:func:`tsjit.ops.staging.copy_rows` with streaming loads."""
    chunks = cols // VEC
    total = total_rows * chunks
    step = tsjit.grid_dim().x * tsjit.block_dim().x
    for base in range(tsjit.block_idx().x * tsjit.block_dim().x + tsjit.thread_idx().x, total, step * staging.UNROLL):
        places, values = [], []
        for u in tsjit.range_constexpr(staging.UNROLL):
            v = tsjit.math.min(base + u * step, total - 1)
            row = v // chunks
            b = row // rows
            place = (b, row - b * rows, (v - row * chunks) * VEC)
            places.append(place)
            values.append(load_streaming(tsjit.address_of(src, *place)))
        for u in tsjit.range_constexpr(staging.UNROLL):
            if base + u * step < total:
                target = tsjit.assume_aligned(tsjit.address_of(dst, *places[u]).cast(tsjit.Int32), 16)
                target.store_vector(values[u])


COPIES = {"copy_rows (main)": staging.copy_rows, "streaming loads": copy_rows_streaming}
ORIGINAL = staging.copy_rows


def copies_alone(flush, reps):
    rows = 5000
    src = torch.randn(rows, 1000, device="cuda", dtype=torch.bfloat16)
    dst = torch.empty(rows, 1024, device="cuda", dtype=torch.bfloat16)[:, :1000]
    stream = torch.cuda.current_stream().cuda_stream
    launches = {}
    for name, kernel in COPIES.items():
        staging.copy_rows = kernel
        launches[name] = staging.copy_launch(
            DeviceArray((1, rows, 1000), "BFloat16", strides=(rows * 1000, 1000, 1), data_ptr=src.data_ptr()),
            DeviceArray((1, rows, 1000), "BFloat16", strides=(rows * 1024, 1024, 1), data_ptr=dst.data_ptr()))
        dst.zero_()
        launches[name](stream)
        torch.cuda.synchronize()
        assert torch.equal(dst, src), f"the copy {name} differs"
    staging.copy_rows = ORIGINAL
    clean = type("Clean", (), {"zero_": lambda self: flush.max()})()     # reads the 256 MiB: clean lines
    times = {(n, f): [] for n in launches for f in ("dirty", "clean")}
    for _ in range(reps):
        for name, launch in launches.items():
            times[(name, "dirty")].append(timed_ms(lambda: launch(stream), flush))
            times[(name, "clean")].append(timed_ms(lambda: launch(stream), clean))
    for (name, how), samples in times.items():
        print(f"| copy 5000x1000 bf16 into 1024-element rows | {name} | L2 flushed {how} | "
              f"{statistics.median(samples) * 1e3:.1f} us |", flush=True)


def whole_call(flush, reps):
    M, N, K = 3000, 5000, 1000
    torch.manual_seed(M * N + K)
    rng = torch.Generator().manual_seed(0)
    a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(N, K, device="cuda", dtype=torch.bfloat16).t()
    ref = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
    out = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)

    def use(name):
        staging.copy_rows = COPIES[name]
        force_with(None)                              # new plans: their copy launches bind this kernel
        tsjit.ops.matmul(a, b, out=out)

    errors = {}
    for name in COPIES:
        use(name)
        first = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
        tsjit.ops.matmul(a, b, out=first)
        torch.cuda.synchronize()
        errors[name] = sampled_error(first, a, b, rng)
    config = next(iter(sys.modules["tsjit.ops.matmul"]._PLANS.values()))
    describe = config.config.describe() + f", realign {config.realign}"
    ours, theirs = {n: [] for n in COPIES}, {n: [] for n in COPIES}
    for _ in range(reps):
        for name in COPIES:
            use(name)
            theirs[name].append(timed_ms(lambda: torch.matmul(a, b, out=ref), flush))
            ours[name].append(timed_ms(lambda: tsjit.ops.matmul(a, b, out=out), flush))
    for name in COPIES:
        t_ours, t_theirs = statistics.median(ours[name]), statistics.median(theirs[name])
        print(f"| {M}x{N}x{K} | {name} | {describe} | {errors[name]:.1e} | {t_ours * 1e3:.1f} | "
              f"{t_theirs * 1e3:.1f} | {t_theirs / t_ours:.3f} |", flush=True)
    staging.copy_rows = ORIGINAL
    force_with(None)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=15)
    args = parser.parse_args()
    began = time.perf_counter()
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    copies_alone(flush, args.reps)
    print("| M x N x K | copy | config | rel. err | tsjit us | cuBLAS us | cuBLAS/tsjit |\n|---|---|---|---|---|---|---|")
    whole_call(flush, args.reps)
    print(f"device: {torch.cuda.get_device_name(0)}, torch {torch.__version__}, {time.perf_counter() - began:.1f} s")


if __name__ == "__main__":
    main()
