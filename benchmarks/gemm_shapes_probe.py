"""Issue 15 probe for the shapes below 0.90x cuBLAS: forced configurations (tile, split-K, ring depth) of
``tsjit.ops.matmul`` against ``torch.matmul``, the unaligned-row shape with its operands padded / staged,
and the host time of the ``out=`` call split into its parts.

Every forced variant is compiled and checked (relative error vs torch < 1e-2) first by ``--workers``
processes (they fill the shared disk cache), then the main process times each interleaved with cuBLAS,
the L2 flushed before every call (a 256 MiB write), medians of ``--reps``.

    PYTHONPATH=. python benchmarks/gemm_shapes_probe.py [--workers 14] [--reps 20] [--only NAME]
"""
from __future__ import annotations

import argparse
import dataclasses
import subprocess
import sys
import threading
import time

import torch

import tsjit
import tsjit.ops
from tsjit.ops import configs

from gemm import host_overhead_us, interleaved_medians, matmul_error  # benchmarks/gemm.py (this folder is on sys.path)
from gemm_configs_probe import force_with  # benchmarks/gemm_configs_probe.py: clears the plan and launch caches

mm = sys.modules["tsjit.ops.matmul"]
matmul_plan = sys.modules["tsjit.ops.matmul_plan"]   # its REALIGN / OPERAND_L2_PROMOTION knobs

# (M, N, K) -> [(BM, BN, splits, stages or None)]; None: the heuristic
FORCED = {
    (256, 256, 16384): [None, (64, 64, 8, 14), (64, 64, 7, None), (64, 64, 6, None), (128, 32, 8, None),
                        (64, 32, 4, None), (64, 128, 16, None), (128, 64, 16, None), (64, 64, 16, None)],
    (384, 384, 16384): [None, (128, 64, 7, 9), (128, 64, 6, None), (128, 64, 5, None), (64, 128, 7, None),
                        (64, 64, 3, None), (128, 128, 14, None), (128, 128, 12, None), (64, 64, 4, None)],
    (512, 512, 8192): [None, (128, 64, 4, 9), (128, 64, 3, None), (64, 128, 4, None), (64, 64, 2, None),
                       (128, 128, 8, None), (64, 64, 4, None), (128, 128, 4, None)],
    (512, 512, 32768): [None, (128, 64, 4, None), (128, 128, 7, None)],
    (3000, 5000, 1000): [None, (128, 128, 1, None)],
}
# 3000 x 5000 x 1000 with its 2000-byte rows: which operand's alignment costs, and what a staging copy costs
PAD_VARIANTS = ("unaligned", "A padded", "B padded", "A+B padded", "copy A+B then padded", "copy B then padded",
                "copy A then padded")


def force(choice):
    """Plan every call with ``choice`` = (BM, BN, splits, stages or None[, staged columns]) (None: the
    heuristic); clears the planned calls."""
    if choice is None:
        force_with(None)
        return
    bm, bn, splits, stages = choice[:4]

    def make(problem):
        config = configs.make_config(problem, bm, bn, splits)
        if stages is not None:
            config = dataclasses.replace(config, stages=stages)
        if len(choice) > 4:
            config = dataclasses.replace(config, staged_columns=choice[4])
        return config
    force_with(make)


def operands(shape):
    M, N, K = shape
    torch.manual_seed(0)
    a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(N, K, device="cuda", dtype=torch.bfloat16).t()
    return a, b


def jobs(only):
    out = [(shape, c) for shape, cands in FORCED.items() for c in cands]
    return [j for j in out if not only or only in str(j[0])]


def check(shape, choice):
    a, b = operands(shape)
    force(choice)
    return matmul_error(a, b)


def padded(x, rows, cols, width):
    """A (rows, cols) view with row stride ``width`` over a fresh buffer, holding ``x``."""
    buf = torch.empty(rows, width, device="cuda", dtype=x.dtype)[:, :cols]
    buf.copy_(x)
    return buf


def worker(index, count, only):
    for i, (shape, choice) in enumerate(jobs(only)):
        if i % count == index:
            try:
                print(f"checked {shape} {choice}: rel err {check(shape, choice):.2e}", flush=True)
            except Exception as exc:                  # report and go on: the main process skips it
                print(f"FAILED {shape} {choice}: {type(exc).__name__}: {exc}", flush=True)
    if index == count - 1 and (not only or "3000" in only):     # the padded operands' plans
        force(None)
        a, b = operands((3000, 5000, 1000))
        ap, bp = padded(a, 3000, 1000, 1024), padded(b.t(), 5000, 1000, 1024).t()
        for x, y in ((ap, b), (a, bp), (ap, bp)):
            tsjit.ops.matmul(x, y, out=torch.empty(3000, 5000, device="cuda", dtype=torch.bfloat16))
        torch.cuda.synchronize()
        print("checked the padded variants", flush=True)


