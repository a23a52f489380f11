"""Issue 15 probe (2026-12-03, helper i15x): why the sweep (``gemm.py``) and the reducer probe
(``gemm_splitk_reducer_probe.py``) disagree at the K-heavy split-K shapes (0.87-0.91 against 0.94-0.97x cuBLAS for
the same reducer).  In one process, per shape, round by round (each round: every variant, each timed call after an
L2 flush, ``gemm.timed_ms``, each interleaved with its own cuBLAS ``torch.matmul`` call):

* ``sweep``: ``tsjit.ops.matmul(a, b, out=c)`` exactly as ``gemm.py`` calls it (the plain fast path, one plan);
* ``probe``: as the reducer probe does it: the plan and launch caches cleared, one untimed call (which plans and
  packs the launch again), then the timed pair;
* ``pre``: an untimed fast-path call, then the timed pair (the probe's extra call without the new plan);

Then: the kernels per call and their device times (``torch.profiler``), the grid / block / stream / workspace,
whether the counter words are all back to 0, the waits' outcome (a build with ``gemm_splitk.TALLY_WORD``: how many
warps resigned and how many last splits summed the whole tile, per launch, for each path), and the ``sweep`` pair
again right after a ``--heat`` seconds run of 8192 x 28672 x 4096 cuBLAS GEMMs (what the sweep runs just before
these shapes), with the SM clock before and after (nvidia-smi).

    cd benchmarks && python gemm_splitk_sweep_probe.py [--reps 30] [--only 384x384x16384] [--heat 4] [--warm-workers 3]
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

import numpy
import torch

import tsjit
import tsjit.ops
from tsjit.ops import configs, gemm_program, gemm_splitk

from gemm import timed_ms                               # benchmarks/gemm.py (this folder is on sys.path)
from gemm_configs_probe import force_with              # clears the plan and launch caches
from gemm_session_probe import sampled_error

SHAPES = [(384, 384, 16384), (512, 512, 8192), (256, 256, 16384), (512, 512, 32768)]
MM = sys.modules["tsjit.ops.matmul"]
TALLY = (1 << 14) - 1                                   # the last counter word (the workspace has 1 << 14)


def build(tally: bool, loaded: dict) -> None:
    """Make ``tsjit.ops.matmul`` launch the normal reducer or the tallying one (compiled kernels kept apart; the
    tallying one bypasses the disk cache: it shares the normal build's key)."""
    gemm_splitk.TALLY_WORD = TALLY if tally else None
    if tally:
        os.environ["TSJIT_DISABLE_CACHE"] = "1"
    else:
        os.environ.pop("TSJIT_DISABLE_CACHE", None)
    kernel = gemm_program.gemm_program
    kernel._loaded, kernel._plans = loaded.setdefault(tally, ({}, {}))
    force_with(None)


def clocks() -> str:
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,clocks.mem,power.draw,temperature.gpu",
                               "--format=csv,noheader"], capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        return f"(nvidia-smi: {exc})"


def quartiles(xs) -> str:
    q = statistics.quantiles(xs, n=4)
    return f"{q[0] * 1e3:.1f}/{statistics.median(xs) * 1e3:.1f}/{q[2] * 1e3:.1f}"


def counters_array():
    """The split-K counter words of the current stream (a tsjit DeviceArray of Int32)."""
    from tsjit.ops import matmul_plan
    return matmul_plan.WORKSPACE.by_stream[(torch.cuda.current_stream().cuda_stream, False)][1]


def warm_up(script: str, workers: int, options: list, began: float) -> None:
    """Run ``script --warm-index i --warm-workers workers *options`` in ``workers`` processes at once and wait."""
    running = [subprocess.Popen([sys.executable, script, "--warm-index", str(i), "--warm-workers", str(workers)]
                                + options) for i in range(workers)]
    for w in running:
        w.wait()
    print(f"(kernels compiled by {workers} processes in {time.perf_counter() - began:.1f} s)")


