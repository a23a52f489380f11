"""Issue 15 probe (2026-12-02, helper i15b): where the split-K shapes' time goes.  Forced configurations of
``tsjit.ops.matmul`` on the K-heavy shapes and on reference shapes that give every CTA the same work without the
split-K reduction (same tile, CTA count and K tiles per CTA: the difference is the reducer's cost); each output
NaN-poisoned and checked against float64 on a sampled 64 x 64 block, then timed interleaved with cuBLAS
(``torch.matmul``), L2 flushed before every call, medians of ``--reps``.  B is the (N, K) transpose.

    cd benchmarks && python gemm_splitk_probe.py [--reps 15] [--tag TEXT]
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
import time

import torch

import tsjit
import tsjit.ops
from tsjit.ops import configs

from gemm import interleaved_medians                    # benchmarks/gemm.py (this folder is on sys.path)
from gemm_configs_probe import force_with              # clears the plan and launch caches
from gemm_session_probe import sampled_error

mm = sys.modules["tsjit.ops.matmul"]

# (M, N, K) -> [(label, None (the heuristic) or (BM, BN, splits, stages, epilogue or None))]
SHAPES = {
    (256, 256, 16384): [("heuristic", None), ("64x64 S16", (64, 64, 16, 11, None)),
                        ("128x64 S16", (128, 64, 16, 8, None))],
    (256, 2048, 2048): [("ref: 64x64 S1 direct, 128 CTAs x 32 K tiles", (64, 64, 1, 11, "direct"))],
    (384, 384, 16384): [("heuristic", None), ("64x128 S7", (64, 128, 7, 8, None))],
    (384, 2688, 2368): [("ref: 128x64 S1 direct, 126 CTAs x 37 K tiles", (128, 64, 1, 8, "direct"))],
    (512, 512, 8192): [("heuristic", None), ("128x128 S8", (128, 128, 8, 7, None))],
    (512, 2048, 2048): [("ref: 128x64 S1 direct, 128 CTAs x 32 K tiles", (128, 64, 1, 8, "direct"))],
    (512, 512, 32768): [("heuristic", None)],
}


#: the 53-shape sweep's shapes whose heuristic splits K (benchmarks/gemm.py, 2026-12-02): heuristic rows only
SWEEP_SPLIT = {shape: [("heuristic", None)] for shape in (
    (256, 256, 16384), (384, 384, 16384), (512, 512, 8192), (512, 512, 32768), (256, 4096, 4096), (256, 4096, 14336),
    (128, 4096, 14336), (64, 4096, 4096), (64, 4096, 14336), (16, 4096, 4096), (16, 4096, 14336), (1, 4096, 4096),
    (1, 4096, 14336))}


def forced(problem, choice):
    bm, bn, splits, stages, epilogue = choice
    config = dataclasses.replace(configs.make_config(problem, bm, bn, splits), stages=stages)
    if epilogue is not None:
        config = dataclasses.replace(config, epilogue=epilogue, staged_columns=64)
    return config


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--tag", default="")
    parser.add_argument("--no-refs", action="store_true", help="skip the reference (no split-K) shapes")
    parser.add_argument("--sweep", action="store_true", help="the sweep's split-K shapes (heuristic rows) instead")
    parser.add_argument("--heuristic-only", action="store_true", help="only the heuristic rows and the references")
    parser.add_argument("--seconds", type=float, default=14.0, help="stop after the shape running at this time")
    args = parser.parse_args()
    began = time.perf_counter()
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    rng = torch.Generator().manual_seed(0)
    print(f"\n{args.tag}\n| M x N x K | variant | config | rel. err | digest | tsjit us | cuBLAS us | cuBLAS/tsjit |")
    print("|---|---|---|---|---|---|---|---|")
    for (M, N, K), variants in (SWEEP_SPLIT if args.sweep else SHAPES).items():
        torch.manual_seed(M * N + K)                 # the same operands in every process: the outputs' digests compare
        a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(N, K, device="cuda", dtype=torch.bfloat16).t()
        ref = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
        for label, choice in variants:
            if args.no_refs and label.startswith("ref:"):
                continue
            if args.heuristic_only and not (label == "heuristic" or label.startswith("ref:")):
                continue
            force_with(None if choice is None else (lambda problem, c=choice: forced(problem, c)))
            out = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
            tsjit.ops.matmul(a, b, out=out)
            torch.cuda.synchronize()
            err = sampled_error(out, a, b, rng)
            again = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
            tsjit.ops.matmul(a, b, out=again)
            same = torch.equal(out, again)
            digest = int(out.view(torch.int16).to(torch.int64).mul_(torch.arange(1, N + 1, device="cuda")).sum())
            config = next(iter(mm._PLANS.values())).config.describe()
            if not (err < 1e-2 and same):
                print(f"| {M}x{N}x{K} | {label} | {config} | CHECK FAILED {err:.1e} same={same} | | | |", flush=True)
                continue
            t_ours, t_theirs = interleaved_medians(lambda: tsjit.ops.matmul(a, b, out=out),
                                                   lambda: torch.matmul(a, b, out=ref), flush, args.reps)
            print(f"| {M}x{N}x{K} | {label} | {config} | {err:.1e} | {digest} | {t_ours * 1e3:.1f} | {t_theirs * 1e3:.1f} | "
                  f"{t_theirs / t_ours:.3f} |", flush=True)
        if time.perf_counter() - began > args.seconds:
            print("(stopped: time)")
            break
    force_with(None)
    print(f"device: {torch.cuda.get_device_name(0)}, torch {torch.__version__}, {time.perf_counter() - began:.1f} s")


if __name__ == "__main__":
    main()
