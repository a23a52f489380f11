"""Issue 15 probe (2026-12-02, helper i15m): the mid-size shapes where ``tsjit.ops.matmul`` trails cuBLAS
(3000 x 5000 x 1000 with its 2000-byte rows, 2048^3, 512 x 4096 x 4096, 512 x 28672 x 4096, 1024 x 14336 x 4096,
2048 x 4096 x 4096) with forced configurations, realign choices and pre-padded operands (the GEMM alone, rows
128-byte aligned) against the heuristic and cuBLAS.

Each variant's output is NaN-poisoned, then checked against float64 on a sampled 64 x 64 block (and for NaN
everywhere); then a shape's variants (their packed launches) and cuBLAS are timed in turns, round by round (L2
flushed before every call, CUDA events), medians of ``--reps`` rounds.  B is the (N, K) transpose (nn.Linear).  ``--workers`` processes compile the
configurations first (the shared disk cache), then one process times them all.

``--table tiles`` (2026-12-03, helper i15m): the aligned shapes below 1.0x in the ninth session's sweep with
tile widths (224: 14336 and 28672 are multiples of it), ring depths, ping-pong schedules and grouped tile orders,
fp8 rows (shape key ``(M, N, K, "fp8")``, against ``torch._scaled_mm``, unit scales), and a variant timed
through ``tsjit.ops.matmul(a, b, out=)`` itself (gemm.py's path) next to the packed launches.

    PYTHONPATH=. python benchmarks/gemm_mid_probe.py [--reps 15] [--workers 6] [--only SUBSTRING] [--table mid|tiles]
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
from tsjit.ops import realign as misaligned_rows
from tsjit.ops.staging import copy_launch
from tsjit.runtime.arrays import DeviceArray

from gemm import timed_ms  # benchmarks/gemm.py (this folder is on sys.path)
from gemm_configs_probe import force_with  # clears the plan and launch caches

mm = sys.modules["tsjit.ops.matmul"]
matmul_plan = sys.modules["tsjit.ops.matmul_plan"]   # its REALIGN knob

# a choice: None (the heuristic) or (BM, BN, splits[, stages[, staged columns]]); realign: None (the model's) or
# "", "x", "y", "both"; pad: "" or "x", "y", "both" (those operands given with rows padded to 1024 elements);
# an optional fifth entry: PDL behind the copies (only branch i15m-pdl has that knob, matmul_plan.PDL_AFTER_COPIES)
SHAPES = {
    (3000, 5000, 1000): [("before realigned_config: 3st/256, realign y", (128, 256, 1, 3, 256), "y", ""),
                         ("heuristic", None, None, ""),
                         ("4st/128, realign both", (128, 256, 1, 4, 128), "both", ""),
                         ("3st/256, as given", (128, 256, 1, 3, 256), "", ""),
                         ("GEMM alone: 4st/128, Y padded", (128, 256, 1, 4, 128), "", "y"),
                         ("GEMM alone: 3st/256, Y padded", (128, 256, 1, 3, 256), "", "y")],
    (2048, 2048, 2048): [("heuristic", None, None, ""), ("128x128 6st", (128, 128, 1), None, "")],
    (512, 4096, 4096): [("heuristic", None, None, ""), ("128x256 S2", (128, 256, 2), None, "")],
    (512, 28672, 4096): [("heuristic", None, None, ""), ("128x256 4st/128", (128, 256, 1, 4, 128), None, "")],
    (1024, 14336, 4096): [("heuristic", None, None, ""), ("128x256 4st/128", (128, 256, 1, 4, 128), None, "")],
    (2048, 4096, 4096): [("heuristic", None, None, ""), ("128x128 6st", (128, 128, 1), None, "")],
}


PP = {"schedule": "pingpong-shared", "mma_lag": 2}
D224 = {"epilogue": "direct", "staged_columns": 64, "stages": 5}          # a 224-wide tile's direct epilogue
# --table tiles: (M, N, K[, "fp8"]) -> variants as above (no realign, no padding); a choice may end in a dict of
# GemmConfig fields (schedule, group_m, mma_lag, epilogue, ...); the label "ops.matmul" times tsjit.ops.matmul itself
TILES = {
    (1024, 14336, 4096): [("heuristic", None, None, ""), ("ops.matmul", None, None, ""),
                          ("128x128 6st", (128, 128, 1), None, ""),
                          ("128x256 4st", (128, 256, 1), None, ""), ("128x224 tma 4st", (128, 224, 1), None, ""),
                          ("128x224 direct 5st", (128, 224, 1, D224), None, ""),
                          ("pp-shared 256x128 lag2", (256, 128, 1, PP), None, "")],
    (512, 28672, 4096): [("heuristic", None, None, ""), ("128x256 4st", (128, 256, 1), None, ""),
                         ("128x128 6st", (128, 128, 1), None, ""),
                         ("128x224 tma 4st", (128, 224, 1), None, ""),
                         ("128x224 direct 5st", (128, 224, 1, D224), None, "")],
    (512, 14336, 4096): [("heuristic", None, None, ""), ("128x224 tma 4st", (128, 224, 1), None, ""),
                         ("128x224 direct 5st", (128, 224, 1, D224), None, ""),
                         ("128x128 6st", (128, 128, 1), None, ""), ("128x256 4st", (128, 256, 1), None, "")],
    (2048, 2048, 2048): [("heuristic", None, None, ""), ("ops.matmul", None, None, ""),
                         ("128x128 6st", (128, 128, 1), None, ""), ("128x256 3st/256", (128, 256, 1, 3, 256), None, ""),
                         ("pp-shared 256x128 lag2", (256, 128, 1, PP), None, ""),
                         ("pp-shared 128x256 lag2", (128, 256, 1, PP), None, "")],
    (2048, 4096, 4096): [("heuristic", None, None, ""), ("ops.matmul", None, None, ""),
                         ("128x256 group 16", (128, 256, 1, {"group_m": 16}), None, ""),
                         ("pp-shared 256x128 lag2", (256, 128, 1, PP), None, "")],
    (256, 14336, 4096): [("heuristic", None, None, ""), ("128x224 tma 4st", (128, 224, 1), None, ""),
                         ("128x256 4st", (128, 256, 1), None, "")],
    (2048, 14336, 4096): [("heuristic", None, None, ""), ("128x224 tma 4st", (128, 224, 1), None, "")],
    (4096, 14336, 4096): [("heuristic", None, None, ""), ("128x224 tma 4st", (128, 224, 1), None, "")],
    (128, 28672, 4096): [("heuristic", None, None, ""), ("128x224 tma 4st", (128, 224, 1), None, ""),
                         ("128x256 4st", (128, 256, 1), None, "")],
    (256, 28672, 4096): [("heuristic", None, None, ""), ("128x224 tma 4st", (128, 224, 1), None, ""),
                         ("128x256 4st", (128, 256, 1), None, "")],
    (512, 4096, 14336): [("heuristic", None, None, ""), ("64x256 S1", (64, 256, 1), None, "")],
    (64, 28672, 4096): [("heuristic", None, None, ""), ("128x64 S2", (128, 64, 2), None, "")],
    (1024, 14336, 4096, "fp8"): [("heuristic", None, None, ""), ("128x224 tma", (128, 224, 1), None, ""),
                                 ("128x224 direct", (128, 224, 1, D224), None, ""),
                                 ("128x256 3st/256", (128, 256, 1, 3, 256), None, ""),
                                 ("128x128", (128, 128, 1), None, "")],
    (16, 4096, 4096, "fp8"): [("heuristic", None, None, ""), ("64x16 S4", (64, 16, 4), None, ""),
                              ("64x16 S1", (64, 16, 1), None, "")],
}

TABLES = {"mid": SHAPES, "tiles": TILES}
TABLE = SHAPES                                     # the --table in use


REALIGNED_CONFIG = misaligned_rows.realigned_config


def forced_config(problem, choice):
    fields = dict(choice[-1]) if isinstance(choice[-1], dict) else {}
    choice = choice[:-1] if fields else choice
    config = configs.make_config(problem, *choice[:3], schedule=fields.pop("schedule", "cooperative"),
                                 group_m=fields.pop("group_m", 8))
    if len(choice) > 3:
        config = dataclasses.replace(config, stages=choice[3])
    if len(choice) > 4:
        config = dataclasses.replace(config, staged_columns=choice[4])
    return dataclasses.replace(config, **fields)


def sampled_error(out, a, b, rng) -> float:
    """Relative error of a random 64 x 64 block of ``out`` against float64; inf if any output is NaN."""
    if torch.isnan(out).any().item():
        return float("inf")
    rows = torch.randperm(out.shape[0], generator=rng)[:64].cuda()
    cols = torch.randperm(out.shape[1], generator=rng)[:64].cuda()
    if a.dtype.itemsize == 1:                 # fp8: no indexing of float8 tensors
        a, b = a.float(), b.float()
    ref = a[rows].double() @ b[:, cols].double()
    got = out[rows][:, cols].double()
    return ((got - ref).norm() / ref.norm()).item()


def padded(rows, cols, pad: bool):
    """A random bf16 (rows, cols) matrix, its rows padded to 1024-element multiples when ``pad``."""
    width = -(-cols // 1024) * 1024 if pad else cols
    return torch.randn(rows, width, device="cuda", dtype=torch.bfloat16)[:, :cols]


def variants(only: str):
    for shape, rows in TABLE.items():
        for label, choice, realign, pad, *pdl in rows:
            if only in f"{name(shape)} {label}":
                yield shape, label, choice, realign, pad, (pdl or [None])[0]


def name(shape) -> str:
    return "x".join(map(str, shape[:3])) + (f" {shape[3]}" if len(shape) > 3 else "")


FP8 = torch.float8_e4m3fn


def scales(shape) -> dict:
    """The fp8 rows' per-tensor scales (unit: the float64 reference needs none); none for bf16."""
    if len(shape) < 4:
        return {}
    return {"scale_a": torch.tensor(1.0, device="cuda"), "scale_b": torch.tensor(1.0, device="cuda")}


