"""Issue 15 (helper i15k): 2-CTA clusters in the library GEMM (``tsjit.ops.matmul``), and why the tutorial GEMM
(``tsjit/examples/gemm.py``) measured 1.07x cuBLAS at 4096^3 where the library measured 1.00x.

One process (worker processes compile first, filling the shared disk cache):

1. ``--method``: the tutorial GEMM (single CTAs and ``cluster_m=2``), the library's heuristic and forced
   configurations and ``torch.matmul`` timed in turns with both methods: ``flush`` is ``benchmarks/gemm.py``'s
   (one call per sample, the L2 flushed by a 256 MiB write before each, torch first in each round) and
   ``inner5`` is ``benchmarks/timing.py``'s ``interleaved_time_ms`` (5 back-to-back calls per sample, no flush,
   as ``gemm_cluster_probe.py`` measured);
2. ``--shapes``: per shape ``torch.matmul``, the heuristic (``matmul``: the ``tsjit.ops.matmul`` call) and forced
   configurations (``BMxBN:schedule``, e.g. ``128x256:cluster_m2``, ``128x128:S1``), ``flush`` method (one round
   of all variants at a time) or, ``--paired``, gemm.py's own order (torch and one variant per round).

Every output is NaN-poisoned first and checked against float64 on sampled blocks; B is a (N, K) weight passed
transposed (gemm.py's NK layout).  Medians of ``--reps``; ratios are torch time / ours.

    PYTHONPATH=. python benchmarks/gemm_cluster_lib_probe.py [--reps 15] [--workers 14] \
        [--method 4096,4096,4096] [--shapes 512,28672,4096 ...] [--variants heuristic 128x256:cluster_m2 ...]
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import tsjit                                        # noqa: E402
import tsjit.ops                                    # noqa: E402
from tsjit.examples import gemm as tutorial         # noqa: E402
from tsjit.ops import configs                       # noqa: E402
from gemm import timed_ms                           # noqa: E402  (benchmarks/gemm.py)
from timing import interleaved_time_ms              # noqa: E402  (benchmarks/timing.py)

mm = sys.modules["tsjit.ops.matmul"]
ORIGINAL_CHOOSE = configs.choose
DEFAULT_VARIANTS = ["matmul", "64x64:S1", "128x256:S1", "128x256:cluster_m2", "128x256:cluster_n2", "128x128:S1",
                    "128x128:cluster_m2", "128x128:cluster_n2"]


def parse_variant(text: str):
    """``"heuristic"`` -> None; ``"128x256:cluster_m2"`` -> (128, 256, 1, "cluster_m2"); ``"64x64:S2"`` ->
    (64, 64, 2)."""
    if text in ("heuristic", "matmul"):
        return None if text == "heuristic" else "matmul"
    tile, kind = text.split(":")
    bm, bn = (int(x) for x in tile.split("x"))
    return (bm, bn, int(kind[1:])) if kind.startswith("S") else (bm, bn, 1, kind)


def force(choice) -> None:
    """The planner picks ``choice`` (a candidate tuple; None: the heuristic) for every problem from now on."""
    for cache in (mm._PLANS, mm._FAST, mm._PLAIN, getattr(mm, "_ALLOCATING", {}), getattr(mm, "_PLAIN_ARRAYS", {})):
        cache.clear()
    if choice is None:
        configs.choose = ORIGINAL_CHOOSE
        return

    def forced(problem):
        config = configs.make_config(problem, *choice, estimate_us=configs.estimate(problem, *choice) * 1e6)
        return config, [(config.estimate_us * 1e-6, *configs.choice_of(config))]
    configs.choose = forced


def operands(M, N, K):
    torch.manual_seed(0)
    a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(N, K, device="cuda", dtype=torch.bfloat16)
    return a, w


def sampled_error(c, a, w, rows=64, cols=64) -> float:
    """Max |C - A W^T| / max |ref| over sampled blocks (float64); NaN if any sampled output is unwritten."""
    M, N = c.shape
    worst = 0.0
    for r0, c0 in ((0, 0), (M - rows, N - cols), (M // 2 - 7, N // 3 + 5), (M // 3, N - 200)):
        r0, c0 = min(max(0, r0), max(0, M - rows)), min(max(0, c0), max(0, N - cols))
        ref = a[r0:r0 + rows].double() @ w[c0:c0 + cols].double().T
        got = c[r0:r0 + rows, c0:c0 + cols].double()
        if not torch.isfinite(got).all():
            return float("nan")
        worst = max(worst, ((got - ref).abs().max() / ref.abs().max()).item())
    return worst


def library_call(a, w, choice):
    """(callable, output, description) of ``tsjit.ops.matmul(a, w.t(), out=c)`` planned with ``choice``: the
    callable is the plan's packed launch (what matmul's fast path calls).  ``choice`` "matmul": the
    ``tsjit.ops.matmul`` call itself (the heuristic, as benchmarks/gemm.py times it)."""
    from tsjit.ops.operands import operand
    c = torch.full((a.shape[0], w.shape[0]), float("nan"), device="cuda", dtype=torch.bfloat16)
    b = w.t()
    if choice == "matmul":
        force(None)
        tsjit.ops.matmul(a, b, out=c)
        text = tsjit.ops.matmul.explain(a, b, out=c)
        desc = next(line for line in text.splitlines() if line.startswith("config:"))[8:].split(" (estimate")[0]
        return (lambda: tsjit.ops.matmul(a, b, out=c)), c, "tsjit.ops.matmul: " + desc
    force(choice)
    tsjit.ops.matmul(a, b, out=c)                 # plans (and compiles) under the forced choice
    plan = next(iter(mm._PLANS.values()))
    force(None)
    s = torch.cuda.current_stream().cuda_stream
    launch = plan.run(operand(a, "a", (2,)), operand(b, "b", (2,)), operand(c, "out", (2,)), None, None, 1.0, 0.0, s)
    return (lambda: launch(s)), c, plan.config.describe()


def tutorial_call(a, w, cluster_m):
    c = torch.full((a.shape[0], w.shape[0]), float("nan"), device="cuda", dtype=torch.bfloat16)
    fn = tutorial.gemm_launcher(a, w, c, block_n=256, stages=4, cluster_m=cluster_m)
    fn()
    return fn, c, f"tutorial 128x256 4 stages cluster_m={cluster_m}"


def build(M, N, K, variants, with_tutorial=False):
    a, w = operands(M, N, K)
    ref = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
    fns, descs, errors = {"torch": lambda: torch.matmul(a, w.t(), out=ref)}, {"torch": "cuBLAS"}, {}
    entries = [(v, lambda v=v: library_call(a, w, parse_variant(v))) for v in variants]
    if with_tutorial:
        entries += [(f"tutorial_c{c}", lambda c=c: tutorial_call(a, w, c)) for c in (1, 2)]
    for label, make in entries:
        if label.endswith("cluster_m2") and M <= int(label.split("x")[0]):
            continue                              # one row of tiles: a vertical pair has nothing to share
        try:
            fn, c, desc = make()
        except Exception as exc:                  # an invalid forced choice for this shape: reported, skipped
            print(f"  {M}x{N}x{K} {label}: not run ({type(exc).__name__}: {str(exc)[:160]})")
            continue
        torch.cuda.synchronize()
        errors[label] = sampled_error(c, a, w)
        fns[label], descs[label] = fn, desc
    return fns, descs, errors


def flush_medians(fns, flush, reps, ratios=None):
    """One call of each callable per round (torch first, the others in an order rotated every round), the L2
    flushed before each; medians.  ``ratios`` (a dict): filled with the median over rounds of each round's
    torch time / variant time (robust to clock drift across the rounds)."""
    for fn in fns.values():
        for _ in range(3):
            fn()
    samples = {name: [] for name in fns}
    others = [name for name in fns if name != "torch"]
    for r in range(reps):
        samples["torch"].append(timed_ms(fns["torch"], flush))
        for name in others[r % len(others):] + others[:r % len(others)]:
            samples[name].append(timed_ms(fns[name], flush))
    if ratios is not None:
        for name in others:
            ratios[name] = statistics.median(t / v for t, v in zip(samples["torch"], samples[name]))
    return {name: statistics.median(v) for name, v in samples.items()}


def paired_medians(fns, flush, reps):
    """benchmarks/gemm.py's method exactly: for each variant in turn, ``reps`` rounds of (torch, variant), one
    call each, the L2 flushed before each; torch's time is the median over all its samples."""
    for fn in fns.values():
        for _ in range(3):
            fn()
    out, theirs = {}, []
    for name, fn in fns.items():
        if name == "torch":
            continue
        ours = []
        for _ in range(reps):
            theirs.append(timed_ms(fns["torch"], flush))
            ours.append(timed_ms(fn, flush))
        out[name] = statistics.median(ours)
    return {"torch": statistics.median(theirs), **out}


