"""GEMM benchmark (issue 15): ``tsjit.ops.matmul`` vs ``torch.matmul`` (cuBLAS) over a sweep of
LLM-inference and odd shapes, bf16 in, fp32 accumulation, bf16 out, ``C = A @ B`` with B given as
(N, K) transposed (the nn.Linear weight layout) or as (K, N) (``--layout KN``).

Method: for each shape, both results are checked first (relative Frobenius error of tsjit against
cuBLAS, < 1e-2); then ``--reps`` repetitions, each timing one cuBLAS call and one tsjit call with
CUDA events, the two interleaved and the L2 flushed (a 256 MiB write) before every timed call;
the median of each library's samples.  The table ends with the geomean, min and max of the
speed ratio (cuBLAS time / tsjit time; > 1 means tsjit is faster), and the host overhead per call
of both libraries.

    PYTHONPATH=. python benchmarks/gemm.py [--quick] [--reps 20] [--layout NK|KN] [--fp8-only | --no-fp8]
        [--shapes M,N,K ...] [--fp8-shapes M,N,K ...]

``--shapes`` / ``--fp8-shapes`` time only the shapes given (in that order) instead of the sweep / the fp8 list.

The fp8 table (after the sweep): e4m3 x e4m3 with per-tensor Float32 scales, bf16 out, against
``torch._scaled_mm`` (same operands: a row-major, b = w.t()), timed the same way.
"""
from __future__ import annotations

import argparse
import math
import os
import statistics
import subprocess
import sys
import time

import torch

import tsjit
import tsjit.ops

LLAMA_NK = [(4096, 4096), (14336, 4096), (4096, 14336), (28672, 4096)]
M_VALUES = [1, 16, 64, 128, 256, 512, 1024, 2048, 4096, 8192]
EXTRA = [(256, 256, 16384), (512, 512, 32768), (384, 384, 16384), (512, 512, 8192),      # K-heavy
         (4096, 4096, 256), (4096, 4096, 512),                                           # short K
         (1000, 3000, 777), (3000, 5000, 1000), (127, 255, 64),                          # odd sizes
         (2048, 2048, 2048), (4096, 4096, 4096), (8192, 8192, 8192), (2048, 8192, 8192)]
FP8_SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (2048, 2048, 2048), (16, 4096, 4096), (1024, 14336, 4096)]
QUICK = [(16, 4096, 4096), (128, 4096, 4096), (4096, 4096, 4096), (512, 512, 8192), (3000, 5000, 1000)]


def sweep(quick: bool, shapes=None):
    if shapes:
        return shapes
    if quick:
        return QUICK
    return [(m, n, k) for n, k in LLAMA_NK for m in M_VALUES] + EXTRA


def timed_ms(fn, flush) -> float:
    """Milliseconds of one call of ``fn`` (CUDA events) after flushing the L2 (``flush.zero_()``)."""
    flush.zero_()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end)


def matmul_error(a, b) -> float:
    """Relative Frobenius error of ``tsjit.ops.matmul(a, b)`` (into a NaN-poisoned output) against
    ``torch.matmul``."""
    out = torch.full((a.shape[0], b.shape[1]), float("nan"), device="cuda", dtype=torch.bfloat16)
    tsjit.ops.matmul(a, b, out=out)
    ref = torch.matmul(a, b)
    torch.cuda.synchronize()
    return (torch.linalg.norm(out.float() - ref.float()) / torch.linalg.norm(ref.float())).item()


def interleaved_medians(ours, theirs, flush, reps: int, warmup: int = 3) -> tuple[float, float]:
    """Median milliseconds of ``ours`` and ``theirs`` over ``reps`` alternating calls (``theirs`` first each
    round, the L2 flushed before every call), after ``warmup`` calls of each."""
    for _ in range(warmup):
        ours()
        theirs()
    t_ours, t_theirs = [], []
    for _ in range(reps):
        t_theirs.append(timed_ms(theirs, flush))
        t_ours.append(timed_ms(ours, flush))
    return statistics.median(t_ours), statistics.median(t_theirs)


