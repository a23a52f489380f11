"""Issue 15 probe (2026-12-03, helper i15f): the split-K reducer of ``tsjit.ops.matmul`` at the K-heavy shapes,
four reducers timed round by round in one process, each round interleaved with cuBLAS (``torch.matmul``):

* ``main``: main 113fc8f's reducer (copied below): the last warp of a tile reads all S partials through registers;
* ``sliced-nowait``: :func:`tsjit.ops.gemm_splitk.reduce_split_k` with ``SPLIT_WAIT_CYCLES = 0``: every split
  leaves its slice to the last one, which sums the S slices one after the other (what a launch of several waves
  does);
* ``sliced-ldrelaxed``: the waits poll with relaxed loads (``ld.relaxed.sys``) instead of atomic adds of 0;
* ``sliced``: the landed reducer: the splits of a tile sum a slice of its columns each (split ``s`` the 8-column
  chunks ``[s C / S, (s + 1) C / S)``), the last one also those of splits that stopped waiting.

Every output is NaN-poisoned and checked against float64 on a sampled 64 x 64 block and against a rerun
(bit-identical), then timed (CUDA events, L2 flushed before every call, medians of ``--reps`` rounds).  B is the
(N, K) transpose.  Compiles every variant (``TSJIT_DISABLE_CACHE=1`` is set: the variants share a disk-cache key).

    cd benchmarks && python gemm_splitk_reducer_probe.py [--reps 15] [--only 384x384x16384] [--variants main,sliced]
        [--all-variants-at 384x384x16384]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

os.environ["TSJIT_DISABLE_CACHE"] = "1"

import torch

import tsjit
import tsjit.ops
from tsjit.lang.epilogue import store_fragment_global
from tsjit.lang.fragment import Fragment
from tsjit import wgmma
from tsjit.ops import gemm_program, gemm_splitk

from gemm import timed_ms                               # benchmarks/gemm.py (this folder is on sys.path)
from gemm_configs_probe import force_with              # clears the plan and launch caches
from gemm_session_probe import sampled_error

SHAPES = [(384, 384, 16384), (512, 512, 8192), (256, 256, 16384), (512, 512, 32768)]
LANDED = gemm_program.reduce_split_k
WAIT = gemm_splitk.SPLIT_WAIT_CYCLES


@tsjit.func
def main_reduce_split_k(acc, out, workspace, counters, tile, split, splits, units, fused, operands, batch, row0,
                        col0, rows, cols, BM: tsjit.Constexpr[int], BN: tsjit.Constexpr[int]):
    """main 113fc8f's reducer: the last warp of a tile sums every partial (``gemm_splitk.sum_tile``, main's passes,
    moved there); ``units`` unused."""
    threads = gemm_splitk.WARPGROUP * (BM // 64)
    thread = tsjit.thread_idx().x - gemm_splitk.WARPGROUP      # 0 .. threads - 1 over the MMA warpgroups
    chunks = BN // 8                                           # float4 chunks per thread
    gemm_splitk.publish_partial(acc, workspace, tile, split, splits, BM, BN)
    counter = tile * (threads // 32) + thread // 32
    arrived = 0
    if tsjit.lane_idx() == 0:
        arrived = tsjit.atomic_add(counters.ptr + counter, 1)
    arrived = tsjit.shuffle(arrived, 0)
    if arrived == splits - 1:
        tsjit.threadfence()
        if tsjit.lane_idx() == 0:
            counters[counter] = 0                              # ready for the next launch
        first = (tile * splits * chunks) * threads + thread
        gemm_splitk.sum_tile(workspace, first, splits, out, fused, operands, batch, row0, col0, rows, cols,
                             thread % gemm_splitk.WARPGROUP, BM, BN)


POLL = gemm_splitk.poll_word


def poll_relaxed(word):
    """The counter word by a relaxed load (``Pointer.load(volatile=True)``: ``ld.relaxed.sys``)."""
    return word.load(volatile=True)


#: name -> (reducer, SPLIT_WAIT_CYCLES, how the wait polls)
VARIANTS = {"main": (main_reduce_split_k, WAIT, POLL), "sliced": (LANDED, WAIT, POLL),
            "sliced-nowait": (LANDED, 0, POLL), "sliced-ldrelaxed": (LANDED, WAIT, poll_relaxed)}


def use(variant, loaded):
    """Make ``tsjit.ops.matmul`` launch ``variant``'s reducer (its compiled kernels kept in ``loaded``)."""
    reducer, wait, poll = VARIANTS[variant]
    gemm_program.reduce_split_k = reducer
    gemm_splitk.SPLIT_WAIT_CYCLES = wait
    gemm_splitk.poll_word = poll
    kernel = gemm_program.gemm_program
    kernel._loaded, kernel._plans = loaded.setdefault(variant, ({}, {}))   # compiled kernels, launch plans
    force_with(None)                                   # new plans: their launches bind this variant's kernel


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--only", default="", help="comma-separated MxNxK shapes (default: all)")
    parser.add_argument("--variants", default="main,sliced", help="comma-separated names of VARIANTS")
    parser.add_argument("--all-variants-at", default="", help="comma-separated shapes that time every variant")
    parser.add_argument("--seconds", type=float, default=300.0, help="stop after the shape running at this time")
    args = parser.parse_args()
    began = time.perf_counter()
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    rng = torch.Generator().manual_seed(0)
    wanted = [tuple(int(v) for v in s.split("x")) for s in args.only.split(",") if s] or SHAPES
    chosen = [v for v in args.variants.split(",") if v]
    everywhere = [tuple(int(v) for v in s.split("x")) for s in args.all_variants_at.split(",") if s]
    unknown = [v for v in chosen if v not in VARIANTS]
    if unknown:
        raise SystemExit(f"unknown variants {unknown}; known: {list(VARIANTS)}")
    loaded = {}
    print("| M x N x K | reducer | config | rel. err | bit-identical | tsjit us | cuBLAS us | cuBLAS/tsjit |")
    print("|---|---|---|---|---|---|---|---|")
    for (M, N, K) in wanted:
        names = list(VARIANTS) if (M, N, K) in everywhere else chosen
        torch.manual_seed(M * N + K)
        a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(N, K, device="cuda", dtype=torch.bfloat16).t()
        ref = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
        out = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
        checks, ours, theirs, config = {}, {v: [] for v in names}, {v: [] for v in names}, ""
        for variant in names:
            use(variant, loaded)
            first = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
            tsjit.ops.matmul(a, b, out=first)
            again = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
            tsjit.ops.matmul(a, b, out=again)
            torch.cuda.synchronize()
            config = next(iter(sys.modules["tsjit.ops.matmul"]._PLANS.values())).config.describe()
            checks[variant] = (sampled_error(first, a, b, rng), torch.equal(first, again))
        for _ in range(args.reps):
            for variant in names:
                use(variant, loaded)
                tsjit.ops.matmul(a, b, out=out)        # builds the plan outside the timing
                theirs[variant].append(timed_ms(lambda: torch.matmul(a, b, out=ref), flush))
                ours[variant].append(timed_ms(lambda: tsjit.ops.matmul(a, b, out=out), flush))
        for variant in names:
            err, same = checks[variant]
            t_ours, t_theirs = statistics.median(ours[variant]), statistics.median(theirs[variant])
            print(f"| {M}x{N}x{K} | {variant} | {config} | {err:.1e} | {same} | {t_ours * 1e3:.1f} | "
                  f"{t_theirs * 1e3:.1f} | {t_theirs / t_ours:.3f} |", flush=True)
        if time.perf_counter() - began > args.seconds:
            print("(stopped: time)")
            break
    use("sliced", loaded)
    print(f"device: {torch.cuda.get_device_name(0)}, torch {torch.__version__}, {time.perf_counter() - began:.1f} s")


if __name__ == "__main__":
    main()