def table(title, M, N, K, times, descs, errors, ratios=None):
    flops = 2.0 * M * N * K
    print(f"\n{title} {M}x{N}x{K}: torch {times['torch'] * 1e3:.1f} us ({flops / times['torch'] / 1e9:.0f} TFLOP/s)")
    print("| variant | config | us | TFLOP/s | torch / variant | median per-round ratio | sampled rel err |")
    print("|---|---|---|---|---|---|---|")
    for name, t in times.items():
        if name == "torch":
            continue
        err = errors[name]
        bad = "" if err < 2e-2 else " **CHECK FAILED**"
        per_round = f"{ratios[name]:.3f}" if ratios else ""
        print(f"| {name} | {descs[name]} | {t * 1e3:.1f} | {flops / t / 1e9:.0f} | {times['torch'] / t:.3f} | "
              f"{per_round} | {err:.1e}{bad} |", flush=True)


def warm(jobs, index, count):
    """Worker ``index`` of ``count``: run its jobs once (compiling into the shared disk cache); the jobs of one
    variant go to one worker (the same kernels at every shape; the heuristic's differ by shape)."""
    variants = sorted({v for _, v in jobs})
    for shape, variant in jobs:
        slot = variants.index(variant) if variant != "heuristic" else len(variants) + hash(shape)
        if slot % count != index:
            continue
        try:
            a, w = operands(*shape)
            if variant.startswith("tutorial_c"):
                tutorial_call(a, w, int(variant[-1]))
            else:
                library_call(a, w, parse_variant(variant))
            torch.cuda.synchronize()
        except Exception as exc:
            print(f"warm {shape} {variant}: {type(exc).__name__}: {str(exc)[:200]}", flush=True)


