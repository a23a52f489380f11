"""Issue 15 probe (2026-12-03, helper i15v): the memory-bound small-M shapes (M in {1, 16, 64, 128} x (N, K) in
{(4096, 4096), (14336, 4096), (4096, 14336), (28672, 4096)}), where tsjit and cuBLAS both read B (N x K bf16) once.

Per (N, K): the roof of reading B once (a Triton read-only kernel with normal and evict-first loads, a torch copy as
read + write), then per shape cuBLAS, the heuristic and forced configurations of ``tsjit.ops.matmul`` (tiles,
split-K, the L2 eviction priorities of the TMA loads: ``GemmConfig.x_policy`` / ``y_policy``), all interleaved
round-robin in one process, each call after an L2 flush, medians of ``--reps``.  Two flushes, each timed: ``zero``
(the benchmark's: a 256 MiB ``zero_()``, which leaves the L2 full of dirty lines that a later read must write back
to make room) and ``read`` (a 256 MiB sum: the L2 is left clean).  Every tsjit output is NaN-poisoned and checked
against float64 on a sampled 64 x 64 block and against a rerun (bit-identical) before it is timed.

Worker processes (``--workers``) compile every configuration first (the shared disk cache, ``TSJIT_CACHE_DIR``).

    cd benchmarks && python3 gemm_stream_probe.py [--workers 14] [--reps 15] [--only 64x4096x4096] [--seconds 30]
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

from gemm_configs_probe import force_with              # clears the plan and launch caches
from gemm_session_probe import sampled_error

mm = sys.modules["tsjit.ops.matmul"]
plan_module = sys.modules["tsjit.ops.matmul_plan"]

NK = [(4096, 4096), (28672, 4096), (4096, 14336), (14336, 4096)]
MS = [64, 16, 1, 128]
FIRST, LAST = "evict_first", "evict_last"


def variants(M, N, K):
    """(label, spec) per variant: spec None = the heuristic; ("hint", x_policy, y_policy) = the heuristic's tile with
    these policies (``""``, ``""``: main's configuration before configs.stream_policies); (BM, BN, splits, stages or None, x_policy, y_policy) = forced, in D's coordinates."""
    out = [("heuristic", None), ("main: heur, no hints", ("hint", "", "")), ("heur X first", ("hint", FIRST, "")),
           ("heur X first Y last", ("hint", FIRST, LAST))]
    if M == 128:       # not swapped: X = A (re-read by every CTA), Y = B
        out = [("heuristic", None), ("main: heur, no hints", ("hint", "", "")), ("heur Y first", ("hint", "", FIRST)),
               ("heur Y first X last", ("hint", LAST, FIRST))]
        out += [("128x64 S1 Yfirst", (128, 64, 1, None, "", FIRST)), ("128x128 S1 Yfirst", (128, 128, 1, None, "", FIRST)),
                ("128x64 S2 Yfirst", (128, 64, 2, None, "", FIRST))]
        return out
    if M == 64:
        out += [("64x64 S1 Xfirst", (64, 64, 1, None, FIRST, "")), ("64x64 S2 Xfirst", (64, 64, 2, None, FIRST, "")),
                ("128x64 S1 Xfirst", (128, 64, 1, None, FIRST, "")), ("128x64 S2 Xfirst", (128, 64, 2, None, FIRST, "")),
                ("64x64 S1 13st Xfirst", (64, 64, 1, 13, FIRST, "")), ("64x64 S2 13st Xfirst", (64, 64, 2, 13, FIRST, ""))]
    else:
        out += [("64x16 S1 Xfirst", (64, 16, 1, None, FIRST, "")), ("64x16 S2 Xfirst", (64, 16, 2, None, FIRST, "")),
                ("128x16 S1 Xfirst", (128, 16, 1, None, FIRST, "")), ("128x16 S2 Xfirst", (128, 16, 2, None, FIRST, "")),
                ("64x16 S1 16st Xfirst", (64, 16, 1, 16, FIRST, "")), ("64x16 S2 16st Xfirst", (64, 16, 2, 16, FIRST, "")),
                ("128x16 S1 12st Xfirst", (128, 16, 1, 12, FIRST, "")), ("64x16 S1 16st", (64, 16, 1, 16, "", ""))]
    return out


#: --final: the landed heuristic against main's configuration (no policies) and the one-read rule (policies only on
#: an operand the grid reads once), and a 128-CTA 64 x 32 tiling of the 64-wide product
FINAL = [(128, 4096, 4096), (256, 4096, 4096), (256, 14336, 4096), (256, 4096, 14336), (256, 28672, 4096),
         (64, 4096, 4096), (16, 4096, 4096), (1, 4096, 4096), (128, 28672, 4096), (64, 14336, 4096)]


#: --reads: shapes whose B several tile rows read (BM = 128: 4 at M = 512, 8 at M = 1024), main's policies (none
#: there) against B evict-first
READS = [(512, 4096, 4096), (512, 14336, 4096), (512, 4096, 14336), (512, 28672, 4096), (1024, 4096, 4096),
         (1024, 14336, 4096), (1024, 4096, 14336), (1024, 28672, 4096), (384, 28672, 4096)]


def reads_variants(M, N, K):
    return [("heuristic", None), ("B evict-first", ("hint", "", FIRST)), ("heuristic again", None)]


def final_variants(M, N, K):
    out = [("heuristic", None), ("main: no hints", ("hint", "", "")), ("one-read rule", ("once",))]
    if M == 64:
        out.append(("64x32 S1 Xfirst", (64, 32, 1, None, FIRST, "")))
    if (N, K) == (4096, 4096) and M <= 64 or (M, N) == (64, 28672):
        out.append(("heuristic, 256B L2 promotion", ("promo", "256B")))
    return out


def shapes(only, final=False, reads=False):
    if reads and not only:
        return READS
    if final and not only:
        return FINAL
    if only:
        return [tuple(int(v) for v in item.split("x")) for item in only.split(",") if item]
    return [(m, n, k) for n, k in NK for m in MS]


def maker(spec):
    """The ``make(problem)`` for force_with, or None for the heuristic."""
    if spec is None:
        return None
    if spec[0] == "promo":       # the heuristic; main() sets the operands' TensorMap L2 promotion while it binds
        return None
    if spec[0] == "once":
        def make(problem):
            config, _ = ORIGINAL_CHOOSE(problem)
            x_reads = configs.ceil_div(problem.Q, config.block_n)
            y_reads = configs.ceil_div(problem.P, config.block_m)
            return dataclasses.replace(config, x_policy=config.x_policy if x_reads == 1 else "",
                                       y_policy=config.y_policy if y_reads == 1 else "")
        return make
    if spec[0] == "hint":
        def make(problem, spec=spec):
            config, _ = ORIGINAL_CHOOSE(problem)
            return dataclasses.replace(config, x_policy=spec[1], y_policy=spec[2])
        return make
    bm, bn, splits, stages, xp, yp = spec

    def make(problem):
        config = configs.make_config(problem, bm, bn, splits)
        if stages is not None:
            config = dataclasses.replace(config, stages=stages)
        return dataclasses.replace(config, x_policy=xp, y_policy=yp)
    return make


ORIGINAL_CHOOSE = configs.choose


def operands(M, N, K):
    torch.manual_seed(M * N + K)
    a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(N, K, device="cuda", dtype=torch.bfloat16).t()
    return a, b


def warm(args, index):
    """Worker: compile (run once) this worker's share of every (shape, variant)."""
    table = reads_variants if args.reads else final_variants if args.final else variants
    jobs = [(shape, spec) for shape in shapes(args.only, args.final, args.reads) for _, spec in table(*shape)]
    for (M, N, K), spec in jobs[index::args.workers]:
        a, b = operands(M, N, K)
        force_with(maker(spec))
        try:
            tsjit.ops.matmul(a, b, out=torch.empty(M, N, device="cuda", dtype=torch.bfloat16))
        except Exception as exc:          # reported by the main process
            print(f"warm {M}x{N}x{K} {spec}: {type(exc).__name__}: {str(exc)[:200]}", flush=True)
    torch.cuda.synchronize()


def triton_reader():
    """A Triton kernel reading ``n`` int32 words once (each program sums 8192 words; 8 warps, 16-byte loads), with
    normal or evict-first loads; None where Triton is missing."""
    try:
        import triton
        import triton.language as tl
    except ImportError:
        return None

    @triton.jit
    def read_words(src, sink, n, BLOCK: tl.constexpr, POLICY: tl.constexpr):
        pid = tl.program_id(0)
        offsets = pid * BLOCK + tl.arange(0, BLOCK)
        values = tl.load(src + offsets, mask=offsets < n, other=0, eviction_policy=POLICY)
        tl.store(sink + pid, tl.sum(values, axis=0))

    def run(words, sink, policy):
        n = words.numel()
        return read_words[(triton.cdiv(n, 8192),)](words, sink, n, BLOCK=8192, POLICY=policy, num_warps=8)
    return run


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--only", default="")
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--worker-index", type=int, default=-1, help=argparse.SUPPRESS)
    parser.add_argument("--seconds", type=float, default=30.0, help="stop after the shape running at this time")
    parser.add_argument("--no-roof", action="store_true")
    parser.add_argument("--final", action="store_true", help="the FINAL shapes and final_variants (no roofs)")
    parser.add_argument("--reads", action="store_true", help="the READS shapes and reads_variants (no roofs)")
    args = parser.parse_args()
    if args.worker_index >= 0:
        warm(args, args.worker_index)
        return
    began = time.perf_counter()
    if args.workers:
        procs = [subprocess.Popen([sys.executable, __file__, "--worker-index", str(i), "--workers", str(args.workers),
                                   "--only", args.only] + (["--final"] if args.final else [])
                                  + (["--reads"] if args.reads else []))
                 for i in range(args.workers)]
        for p in procs:
            p.wait()
        print(f"workers done at {time.perf_counter() - began:.1f} s", flush=True)
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    flush_words = flush.view(torch.int32)
    sink = torch.empty((), device="cuda", dtype=torch.int64)
    flushes = {"zero": lambda: flush.zero_(), "read": lambda: torch.sum(flush_words, 0, dtype=torch.int64, out=sink)}
    rng = torch.Generator().manual_seed(0)
    reader = None if args.no_roof else triton_reader()
    stream = torch.cuda.current_stream().cuda_stream

    def measure(fns):
        """{(label, flush): median ms} over args.reps round-robin rounds (3 warm-up calls each)."""
        for _ in range(3):
            for fn in fns.values():
                fn()
        torch.cuda.synchronize()
        samples = {(label, f): [] for label in fns for f in flushes}
        events = [torch.cuda.Event(enable_timing=True) for _ in range(2)]
        names = list(fns)
        for rep in range(args.reps):
            order = names[rep % len(names):] + names[:rep % len(names)]       # rotated: no row is always first
            for f, do_flush in flushes.items():
                for label in order:
                    fn = fns[label]
                    do_flush()
                    events[0].record()
                    fn()
                    events[1].record()
                    events[1].synchronize()
                    samples[(label, f)].append(events[0].elapsed_time(events[1]))
        return {key: statistics.median(v) for key, v in samples.items()}

    done_roofs = set()
    print("\n| M x N x K | variant | config | rel. err | zero flush us | cuBLAS/x | read flush us | cuBLAS/x | "
          "B TB/s (zero / read) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for (M, N, K) in shapes(args.only, args.final, args.reads):
        a, b = operands(M, N, K)
        b_bytes = N * K * 2
        ref = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
        fns = {"cuBLAS": lambda: torch.matmul(a, b, out=ref)}
        if (N, K) not in done_roofs and not (args.no_roof or args.final or args.reads):
            done_roofs.add((N, K))
            bt = b.t()                                            # (N, K) contiguous: the weight itself
            copy = torch.empty_like(bt)
            fns["roof: torch copy B (read+write)"] = lambda: copy.copy_(bt)
            fns["roof: torch sum B (read)"] = lambda: torch.sum(bt.view(torch.int32).view(-1), 0,
                                                                        dtype=torch.int64, out=sink)
            if reader is not None:
                run = reader
                words = bt.view(torch.int32).view(-1)
                parts = torch.empty((words.numel() + 8191) // 8192, device="cuda", dtype=torch.int32)
                for policy in ("", "evict_first"):
                    try:
                        compiled = run(words, parts, policy)
                        torch.cuda.synchronize()
                        fns[f"roof: triton read B {policy or 'normal'}"] = (lambda p=policy: run(words, parts, p))
                        ptx = compiled.asm["ptx"]
                        hints = sorted({line.split()[0] for line in ptx.splitlines()
                                        if "evict" in line or "cache_hint" in line or "ld.global" in line})
                        print(f"(triton read {policy or 'normal'} PTX load / policy instructions: {hints})")
                    except Exception as exc:
                        print(f"| {N}x{K} | triton read {policy} | FAILED {type(exc).__name__}: {str(exc)[:150]} |")
        labels, outputs = {}, []            # outputs: every bound launch's D stays allocated while it is timed
        table = reads_variants if args.reads else final_variants if args.final else variants
        for label, spec in table(M, N, K):
            try:
                force_with(maker(spec))
                plan_module.OPERAND_L2_PROMOTION = spec[1] if spec is not None and spec[0] == "promo" else "none"
                out = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
                tsjit.ops.matmul(a, b, out=out)
                torch.cuda.synchronize()
                plan_module.OPERAND_L2_PROMOTION = "none"
            except Exception as exc:
                print(f"| {M}x{N}x{K} | {label} | FAILED: {type(exc).__name__}: {str(exc)[:160]} | | | | | | |",
                      flush=True)
                continue
            plan = next(iter(mm._PLANS.values()))
            err = sampled_error(out, a, b, rng)
            again = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
            tsjit.ops.matmul(a, b, out=again)
            same = torch.equal(out, again)
            config = plan.config
            text = config.describe() + (f", X {config.x_policy}" if config.x_policy else "") + \
                (f", Y {config.y_policy}" if config.y_policy else "")
            if not (err < 1e-2 and same):
                print(f"| {M}x{N}x{K} | {label} | {text} | CHECK FAILED {err:.1e} same={same} | | | | | |", flush=True)
                continue
            bound = next(iter(plan.bindings.values()))           # the first call's: into `out`
            labels[label] = (text, f"{err:.1e}")
            outputs.append(out)
            fns[label] = (lambda bound=bound: bound(stream))
        force_with(None)
        t = measure(fns)
        base = {f: t[("cuBLAS", f)] for f in flushes}
        for label in fns:
            text, err = labels.get(label, ("", ""))
            z, r = t[(label, "zero")], t[(label, "read")]
            rate = f"{b_bytes / z / 1e9:.2f} / {b_bytes / r / 1e9:.2f}"
            print(f"| {M}x{N}x{K} | {label} | {text} | {err} | {z * 1e3:.1f} | {base['zero'] / z:.3f} | "
                  f"{r * 1e3:.1f} | {base['read'] / r:.3f} | {rate} |", flush=True)
        if time.perf_counter() - began > args.seconds:
            print("(stopped: time)")
            break
    print(f"device: {torch.cuda.get_device_name(0)}, torch {torch.__version__}, {time.perf_counter() - began:.1f} s")


if __name__ == "__main__":
    main()
