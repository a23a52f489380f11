"""Issue 15 (helper i15r): GEMMs whose operand rows are 16- but not 128-byte aligned (3000 x 5000 x 1000: 2000-byte
rows), forced configurations with and without the realigning copy, against ``torch.matmul`` in one process.

A variant is ``[pad|padx|pady:]TILE:SCHEDULE[:gG][/REALIGN]``:

* ``TILE:SCHEDULE``: ``128x256:S1`` (cooperative, split-K 1), ``128x256:cluster_m2`` / ``cluster_n2`` (2-CTA
  clusters with multicast, :mod:`tsjit.ops.gemm_cluster`), ``128x256:pingpong-shared``; or ``matmul`` (the
  ``tsjit.ops.matmul`` call with its own heuristic, as ``benchmarks/gemm.py`` times it);
* ``:gG``: the grouped tile order's ``group_m`` (default 8); ``:deep``: the staging of realigned rows
  (:func:`tsjit.ops.realign.realigned_config`: a 4th stage, 128 staged columns) whether or not a copy runs;
  ``:l2_128B`` / ``:l2_256B``: the operand TensorMaps' L2 promotion (``matmul_plan.OPERAND_L2_PROMOTION``);
* ``/REALIGN``: ``tsjit.ops.matmul_plan.REALIGN`` for that plan (``/`` alone: no copy; ``/y``, ``/x``,
  ``/both``); none given: the heuristic's :func:`tsjit.ops.realign.realign_choice`;
* ``pad:`` / ``padx:`` / ``pady:``: both / X's / Y's rows given padded to 2048 bytes (the aligned reference: the
  GEMM without the copy's cost);
* ``merge`` / ``merge:pady`` / ``merge:pad``: the cp.async Merge GEMM of tutorial 10
  (``tsjit/examples/ts_merge_gemm.py``, ``relu(A @ W^T)``: A's 128-row tiles copied by ``cp.async`` 16 bytes per
  thread, W's 256-row tiles by TMA), for what a cp.async loader pays on misaligned rows.

Per shape every variant's launch (the plan's packed launch: the copies, then the GEMM) and ``torch.matmul`` are
timed in rounds (torch first, the others in an order rotated every round, the L2 flushed by a 256 MiB write
before every call, CUDA events, medians; the ratio column is the median over rounds of torch / variant).  Every
output is NaN-poisoned first and checked against float64 on sampled blocks (``gemm_cluster_lib_probe``).  B is
the (N, K) weight passed transposed (gemm.py's NK layout).  Worker processes compile first.

    PYTHONPATH=. python benchmarks/gemm_misaligned_probe.py [--reps 15] [--workers 14] [--shape 3000,5000,1000] \
        [--variants matmul 128x256:cluster_m2/ ...]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import tsjit                                        # noqa: E402
import tsjit.ops                                    # noqa: E402
from tsjit.ops import configs                                    # noqa: E402
from tsjit.ops import realign as misaligned_rows                # noqa: E402
from gemm_cluster_lib_probe import flush_medians, sampled_error, table   # noqa: E402

mm = sys.modules["tsjit.ops.matmul"]
plan_module = sys.modules["tsjit.ops.matmul_plan"]
ORIGINAL_CHOOSE = configs.choose
DEFAULT_VARIANTS = [
    "matmul", "128x256:S1/", "128x256:S1/x", "128x256:S1/both", "128x256:cluster_m2/", "128x256:cluster_m2:deep/",
    "128x256:cluster_m2/x", "128x256:cluster_m2/y", "128x256:cluster_m2/both", "128x256:cluster_n2/",
    "128x256:cluster_n2/y", "128x128:cluster_m2/", "128x128:cluster_m2/x", "128x128:cluster_m2/y",
    "128x128:cluster_n2/", "128x192:S1/", "128x192:S1/y", "128x256:S1:g4/y", "128x256:S1:g16/y",
    "pady:128x256:S1:deep/", "padx:128x256:cluster_m2:deep/", "pady:128x256:cluster_m2:deep/",
    "pad:128x256:S1:deep/", "pad:128x256:cluster_m2:deep/", "merge", "merge:pady", "merge:pad"]


def parse(text: str):
    """(padding, choice or "matmul", (group_m, deep, L2 promotion or None), realign or None) of a variant's text
    (module docstring)."""
    padding = ""
    if text.split(":")[0] in ("pad", "padx", "pady"):
        padding, text = text.split(":", 1)
    realign = None
    if "/" in text:
        text, realign = text.split("/")
    if text == "matmul":
        return padding, "matmul", (8, False, None), realign
    parts = text.split(":")
    bm, bn = (int(x) for x in parts[0].split("x"))
    kind = parts[1]
    promotion = next((p[3:] for p in parts[2:] if p.startswith("l2_")), None)
    group = next((int(p[1:]) for p in parts[2:] if p.startswith("g")), 8), "deep" in parts[2:], promotion
    choice = (bm, bn, int(kind[1:])) if kind.startswith("S") else (bm, bn, 1, kind)
    return padding, choice, group, realign


def force(choice, group) -> None:
    """The planner picks ``choice`` with ``group = (group_m, deep)`` for every problem from now on (None: the
    heuristic)."""
    for cache in (mm._PLANS, mm._FAST, mm._PLAIN, getattr(mm, "_ALLOCATING", {}), getattr(mm, "_PLAIN_ARRAYS", {})):
        cache.clear()
    if choice is None:
        configs.choose = ORIGINAL_CHOOSE
        return

    def forced(problem):
        config = configs.make_config(problem, *choice, group_m=group[0],
                                     estimate_us=configs.estimate(problem, *choice) * 1e6)
        if group[1]:
            config = misaligned_rows.realigned_config(problem, config, "y")
        return config, [(config.estimate_us * 1e-6, *configs.choice_of(config))]
    configs.choose = forced


def operands(M, N, K, padding):
    """(a (M, K), w (N, K)) bf16, seeded; rows padded to a multiple of 1024 elements where ``padding`` says."""
    torch.manual_seed(0)
    a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(N, K, device="cuda", dtype=torch.bfloat16)
    wide = -(-K // 1024) * 1024

    def padded(t):
        out = torch.zeros(t.shape[0], wide, device="cuda", dtype=torch.bfloat16)[:, :K]
        out.copy_(t)
        return out
    if padding in ("pad", "padx"):
        a = padded(a)
    if padding in ("pad", "pady"):
        w = padded(w)
    return a, w


def call(a, w, choice, group, realign):
    """(callable, output, description): the packed launch of ``tsjit.ops.matmul(a, w.t(), out=c)`` planned with
    ``choice`` and ``realign`` (``choice`` "matmul": the call itself, its heuristic)."""
    from tsjit.ops.operands import operand
    c = torch.full((a.shape[0], w.shape[0]), float("nan"), device="cuda", dtype=torch.bfloat16)
    b = w.t()
    plan_module.REALIGN = realign
    promotion = plan_module.OPERAND_L2_PROMOTION
    if group[2]:
        plan_module.OPERAND_L2_PROMOTION = group[2]
    try:
        if choice == "matmul":
            force(None, None)
            tsjit.ops.matmul(a, b, out=c)
            text = tsjit.ops.matmul.explain(a, b, out=c)
            desc = next(line for line in text.splitlines() if line.startswith("config:"))[8:].split(" (estimate")[0]
            if "realign:" in text:
                desc += "; realign " + text.split("realign: ")[1].split(" copied")[0]
            return (lambda: tsjit.ops.matmul(a, b, out=c)), c, "tsjit.ops.matmul: " + desc
        force(choice, group)
        tsjit.ops.matmul(a, b, out=c)            # plans (and compiles) under the forced choice
        plan = next(iter(mm._PLANS.values()))
    finally:
        force(None, None)
        plan_module.REALIGN = None
    s = torch.cuda.current_stream().cuda_stream
    try:                                         # the TensorMaps are encoded when the launch is bound
        launch = plan.run(operand(a, "a", (2,)), operand(b, "b", (2,)), operand(c, "out", (2,)), None, None, 1.0,
                          0.0, s)
    finally:
        plan_module.OPERAND_L2_PROMOTION = promotion
    desc = plan.config.describe() + (f"; realign {plan.realign}" if plan.realign else "; no copy")
    return (lambda: launch(s)), c, desc


def merge_call(a, w):
    """(callable, output, description) of tutorial 10's Merge GEMM ``relu(a @ w^T)`` on torch's stream."""
    from tsjit.examples.ts_merge_gemm import merge_gemm_launcher
    from tsjit.runtime.arrays import DeviceArray

    def device(t):
        return DeviceArray(tuple(t.shape), tsjit.BFloat16, strides=tuple(t.stride()), data_ptr=t.data_ptr())
    c = torch.full((a.shape[0], w.shape[0]), float("nan"), device="cuda", dtype=torch.bfloat16)
    fn = merge_gemm_launcher(device(a), device(w), device(c), stream=torch.cuda.current_stream().cuda_stream)
    fn()
    return fn, c, "tutorial 10 Merge GEMM 128x256, A by cp.async, W by TMA, 4 stages, relu"


def merge_error(c, a, w, rows=64, cols=64) -> float:
    """``sampled_error`` of relu(a @ w^T)."""
    M, N = c.shape
    worst = 0.0
    for r0, c0 in ((0, 0), (M - rows, N - cols), (M // 2 - 7, N // 3 + 5)):
        ref = torch.relu(a[r0:r0 + rows].double() @ w[c0:c0 + cols].double().T)
        got = c[r0:r0 + rows, c0:c0 + cols].double()
        if not torch.isfinite(got).all():
            return float("nan")
        worst = max(worst, ((got - ref).abs().max() / ref.abs().max()).item())
    return worst


def build(M, N, K, variants):
    a0, w0 = operands(M, N, K, "")
    ref = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
    fns, descs, errors = {"torch": lambda: torch.matmul(a0, w0.t(), out=ref)}, {"torch": "cuBLAS"}, {}
    for label in variants:
        if label.startswith("merge"):
            a, w = operands(M, N, K, label.split(":")[1] if ":" in label else "")
            try:
                fn, c, desc = merge_call(a, w)
            except Exception as exc:
                print(f"  {label}: not run ({type(exc).__name__}: {str(exc)[:200]})", flush=True)
                continue
            torch.cuda.synchronize()
            errors[label] = merge_error(c, a, w)
            fns[label], descs[label] = fn, desc
            continue
        padding, choice, group, realign = parse(label)
        a, w = operands(M, N, K, padding)
        try:
            fn, c, desc = call(a, w, choice, group, realign)
        except Exception as exc:                 # an invalid forced choice for this shape: reported, skipped
            print(f"  {M}x{N}x{K} {label}: not run ({type(exc).__name__}: {str(exc)[:200]})", flush=True)
            continue
        torch.cuda.synchronize()
        errors[label] = sampled_error(c, a, w)
        fns[label], descs[label] = fn, desc
    return fns, descs, errors


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--workers", type=int, default=14)
    parser.add_argument("--worker", type=int, default=-1, help=argparse.SUPPRESS)
    parser.add_argument("--shape", nargs="*", default=["3000,5000,1000"])
    parser.add_argument("--variants", nargs="*", default=DEFAULT_VARIANTS)
    args = parser.parse_args()
    shapes = [tuple(int(x) for x in text.split(",")) for text in args.shape]
    if args.worker >= 0:                         # compile this worker's share into the shared disk cache
        jobs = [(shape, label) for shape in shapes for label in args.variants]
        for i, ((M, N, K), label) in enumerate(jobs):
            if i % args.workers == args.worker:
                try:
                    if label.startswith("merge"):
                        merge_call(*operands(M, N, K, label.split(":")[1] if ":" in label else ""))
                        continue
                    padding, choice, group, realign = parse(label)
                    call(*operands(M, N, K, padding), choice, group, realign)
                    torch.cuda.synchronize()
                except Exception as exc:
                    print(f"warm {label}: {type(exc).__name__}: {str(exc)[:200]}", flush=True)
        return
    t0 = time.time()
    if args.workers:
        procs = [subprocess.Popen([sys.executable, __file__, "--worker", str(i)] + sys.argv[1:])
                 for i in range(args.workers)]
        for p in procs:
            p.wait()
    print(f"{torch.cuda.get_device_name(0)}; compiled in {time.time() - t0:.1f} s", flush=True)
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    for M, N, K in shapes:
        fns, descs, errors = build(M, N, K, args.variants)
        print(f"built and checked at {time.time() - t0:.1f} s", flush=True)
        ratios = {}
        table("rounds (torch, then every variant in a rotated order; L2 flushed)", M, N, K,
              flush_medians(fns, flush, args.reps, ratios), descs, errors, ratios)
        print(f"[{time.time() - t0:.1f} s]", flush=True)


if __name__ == "__main__":
    main()
