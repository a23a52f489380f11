"""Issue 15 probe (2026-12-03, helper i15x): two cheaper orderings of the split-K reducer's L2 protocol
(:mod:`tsjit.ops.gemm_splitk`), each a compile-time knob, timed round by round in one process against the landed
reducer, each call followed by a cuBLAS call (``torch.matmul``), L2 flushed before every call (``gemm.timed_ms``),
the variants in an order and its reverse every round (:func:`rounds`):

* ``landed``: ``FENCE = "sc"``, ``FINISH_EARLY = False``;
* ``acqrel``: the fences are ``fence.acq_rel.gpu`` instead of ``fence.sc.gpu``;
* ``early``: each split adds its FINISHED count right after its last use of the counter word, before summing;
* ``both``.

Every variant's output is NaN-poisoned, checked against float64 (a sampled 64 x 64 block) and against a rerun
(bit-identical).  The variants are compiled first by ``--warm-workers`` processes, each variant into a disk cache of
its own (the knobs are tsjit module globals, not part of the cache key).  With ``--heat S`` the rounds are repeated
after S seconds of 8192 x 28672 x 4096 cuBLAS GEMMs (the clock-throttled state the sweep measures these shapes in).

    cd benchmarks && python gemm_splitk_fence_probe.py [--reps 25] [--only 384x384x16384] [--warm-workers 12] [--heat 2]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

import torch

import tsjit
import tsjit.ops
from tsjit.ops import gemm_program, gemm_splitk

from gemm import timed_ms                               # benchmarks/gemm.py (this folder is on sys.path)
from gemm_configs_probe import force_with              # clears the plan and launch caches
from gemm_session_probe import sampled_error
from gemm_splitk_sweep_probe import clocks, quartiles, warm_up

SHAPES = [(384, 384, 16384), (512, 512, 8192), (256, 256, 16384)]
#: name -> (FENCE, FINISH_EARLY)
VARIANTS = {"landed": ("sc", False), "acqrel": ("acq_rel", False), "early": ("sc", True), "both": ("acq_rel", True)}
MM = sys.modules["tsjit.ops.matmul"]


def use(variant: str, root: str, loaded: dict) -> None:
    """Make ``tsjit.ops.matmul`` launch ``variant``'s reducer: its knobs, its disk cache, its compiled kernels."""
    gemm_splitk.FENCE, gemm_splitk.FINISH_EARLY = VARIANTS[variant]
    os.environ["TSJIT_CACHE_DIR"] = os.path.join(root, variant)
    kernel = gemm_program.gemm_program
    kernel._loaded, kernel._plans = loaded.setdefault(variant, ({}, {}))
    force_with(None)


def shapes_of(text: str):
    return [tuple(int(v) for v in s.split("x")) for s in text.split(",") if s] or SHAPES


def warm(args) -> None:
    """Worker ``--warm-index``: compile its share of the (variant, shape) kernels into the variants' caches."""
    jobs = [(v, shape) for v in VARIANTS for shape in shapes_of(args.only)]
    for variant, (M, N, K) in jobs[args.warm_index::args.warm_workers]:
        use(variant, args.root, {})
        a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(N, K, device="cuda", dtype=torch.bfloat16).t()
        tsjit.ops.matmul(a, b, out=torch.empty(M, N, device="cuda", dtype=torch.bfloat16))
    torch.cuda.synchronize()


