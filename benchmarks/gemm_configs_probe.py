"""Measure forced configurations of ``tsjit.ops.matmul`` against cuBLAS on the shapes where the
heuristic is weak, fp8 against ``torch._scaled_mm``, and the host overhead per call (issue 15).

Every forced config is first compiled and checked (relative error vs torch) by worker processes
in parallel (``--workers``; they fill the shared disk cache, ``TSJIT_CACHE_DIR``), then the main
process times each one interleaved with the baseline, L2 flushed, medians of ``--reps``.

    PYTHONPATH=. python benchmarks/gemm_configs_probe.py [--workers 12] [--reps 15] [--wait-for FILE]
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

import torch

import tsjit
import tsjit.ops
from tsjit.ops import configs

from gemm import host_overhead_us, timed_ms  # benchmarks/gemm.py (this script's folder is on sys.path)

mm = sys.modules["tsjit.ops.matmul"]
FP8 = torch.float8_e4m3fn

# (M, N, K) -> [(BM, BN, splits, group_m)]; the first entry of each list is today's heuristic choice
BF16_CANDIDATES = {
    (3000, 5000, 1000): [(128, 256, 1, 8), (128, 192, 1, 8), (128, 128, 1, 8), (128, 192, 1, 4), (128, 256, 1, 16),
                         (128, 192, 1, 16)],
    (2048, 2048, 2048): [(128, 256, 1, 8), (128, 128, 1, 8), (128, 192, 1, 8)],
    (1024, 14336, 4096): [(128, 256, 1, 8), (128, 192, 1, 8), (128, 128, 1, 8)],
    (512, 28672, 4096): [(128, 256, 1, 8), (128, 192, 1, 8), (128, 128, 1, 8)],
    (128, 4096, 4096): [(64, 64, 1, 8), (64, 64, 2, 8), (128, 64, 2, 8), (64, 128, 2, 8), (128, 128, 4, 8),
                        (64, 128, 4, 8), (128, 32, 1, 8)],
    (64, 28672, 4096): [(128, 128, 1, 8), (128, 64, 1, 8), (64, 64, 1, 8), (128, 64, 2, 8), (64, 64, 2, 8),
                        (128, 64, 3, 8)],
    (1, 28672, 4096): [(128, 64, 1, 8), (128, 16, 1, 8), (64, 16, 1, 8), (128, 16, 2, 8), (64, 16, 2, 8)],
    (16, 28672, 4096): [(128, 64, 1, 8), (128, 16, 1, 8), (64, 16, 1, 8), (128, 16, 2, 8), (64, 16, 2, 8)],
    (256, 4096, 14336): [(128, 256, 4, 8), (128, 128, 4, 8), (128, 128, 2, 8), (128, 192, 4, 8), (128, 256, 2, 8)],
    (512, 4096, 14336): [(128, 256, 2, 8), (128, 128, 2, 8), (128, 128, 1, 8), (128, 256, 4, 8), (128, 192, 2, 8)],
    (256, 256, 16384): [(64, 64, 8, 8), (128, 64, 16, 8), (64, 128, 16, 8), (64, 64, 16, 8), (128, 128, 16, 8)],
    (384, 384, 16384): [(128, 64, 6, 8), (128, 128, 12, 8), (64, 64, 3, 8), (128, 64, 8, 8), (64, 128, 6, 8),
                        (128, 192, 12, 8)],
}
FP8_CANDIDATES = {
    (4096, 4096, 4096): [None, (128, 256, 1, 8), (128, 128, 1, 8), (128, 192, 1, 8)],
    (8192, 8192, 8192): [None, (128, 256, 1, 8), (128, 192, 1, 8)],
}


def jobs():
    out = []
    for shape, cands in BF16_CANDIDATES.items():
        out += [("bf16", shape, c) for c in cands]
    for shape, cands in FP8_CANDIDATES.items():
        out += [("fp8", shape, c) for c in cands]
    return out


def force_with(make):
    """Make the planner use the configuration ``make(problem)`` for every problem (None: the heuristic);
    clears the planned calls."""
    mm._PLANS.clear()
    mm._FAST.clear()
    mm._PLAIN.clear()
    getattr(mm, "_ALLOCATING", {}).clear()
    if make is None:
        configs.choose = ORIGINAL_CHOOSE
        return

    def forced(problem):
        config = make(problem)
        return config, [(0.0, *configs.choice_of(config))]
    configs.choose = forced


def force(choice):
    """Make the planner pick ``choice`` = (BM, BN, splits, group_m) (None: the heuristic)."""
    if choice is None:
        force_with(None)
        return
    bm, bn, splits, group_m = choice
    force_with(lambda problem: configs.make_config(problem, bm, bn, splits, group_m=group_m))


ORIGINAL_CHOOSE = configs.choose


def operands(kind, shape):
    M, N, K = shape
    torch.manual_seed(0)
    if kind == "bf16":
        a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(N, K, device="cuda", dtype=torch.bfloat16).t()
        return a, b, {}
    a = torch.randn(M, K, device="cuda").to(FP8)
    b = torch.randn(N, K, device="cuda").to(FP8).t()
    return a, b, {"scale_a": torch.tensor(0.5, device="cuda"), "scale_b": torch.tensor(2.0, device="cuda")}


def baseline(kind, a, b, kw, out):
    if kind == "bf16":
        return lambda: torch.matmul(a, b, out=out)
    return lambda: torch._scaled_mm(a, b, scale_a=kw["scale_a"], scale_b=kw["scale_b"], out_dtype=torch.bfloat16)


def check(kind, shape, choice):
    a, b, kw = operands(kind, shape)
    force(choice)
    out = torch.full((shape[0], shape[1]), float("nan"), device="cuda", dtype=torch.bfloat16)
    tsjit.ops.matmul(a, b, out=out, **kw)
    if kind == "bf16":
        ref = torch.matmul(a, b)
    else:
        ref = baseline(kind, a, b, kw, None)()
    torch.cuda.synchronize()
    return (torch.linalg.norm(out.float() - ref.float()) / torch.linalg.norm(ref.float())).item()


def worker(index, count):
    for i, (kind, shape, choice) in enumerate(jobs()):
        if i % count == index:
            try:
                err = check(kind, shape, choice)
                print(f"checked {kind} {shape} {choice}: rel err {err:.2e}", flush=True)
            except Exception as exc:           # report and go on: the main process skips it
                print(f"FAILED {kind} {shape} {choice}: {type(exc).__name__}: {exc}", flush=True)


def host_overhead():
    """Host time per call of a tiny product (median of batches), and its parts."""
    a = torch.randn(64, 256, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(256, 256, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(64, 256, device="cuda", dtype=torch.bfloat16)
    force(None)

    per_call = host_overhead_us
    tsjit.ops.matmul(a, b, out=c)
    tsjit.ops.matmul(a, b, out=c)
    bound = next(iter(mm._FAST.values()))[1]     # (direct driver call, packed launch)
    stream = torch.cuda.current_stream().cuda_stream
    rows = {
        "tsjit.ops.matmul(a, b, out=c)": per_call(lambda: tsjit.ops.matmul(a, b, out=c)),
        "tsjit.ops.matmul(a, b)": per_call(lambda: tsjit.ops.matmul(a, b)),
        "torch.matmul(a, b, out=c)": per_call(lambda: torch.matmul(a, b, out=c)),
        "torch.matmul(a, b)": per_call(lambda: torch.matmul(a, b)),
        "packed launch alone": per_call(lambda: bound(stream)),
        "fast-path key alone": per_call(lambda: (a.data_ptr(), a.shape, a.stride(), a.dtype, b.data_ptr(), b.shape,
                                                 b.stride(), b.dtype, c.data_ptr(), c.shape, c.stride(), c.dtype)),
        "current stream alone": per_call(lambda: mm._current_stream(a)),
    }
    for name, us in rows.items():
        print(f"host: {name}: {us:.2f} us", flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=12)
    parser.add_argument("--worker", type=int, default=-1)
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--wait-for", default="", help="a file whose existence means the GPU is free for timing")
    args = parser.parse_args()
    if args.worker >= 0:
        worker(args.worker, args.workers)
        return
    t0 = time.time()
    procs = [subprocess.Popen([sys.executable, __file__, "--worker", str(i), "--workers", str(args.workers)])
             for i in range(args.workers)]
    for p in procs:
        p.wait()
    print(f"compiled and checked in {time.time() - t0:.1f} s", flush=True)
    while args.wait_for and not os.path.exists(args.wait_for):
        time.sleep(0.5)
    print(f"timing from {time.time() - t0:.1f} s", flush=True)
    host_overhead()
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    print("| kind | M x N x K | config (BM, BN, S, group) | tsjit TFLOP/s | baseline TFLOP/s | ratio |")
    print("|---|---|---|---|---|---|")
    for kind, shape, choice in jobs():
        a, b, kw = operands(kind, shape)
        force(choice)
        out = torch.empty(shape[0], shape[1], device="cuda", dtype=torch.bfloat16)
        ref = torch.empty_like(out)
        ours_fn = lambda: tsjit.ops.matmul(a, b, out=out, **kw)            # noqa: E731
        theirs_fn = baseline(kind, a, b, kw, ref)
        try:
            for _ in range(3):
                ours_fn()
                theirs_fn()
            ours, theirs = [], []
            for _ in range(args.reps):
                theirs.append(timed_ms(theirs_fn, flush))
                ours.append(timed_ms(ours_fn, flush))
        except Exception as exc:
            print(f"| {kind} | {shape} | {choice} | FAILED {type(exc).__name__}: {exc} | | |")
            continue
        t_ours, t_theirs = statistics.median(ours), statistics.median(theirs)
        flops = 2.0 * shape[0] * shape[1] * shape[2]
        desc = choice if choice is not None else "heuristic: " + next(iter(mm._PLANS.values())).config.describe()
        print(f"| {kind} | {shape[0]}x{shape[1]}x{shape[2]} | {desc} | {flops / t_ours / 1e9:.0f} | "
              f"{flops / t_theirs / 1e9:.0f} | {t_theirs / t_ours:.3f} |", flush=True)
    print(f"done in {time.time() - t0:.1f} s; device {torch.cuda.get_device_name(0)}, torch {torch.__version__}")


if __name__ == "__main__":
    main()
