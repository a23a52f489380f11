"""Attention forward benchmark (issue 16): TFLOP/s of ``tsjit.ops.attention`` (the Task Scheduling kernel of
tsjit/examples/attention.py) vs torch SDPA's cuDNN, flash (FA2) and memory-efficient backends, bf16,
FLOPs = 4 * B * H * S^2 * D (halved when causal).

All libraries run on the same inputs in one process, timed in turns (CUDA events, warm-up, one untimed call
before each timed repetition, medians); the
tsjit output is compared with cuDNN's (max abs difference) before timing.

    PYTHONPATH=. python benchmarks/attention.py [--quick] [--shapes main|all] [--variants] [--sass]
        [--shape B,H,H_kv,S,D,causal ...] [--variant NAME:key=value,... ...] [--hd256]

``--fp8`` times the fp8 (e4m3, per-tensor scales) forward instead, against our bf16 forward and cuDNN on the
dequantized inputs (``FP8_SHAPES``, or ``--shape``): ``fp8`` transposes V inside each call (the transpose kernel of
tsjit/examples/attention_v_transpose.py, timed; the last column times it alone), ``fp8-vt`` is given V already in
the kernel's layout (``v_transposed=True``); the ratios are to ``tsjit`` bf16;
``--variant`` adds fp8-vt columns with other options (``--variant st3:stages=3``).

``--hd256`` replaces the shape list with ``HD256_SHAPES`` (head_dim 256, causal and not, S = 4096 and 8192).

``--variants`` also times other tsjit configurations (``TSJIT_VARIANTS``: the one-tile schedule, warpgroup
ping-pong, the grid tile order under a causal mask, other KV tile sizes, a 1-stage Q ring); ``--sass`` prints the
SASS instruction counts of the kernels.  ``--shape`` replaces the shape list (``causal`` is 0 or 1) and
``--variant`` (repeatable) replaces ``TSJIT_VARIANTS``, e.g. ``--variant bn96:block_n=96,stages=4``
(integer values; ``true`` / ``false`` for the boolean options of ``tsjit.ops.attention``).
"""
from __future__ import annotations

import argparse
import functools

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

import tsjit.ops
from timing import interleaved_time_ms  # benchmarks/timing.py

# (batch, heads, kv_heads, seqlen, head_dim, causal)
MAIN_SHAPES = [(4, 16, 16, 4096, 128, False), (4, 16, 16, 4096, 128, True), (2, 16, 16, 8192, 128, False),
               (2, 16, 16, 8192, 128, True), (4, 32, 32, 4096, 64, False), (4, 32, 32, 4096, 64, True)]
EXTRA_SHAPES = [(16, 16, 16, 1024, 128, False), (16, 16, 16, 1024, 128, True), (8, 16, 16, 2048, 128, False),
                (8, 16, 16, 2048, 128, True), (1, 16, 16, 16384, 128, False), (1, 16, 16, 16384, 128, True),
                (4, 32, 8, 4096, 128, False), (4, 32, 8, 4096, 128, True), (4, 16, 16, 4096, 256, False),
                (4, 16, 16, 4096, 256, True)]
#: ``--hd256``: head_dim 256 (80-key tiles, O stored from registers), causal and not
HD256_SHAPES = [(4, 16, 16, 4096, 256, False), (4, 16, 16, 4096, 256, True), (2, 16, 16, 8192, 256, False),
                (2, 16, 16, 8192, 256, True)]
BACKENDS = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION,
            "efficient": SDPBackend.EFFICIENT_ATTENTION}


def sdpa_call(backend, q, k, v, causal):
    """An SDPA call on (B, H, S, D) views of FlashAttention-layout tensors, or None if the backend refuses."""
    qt, kt, vt = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
    group = q.shape[2] // k.shape[2]
    if group > 1:
        kt, vt = kt.repeat_interleave(group, dim=1), vt.repeat_interleave(group, dim=1)

    def run():
        with sdpa_kernel(backend):
            return torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
    try:
        run()
        torch.cuda.synchronize()
    except RuntimeError:
        return None
    return run


TSJIT_VARIANTS = {"one-tile": dict(overlap=False), "no-pingpong": dict(overlap=True, pingpong=False),
                  "grid-order": dict(tile_table=False), "bn160-q1": dict(block_n=160, q_stages=1)}


def variant_call(q, k, v, causal, out, options):
    """A tsjit call with ``options``, or None where the variant does not fit this head_dim (shared memory)."""
    def run():
        return tsjit.ops.attention(q, k, v, causal=causal, out=out, **options)
    try:
        run()
    except tsjit.TsjitError:
        return None
    return run


