"""GEMM benchmark (issue 15): ``tsjit.ops.matmul`` vs ``torch.matmul`` (cuBLAS) over a sweep of
LLM-inference and odd shapes, bf16 in, fp32 accumulation, bf16 out, ``C = A @ B`` with B given as
(N, K) transposed (the nn.Linear weight layout) or as (K, N) (``--layout KN``).

Method: for each shape, both results are checked first (relative Frobenius error of tsjit against
cuBLAS, < 1e-2); then ``--reps`` repetitions, each timing one cuBLAS call and one tsjit call with
CUDA events, the two interleaved and the L2 flushed (a 256 MiB write) before every timed call;
the median of each library's samples.  The table ends with the geomean, min and max of the
speed ratio (cuBLAS time / tsjit time; > 1 means tsjit is faster), and the host overhead per call
of both libraries.

    PYTHONPATH=. python benchmarks/gemm.py [--quick] [--reps 20] [--layout NK|KN]
"""
from __future__ import annotations

import argparse
import math
import statistics
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
QUICK = [(16, 4096, 4096), (128, 4096, 4096), (4096, 4096, 4096), (512, 512, 8192), (3000, 5000, 1000)]


def sweep(quick: bool):
    if quick:
        return QUICK
    return [(m, n, k) for n, k in LLAMA_NK for m in M_VALUES] + EXTRA


def _timed(fn, flush) -> float:
    flush.zero_()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end)


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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="five representative shapes only")
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--layout", choices=("NK", "KN"), default="NK")
    parser.add_argument("--max-seconds", type=float, default=1e9, help="stop the sweep after this long")
    args = parser.parse_args()
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    rows, ratios = [], []
    began = time.perf_counter()
    print("| M x N x K | tsjit TFLOP/s | cuBLAS TFLOP/s | cuBLAS time / tsjit time | rel. error | tsjit config |")
    print("|---|---|---|---|---|---|")
    for M, N, K in sweep(args.quick):
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
            theirs.append(_timed(lambda: torch.matmul(a, b, out=ref), flush))
            ours.append(_timed(lambda: tsjit.ops.matmul(a, b, out=c), flush))
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
    a = torch.randn(64, 256, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(256, 256, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(64, 256, device="cuda", dtype=torch.bfloat16)
    ours = host_overhead_us(lambda: tsjit.ops.matmul(a, b, out=c))
    ours_alloc = host_overhead_us(lambda: tsjit.ops.matmul(a, b))
    theirs = host_overhead_us(lambda: torch.matmul(a, b, out=c))
    import sys
    stats = sys.modules["tsjit.ops.matmul"].cache_statistics()
    print(f"host overhead per call: tsjit.ops.matmul {ours:.2f} us (out=), {ours_alloc:.2f} us (allocating); "
          f"torch.matmul {theirs:.2f} us; {stats}")
    print(f"device: {torch.cuda.get_device_name(0)}, torch {torch.__version__}, tsjit {tsjit.__version__}")


if __name__ == "__main__":
    main()