def host_overhead_us(fn, calls: int = 2000) -> float:
    """Median host time per call (us) over batches of back-to-back calls on a tiny problem."""
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(10):
        t0 = time.perf_counter()
        for _ in range(calls // 10):
            fn()
        samples.append((time.perf_counter() - t0) / (calls // 10) * 1e6)
        torch.cuda.synchronize()
    return statistics.median(samples)


def interleaved_host_us(fns: dict, calls: int = 2000, rounds: int = 10) -> dict:
    """``{name: (wall us, CUDA-event us)}`` per call of each callable (a tiny problem: host-bound), medians over
    ``rounds`` rounds, each round timing ``calls / rounds`` back-to-back calls of every callable in turn (wall clock
    and CUDA events around the same calls), after 50 warm-up calls of each."""
    for fn in fns.values():
        for _ in range(50):
            fn()
    torch.cuda.synchronize()
    per_round = max(1, calls // rounds)
    wall = {name: [] for name in fns}
    event = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            t0 = time.perf_counter()
            for _ in range(per_round):
                fn()
            t1 = time.perf_counter()
            end.record()
            end.synchronize()
            wall[name].append((t1 - t0) / per_round * 1e6)
            event[name].append(start.elapsed_time(end) / per_round * 1e3)
    return {name: (statistics.median(wall[name]), statistics.median(event[name])) for name in fns}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="five representative shapes only")
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--layout", choices=("NK", "KN"), default="NK")
    parser.add_argument("--max-seconds", type=float, default=1e9, help="stop the sweep after this long")
    parser.add_argument("--fp8-only", action="store_true", help="only the fp8 table")
    parser.add_argument("--no-fp8", action="store_true", help="no fp8 table")
    parser.add_argument("--warm-workers", type=int, default=0,
                        help="compile every shape's kernel first in this many processes (shared disk cache)")
    parser.add_argument("--warm-index", type=int, default=-1, help=argparse.SUPPRESS)
    parser.add_argument("--wait-for", default="", help="start timing once this file exists (the GPU is free)")
    parser.add_argument("--shapes", nargs="*", type=shape_argument, default=None, help="only these bf16 M,N,K shapes")
    parser.add_argument("--fp8-shapes", nargs="*", type=shape_argument, default=None, help="only these fp8 M,N,K shapes")
    args = parser.parse_args()
    if args.warm_index >= 0:
        warm(args, args.warm_index)
        return
    if args.warm_workers:
        t0 = time.perf_counter()
        workers = [subprocess.Popen([sys.executable, __file__, "--warm-index", str(i), "--warm-workers",
                                     str(args.warm_workers), "--layout", args.layout] + (["--quick"] if args.quick
                                                                                         else [])
                                    + shape_options(args))
                   for i in range(args.warm_workers)]
        for w in workers:
            w.wait()
        print(f"(kernels compiled by {args.warm_workers} processes in {time.perf_counter() - t0:.1f} s)")
    while args.wait_for and not os.path.exists(args.wait_for):
        time.sleep(0.5)
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    if args.fp8_only:
        fp8_table(flush, args.reps, args.fp8_shapes)
        return
    rows, ratios = [], []
    began = time.perf_counter()
    print("| M x N x K | tsjit TFLOP/s | cuBLAS TFLOP/s | cuBLAS time / tsjit time | rel. error | tsjit config |")
    print("|---|---|---|---|---|---|")
    for M, N, K in sweep(args.quick, args.shapes):
        if time.perf_counter() - began > args.max_seconds:
            print(f"(stopped after {args.max_seconds:.0f} s)")
            break
        a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
        b = (torch.randn(N, K, device="cuda", dtype=torch.bfloat16).t() if args.layout == "NK"
             else torch.randn(K, N, device="cuda", dtype=torch.bfloat16))
        c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
        ref = torch.empty_like(c)
        torch.matmul(a, b, out=ref)
        tsjit.ops.matmul(a, b, out=c)
        torch.cuda.synchronize()
        err = (torch.linalg.norm(c.float() - ref.float()) / torch.linalg.norm(ref.float())).item()
        config = next(line for line in tsjit.ops.matmul.explain(a, b, verbose=False).splitlines()
                      if line.startswith("config:"))[8:].split(" (estimate")[0]
        if not err < 1e-2:
            print(f"| {M} x {N} x {K} | CHECK FAILED: rel. error {err:.2e} | | | | {config} |")
            continue
        ours, theirs = [], []
        for _ in range(3):
            tsjit.ops.matmul(a, b, out=c)
            torch.matmul(a, b, out=ref)
        for _ in range(args.reps):
            theirs.append(timed_ms(lambda: torch.matmul(a, b, out=ref), flush))
            ours.append(timed_ms(lambda: tsjit.ops.matmul(a, b, out=c), flush))
        t_ours, t_theirs = statistics.median(ours), statistics.median(theirs)
        flops = 2.0 * M * N * K
        ratio = t_theirs / t_ours
        ratios.append(ratio)
        rows.append((M, N, K, ratio))
        print(f"| {M} x {N} x {K} | {flops / t_ours / 1e9:.0f} | {flops / t_theirs / 1e9:.0f} | {ratio:.3f} | "
              f"{err:.1e} | {config} |", flush=True)
        del a, b, c, ref
    if ratios:
        geomean = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        worst = min(rows, key=lambda r: r[3])
        best = max(rows, key=lambda r: r[3])
        print(f"\n{len(ratios)} shapes: geomean {geomean:.3f}, min {worst[3]:.3f} ({worst[0]}x{worst[1]}x{worst[2]}), "
              f"max {best[3]:.3f} ({best[0]}x{best[1]}x{best[2]})")
    if not args.no_fp8:
        fp8_table(flush, args.reps, args.fp8_shapes)
    a = torch.randn(64, 256, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(256, 256, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(64, 256, device="cuda", dtype=torch.bfloat16)
    for _ in range(2):                     # the fast-path entry exists from the second call of a process on
        tsjit.ops.matmul(a, b, out=c)
    module = sys.modules["tsjit.ops.matmul"]
    launch = next((entry[1] for key, entry in module._FAST.items()        # the out= call's packed launch
                   if key[0] == a.data_ptr() and key[8] == c.data_ptr()), None)
    stream = torch.cuda.current_stream().cuda_stream
    host = interleaved_host_us({"ours": lambda: tsjit.ops.matmul(a, b, out=c), "ours_alloc": lambda: tsjit.ops.matmul(a, b),
                                "theirs": lambda: torch.matmul(a, b, out=c), "theirs_alloc": lambda: torch.matmul(a, b),
                                "alone": (lambda: launch(stream)) if launch is not None else (lambda: None)})
    ours, ours_alloc, theirs, theirs_alloc, alone = (host[name][0] for name in host)
    stats = module.cache_statistics()
    print(f"host overhead per call: tsjit.ops.matmul {ours:.2f} us (out=), {ours_alloc:.2f} us (allocating); "
          f"torch.matmul {theirs:.2f} us (out=), {theirs_alloc:.2f} us (allocating); tsjit's packed launch alone "
          f"{alone:.2f} us; {stats}")
    print(f"device: {torch.cuda.get_device_name(0)}, torch {torch.__version__}, tsjit {tsjit.__version__}")


def shape_argument(text: str) -> tuple[int, int, int]:
    """``"M,N,K"`` -> ``(M, N, K)``."""
    M, N, K = (int(part) for part in text.split(","))
    return M, N, K


def shape_options(args) -> list[str]:
    """The ``--shapes`` / ``--fp8-shapes`` options of ``args`` again (for the warm-up workers)."""
    out = []
    for option, shapes in (("--shapes", args.shapes), ("--fp8-shapes", args.fp8_shapes)):
        if shapes:
            out += [option] + [",".join(map(str, shape)) for shape in shapes]
    return out


def warm(args, index: int) -> None:
    """Worker: run each of this worker's shapes once (bf16, then the fp8 shapes), filling the disk cache."""
    jobs = ([("bf16", shape) for shape in sweep(args.quick, args.shapes)]
            + [("fp8", shape) for shape in (args.fp8_shapes or FP8_SHAPES)])
    for kind, (M, N, K) in jobs[index::args.warm_workers]:
        if kind == "bf16":
            a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
            b = (torch.randn(N, K, device="cuda", dtype=torch.bfloat16).t() if args.layout == "NK"
                 else torch.randn(K, N, device="cuda", dtype=torch.bfloat16))
            tsjit.ops.matmul(a, b, out=torch.empty(M, N, device="cuda", dtype=torch.bfloat16))
        else:
            a = torch.randn(M, K, device="cuda").to(torch.float8_e4m3fn)
            b = torch.randn(N, K, device="cuda").to(torch.float8_e4m3fn).t()
            tsjit.ops.matmul(a, b, scale_a=torch.tensor(0.5, device="cuda"), scale_b=torch.tensor(2.0, device="cuda"),
                             out=torch.empty(M, N, device="cuda", dtype=torch.bfloat16))
    torch.cuda.synchronize()


def fp8_table(flush, reps: int, shapes=None) -> None:
    """e4m3 tsjit.ops.matmul vs torch._scaled_mm, per-tensor scales, bf16 out (see the module docstring);
    ``shapes``: instead of :data:`FP8_SHAPES`."""
    print("\n| fp8 e4m3 M x N x K | tsjit TFLOP/s | torch._scaled_mm TFLOP/s | _scaled_mm time / tsjit time | "
          "_scaled_mm fast-accum TFLOP/s | rel. error | tsjit config |")
    print("|---|---|---|---|---|---|---|")
    for M, N, K in shapes or FP8_SHAPES:
        a = torch.randn(M, K, device="cuda").to(torch.float8_e4m3fn)
        b = torch.randn(N, K, device="cuda").to(torch.float8_e4m3fn).t()
        sa, sb = torch.tensor(0.5, device="cuda"), torch.tensor(2.0, device="cuda")
        c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
        ours_fn = lambda: tsjit.ops.matmul(a, b, scale_a=sa, scale_b=sb, out=c)                  # noqa: E731
        theirs_fn = lambda: torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)  # noqa: E731
        fast_fn = lambda: torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16,  # noqa: E731
                                           use_fast_accum=True)
        ref = theirs_fn()
        ours_fn()
        torch.cuda.synchronize()
        err = (torch.linalg.norm(c.float() - ref.float()) / torch.linalg.norm(ref.float())).item()
        config = next(line for line in tsjit.ops.matmul.explain(a, b, scale_a=sa, scale_b=sb, verbose=False)
                      .splitlines() if line.startswith("config:"))[8:].split(" (estimate")[0]
        if not err < 1e-2:
            print(f"| {M} x {N} x {K} | CHECK FAILED: rel. error {err:.2e} | | | | {config} |")
            continue
        ours, theirs, fast = [], [], []
        for _ in range(3):
            ours_fn()
            theirs_fn()
            fast_fn()
        for _ in range(reps):
            theirs.append(timed_ms(theirs_fn, flush))
            ours.append(timed_ms(ours_fn, flush))
            fast.append(timed_ms(fast_fn, flush))
        t_ours, t_theirs, t_fast = statistics.median(ours), statistics.median(theirs), statistics.median(fast)
        flops = 2.0 * M * N * K
        print(f"| {M} x {N} x {K} | {flops / t_ours / 1e9:.0f} | {flops / t_theirs / 1e9:.0f} | {t_theirs / t_ours:.3f} | "
              f"{flops / t_fast / 1e9:.0f} | {err:.1e} | {config} |", flush=True)


if __name__ == "__main__":
    main()