def rounds(data, names, flush, loaded, root, reps: int, label: str) -> None:
    """Per shape, ``reps`` rounds of the variants in the order ``names`` then reversed (each variant once in an
    even and once in an odd position of the round: job 2 saw the position's parity move a variant by 0.8 us); per
    call: the variant's plan made and launched untimed, a synchronize, then our timed call and cuBLAS's."""
    order = list(names) + list(reversed(names))
    for (M, N, K), (a, b, c, ref) in data.items():
        ours, theirs = {v: ([], []) for v in names}, {v: [] for v in names}
        for _ in range(reps):
            for position, variant in enumerate(order):
                use(variant, root, loaded)
                tsjit.ops.matmul(a, b, out=c)                  # plans and packs outside the timing
                torch.cuda.synchronize()
                ours[variant][position % 2].append(timed_ms(lambda: tsjit.ops.matmul(a, b, out=c), flush))
                theirs[variant].append(timed_ms(lambda: torch.matmul(a, b, out=ref), flush))
        base = statistics.median(ours[names[0]][0] + ours[names[0]][1])
        for variant in names:
            both = ours[variant][0] + ours[variant][1]
            t_ours, t_theirs = statistics.median(both), statistics.median(theirs[variant])
            even, odd = (statistics.median(x) * 1e3 for x in ours[variant])
            print(f"| {M}x{N}x{K} | {label} | {variant} | {quartiles(both)} | {even:.1f} / {odd:.1f} | "
                  f"{quartiles(theirs[variant])} | {t_theirs / t_ours:.3f} | {(t_ours - base) * 1e3:+.2f} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=25)
    parser.add_argument("--only", default="", help="comma-separated MxNxK shapes (default: the three K-heavy ones)")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--warm-workers", type=int, default=0)
    parser.add_argument("--heat", type=float, default=0.0)
    parser.add_argument("--warm-index", type=int, default=-1, help=argparse.SUPPRESS)
    parser.add_argument("--root", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.warm_index >= 0:
        warm(args)
        return
    began = time.perf_counter()
    args.root = args.root or tempfile.mkdtemp(prefix="tsjit-fence-")
    names = [v for v in args.variants.split(",") if v]
    if args.warm_workers:
        warm_up(__file__, args.warm_workers, ["--only", args.only, "--root", args.root], began)
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    rng = torch.Generator().manual_seed(0)
    loaded: dict = {}
    print(f"clocks at start: {clocks()}")
    print("| M x N x K | state | reducer | tsjit us q1/med/q3 | tsjit even / odd positions | cuBLAS us q1/med/q3 | "
          "cuBLAS/tsjit | vs landed us |")
    print("|---|---|---|---|---|---|---|---|")
    data, checks = {}, []
    for (M, N, K) in shapes_of(args.only):
        torch.manual_seed(M * N + K)
        a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(N, K, device="cuda", dtype=torch.bfloat16).t()
        ref = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
        c = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
        data[(M, N, K)] = (a, b, c, ref)
        for variant in names:
            use(variant, args.root, loaded)
            first = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
            tsjit.ops.matmul(a, b, out=first)
            again = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
            tsjit.ops.matmul(a, b, out=again)
            torch.cuda.synchronize()
            checks.append(f"{M}x{N}x{K} {variant}: {sampled_error(first, a, b, rng):.1e} "
                          f"{'bit-identical' if torch.equal(first, again) else 'NOT BIT-IDENTICAL'}")
    rounds(data, names, flush, loaded, args.root, args.reps, "cool")
    if args.heat > 0:
        big_a = torch.randn(8192, 4096, device="cuda", dtype=torch.bfloat16)
        big_b = torch.randn(28672, 4096, device="cuda", dtype=torch.bfloat16).t()
        big_c = torch.empty(8192, 28672, device="cuda", dtype=torch.bfloat16)
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < args.heat:
            for _ in range(20):
                torch.matmul(big_a, big_b, out=big_c)
            torch.cuda.synchronize()
        print(f"(heat: {args.heat:.0f} s of 8192x28672x4096; clocks now {clocks()})")
        rounds(data, names, flush, loaded, args.root, args.reps, "after heat")
        print(f"clocks at the end: {clocks()}")
    print("checks (rel. err of a 64x64 block vs float64, rerun): " + "; ".join(checks))
    use("landed", args.root, loaded)
    print(f"device: {torch.cuda.get_device_name(0)}, torch {torch.__version__}, {time.perf_counter() - began:.1f} s")


if __name__ == "__main__":
    main()