def plan_of(M: int, N: int, K: int):
    """The cached plan of the (M, N, K) call."""
    return next(p for p in MM._PLANS.values() if (p.M, p.N, p.K) == (M, N, K))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument("--only", default="", help="comma-separated MxNxK shapes (default: all)")
    parser.add_argument("--heat", type=float, default=4.0, help="seconds of 8192x28672x4096 cuBLAS before the rerun")
    parser.add_argument("--warm-workers", type=int, default=0, help="compile the kernels first in this many processes")
    parser.add_argument("--warm-index", type=int, default=-1, help=argparse.SUPPRESS)
    args = parser.parse_args()
    began = time.perf_counter()
    if args.warm_index >= 0:
        warm(args)
        return
    if args.warm_workers:
        warm_up(__file__, args.warm_workers, ["--only", args.only], began)
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    rng = torch.Generator().manual_seed(0)
    wanted = [tuple(int(v) for v in s.split("x")) for s in args.only.split(",") if s] or SHAPES
    loaded: dict = {}
    build(False, loaded)
    print(f"clocks at start: {clocks()}")
    print("| M x N x K | variant | config | tsjit us q1/med/q3 | cuBLAS us q1/med/q3 | cuBLAS/tsjit (medians) |")
    print("|---|---|---|---|---|---|")
    data = {}
    for (M, N, K) in wanted:
        force_with(None)
        torch.manual_seed(M * N + K)
        a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(N, K, device="cuda", dtype=torch.bfloat16).t()
        ref = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
        c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
        torch.matmul(a, b, out=ref)
        tsjit.ops.matmul(a, b, out=c)
        again = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
        tsjit.ops.matmul(a, b, out=again)
        torch.cuda.synchronize()
        err, same = sampled_error(c, a, b, rng), torch.equal(c, again)
        plan = plan_of(M, N, K)
        config = plan.config.describe().replace(" consumer warpgroup(s)", "wg").replace(" epilogue", "")
        ours_fn = lambda: tsjit.ops.matmul(a, b, out=c)          # noqa: E731  (gemm.py's lambdas)
        theirs_fn = lambda: torch.matmul(a, b, out=ref)           # noqa: E731
        for _ in range(3):
            ours_fn()
            theirs_fn()
        samples = {v: ([], []) for v in ("sweep", "probe", "pre")}
        for _ in range(args.reps):
            samples["sweep"][1].append(timed_ms(theirs_fn, flush))
            samples["sweep"][0].append(timed_ms(ours_fn, flush))
            force_with(None)
            ours_fn()                                             # plans and packs again (full path)
            samples["probe"][1].append(timed_ms(theirs_fn, flush))
            samples["probe"][0].append(timed_ms(ours_fn, flush))
            ours_fn()
            samples["pre"][1].append(timed_ms(theirs_fn, flush))
            samples["pre"][0].append(timed_ms(ours_fn, flush))
        data[(M, N, K)] = (a, b, c, ref)
        for v, (ours, theirs) in samples.items():
            print(f"| {M}x{N}x{K} | {v} | {config} | {quartiles(ours)} | {quartiles(theirs)} | "
                  f"{statistics.median(theirs) / statistics.median(ours):.3f} |", flush=True)
        plan = plan_of(M, N, K)
        cnt = counters_array()
        words = plan.counters
        dirty = int(cnt.numpy()[:words].astype(bool).sum())
        print(f"  {M}x{N}x{K}: rel. err {err:.1e} (64x64 vs fp64), bit-identical rerun {same}; grid {plan.grid} block "
              f"{plan.block} (work units {configs_units(plan)}: one wave {plan.grid[0] >= configs_units(plan)}), stream "
              f"{torch.cuda.current_stream().cuda_stream}, workspace floats {plan.workspace_floats}, counter words "
              f"{words}, nonzero after the rounds: {dirty}")
    # kernels per call (device times)
    from torch.profiler import ProfilerActivity, profile
    for (M, N, K), (a, b, c, ref) in data.items():
        ours_fn = lambda: tsjit.ops.matmul(a, b, out=c)          # noqa: E731
        ours_fn()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(3):
                flush.zero_()
                ours_fn()
            force_with(None)
            for _ in range(3):
                flush.zero_()
                ours_fn()
            for _ in range(2):
                flush.zero_()
                torch.matmul(a, b, out=ref)
            torch.cuda.synchronize()
        kernels = [(e.name, getattr(e, "device_time", None) or getattr(e, "cuda_time", 0.0)) for e in prof.events()
                   if "CUDA" in str(e.device_type)]
        text = ", ".join(f"{n[:24]} {t:.1f}" for n, t in kernels)
        print(f"  profiler {M}x{N}x{K} (3 sweep calls, 3 after clearing the caches, 2 cuBLAS; each after a flush):"
              f" {len(kernels)} device events: {text}")
    # the waits' outcome: the tallying build
    build(True, loaded)
    for (M, N, K), (a, b, c, ref) in data.items():
        for path in ("sweep", "probe"):
            tsjit.ops.matmul(a, b, out=c)
            torch.cuda.synchronize()
            cnt = counters_array()
            cnt.copy_from(numpy.zeros(cnt.shape[0], dtype=numpy.int32))
            n = 10
            for _ in range(n):
                if path == "probe":
                    force_with(None)
                    tsjit.ops.matmul(a, b, out=c)
                flush.zero_()
                tsjit.ops.matmul(a, b, out=c)
            torch.cuda.synchronize()
            host = cnt.numpy()
            plan = plan_of(M, N, K)
            launches = n * (2 if path == "probe" else 1)
            warps = configs_units(plan) // plan.config.splits * plan.config.block_m // 32
            print(f"  tally {M}x{N}x{K} {path}: per launch {host[TALLY] / launches:.2f} resigned warps, "
                  f"{host[TALLY - 1] / launches:.2f} whole-tile sums (of {warps} tile warps x "
                  f"{plan.config.splits} splits)")
            cnt.copy_from(numpy.zeros(cnt.shape[0], dtype=numpy.int32))
    build(False, loaded)
    # the sweep pair after heavy GEMMs
    if args.heat > 0:
        big_a = torch.randn(8192, 4096, device="cuda", dtype=torch.bfloat16)
        big_b = torch.randn(28672, 4096, device="cuda", dtype=torch.bfloat16).t()
        big_c = torch.empty(8192, 28672, device="cuda", dtype=torch.bfloat16)
        t0 = time.perf_counter()
        calls = 0
        while time.perf_counter() - t0 < args.heat:
            for _ in range(20):
                torch.matmul(big_a, big_b, out=big_c)
            torch.cuda.synchronize()
            calls += 20
        print(f"heat: {calls} calls of 8192x28672x4096 in {time.perf_counter() - t0:.1f} s; clocks now {clocks()}")
        del big_a, big_b, big_c
        for (M, N, K), (a, b, c, ref) in data.items():
            ours_fn = lambda: tsjit.ops.matmul(a, b, out=c)          # noqa: E731
            theirs_fn = lambda: torch.matmul(a, b, out=ref)           # noqa: E731
            ours_fn()
            ours, theirs = [], []
            for _ in range(args.reps):
                theirs.append(timed_ms(theirs_fn, flush))
                ours.append(timed_ms(ours_fn, flush))
            print(f"| {M}x{N}x{K} | sweep after heat | | {quartiles(ours)} | {quartiles(theirs)} | "
                  f"{statistics.median(theirs) / statistics.median(ours):.3f} |", flush=True)
        print(f"clocks at the end: {clocks()}")
    print(f"device: {torch.cuda.get_device_name(0)}, torch {torch.__version__}, {time.perf_counter() - began:.1f} s")


def warm(args) -> None:
    """Worker ``--warm-index``: run its share of the shapes once, filling the disk cache."""
    wanted = [tuple(int(v) for v in s.split("x")) for s in args.only.split(",") if s] or SHAPES
    for M, N, K in wanted[args.warm_index::args.warm_workers]:
        a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(N, K, device="cuda", dtype=torch.bfloat16).t()
        tsjit.ops.matmul(a, b, out=torch.empty(M, N, device="cuda", dtype=torch.bfloat16))
    torch.cuda.synchronize()


def configs_units(plan) -> int:
    """The work units (tiles x splits) of ``plan``'s launch."""
    cfg = plan.config
    return configs.ceil_div(plan.P, cfg.block_m) * configs.ceil_div(plan.Q, cfg.block_n) * plan.batch * cfg.splits


if __name__ == "__main__":
    main()
