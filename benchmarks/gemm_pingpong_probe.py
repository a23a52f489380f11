"""Cooperative vs ping-pong consumers vs cuBLAS (issue 15): forced configurations of
``tsjit.ops.matmul`` timed interleaved with ``torch.matmul`` in one process, CUDA events, the L2
flushed before every timed call, medians of ``--reps``; every configuration is checked first
(relative error vs cuBLAS < 1e-2).  Kernels are compiled (and checked) by ``--workers`` processes
first, filling the shared disk cache.

    PYTHONPATH=. python benchmarks/gemm_pingpong_probe.py [--workers 12] [--reps 15] [--layout NK|KN] [--short]
"""
from __future__ import annotations

import argparse
import dataclasses
import statistics
import subprocess
import sys
import time

import torch

import tsjit
import tsjit.ops
from tsjit.ops import configs

from gemm import timed_ms  # benchmarks/gemm.py (this script's folder is on sys.path)
from gemm_configs_probe import force_with

mm = sys.modules["tsjit.ops.matmul"]
SHAPES = [(2048, 2048, 2048), (4096, 4096, 4096), (3000, 5000, 1000), (1024, 14336, 4096), (512, 4096, 14336),
          (8192, 8192, 8192)]
# (schedule, BM, BN, stages or None for the deepest, staged columns or None, wgmma groups in flight); None: the heuristic
CHOICES = [None, ("cooperative", 128, 256, None, None, 1), ("cooperative", 128, 128, None, None, 1),
           ("pingpong-shared", 128, 256, None, None, 1), ("pingpong-shared", 128, 256, None, None, 2),
           ("pingpong-shared", 128, 256, None, 128, 2), ("pingpong-shared", 256, 128, None, None, 1),
           ("pingpong-shared", 256, 128, None, None, 2), ("pingpong-shared", 128, 128, None, None, 2)]
#: ``--short``: the heuristic, cooperative 128x256 and the two shared-ring ping-pong tiles (2 groups in flight)
SHORT = [None, ("cooperative", 128, 256, None, None, 1), ("pingpong-shared", 256, 128, None, None, 2),
         ("pingpong-shared", 128, 256, None, None, 2)]


def describe(choice) -> str:
    if choice is None:
        return "heuristic"
    schedule, bm, bn, stages, staged, lag = choice
    name = {"cooperative": "coop", "pingpong": "pp", "pingpong-shared": "pp-shared"}[schedule]
    return (f"{name} {bm}x{bn}" + (f" lag{lag}" if lag > 1 else "") + (f" S{stages}" if stages else "")
            + (f" st{staged}" if staged else ""))


def force(choice):
    """Make the planner pick ``choice`` (None: the heuristic)."""
    if choice is None:
        force_with(None)
        return
    schedule, bm, bn, stages, staged, lag = choice

    def make(problem):
        cfg = dataclasses.replace(configs.make_config(problem, bm, bn, 1, schedule=schedule), mma_lag=lag)
        if staged:
            cfg = dataclasses.replace(cfg, staged_columns=staged,
                                      stages=configs.stages_for(bm, bn, cfg.epilogue, staged, 2, schedule))
        if stages:
            cfg = dataclasses.replace(cfg, stages=stages)
        return cfg
    force_with(make)


def operands(shape, layout):
    M, N, K = shape
    torch.manual_seed(0)
    a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    b = (torch.randn(N, K, device="cuda", dtype=torch.bfloat16).t() if layout == "NK"
         else torch.randn(K, N, device="cuda", dtype=torch.bfloat16))
    return a, b


def jobs(short=False):
    return [(shape, choice) for shape in SHAPES for choice in (SHORT if short else CHOICES)]


def check(shape, choice, layout) -> float:
    a, b = operands(shape, layout)
    force(choice)
    out = torch.full((shape[0], shape[1]), float("nan"), device="cuda", dtype=torch.bfloat16)
    tsjit.ops.matmul(a, b, out=out)
    ref = torch.matmul(a, b)
    torch.cuda.synchronize()
    return (torch.linalg.norm(out.float() - ref.float()) / torch.linalg.norm(ref.float())).item()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=12)
    parser.add_argument("--worker", type=int, default=-1)
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--layout", choices=("NK", "KN"), default="NK")
    parser.add_argument("--short", action="store_true", help="only the configurations of SHORT")
    args = parser.parse_args()
    if args.worker >= 0:
        for i, (shape, choice) in enumerate(jobs(args.short)):
            if i % args.workers == args.worker:
                try:
                    print(f"checked {shape} {describe(choice)}: rel err {check(shape, choice, args.layout):.2e}",
                          flush=True)
                except Exception as exc:       # report and go on
                    print(f"FAILED {shape} {describe(choice)}: {type(exc).__name__}: {exc}", flush=True)
        return
    t0 = time.time()
    procs = [subprocess.Popen([sys.executable, __file__, "--worker", str(i), "--workers", str(args.workers),
                               "--layout", args.layout] + (["--short"] if args.short else []))
             for i in range(args.workers)]
    for p in procs:
        p.wait()
    print(f"compiled and checked in {time.time() - t0:.1f} s", flush=True)
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    print(f"layout {args.layout}; ratio = cuBLAS time / tsjit time")
    print("| M x N x K | config | tsjit TFLOP/s | cuBLAS TFLOP/s | ratio | rel. err | full config |")
    print("|---|---|---|---|---|---|---|")
    for shape, choice in jobs(args.short):
        a, b = operands(shape, args.layout)
        force(choice)
        out = torch.empty(shape[0], shape[1], device="cuda", dtype=torch.bfloat16)
        ref = torch.empty_like(out)
        ours_fn = lambda: tsjit.ops.matmul(a, b, out=out)          # noqa: E731
        theirs_fn = lambda: torch.matmul(a, b, out=ref)            # noqa: E731
        try:
            for _ in range(3):
                ours_fn()
                theirs_fn()
            torch.cuda.synchronize()
            err = (torch.linalg.norm(out.float() - ref.float()) / torch.linalg.norm(ref.float())).item()
            ours, theirs = [], []
            for _ in range(args.reps):
                theirs.append(timed_ms(theirs_fn, flush))
                ours.append(timed_ms(ours_fn, flush))
        except Exception as exc:
            print(f"| {shape} | {describe(choice)} | FAILED {type(exc).__name__}: {exc} | | | | |", flush=True)
            continue
        t_ours, t_theirs = statistics.median(ours), statistics.median(theirs)
        flops = 2.0 * shape[0] * shape[1] * shape[2]
        cfg = next(iter(mm._PLANS.values())).config
        print(f"| {shape[0]}x{shape[1]}x{shape[2]} | {describe(choice)} | {flops / t_ours / 1e9:.0f} | "
              f"{flops / t_theirs / 1e9:.0f} | {t_theirs / t_ours:.3f} | {err:.1e} | {cfg.describe()} |", flush=True)
    print(f"done in {time.time() - t0:.1f} s; device {torch.cuda.get_device_name(0)}, torch {torch.__version__}")


if __name__ == "__main__":
    main()
