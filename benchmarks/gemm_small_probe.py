"""Issue 15 probe (2026-12-02, helper i15s): the small-M and K-heavy shapes where ``tsjit.ops.matmul`` trails
cuBLAS, each with the heuristic's configuration and forced alternatives (tile, split-K, ring depth, epilogue).
Every output is NaN-poisoned and checked against float64 on a sampled 64 x 64 block and against a rerun (split-K
must be bit-identical), then timed interleaved with cuBLAS (``torch.matmul``), L2 flushed before every call,
medians of ``--reps``.  B is the (N, K) transpose (the nn.Linear weight layout); shapes with M <= 64 are computed
swapped (D = C^T), so a forced (BM, BN) tiles D = (N, M).

    cd benchmarks && python gemm_small_probe.py [--reps 15] [--only 384x384x16384,64x4096x4096] [--seconds 120]
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

H = None    # the heuristic's row
# (M, N, K) -> [(label, None (the heuristic) or (BM, BN, splits, stages or None, epilogue or None))], D coordinates
#: the split-K shapes with shallower rings: the reducer's loads in flight live in the L1 beside the ring's shared memory
#: (the carve-out steps 100 / 132 / 164 / 196 / 228 KB of shared memory leave 156 / 124 / 92 / 60 / 28 KB of L1)
RINGS = {
    (384, 384, 16384): [("128x64 S7 %dst" % n, (128, 64, 7, n, None)) for n in (8, 7, 6, 5)],
    (256, 256, 16384): [("64x64 S8 %dst" % n, (64, 64, 8, n, None)) for n in (11, 9, 8, 6)],
    (512, 512, 8192): [("128x64 S4 %dst" % n, (128, 64, 4, n, None)) for n in (8, 7, 6, 5)],
    (512, 512, 32768): [("128x128 S8 %dst" % n, (128, 128, 8, n, None)) for n in (7, 6, 5, 4)],
    (64, 4096, 4096): [("64x64 S2 %dst" % n, (64, 64, 2, n, None)) for n in (11, 9, 8, 6)],
}
#: the heuristic against the alternatives it was chosen over (order-controlled with --repeat)
CHOICES = {
    (64, 4096, 4096): [("heuristic", H), ("64x64 S1 11st", (64, 64, 1, 11, None)),
                       ("64x64 S2 11st (before)", (64, 64, 2, 11, None))],
    (128, 4096, 4096): [("heuristic", H), ("64x64 S1 11st (before)", (64, 64, 1, 11, None))],
}
SHAPES = {
    (384, 384, 16384): [("heuristic", H), ("128x64 S7 9st", (128, 64, 7, 9, None)),
                        ("128x64 S6", (128, 64, 6, None, None)), ("64x64 S3 11st", (64, 64, 3, 11, None)),
                        ("128x128 S7", (128, 128, 7, None, None)), ("64x128 S5", (64, 128, 5, None, None)),
                        ("128x192 S10", (128, 192, 10, None, None))],
    (256, 256, 16384): [("heuristic", H), ("64x64 S8 13st", (64, 64, 8, 13, None)),
                        ("64x128 S8", (64, 128, 8, None, None)), ("128x64 S8", (128, 64, 8, None, None)),
                        ("128x128 S8", (128, 128, 8, None, None)), ("64x64 S6", (64, 64, 6, 11, None))],
    (512, 512, 8192): [("heuristic", H), ("128x64 S4 9st", (128, 64, 4, 9, None)),
                       ("64x64 S2 11st", (64, 64, 2, 11, None)), ("64x128 S4", (64, 128, 4, None, None)),
                       ("128x128 S4", (128, 128, 4, None, None)), ("128x128 S2", (128, 128, 2, None, None))],
    (512, 512, 32768): [("heuristic", H), ("128x128 S6", (128, 128, 6, None, None)),
                        ("128x64 S4 9st", (128, 64, 4, 9, None)), ("128x256 S8", (128, 256, 8, None, None)),
                        ("128x128 S4", (128, 128, 4, None, None))],
    (128, 4096, 4096): [("heuristic", H), ("64x64 S1 11st", (64, 64, 1, 11, None)), ("128x64 S2", (128, 64, 2, None, None)),
                        ("128x64 S2 9st", (128, 64, 2, 9, None)), ("128x128 S4", (128, 128, 4, None, None)),
                        ("64x128 S2", (64, 128, 2, None, None)), ("128x128 S2", (128, 128, 2, None, None)),
                        ("64x64 S1 13st", (64, 64, 1, 13, None)), ("64x64 S1 12st", (64, 64, 1, 12, None)),
                        ("64x64 S1 13st direct", (64, 64, 1, 13, "direct")), ("128x256 S4", (128, 256, 4, None, None))],
    (64, 4096, 4096): [("heuristic", H), ("64x64 S2 11st", (64, 64, 2, 11, None)), ("128x64 S4", (128, 64, 4, None, None)),
                       ("128x64 S4 9st", (128, 64, 4, 9, None)), ("128x64 S2", (128, 64, 2, None, None)),
                       ("64x64 S2 13st", (64, 64, 2, 13, None)), ("64x64 S1", (64, 64, 1, 11, None)),
                       ("64x64 S1 13st", (64, 64, 1, 13, None)),
                       ("128x64 S3", (128, 64, 3, 9, None))],
    (64, 4096, 14336): [("heuristic", H), ("64x64 S1 13st", (64, 64, 1, 13, None)),
                        ("64x64 S2 13st", (64, 64, 2, 13, None)), ("128x64 S2", (128, 64, 2, None, None))],
    (128, 4096, 14336): [("heuristic", H), ("128x64 S2 8st", (128, 64, 2, 8, None)), ("64x64 S1 13st", (64, 64, 1, 13, None)),
                         ("64x64 S1 12st", (64, 64, 1, 12, None)), ("128x64 S2 9st", (128, 64, 2, 9, None))],
    (16, 4096, 4096): [("heuristic", H), ("64x16 S1", (64, 16, 1, None, None)), ("64x16 S1 16st", (64, 16, 1, 16, None)),
                       ("64x16 S2 16st", (64, 16, 2, 16, None))],
    (1, 4096, 14336): [("heuristic", H), ("64x16 S1", (64, 16, 1, None, None)),
                       ("64x16 S2 16st", (64, 16, 2, 16, None))],
    (64, 14336, 4096): [("heuristic", H), ("64x64 S1 13st", (64, 64, 1, 13, None)),
                        ("128x64 S1 9st direct", (128, 64, 1, 9, "direct"))],
    (64, 28672, 4096): [("heuristic", H), ("128x64 S1 9st direct", (128, 64, 1, 9, "direct")),
                        ("64x64 S1 11st", (64, 64, 1, 11, None)), ("64x64 S1 13st", (64, 64, 1, 13, None)),
                        ("128x64 S1 tma", (128, 64, 1, None, "tma"))],
    (128, 14336, 4096): [("heuristic", H), ("128x128 S1 7st direct", (128, 128, 1, 7, "direct")),
                         ("128x112 S1 direct", (128, 112, 1, None, "direct")), ("128x64 S1 9st direct", (128, 64, 1, 9, "direct")),
                         ("64x128 S1", (64, 128, 1, None, None)), ("128x256 S2", (128, 256, 2, None, None))],
    (512, 4096, 14336): [("heuristic", H), ("128x128 S1 7st direct", (128, 128, 1, 7, "direct")),
                         ("128x256 S2", (128, 256, 2, None, None)), ("128x192 S1", (128, 192, 1, None, None)),
                         ("128x128 S2", (128, 128, 2, None, None))],
}


def forced(problem, choice):
    """The :class:`GemmConfig` of ``choice`` for ``problem``: the heuristic's make_config, then the ring depth and
    the epilogue replaced where given (a direct epilogue stages nothing)."""
    bm, bn, splits, stages, epilogue = choice
    config = configs.make_config(problem, bm, bn, splits)
    if epilogue is not None and epilogue != config.epilogue:
        config = dataclasses.replace(config, epilogue=epilogue, staged_columns=64 if epilogue == "direct" else bn)
        if stages is None:
            staged = config.staged_columns if epilogue == "tma" else 0
            config = dataclasses.replace(config, stages=configs.stages_for(bm, bn, epilogue, staged, 2))
    if stages is not None:
        config = dataclasses.replace(config, stages=stages)
    return config


def parse_shapes(text):
    return [tuple(int(v) for v in item.split("x")) for item in text.split(",") if item]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--tag", default="")
    parser.add_argument("--only", default="", help="comma-separated MxNxK shapes (default: all)")
    parser.add_argument("--heuristic-only", action="store_true")
    parser.add_argument("--rings", action="store_true", help="the ring-depth variants of the split-K shapes (RINGS)")
    parser.add_argument("--choices", action="store_true", help="the heuristic against what it replaced (CHOICES)")
    parser.add_argument("--labels", default="", help="comma-separated substrings: only variants whose label has one")
    parser.add_argument("--repeat", type=int, default=1,
                        help="time each shape's variant list this many times over (order effects: the first row of a "
                             "shape or process can read slow)")
    parser.add_argument("--time-failed", action="store_true",
                        help="time variants whose check fails too (experiments that leave work out)")
    parser.add_argument("--seconds", type=float, default=300.0, help="stop after the shape running at this time")
    args = parser.parse_args()
    began = time.perf_counter()
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    rng = torch.Generator().manual_seed(0)
    wanted = parse_shapes(args.only) if args.only else list(SHAPES)
    print(f"\n{args.tag}\n| M x N x K | variant | config | rel. err | digest | tsjit us | cuBLAS us | cuBLAS/tsjit |")
    print("|---|---|---|---|---|---|---|---|")
    for (M, N, K) in wanted:
        table = RINGS if args.rings else CHOICES if args.choices else SHAPES
        variants = table.get((M, N, K), [("heuristic", H)])
        torch.manual_seed(M * N + K)                 # the same operands in every process: the digests compare
        a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(N, K, device="cuda", dtype=torch.bfloat16).t()
        ref = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
        for label, choice in [v for _ in range(args.repeat) for v in variants]:
            if args.heuristic_only and choice is not None:
                continue
            if args.labels and not any(part in label for part in args.labels.split(",")):
                continue
            try:
                force_with(None if choice is None else (lambda problem, c=choice: forced(problem, c)))
                out = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
                tsjit.ops.matmul(a, b, out=out)
                torch.cuda.synchronize()
            except Exception as exc:                 # a forced configuration that does not build: report, go on
                print(f"| {M}x{N}x{K} | {label} | FAILED: {type(exc).__name__}: {str(exc)[:160]} | | | | | |",
                      flush=True)
                continue
            err = sampled_error(out, a, b, rng)
            again = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
            tsjit.ops.matmul(a, b, out=again)
            same = torch.equal(out, again)
            digest = int(out.view(torch.int16).to(torch.int64).mul_(torch.arange(1, N + 1, device="cuda")).sum())
            config = next(iter(mm._PLANS.values())).config.describe()
            if not (err < 1e-2 and same):
                print(f"| {M}x{N}x{K} | {label} | {config} | CHECK FAILED {err:.1e} same={same} | | | |", flush=True)
                if not args.time_failed:
                    continue
            t_ours, t_theirs = interleaved_medians(lambda: tsjit.ops.matmul(a, b, out=out),
                                                   lambda: torch.matmul(a, b, out=ref), flush, args.reps)
            print(f"| {M}x{N}x{K} | {label} | {config} | {err:.1e} | {digest} | {t_ours * 1e3:.1f} | "
                  f"{t_theirs * 1e3:.1f} | {t_theirs / t_ours:.3f} |", flush=True)
        if time.perf_counter() - began > args.seconds:
            print("(stopped: time)")
            break
    force_with(None)
    print(f"device: {torch.cuda.get_device_name(0)}, torch {torch.__version__}, {time.perf_counter() - began:.1f} s")


if __name__ == "__main__":
    main()