time_pair = interleaved_medians


def host_parts():
    a = torch.randn(64, 256, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(256, 256, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(64, 256, device="cuda", dtype=torch.bfloat16)
    force(None)
    tsjit.ops.matmul(a, b, out=c)
    tsjit.ops.matmul(a, b, out=c)
    direct, bound = next(iter(mm._FAST.values()))
    stream = torch.cuda.current_stream().cuda_stream
    raw = torch._C._cuda_getCurrentRawStream

    def key():
        return (a.data_ptr(), a.shape, a.stride(), a.dtype, b.data_ptr(), b.shape, b.stride(), b.dtype, c.data_ptr(),
                c.shape, c.stride(), c.dtype, 0, 1.0, 0.0, False)
    table = {key(): 1}
    rows = [
        ("tsjit.ops.matmul(a, b, out=c)", lambda: tsjit.ops.matmul(a, b, out=c)),
        ("torch.matmul(a, b, out=c)", lambda: torch.matmul(a, b, out=c)),
        ("tsjit.ops.matmul(a, b, out=c) again", lambda: tsjit.ops.matmul(a, b, out=c)),
        ("torch.matmul(a, b, out=c) again", lambda: torch.matmul(a, b, out=c)),
        ("packed launch alone", lambda: bound(stream)),
        ("direct driver call alone", direct),
        ("fast-path key alone", lambda: (a.data_ptr(), a.shape, a.stride(), a.dtype, b.data_ptr(), b.shape, b.stride(),
                                         b.dtype, c.data_ptr(), c.shape, c.stride(), c.dtype)),
        ("current raw stream alone", lambda: raw(a.get_device())),
        ("a.data_ptr()", a.data_ptr),
        ("a.shape", lambda: a.shape),
        ("a.stride()", a.stride),
        ("a.dtype", lambda: a.dtype),
        ("a.get_device()", a.get_device),
        ("a.size()", a.size),
        ("a.is_contiguous()", a.is_contiguous),
        ("key dict hit", lambda: table.get(key())),
        ("threading.get_ident", threading.get_ident),
        ("empty lambda", lambda: None),
    ]
    for name, fn in rows:
        print(f"host: {name}: {host_overhead_us(fn):.2f} us", flush=True)


REALIGN_SHAPES = [(3000, 5000, 1000, "NK"), (3000, 5000, 1000, "KN"), (1000, 3000, 777, "NK")]


def realign_operands(M, N, K, layout):
    torch.manual_seed(0)
    a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    b = (torch.randn(N, K, device="cuda", dtype=torch.bfloat16).t() if layout == "NK"
         else torch.randn(K, N, device="cuda", dtype=torch.bfloat16))
    return a, b


# (REALIGN, forced config or None)
REALIGN_VARIANTS = ((None, None), ("", None), ("x", None), ("y", None), ("both", None), ("y", (128, 256, 1, 4, 128)),
                    ("both", (128, 256, 1, 4, 128)))


def realign_warm():
    for M, N, K, layout in REALIGN_SHAPES:
        a, b = realign_operands(M, N, K, layout)
        for force_realign, choice in REALIGN_VARIANTS:
            matmul_plan.REALIGN = force_realign
            force(choice if K == 1000 else None)
            err = matmul_error(a, b)
            print(f"checked realign {M}x{N}x{K} {layout} {force_realign!r}: rel err {err:.2e}", flush=True)
    matmul_plan.REALIGN = None
    force(None)


def realign_table(flush, reps):
    """3000 x 5000 x 1000 (2000-byte rows) with each operand choice of the 128-byte realigning copy, and that
    copy alone (the first launch of the plan's sequence)."""
    for M, N, K, layout in REALIGN_SHAPES:
        a, b = realign_operands(M, N, K, layout)
        out = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
        ref = torch.empty_like(out)
        flops = 2.0 * M * N * K
        for force_realign, choice in REALIGN_VARIANTS:
            if K != 1000 and choice is not None:
                continue
            matmul_plan.REALIGN = force_realign
            force(choice)
            tsjit.ops.matmul(a, b, out=out)
            plan = next(iter(mm._PLANS.values()))
            t_ours, t_theirs = time_pair(lambda: tsjit.ops.matmul(a, b, out=out), lambda: torch.matmul(a, b, out=ref),
                                         flush, reps)
            print(f"| {M}x{N}x{K} {layout} | realign {force_realign!r} -> {plan.realign!r}, {plan.config.describe()} | {flops / t_ours / 1e9:.0f} | "
                  f"{flops / t_theirs / 1e9:.0f} | {t_theirs / t_ours:.3f} | {t_ours * 1e3:.1f} |", flush=True)
            bound = next(iter(plan.bindings.values()))
            if hasattr(bound, "launches"):
                stream = torch.cuda.current_stream().cuda_stream
                for i, launch in enumerate(bound.launches[:-1]):
                    t_copy, _ = time_pair(lambda: launch(stream), lambda: None, flush, reps)
                    print(f"|   | copy {i} alone ({launch.function.name}) | | | | {t_copy * 1e3:.1f} |", flush=True)
    matmul_plan.REALIGN = None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=14)
    parser.add_argument("--worker", type=int, default=-1)
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--only", default="")
    parser.add_argument("--no-host", action="store_true")
    parser.add_argument("--realign", action="store_true", help="only the realigning-copy table (and host parts)")
    args = parser.parse_args()
    if args.worker >= 0:
        worker(args.worker, args.workers, args.only)
        return
    t0 = time.time()
    if args.realign:
        realign_warm()
    else:
        procs = [subprocess.Popen([sys.executable, __file__, "--worker", str(i), "--workers", str(args.workers),
                                   "--only", args.only]) for i in range(args.workers)]
        for p in procs:
            p.wait()
    print(f"compiled and checked in {time.time() - t0:.1f} s", flush=True)
    if not args.no_host:
        host_parts()
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    print("| M x N x K | variant (BM, BN, S, stages) | tsjit TFLOP/s | cuBLAS TFLOP/s | ratio | tsjit us |")
    print("|---|---|---|---|---|---|")
    for shape, choice in ([] if args.realign else jobs(args.only)):
        a, b = operands(shape)
        force(choice)
        out = torch.empty(shape[0], shape[1], device="cuda", dtype=torch.bfloat16)
        ref = torch.empty_like(out)
        try:
            t_ours, t_theirs = time_pair(lambda: tsjit.ops.matmul(a, b, out=out), lambda: torch.matmul(a, b, out=ref),
                                         flush, args.reps)
        except Exception as exc:
            print(f"| {shape} | {choice} | FAILED {type(exc).__name__}: {exc} | | | |")
            continue
        flops = 2.0 * shape[0] * shape[1] * shape[2]
        desc = choice if choice is not None else "heuristic: " + next(iter(mm._PLANS.values())).config.describe()
        print(f"| {shape[0]}x{shape[1]}x{shape[2]} | {desc} | {flops / t_ours / 1e9:.0f} | {flops / t_theirs / 1e9:.0f} | "
              f"{t_theirs / t_ours:.3f} | {t_ours * 1e3:.1f} |", flush=True)
    if args.realign:
        realign_table(flush, args.reps)
    if not args.realign and (not args.only or "3000" in args.only):
        force(None)
        shape = (3000, 5000, 1000)
        a, b = operands(shape)
        ap, bpt = padded(a, 3000, 1000, 1024), padded(b.t(), 5000, 1000, 1024)
        bp = bpt.t()
        out = torch.empty(3000, 5000, device="cuda", dtype=torch.bfloat16)
        ref = torch.empty_like(out)
        bt = b.t()

        def copy_ab():
            ap.copy_(a)
            bpt.copy_(bt)
            tsjit.ops.matmul(ap, bp, out=out)

        def copy_b():
            bpt.copy_(bt)
            tsjit.ops.matmul(a, bp, out=out)

        def copy_a():
            ap.copy_(a)
            tsjit.ops.matmul(ap, b, out=out)
        variants = {"unaligned": lambda: tsjit.ops.matmul(a, b, out=out),
                    "A padded": lambda: tsjit.ops.matmul(ap, b, out=out),
                    "B padded": lambda: tsjit.ops.matmul(a, bp, out=out),
                    "A+B padded": lambda: tsjit.ops.matmul(ap, bp, out=out),
                    "copy A+B then padded": copy_ab, "copy B then padded": copy_b, "copy A then padded": copy_a,
                    "torch copies A+B alone": lambda: (ap.copy_(a), bpt.copy_(bt))}
        flops = 2.0 * 3000 * 5000 * 1000
        for name, fn in variants.items():
            t_ours, t_theirs = time_pair(fn, lambda: torch.matmul(a, b, out=ref), flush, args.reps)
            print(f"| 3000x5000x1000 | {name} | {flops / t_ours / 1e9:.0f} | {flops / t_theirs / 1e9:.0f} | "
                  f"{t_theirs / t_ours:.3f} | {t_ours * 1e3:.1f} |", flush=True)
    print(f"done in {time.time() - t0:.1f} s; device {torch.cuda.get_device_name(0)}, torch {torch.__version__}")


if __name__ == "__main__":
    main()