def prepare(shape, choice, realign, pad, pdl):
    M, N, K = shape[:3]
    if pdl is not None:
        matmul_plan.PDL_AFTER_COPIES = pdl
    # a forced configuration runs as given (not turned into the realigned long-K staging)
    misaligned_rows.realigned_config = (REALIGNED_CONFIG if choice is None
                                        else (lambda problem, config, realign: config))
    a = padded(M, K, pad in ("x", "both"))
    b = padded(N, K, pad in ("y", "both")).t()
    if len(shape) > 3:
        a, b = a.to(FP8), b.to(FP8)
    matmul_plan.REALIGN = realign
    force_with(None if choice is None else (lambda problem, c=choice: forced_config(problem, c)))
    out = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
    tsjit.ops.matmul(a, b, out=out, **scales(shape))
    torch.cuda.synchronize()
    return a, b, out


def run(reps: int, only: str) -> None:
    """Per shape: every variant's packed launch (built by one ``matmul`` call, checked) and cuBLAS timed in
    turns, round by round (L2 flushed before every call), medians of ``reps`` rounds."""
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    rng = torch.Generator().manual_seed(0)
    stream = torch.cuda.current_stream().cuda_stream
    print("\n| M x N x K | variant | config | rel. err | tsjit us | cuBLAS us | cuBLAS/tsjit |")
    print("|---|---|---|---|---|---|---|")
    for shape in TABLE:
        M, N, K = shape[:3]
        kw = scales(shape)
        rows = []
        for _, label, choice, realign, pad, pdl in (v for v in variants(only) if v[0] == shape):
            try:
                a, b, out = prepare(shape, choice, realign, pad, pdl)
            except Exception as error:     # noqa: BLE001 -- a probe: report and go on
                print(f"| {name(shape)} | {label} | FAILED {type(error).__name__}: {error} | | | | |", flush=True)
                continue
            err = sampled_error(out, a, b, rng)
            plan = next(iter(mm._PLANS.values()))
            config = plan.config.describe() + (f", realign {plan.realign}" if plan.realign else "")
            if not err < 1e-2:
                print(f"| {name(shape)} | {label} | {config} | CHECK FAILED {err:.1e} | | | |", flush=True)
                continue
            if not plan.bindings:
                print(f"| {name(shape)} | {label} | {config} | no packed launch kept | | | |", flush=True)
                continue
            bound = next(iter(plan.bindings.values()))
            call = lambda bound=bound: bound(stream)                # noqa: E731
            if label == "ops.matmul":            # gemm.py's path: the call itself (the heuristic, restored below)
                call = lambda a=a, b=b, out=out: tsjit.ops.matmul(a, b, out=out, **kw)   # noqa: E731
            rows.append((label, config, err, call, (a, b, out, plan)))
        if not rows:
            continue
        force_with(None)
        a, b = rows[0][4][0], rows[0][4][1]
        ref = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
        calls = [(lambda: torch.matmul(a, b, out=ref)) if not kw else
                 (lambda: torch._scaled_mm(a, b, out_dtype=torch.bfloat16, **kw))] + [row[3] for row in rows]
        for _ in range(3):
            for call in calls:
                call()
        samples = [[] for _ in calls]
        for _ in range(reps):
            for i, call in enumerate(calls):
                samples[i].append(timed_ms(call, flush))
        theirs = statistics.median(samples[0])
        for (label, config, err, _, _), times in zip(rows, samples[1:]):
            ours = statistics.median(times)
            print(f"| {name(shape)} | {label} | {config} | {err:.1e} | {ours * 1e3:.1f} | {theirs * 1e3:.1f} | "
                  f"{theirs / ours:.3f} |", flush=True)
    if only in "copy":
        try:
            copies(flush, reps)
        except Exception as error:     # noqa: BLE001 -- a probe: report and go on
            print(f"copies: {type(error).__name__}: {error}")
    matmul_plan.REALIGN = None
    misaligned_rows.realigned_config = REALIGNED_CONFIG
    force_with(None)