def parse_variant(text):
    """``NAME:key=value,...`` -> (name, options of tsjit.ops.attention)."""
    name, _, body = text.partition(":")
    options = {}
    for item in filter(None, body.split(",")):
        key, _, value = item.partition("=")
        options[key] = {"true": True, "false": False}.get(value.lower(), None)
        if options[key] is None:
            options[key] = int(value)
    return name, options


def parse_shape(text):
    """``B,H,H_kv,S,D,causal`` -> the tuple of MAIN_SHAPES."""
    *dims, causal = (int(x) for x in text.split(","))
    return (*dims, bool(causal))


def bench_shape(batch, heads, kv_heads, seqlen, head_dim, causal, reps, variants=False):
    q = torch.randn(batch, seqlen, heads, head_dim, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(batch, seqlen, kv_heads, head_dim, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(batch, seqlen, kv_heads, head_dim, device="cuda", dtype=torch.bfloat16)
    out = torch.empty_like(q)
    fns = {"tsjit": lambda: tsjit.ops.attention(q, k, v, causal=causal, out=out)}
    if variants:
        for name, options in TSJIT_VARIANTS.items():
            fn = variant_call(q, k, v, causal, out, options)
            if fn is not None:
                fns[name] = fn
    for name, backend in BACKENDS.items():
        fn = sdpa_call(backend, q, k, v, causal)
        if fn is not None:
            fns[name] = fn
    diff = None
    if "cudnn" in fns:
        # every tsjit configuration is checked against cuDNN before timing (out poisoned before each launch);
        # the reported difference is the largest over them
        reference = fns["cudnn"]().transpose(1, 2).float()
        for name in [n for n in fns if n == "tsjit" or n in TSJIT_VARIANTS]:
            out.fill_(float("nan"))
            fns[name]()
            err = (out.float() - reference).abs().max().item()
            if not err <= 0.05:
                raise SystemExit(f"{name} at {(batch, heads, kv_heads, seqlen, head_dim, causal)}: max |tsjit - "
                                 f"cuDNN| = {err}")
            diff = err if diff is None else max(diff, err)
    times = interleaved_time_ms(fns, reps=reps, prime=True)
    flops = 4 * batch * heads * seqlen * seqlen * head_dim * (0.5 if causal else 1.0)
    return {name: flops / (ms * 1e-3) / 1e12 for name, ms in times.items()}, diff


FP8_SHAPES = [(4, 16, 16, 4096, 128, False), (4, 16, 16, 4096, 128, True), (2, 16, 16, 8192, 128, False),
              (2, 16, 16, 8192, 128, True)]


def bench_fp8_shape(batch, heads, kv_heads, seqlen, head_dim, causal, reps, variants=None):
    """TFLOP/s of the fp8 forward (V transposed per call, and pre-transposed; ``variants``: more pre-transposed
    configurations, name -> options) vs the bf16 forward and cuDNN on the dequantized inputs, timed in turns; the
    max |fp8 - cuDNN| (checked < 0.05 before timing); and the time of ``transpose_v_fp8`` alone (us, in the same
    turns)."""
    from tsjit.ops.attention_fp8 import transpose_v_fp8
    shapes = [(batch, seqlen, h, head_dim) for h in (heads, kv_heads, kv_heads)]
    q8, k8, v8 = ((torch.randn(s, device="cuda") * 2).to(torch.float8_e4m3fn) for s in shapes)
    scales = (0.125, 0.0625, 0.25)
    q, k, v = ((t.float() * c).bfloat16() for t, c in zip((q8, k8, v8), scales))
    vt8 = transpose_v_fp8(v8)
    out, out8 = torch.empty_like(q), torch.empty_like(q)
    fp8_args = dict(causal=causal, q_scale=scales[0], k_scale=scales[1], v_scale=scales[2], out=out8)
    fns = {"tsjit": lambda: tsjit.ops.attention(q, k, v, causal=causal, out=out),
           "fp8": lambda: tsjit.ops.attention(q8, k8, v8, **fp8_args),
           "fp8-vt": lambda: tsjit.ops.attention(q8, k8, vt8, v_transposed=True, **fp8_args)}
    for name, options in (variants or {}).items():
        fns[name] = functools.partial(tsjit.ops.attention, q8, k8, vt8, v_transposed=True, **fp8_args, **options)
    cudnn = sdpa_call(BACKENDS["cudnn"], q, k, v, causal)
    diff = None
    if cudnn is not None:
        fns["cudnn"] = cudnn
        reference = cudnn().transpose(1, 2).float()
        for name in [n for n in fns if n.startswith("fp8") or n in (variants or {})]:
            out8.fill_(float("nan"))
            fns[name]()
            err = (out8.float() - reference).abs().max().item()
            if not err <= 0.05:
                raise SystemExit(f"{name} at {(batch, heads, kv_heads, seqlen, head_dim, causal)}: max |fp8 - cuDNN| "
                                 f"= {err}")
            diff = err if diff is None else max(diff, err)
    fns["v^T"] = lambda: transpose_v_fp8(v8)
    times = interleaved_time_ms(fns, reps=reps, prime=True)
    transpose_us = times.pop("v^T") * 1e3
    flops = 4 * batch * heads * seqlen * seqlen * head_dim * (0.5 if causal else 1.0)
    return {name: flops / (ms * 1e-3) / 1e12 for name, ms in times.items()}, diff, transpose_us


def fp8_table(shapes, reps, variants=None):
    """The fp8 table (``--fp8``): TFLOP/s per column and each fp8 column's ratio to our bf16 forward."""
    fp8_columns = ["fp8", "fp8-vt"] + list(variants or {})
    print("| B, H, H_kv, S, D | causal | " + " | ".join(fp8_columns) + " | tsjit bf16 | cudnn | " +
          " | ".join(f"{c} / bf16" for c in fp8_columns) + " | max |fp8 - cuDNN| | V^T us |")
    print("|---|---|" + "---|" * (2 * len(fp8_columns) + 4))
    for shape in shapes:
        tf, diff, transpose_us = bench_fp8_shape(*shape, reps=reps, variants=variants)
        b, h, hkv, s, d, causal = shape
        cells = [f"{tf[c]:.0f}" for c in fp8_columns] + [f"{tf['tsjit']:.0f}", f"{tf.get('cudnn', float('nan')):.0f}"]
        cells += [f"{tf[c] / tf['tsjit']:.3f}" for c in fp8_columns]
        print(f"| {b}, {h}, {hkv}, {s}, {d} | {causal} | " + " | ".join(cells) +
              f" | {diff if diff is None else f'{diff:.2e}'} | {transpose_us:.1f} |", flush=True)


def print_sass():
    """ptxas statistics and SASS counts of the default kernels (each head_dim, causal or not)."""
    from sass_check import sass_report  # benchmarks/sass_check.py
    from tsjit.examples import attention as program
    for head_dim in program.HEAD_DIMS:
        for causal in (False, True):
            kernel = program.compile_config(head_dim, causal)
            meta = kernel.metadata
            print(f"head_dim {head_dim} causal {causal}: {meta['tool_version']}, spill stores "
                  f"{meta['spill_stores_bytes']} B, loads {meta['spill_loads_bytes']} B, stack "
                  f"{meta['stack_frame_bytes']} B")
            sass_report(kernel.cubin)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--shapes", choices=["main", "all"], default="main")
    parser.add_argument("--variants", action="store_true")
    parser.add_argument("--sass", action="store_true")
    parser.add_argument("--shape", action="append", default=[])
    parser.add_argument("--variant", action="append", default=[])
    parser.add_argument("--fp8", action="store_true")
    parser.add_argument("--hd256", action="store_true", help="the head_dim-256 shapes (HD256_SHAPES)")
    args = parser.parse_args()
    if args.fp8:            # --variant adds pre-transposed fp8 configurations
        fp8_table([parse_shape(t) for t in args.shape] or FP8_SHAPES, 5 if args.quick else 10,
                  dict(parse_variant(v) for v in args.variant))
        return
    if args.variant:
        TSJIT_VARIANTS.clear()
        TSJIT_VARIANTS.update(parse_variant(v) for v in args.variant)
        args.variants = True
    if args.sass:
        print_sass()
    shapes = MAIN_SHAPES + (EXTRA_SHAPES if args.shapes == "all" else [])
    if args.hd256:
        shapes = HD256_SHAPES
    if args.shape:
        shapes = [parse_shape(text) for text in args.shape]
    reps = 5 if args.quick else 10
    columns = ["tsjit", "cudnn", "flash", "efficient"] + (list(TSJIT_VARIANTS) if args.variants else [])
    print("| B, H, H_kv, S, D | causal | " + " | ".join(columns) + " | tsjit / cuDNN | max |tsjit - cuDNN| |")
    print("|---|---|" + "---|" * (len(columns) + 2))
    for shape in shapes:
        tflops, diff = bench_shape(*shape, reps=reps, variants=args.variants)
        cells = [f"{tflops[n]:.0f}" if n in tflops else "-" for n in columns]
        ratio = f"{tflops['tsjit'] / tflops['cudnn']:.3f}" if "cudnn" in tflops else "-"
        b, h, hkv, s, d, causal = shape
        print(f"| {b}, {h}, {hkv}, {s}, {d} | {causal} | " + " | ".join(cells) +
              f" | {ratio} | {diff if diff is None else f'{diff:.2e}'} |", flush=True)


if __name__ == "__main__":
    main()
