"""Attention forward benchmark (issue 16): TFLOP/s of ``tsjit.ops.attention`` (the Task Scheduling kernel of
tsjit/examples/attention.py) vs torch SDPA's cuDNN, flash (FA2) and memory-efficient backends, bf16,
FLOPs = 4 * B * H * S^2 * D (halved when causal).

All libraries run on the same inputs in one process, timed in turns (CUDA events, warm-up, one untimed call
before each timed repetition, medians); the
tsjit output is compared with cuDNN's (max abs difference) before timing.

    PYTHONPATH=. python benchmarks/attention.py [--quick] [--shapes main|all] [--rows 0-7,9] [--precompile N]
        [--no-f64] [--variants] [--sass] [--shape B,H,H_kv,S,D,causal ...] [--variant NAME:key=value,... ...]
        [--hd256]

The default run times the full shape list of issue 16 (``FULL_SHAPES``: the issue's table, S = 1024, 2048 and
16384 and GQA 32 / 8 at head_dim 128, head_dim 64 at S = 1024, 2048 and 16384, head_dim 256; causal and not);
``--quick`` (or ``--shapes main``) the table alone (``MAIN_SHAPES``).  ``--rows`` keeps the rows of that list with
these indices (to split a run over several jobs).  ``--precompile N`` first compiles the kernels the rows launch in N
worker processes (into the disk cache), so the timed process loads them instead of compiling one after another.
Two more columns compare errors: the max abs error against float64 (the reference softmax per row in float64,
computed on the GPU) of ``tsjit`` and of the flash backend, on the same inputs; ``--no-f64`` leaves them out.
triton's fused-attention tutorial kernel is a column where it is importable (``TRITON_FUSED_ATTENTION``: the path
of the tutorial's ``06-fused-attention.py``; triton 3.x ships no such module), else the run says so.

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
import concurrent.futures
import functools
import importlib.util
import multiprocessing
import os
import time

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

import tsjit.ops
from tsjit.examples.attention_config import default_kv_tiles
from timing import interleaved_time_ms  # benchmarks/timing.py

# (batch, heads, kv_heads, seqlen, head_dim, causal)
MAIN_SHAPES = [(4, 16, 16, 4096, 128, False), (4, 16, 16, 4096, 128, True), (2, 16, 16, 8192, 128, False),
               (2, 16, 16, 8192, 128, True), (4, 32, 32, 4096, 64, False), (4, 32, 32, 4096, 64, True)]
EXTRA_SHAPES = [(16, 16, 16, 1024, 128, False), (16, 16, 16, 1024, 128, True), (8, 16, 16, 2048, 128, False),
                (8, 16, 16, 2048, 128, True), (1, 16, 16, 16384, 128, False), (1, 16, 16, 16384, 128, True),
                (4, 32, 8, 4096, 128, False), (4, 32, 8, 4096, 128, True), (4, 16, 16, 4096, 256, False),
                (4, 16, 16, 4096, 256, True)]
#: head_dim 64 at the other sequence lengths of the list (three consumer warpgroups, 192-row Q tiles)
EXTRA_HD64_SHAPES = [(16, 32, 32, 1024, 64, False), (16, 32, 32, 1024, 64, True), (8, 32, 32, 2048, 64, False),
                     (8, 32, 32, 2048, 64, True), (1, 32, 32, 16384, 64, False), (1, 32, 32, 16384, 64, True)]
#: the default run: the issue's list
FULL_SHAPES = MAIN_SHAPES + EXTRA_SHAPES + EXTRA_HD64_SHAPES
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


def bench_shape(batch, heads, kv_heads, seqlen, head_dim, causal, reps, variants=False, errors=None):
    """TFLOP/s of tsjit (and its variants) and the SDPA backends (and triton's tutorial kernel, where importable),
    timed in turns, and the max |tsjit - cuDNN| (checked < 0.05 first, outputs NaN-poisoned).  ``errors``: a dict
    that receives the max abs errors against float64 of ``tsjit`` and ``flash`` (:func:`float64_errors`)."""
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
    fn = triton_call(q, k, v, causal)
    if fn is not None:
        fns["triton"] = fn
    if errors is not None:
        out.fill_(float("nan"))
        fns["tsjit"]()
        outputs = {"tsjit": out.clone()}
        if "flash" in fns:
            outputs["flash"] = fns["flash"]().transpose(1, 2)
        errors.update(float64_errors(q, k, v, causal, outputs))
        del outputs
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
        del reference
    times = interleaved_time_ms(fns, reps=reps, prime=True)
    flops = 4 * batch * heads * seqlen * seqlen * head_dim * (0.5 if causal else 1.0)
    return {name: flops / (ms * 1e-3) / 1e12 for name, ms in times.items()}, diff


def float64_errors(q, k, v, causal, outputs):
    """Max abs error against float64 attention of each of ``outputs`` (name -> (B, S, H, D) tensor) for the
    (B, S, H, D) / (B, S, H_kv, D) inputs ``q``, ``k``, ``v`` (scale 1/sqrt(D); causal: bottom-right aligned):
    the scores, the softmax per row and P V in float64 on the GPU, per (batch, KV head) and block of query rows
    (at most 2^27 scores, 1 GiB, at a time).  Returns {name: float}."""
    batch, seqlen_q, heads, head_dim = q.shape
    seqlen_k, kv_heads = k.shape[1], k.shape[2]
    group = heads // kv_heads
    rows = max(1, min(seqlen_q, (1 << 27) // (group * seqlen_k)))
    scale = 1.0 / head_dim ** 0.5
    worst = {name: torch.zeros((), dtype=torch.float64, device=q.device) for name in outputs}
    cols = torch.arange(seqlen_k, device=q.device)
    for b in range(batch):
        for j in range(kv_heads):
            kd, vd = k[b, :, j].double(), v[b, :, j].double()
            heads_j = slice(j * group, (j + 1) * group)
            for r0 in range(0, seqlen_q, rows):
                r1 = min(seqlen_q, r0 + rows)
                s = (q[b, r0:r1, heads_j].double().transpose(0, 1) @ kd.T) * scale      # (group, rows, keys)
                if causal:
                    last = torch.arange(r0, r1, device=q.device)[:, None] + (seqlen_k - seqlen_q)
                    s.masked_fill_(cols[None, :] > last, float("-inf"))
                o = torch.softmax(s, dim=-1) @ vd
                del s
                for name, t in outputs.items():
                    err = (t[b, r0:r1, heads_j].double().transpose(0, 1) - o).abs().max()
                    worst[name] = torch.maximum(worst[name], err)
    return {name: value.item() for name, value in worst.items()}


def triton_call(q, k, v, causal):
    """triton's fused-attention tutorial kernel on (B, H, S, D) copies of the inputs, where importable: the
    module at ``$TRITON_FUSED_ATTENTION`` (the tutorial's ``06-fused-attention.py``, whose ``attention`` is
    ``_attention.apply``), else None (triton 3.x ships no fused-attention module: ``triton.ops`` is gone)."""
    module = _triton_tutorial()
    if module is None or k.shape[2] != q.shape[2]:
        return None
    qt, kt, vt = (t.transpose(1, 2).contiguous() for t in (q, k, v))
    scale = 1.0 / q.shape[-1] ** 0.5

    def run():
        return module.attention(qt, kt, vt, causal, scale)
    try:
        run()
        torch.cuda.synchronize()
    except Exception as err:  # noqa: BLE001 -- a tutorial kernel that cannot run a shape is left out of its row
        print(f"triton tutorial kernel: {type(err).__name__}: {err}", flush=True)
        return None
    return run


@functools.lru_cache(maxsize=1)
def _triton_tutorial():
    path = os.environ.get("TRITON_FUSED_ATTENTION")
    if not path:
        return None
    spec = importlib.util.spec_from_file_location("triton_fused_attention", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def kernel_key(shape):
    """What selects the default kernel of a shape (head_dim, mask, KV tiles): shapes with one key share it."""
    _, _, _, seqlen, head_dim, causal = shape
    return head_dim, causal, default_kv_tiles(head_dim, seqlen, True, causal)


def _compile_one(shape, options=None):
    """One precompile worker: the call of ``shape`` with ``options`` (default: none) on a one-batch copy of it (the
    kernel depends on neither the batch nor the lengths, only on :func:`kernel_key` and the options), which leaves
    its cubin in the disk cache; a configuration tsjit refuses is skipped (the timed process leaves it out too)."""
    _, heads, kv_heads, seqlen, head_dim, causal = shape
    q = torch.randn(1, seqlen, heads, head_dim, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(1, seqlen, kv_heads, head_dim, device="cuda", dtype=torch.bfloat16)
    try:
        tsjit.ops.attention(q, k, k, causal=causal, out=torch.empty_like(q), **(options or {}))
    except tsjit.TsjitError:
        pass
    torch.cuda.synchronize()
    return shape


def precompile(cases, workers):
    """Compile the kernels of ``cases`` ((shape, variants) pairs; variants: name -> options of tsjit.ops.attention,
    or None): each shape's default (one per :func:`kernel_key`) and its variants, in ``workers`` spawned
    processes; returns the seconds it took.  The timed process then loads them from the disk cache."""
    start = time.perf_counter()
    jobs = {}
    for shape, variants in cases:
        jobs[kernel_key(shape)] = (shape, None)
        for options in (variants or {}).values():
            jobs[(kernel_key(shape), repr(sorted(options.items())))] = (shape, options)
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(max_workers=max(1, min(workers, len(jobs))),
                                                mp_context=context) as pool:
        list(pool.map(_compile_one, *zip(*jobs.values())))
    return time.perf_counter() - start


def parse_rows(text, count):
    """``0-7,9`` -> the row indices [0, 1, ..., 7, 9] (each < count)."""
    rows = []
    for part in filter(None, text.split(",")):
        first, _, last = part.partition("-")
        rows.extend(range(int(first), int(last or first) + 1))
    bad = [r for r in rows if not 0 <= r < count]
    if bad:
        raise SystemExit(f"--rows {text}: rows {bad} are outside the list's 0-{count - 1}")
    return rows


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
    parser.add_argument("--shapes", choices=["main", "all"], default=None,
                        help="main: the issue's table (MAIN_SHAPES); all (the default without --quick): FULL_SHAPES")
    parser.add_argument("--rows", default=None, help="indices into the shape list, e.g. 0-7,9")
    parser.add_argument("--precompile", type=int, default=0, metavar="N",
                        help="compile the rows' default kernels in N worker processes first")
    parser.add_argument("--no-f64", action="store_true", help="leave out the float64 error columns")
    parser.add_argument("--budget", type=float, default=None, metavar="S",
                        help="start no row after S seconds (the rest are listed as not run)")
    parser.add_argument("--variants", action="store_true")
    parser.add_argument("--sass", action="store_true")
    parser.add_argument("--shape", action="append", default=[])
    parser.add_argument("--variant", action="append", default=[])
    parser.add_argument("--fp8", action="store_true")
    parser.add_argument("--hd256", action="store_true", help="the head_dim-256 shapes (HD256_SHAPES)")
    args = parser.parse_args()
    start = time.perf_counter()
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
    shapes = MAIN_SHAPES if (args.shapes or ("main" if args.quick else "all")) == "main" else FULL_SHAPES
    if args.hd256:
        shapes = HD256_SHAPES
    if args.shape:
        shapes = [parse_shape(text) for text in args.shape]
    if args.rows:
        shapes = [shapes[r] for r in parse_rows(args.rows, len(shapes))]
    if args.precompile:
        seconds = precompile([(s, TSJIT_VARIANTS if args.variants else None) for s in shapes], args.precompile)
        print(f"precompiled the rows' kernels in {seconds:.1f} s", flush=True)
    if not os.environ.get("TRITON_FUSED_ATTENTION"):
        print("triton's fused-attention tutorial kernel: not importable (set TRITON_FUSED_ATTENTION to the path of "
              "its 06-fused-attention.py)", flush=True)
    reps = 5 if args.quick else 10
    columns = ["tsjit", "cudnn", "flash", "efficient"] + (["triton"] if _triton_tutorial() else []) + \
        (list(TSJIT_VARIANTS) if args.variants else [])
    f64 = [] if args.no_f64 else ["max |tsjit - f64|", "max |flash - f64|", "tsjit / flash error"]
    header = columns + ["tsjit / cuDNN", "max |tsjit - cuDNN|"] + f64
    print("| B, H, H_kv, S, D | causal | " + " | ".join(header) + " |")
    print("|---|---|" + "---|" * len(header))
    for shape in shapes:
        b, h, hkv, s, d, causal = shape
        if args.budget is not None and time.perf_counter() - start > args.budget:
            print(f"| {b}, {h}, {hkv}, {s}, {d} | {causal} | not run (budget of {args.budget:.0f} s spent) |",
                  flush=True)
            continue
        errors = None if args.no_f64 else {}
        tflops, diff = bench_shape(*shape, reps=reps, variants=args.variants, errors=errors)
        cells = [f"{tflops[n]:.0f}" if n in tflops else "-" for n in columns]
        cells.append(f"{tflops['tsjit'] / tflops['cudnn']:.3f}" if "cudnn" in tflops else "-")
        cells.append("-" if diff is None else f"{diff:.2e}")
        if errors is not None:
            flash = errors.get("flash")
            cells += [f"{errors['tsjit']:.3e}"] + ([f"{flash:.3e}", f"{errors['tsjit'] / flash:.3f}"] if flash
                                                   else ["-", "-"])
        print(f"| {b}, {h}, {hkv}, {s}, {d} | {causal} | " + " | ".join(cells) + " |", flush=True)
    print(f"total {time.perf_counter() - start:.1f} s", flush=True)


if __name__ == "__main__":
    main()
