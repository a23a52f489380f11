"""Forced cooperative configurations of ``tsjit.ops.matmul`` (tile, ring depth, staging width,
tile-group height, operand row strides) against cuBLAS on the weakest shapes of the issue-15 sweep:
the timings interleaved with ``torch.matmul`` in one process, CUDA events, the L2 flushed before every
timed call, medians of ``--reps``; every configuration is checked first against a float64 reference
computed from the same bf16 inputs (every 37th row and the last 130: every M tile), with the output
poisoned (NaN) before the launch.  Kernels are
compiled (and checked) by ``--workers`` processes first, filling the shared disk cache.

    PYTHONPATH=. python benchmarks/gemm_tile_probe.py [--workers 12] [--reps 20] [--only SUBSTRING] [--batch N]

A variant is ``(label, BM, BN, split-K, stages, staged columns, group_m, strides, schedule, l2)`` (BM
None: the heuristic's configuration; schedule "cooperative", "deferred" (:mod:`tsjit.ops.gemm_deferred`) or
a ping-pong one (then its own stages and staging); l2: the operand TensorMaps' L2 promotion,
``tsjit.ops.matmul.OPERAND_L2_PROMOTION``).  ``strides`` "dense" passes A (M, K) and B as the (N, K)
transpose (nn.Linear); "pad" gives both operands rows of ``K`` rounded up to 64 elements (128-byte aligned
rows: TMA boxes start on 128-byte lines), "padout" the same for D's rows, "padall" both: the same logical
matrices.  ``--batch`` picks the variant set (BATCHES: what each GPU batch measured).
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import time

import torch

import tsjit
import tsjit.ops
from tsjit.ops import configs
from tsjit.ops.configs import GemmConfig

from gemm import interleaved_medians  # benchmarks/gemm.py (this script's folder is on sys.path)
from gemm_configs_probe import force_with

mm = sys.modules["tsjit.ops.matmul"]
matmul_plan = sys.modules["tsjit.ops.matmul_plan"]   # its REALIGN / OPERAND_L2_PROMOTION knobs

def heuristic(l2="none", strides="dense"):
    """The heuristic's own configuration, with the operand TensorMaps' L2 promotion ``l2``."""
    return (f"heuristic l2={l2}" + ("" if strides == "dense" else f" {strides}"), None, None, None, None, None,
            None, strides, "cooperative", l2)


def forced(label, bm, bn, splits, stages, staged, group_m=8, strides="dense", schedule="cooperative", l2="none"):
    return (label + ("" if l2 == "none" else f" l2={l2}"), bm, bn, splits, stages, staged, group_m, strides,
            schedule, l2)


PROMOTIONS = ("none", "128B", "256B")
#: batch 1 (17:50 UTC, BENCHMARKS.md): tile width, ring depth, staging width, tile-group height, 128-byte
#: aligned rows, the deferred epilogue
BATCH1 = {(3000, 5000, 1000): [heuristic(), forced("256w S3 st256", 128, 256, 1, 3, 256),
                               forced("256w S4 st128", 128, 256, 1, 4, 128),
                               forced("256w S3 st256 padall", 128, 256, 1, 3, 256, strides="padall"),
                               forced("128w deferred", 128, 128, 1, 6, 128, schedule="deferred")]}
#: batch 2: the operand TensorMaps' L2 promotion on the sweep's weak and strong shapes; ping-pong with a ring
#: per warpgroup (each stage released by its owner alone) against the cooperative program
BATCH2 = {
    (3000, 5000, 1000): [heuristic(l2) for l2 in PROMOTIONS] + [heuristic("none", "padall"),
                                                               heuristic("256B", "padall"),
                                                               forced("128w S6", 128, 128, 1, 6, 128, l2="256B")],
    (2048, 2048, 2048): [heuristic(l2) for l2 in PROMOTIONS] + [forced("256w S4 st128", 128, 256, 1, 4, 128),
                                                               forced("256w S4 st128", 128, 256, 1, 4, 128,
                                                                      l2="256B"),
                                                               forced("pp 128x128", 128, 128, 1, None, None,
                                                                      schedule="pingpong"),
                                                               forced("pp-shared 256x128 lag2", 256, 128, 1, None,
                                                                      None, schedule="pingpong-shared")],
    (4096, 4096, 4096): [heuristic(l2) for l2 in PROMOTIONS] + [
        forced("pp 128x128", 128, 128, 1, None, None, schedule="pingpong"),
        forced("pp-shared 256x128 lag2", 256, 128, 1, None, None, schedule="pingpong-shared")],
    (8192, 8192, 8192): [heuristic("none"), heuristic("256B")],
    (1024, 14336, 4096): [heuristic("none"), heuristic("256B")],
    (512, 28672, 4096): [heuristic("none"), heuristic("256B")],
    (4096, 4096, 512): [heuristic("none"), heuristic("256B")],
    (128, 4096, 4096): [heuristic(l2) for l2 in PROMOTIONS],
    (128, 4096, 14336): [heuristic("none"), heuristic("256B")],
    (16, 4096, 4096): [heuristic("none"), heuristic("256B")],
    (64, 28672, 4096): [heuristic("none"), heuristic("256B")],
    (384, 384, 16384): [heuristic("none"), heuristic("256B"), forced("128x64 K7 S8", 128, 64, 7, 8, 64),
                        forced("128x64 K7 S8", 128, 64, 7, 8, 64, l2="256B")],
    (256, 256, 16384): [heuristic("none"), heuristic("256B")],
    (512, 512, 8192): [heuristic("none"), heuristic("256B")],
}
#: batch 3: ring depth past the 8-stage cap for small tiles (latency-bound K loops)
BATCH3 = {
    (256, 256, 16384): [heuristic()] + [forced(f"64x64 K8 S{n}", 64, 64, 8, n, 64) for n in (8, 11, 14)],
    (128, 4096, 4096): [heuristic()] + [forced(f"64x64 K1 S{n}", 64, 64, 1, n, 64) for n in (8, 11, 13)]
    + [forced("128x64 K2 S9", 128, 64, 2, 9, 64)],
    (384, 384, 16384): [heuristic(), forced("128x64 K7 S9", 128, 64, 7, 9, 64)],
    (512, 512, 8192): [heuristic(), forced("128x64 K4 S9", 128, 64, 4, 9, 64)],
    (16, 4096, 4096): [heuristic()] + [forced(f"64x16 K2 S{n}", 64, 16, 2, n, 64) for n in (12, 16)],
    (1, 4096, 4096): [heuristic(), forced("64x16 K2 S16", 64, 16, 2, 16, 64)],
    (16, 28672, 4096): [heuristic(), forced("128x16 S12", 128, 16, 1, 12, 64)],
    (64, 28672, 4096): [heuristic(), forced("128x64 S9", 128, 64, 1, 9, 64)],
    (128, 4096, 14336): [heuristic(), forced("128x64 K2 S9", 128, 64, 2, 9, 64)],
    (64, 4096, 4096): [heuristic(), forced("64x64 K2 S14", 64, 64, 2, 14, 64)],
}
#: batch 4: 11-stage 64 x 64 rings (the heuristic after batch 3) against 8 on the shapes that take them
BATCH4 = {shape: [heuristic(), forced(f"64x64 K{splits} S8", 64, 64, splits, 8, 64)]
          for shape, splits in (((64, 4096, 4096), 2), ((64, 4096, 14336), 2), ((128, 4096, 4096), 1),
                                ((256, 256, 16384), 8))}
BATCHES = {"1": BATCH1, "2": BATCH2, "3": BATCH3, "4": BATCH4}


def jobs(only="", batch="2"):
    return [(shape, v) for shape, variants in BATCHES[batch].items() for v in variants
            if only in f"{shape} {label(v)}"]


def label(variant) -> str:
    return variant[0]


def force(variant):
    """Make the planner use ``variant`` (its L2 promotion for the operand TensorMaps; BM None: the heuristic)."""
    _, bm, bn, splits, stages, staged, group_m, _, schedule, l2 = variant
    matmul_plan.OPERAND_L2_PROMOTION = l2
    if bm is None:
        force_with(None)
        return

    def make(problem):
        base = configs.make_config(problem, bm, bn, splits, schedule=schedule, group_m=group_m)
        if schedule in configs.PINGPONG_SCHEDULES:
            return base
        return GemmConfig(bm, bn, stages, base.epilogue, staged if base.epilogue == "tma" else 64, splits,
                          group_m=group_m, block_k=base.block_k, schedule=schedule)
    force_with(make)


def operands(shape, variant):
    M, N, K = shape
    torch.manual_seed(0)
    strides = variant[7]
    width = -(-K // 64) * 64 if strides in ("pad", "padall") else K
    a = torch.randn(M, width, device="cuda", dtype=torch.bfloat16)[:, :K]
    b = torch.randn(N, width, device="cuda", dtype=torch.bfloat16)[:, :K].t()
    return a, b


def output(shape, variant, fill=None):
    """D (M, N); "padout" / "padall": rows of N rounded up to 64 elements (128-byte aligned rows)."""
    M, N = shape[0], shape[1]
    strides = "dense" if variant is None else variant[7]
    width = -(-N // 64) * 64 if strides in ("padout", "padall") else N
    out = torch.empty(M, width, device="cuda", dtype=torch.bfloat16)[:, :N]
    if fill is not None:
        out.fill_(fill)
    return out


def check(shape, variant) -> float:
    """Relative error of the forced configuration against float64 (output poisoned with NaN first)."""
    a, b = operands(shape, variant)
    force(variant)
    out = output(shape, variant, float("nan"))
    tsjit.ops.matmul(a, b, out=out)
    # every 37th row and the last 130: every M tile (and the ragged last one) of every configuration
    rows = torch.cat([torch.arange(0, shape[0], 37), torch.arange(max(0, shape[0] - 130), shape[0])]).cuda()
    ref = a[rows].double() @ b.double()
    torch.cuda.synchronize()
    err = (torch.linalg.norm(out[rows].double() - ref) / torch.linalg.norm(ref)).item()
    if not err < 1e-2:
        raise AssertionError(f"relative error {err:.2e} vs float64")
    return err


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=12)
    parser.add_argument("--worker", type=int, default=-1)
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--only", default="")
    parser.add_argument("--batch", choices=sorted(BATCHES), default="2")
    args = parser.parse_args()
    if args.worker >= 0:
        for i, (shape, variant) in enumerate(jobs(args.only, args.batch)):
            if i % args.workers == args.worker:
                try:
                    print(f"checked {shape} {label(variant)}: rel err {check(shape, variant):.2e}", flush=True)
                except Exception as exc:       # report and go on
                    print(f"FAILED {shape} {label(variant)}: {type(exc).__name__}: {exc}", flush=True)
        return
    t0 = time.time()
    procs = [subprocess.Popen([sys.executable, __file__, "--worker", str(i), "--workers", str(args.workers),
                               "--only", args.only, "--batch", args.batch]) for i in range(args.workers)]
    for p in procs:
        p.wait()
    print(f"compiled and checked in {time.time() - t0:.1f} s", flush=True)
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    print("ratio = cuBLAS time / tsjit time (B as the (N, K) transpose)")
    print("| M x N x K | variant | tsjit TFLOP/s | cuBLAS TFLOP/s | ratio | tsjit us | config |")
    print("|---|---|---|---|---|---|---|")
    for shape, variant in jobs(args.only, args.batch):
        a, b = operands(shape, variant)
        force(variant)
        out = output(shape, variant)
        ref = output(shape, None)                 # cuBLAS writes a dense D
        ours_fn = lambda: tsjit.ops.matmul(a, b, out=out)          # noqa: E731
        theirs_fn = lambda: torch.matmul(a, b, out=ref)            # noqa: E731
        try:
            t_ours, t_theirs = interleaved_medians(ours_fn, theirs_fn, flush, args.reps)
        except Exception as exc:
            print(f"| {shape} | {label(variant)} | FAILED {type(exc).__name__}: {exc} | | | | |", flush=True)
            continue
        flops = 2.0 * shape[0] * shape[1] * shape[2]
        cfg = next(iter(mm._PLANS.values())).config
        print(f"| {shape[0]}x{shape[1]}x{shape[2]} | {label(variant)} | {flops / t_ours / 1e9:.0f} | "
              f"{flops / t_theirs / 1e9:.0f} | {t_theirs / t_ours:.3f} | {t_ours * 1e3:.1f} | {cfg.describe()} "
              f"g{cfg.group_m} st{cfg.staged_columns} |", flush=True)
    print(f"done in {time.time() - t0:.1f} s; device {torch.cuda.get_device_name(0)}, torch {torch.__version__}")


if __name__ == "__main__":
    main()
