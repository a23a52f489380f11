"""Issue 15 probe (2026-12-03, helper i15f): what the realigning copy of 3000 x 5000 x 1000 costs
(``tsjit.ops.matmul`` copies Y's 2000-byte rows into 2048-byte rows first, :mod:`tsjit.ops.staging`), with
other copy geometries (vectors per thread and step, CTAs: a grid-stride loop overlaps one step's stores with the
next step's loads) and with streaming loads (``ld.global.cs``: lines allocated evict-first).

* the copy alone (Y: 5000 x 1000 bf16), each variant, after a dirty L2 flush (``zero_()`` of 256 MiB: what the
  GEMM benchmarks do before every call) and after a clean one (a read of the 256 MiB);
* the whole call against cuBLAS, each copy variant in turn per round, L2 flushed (dirty) before every call.

Medians of ``--reps``; every copy is checked exact, every product against float64 on a sampled 64 x 64 block.

    cd benchmarks && python gemm_realign_probe.py [--reps 15] [--variants main,u8,...]
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

matmul_plan = sys.modules["tsjit.ops.matmul_plan"]     # its copy_launch (imported from staging)


def load_streaming(ptr):
    """The 16 bytes at global ``ptr`` by ``ld.global.cs.v4.u32`` (PTX ISA 9.7.9.8 ld: ``.cs``, cache streaming,
    lines allocated evict-first), as four Int32."""
    builder = emit.current()
    raw = builder.inline_asm(ir.LiteralStructType([emit.I32] * 4), "ld.global.cs.v4.u32 {$0, $1, $2, $3}, [$4];",
                             "=r,=r,=r,=r,l", [ptr.ir])
    return tuple(Value(builder.builder.extract_value(raw, i), dt.Int32) for i in range(4))


@tsjit.kernel
def copy_rows_unrolled(src, dst, rows, cols, total_rows, VEC: tsjit.Constexpr[int], UNROLL: tsjit.Constexpr[int],
                       STREAMING: tsjit.Constexpr[bool]):
    """:func:`tsjit.ops.staging.copy_rows` with ``UNROLL`` vectors per thread and step, loads streaming or not."""
    chunks = cols // VEC
    total = total_rows * chunks
    step = tsjit.grid_dim().x * tsjit.block_dim().x
    for base in range(tsjit.block_idx().x * tsjit.block_dim().x + tsjit.thread_idx().x, total, step * UNROLL):
        places, values = [], []
        for u in tsjit.range_constexpr(UNROLL):
            v = tsjit.math.min(base + u * step, total - 1)
            row = v // chunks
            b = row // rows
            place = (b, row - b * rows, (v - row * chunks) * VEC)
            places.append(place)
            if tsjit.const_expr(STREAMING):
                values.append(load_streaming(tsjit.address_of(src, *place)))
            else:
                values.append(src.load_vector(place, VEC))
        for u in tsjit.range_constexpr(UNROLL):
            if base + u * step < total:
                if tsjit.const_expr(STREAMING):
                    target = tsjit.assume_aligned(tsjit.address_of(dst, *places[u]).cast(tsjit.Int32), 16)
                    target.store_vector(values[u])
                else:
                    dst.store_vector(places[u], values[u])


#: name -> None (main's copy_launch) or (vectors per thread and step, CTAs per SM or None: main's count, streaming)
COPIES = {"main": None, "u8": (8, None, False), "u2": (2, None, False), "u4 2/SM": (4, 2, False),
          "u4 4/SM": (4, 4, False), "u8 2/SM": (8, 2, False), "streaming": (4, None, True)}
ORIGINAL = staging.copy_launch
SMS = 132


def launcher(name):
    """A ``copy_launch`` replacement for variant ``name``."""
    if COPIES[name] is None:
        return ORIGINAL
    unroll, per_sm, streaming = COPIES[name]

    def copy_launch(source, destination):
        batch, rows, cols = destination.shape
        vec = 16 // source.dtype.itemsize
        vectors = batch * rows * (cols // vec)
        ctas = SMS * per_sm if per_sm else max(1, -(-vectors // (staging.THREADS * unroll)))
        return copy_rows_unrolled.bind(source, destination, rows, cols, batch * rows, vec, unroll, streaming,
                                       grid=(ctas,), block=(staging.THREADS,))
    return copy_launch


def copies_alone(flush, reps, names):
    rows = 5000
    src = torch.randn(rows, 1000, device="cuda", dtype=torch.bfloat16)
    dst = torch.empty(rows, 1024, device="cuda", dtype=torch.bfloat16)[:, :1000]
    stream = torch.cuda.current_stream().cuda_stream
    launches = {}
    for name in names:
        launches[name] = launcher(name)(
            DeviceArray((1, rows, 1000), "BFloat16", strides=(rows * 1000, 1000, 1), data_ptr=src.data_ptr()),
            DeviceArray((1, rows, 1000), "BFloat16", strides=(rows * 1024, 1024, 1), data_ptr=dst.data_ptr()))
        dst.zero_()
        launches[name](stream)
        torch.cuda.synchronize()
        assert torch.equal(dst, src), f"the copy {name} differs"
    clean = type("Clean", (), {"zero_": lambda self: flush.max()})()     # reads the 256 MiB: clean lines
    times = {(n, f): [] for n in launches for f in ("dirty", "clean")}
    for _ in range(reps):
        for name, launch in launches.items():
            times[(name, "dirty")].append(timed_ms(lambda: launch(stream), flush))
            times[(name, "clean")].append(timed_ms(lambda: launch(stream), clean))
    for (name, how), samples in times.items():
        print(f"| copy 5000x1000 bf16 into 1024-element rows | {name} | L2 flushed {how} | "
              f"{statistics.median(samples) * 1e3:.1f} us |", flush=True)


def whole_call(flush, reps, names):
    M, N, K = 3000, 5000, 1000
    torch.manual_seed(M * N + K)
    rng = torch.Generator().manual_seed(0)
    a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(N, K, device="cuda", dtype=torch.bfloat16).t()
    ref = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
    out = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)

    def use(name):
        matmul_plan.copy_launch = launcher(name)
        force_with(None)                              # new plans: their copy launches bind this kernel
        tsjit.ops.matmul(a, b, out=out)

    errors = {}
    for name in names:
        use(name)
        first = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
        tsjit.ops.matmul(a, b, out=first)
        torch.cuda.synchronize()
        errors[name] = sampled_error(first, a, b, rng)
    config = next(iter(sys.modules["tsjit.ops.matmul"]._PLANS.values()))
    describe = config.config.describe() + f", realign {config.realign}"
    ours, theirs = {n: [] for n in names}, {n: [] for n in names}
    for _ in range(reps):
        for name in names:
            use(name)
            theirs[name].append(timed_ms(lambda: torch.matmul(a, b, out=ref), flush))
            ours[name].append(timed_ms(lambda: tsjit.ops.matmul(a, b, out=out), flush))
    for name in names:
        t_ours, t_theirs = statistics.median(ours[name]), statistics.median(theirs[name])
        print(f"| {M}x{N}x{K} | {name} | {describe} | {errors[name]:.1e} | {t_ours * 1e3:.1f} | "
              f"{t_theirs * 1e3:.1f} | {t_theirs / t_ours:.3f} |", flush=True)
    matmul_plan.copy_launch = ORIGINAL
    force_with(None)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--variants", default=",".join(COPIES))
    parser.add_argument("--call-variants", default="main,u8 2/SM,u4 4/SM", help="the copies timed in the whole call")
    args = parser.parse_args()
    began = time.perf_counter()
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    copies_alone(flush, args.reps, args.variants.split(","))
    print("| M x N x K | copy | config | rel. err | tsjit us | cuBLAS us | cuBLAS/tsjit |\n|---|---|---|---|---|---|---|")
    whole_call(flush, args.reps, args.call_variants.split(","))
    print(f"device: {torch.cuda.get_device_name(0)}, torch {torch.__version__}, {time.perf_counter() - began:.1f} s")


if __name__ == "__main__":
    main()