def shape_of(text):
    return tuple(int(x) for x in text.split(","))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--workers", type=int, default=14)
    parser.add_argument("--worker", type=int, default=-1, help=argparse.SUPPRESS)
    parser.add_argument("--method", nargs="*", default=["4096,4096,4096"])
    parser.add_argument("--method-variants", nargs="*", default=["matmul", "heuristic", "128x256:cluster_m2"])
    parser.add_argument("--shapes", nargs="*", default=[])
    parser.add_argument("--variants", nargs="*", default=DEFAULT_VARIANTS)
    parser.add_argument("--paired", action="store_true", help="--shapes timed as gemm.py does: (torch, variant) "
                        "pairs, one variant after the other (else one round of all variants at a time)")
    args = parser.parse_args()
    jobs = [(shape_of(s), v) for s in args.method for v in args.method_variants + ["tutorial_c1", "tutorial_c2"]]
    jobs += [(shape_of(s), v) for s in args.shapes for v in args.variants]
    if args.worker >= 0:
        warm(jobs, args.worker, args.workers)
        return
    t0 = time.time()
    if args.workers and args.method + args.shapes:
        procs = [subprocess.Popen([sys.executable, __file__, "--worker", str(i)] + sys.argv[1:]) for i in
                 range(args.workers)]
        for p in procs:
            p.wait()
    print(f"{torch.cuda.get_device_name(0)}; compiled in {time.time() - t0:.1f} s", flush=True)
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    for text in args.method:
        M, N, K = shape_of(text)
        fns, descs, errors = build(M, N, K, args.method_variants, with_tutorial=True)
        table("method flush (gemm.py: one call, L2 flushed)", M, N, K, flush_medians(fns, flush, args.reps), descs,
              errors)
        table("method inner5 (timing.py: 5 calls back to back, no flush)", M, N, K,
              interleaved_time_ms(fns, reps=args.reps), descs, errors)
        print(f"[{time.time() - t0:.1f} s]", flush=True)
    for text in args.shapes:
        M, N, K = shape_of(text)
        fns, descs, errors = build(M, N, K, args.variants)
        if args.paired:
            table("paired (gemm.py: torch, variant per round, L2 flushed)", M, N, K,
                  paired_medians(fns, flush, args.reps), descs, errors)
        else:
            ratios = {}
            table("rounds (torch, then every variant in a rotated order; L2 flushed)", M, N, K,
                  flush_medians(fns, flush, args.reps, ratios), descs, errors, ratios)
        print(f"[{time.time() - t0:.1f} s]", flush=True)


if __name__ == "__main__":
    main()
