"""Issue 16, helper i16g: interleaved timings of fp8 forward variants against our bf16 forward and cuDNN, with the
kernels compiled first by worker processes (so a 40-second GPU job can time many variants).

    PYTHONPATH=. python benchmarks/gpu_batches/i16g_probe.py [--workers 8] [--reps 9] SHAPES VARIANT...

``SHAPES``: ``B,H,S,causal;...`` (head_dim 128).  ``VARIANT``: ``[n/|c/]name:key=value,...`` -- options of
``tsjit.ops.attention_fp8.attention_fp8`` (the experimental kernel options too; ``probe``: the upper-bound variants
of branch i16g, wrong results by design, which skip the check); ``n/`` only non-causal shapes, ``c/`` only causal
ones.  Columns: ``bf16`` (our bf16 forward), ``cudnn`` (SDPA's cuDNN backend on the same dequantized bf16
inputs), ``fp8`` (the default fp8 call, V transposed in the call), ``fp8-vt`` (the default, V pre-transposed), then
the variants (V pre-transposed).  Every non-probe fp8 column is checked against the bf16 output first (outputs
poisoned with NaN, max abs difference < 0.05).  CUDA events, 2 warm-up calls, ``--reps`` rounds of (1 untimed + 5
timed calls) per column in turns, medians.
"""
import argparse
import os
import subprocess
import sys
import time

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

import tsjit.ops
from tsjit.ops.attention_fp8 import attention_fp8, transpose_v_fp8

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from attention import parse_variant as attention_variant  # noqa: E402
from timing import interleaved_time_ms  # noqa: E402

SCALES = (0.125, 0.0625, 0.25)


def parse_variant(text):
    """``[n/|c/]NAME:key=value,...`` -> (kind, name, options) (benchmarks/attention.py's form, with the kind)."""
    kind = "a"
    if text[1:2] == "/":
        kind, text = text[0], text[2:]
    return (kind, *attention_variant(text))


def build(batch, heads, seqlen, causal, variants):
    """The columns of one shape: name -> (callable, target output, checked)."""
    shape = (batch, seqlen, heads, 128)
    gen = torch.Generator(device="cuda").manual_seed(16)
    q8, k8, v8 = ((torch.randn(shape, device="cuda", generator=gen) * 2).to(torch.float8_e4m3fn) for _ in range(3))
    q, k, v = ((t.float() * c).bfloat16() for t, c in zip((q8, k8, v8), SCALES))
    vt8 = transpose_v_fp8(v8)
    out, out8 = torch.empty_like(q), torch.empty_like(q)
    fp8_args = dict(causal=causal, q_scale=SCALES[0], k_scale=SCALES[1], v_scale=SCALES[2], out=out8)
    cols = {"bf16": (lambda: tsjit.ops.attention(q, k, v, causal=causal, out=out), out, False),
            "fp8": (lambda: tsjit.ops.attention(q8, k8, v8, **fp8_args), out8, True),
            "fp8-vt": (lambda: tsjit.ops.attention(q8, k8, vt8, v_transposed=True, **fp8_args), out8, True)}
    qt, kt, vt = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)

    def cudnn():
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
    cols["cudnn"] = (cudnn, None, False)
    base = dict(causal=causal, scale=None, left=None, right=0 if causal else None, q_scale=SCALES[0],
                k_scale=SCALES[1], v_scale=SCALES[2], v_transposed=True, return_lse=False, out=out8, lse_out=None,
                sms=None, pingpong=None, q_stages=None, tile_table=None, torch=torch, block_n=None, stages=None)
    for kind, name, options in variants:
        if kind != "a" and kind != ("c" if causal else "n"):
            continue
        call = dict(base, **options)
        cols[name] = ((lambda c=call: attention_fp8(q8, k8, vt8, **c)), out8, not options.get("probe"))
    return cols


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--worker", type=int, default=-1)
    parser.add_argument("--reps", type=int, default=9)
    parser.add_argument("shapes")
    parser.add_argument("variants", nargs="*")
    args = parser.parse_args()
    shapes = [tuple(int(x) for x in t.split(",")) for t in args.shapes.split(";")]
    variants = [parse_variant(t) for t in args.variants]
    if args.worker >= 0:          # compile this worker's share: one launch of each (the disk cache keeps them)
        jobs = []
        for b, h, s, c in shapes:
            for name in build(b, h, s, bool(c), variants):
                jobs.append((b, h, s, c, name))
        seen = set()
        unique = []
        for b, h, s, c, name in jobs:          # one compile per (causal, column): the first shape of each class
            if (c, name) not in seen:
                seen.add((c, name))
                unique.append((b, h, s, c, name))
        for i, (b, h, s, c, name) in enumerate(unique):
            if i % args.workers == args.worker and name != "cudnn":
                try:
                    build(b, h, s, bool(c), variants)[name][0]()
                except Exception as err:  # noqa: BLE001 -- the main process reports it
                    print(f"worker {args.worker}: {name}: {type(err).__name__}: {err}"[:300], flush=True)
        torch.cuda.synchronize()
        return
    if args.workers:
        began = time.perf_counter()
        procs = [subprocess.Popen([sys.executable, __file__, "--worker", str(i), "--workers", str(args.workers),
                                   args.shapes, *args.variants]) for i in range(args.workers)]
        for p in procs:
            p.wait()
        print(f"(compiled by {args.workers} processes in {time.perf_counter() - began:.1f} s)", flush=True)
    for b, h, s, c in shapes:
        cols = build(b, h, s, bool(c), variants)
        fns = {}
        ref = None
        for name, (fn, target, checked) in cols.items():
            if target is not None:
                target.fill_(float("nan"))
            try:
                result = fn()
            except Exception as err:  # noqa: BLE001 -- report and drop the column
                print(f"{name}: {type(err).__name__}: {err}"[:300], flush=True)
                continue
            if name == "bf16":
                ref = target.float().clone()
            elif name == "cudnn":
                diff = (result.transpose(1, 2).float() - ref).abs().max().item()
                print(f"  cudnn: max |cudnn - bf16| = {diff:.2e}")
            elif checked:
                diff = (target.float() - ref).abs().max().item()
                if not diff <= 0.05:
                    print(f"  {name}: max |fp8 - bf16| = {diff:.2e}: FAILED, dropped", flush=True)
                    continue
            fns[name] = fn
        times = interleaved_time_ms(fns, reps=args.reps, prime=True)
        flops = 4 * b * h * s * s * 128 * (0.5 if c else 1.0)
        tf = {n: flops / (ms * 1e-3) / 1e12 for n, ms in times.items()}
        print(f"| {b}, {h}, {s}, 128 | {bool(c)} | " +
              " | ".join(f"{n} {tf[n]:.0f} ({tf[n] / tf['bf16']:.3f})" for n in tf) + " |", flush=True)


if __name__ == "__main__":
    main()