def copies(flush, reps: int) -> None:
    """What a realigning copy of 3000 x 5000 x 1000's operands costs alone: torch's strided copy, timed
    against cuBLAS's GEMM as the interleaved partner."""
    for rows in (5000, 3000):
        src = torch.randn(rows, 1000, device="cuda", dtype=torch.bfloat16)
        dst = torch.empty(rows, 1024, device="cuda", dtype=torch.bfloat16)[:, :1000]
        for _ in range(3):
            dst.copy_(src)
        times = sorted(timed_ms(lambda: dst.copy_(src), flush) for _ in range(reps))
        print(f"copy {rows}x1000 bf16 into 1024-element rows (torch copy_): {times[len(times) // 2] * 1e3:.1f} us")
        launch = copy_launch(DeviceArray((1, rows, 1000), "BFloat16", strides=(rows * 1000, 1000, 1),
                                         data_ptr=src.data_ptr()),
                             DeviceArray((1, rows, 1000), "BFloat16", strides=(rows * 1024, 1024, 1),
                                         data_ptr=dst.data_ptr()))
        stream = torch.cuda.current_stream().cuda_stream
        dst.zero_()
        launch(stream)
        torch.cuda.synchronize()
        assert torch.equal(dst, src), "the staging copy differs"
        times = sorted(timed_ms(lambda: launch(stream), flush) for _ in range(reps))
        print(f"copy {rows}x1000 bf16 into 1024-element rows (tsjit staging copy_rows): "
              f"{times[len(times) // 2] * 1e3:.1f} us")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--workers", type=int, default=0, help="processes that compile the variants first")
    parser.add_argument("--worker", type=int, default=-1)
    parser.add_argument("--only", default="")
    parser.add_argument("--table", choices=sorted(TABLES), default="mid")
    args = parser.parse_args()
    global TABLE
    TABLE = TABLES[args.table]
    began = time.perf_counter()
    if args.worker >= 0:     # compile this worker's share (the first call builds and caches the kernel)
        for i, (shape, label, choice, realign, pad, pdl) in enumerate(variants(args.only)):
            if i % args.workers == args.worker:
                prepare(shape, choice, realign, pad, pdl)
        return
    if args.workers:
        procs = [subprocess.Popen([sys.executable, __file__, "--worker", str(i), "--workers", str(args.workers),
                                   "--only", args.only, "--table", args.table]) for i in range(args.workers)]
        for p in procs:
            p.wait()
        print(f"(compiled by {args.workers} processes in {time.perf_counter() - began:.1f} s)")
    run(args.reps, args.only)
    print(f"device: {torch.cuda.get_device_name(0)}, torch {torch.__version__}, {time.perf_counter() - began:.1f} s")


if __name__ == "__main__":
    main()
