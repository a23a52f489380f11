"""Issue 16 GPU job (helper i16b, 2026-12-02): why is the causal fp8 forward at (4, 16, 4096, 128) unstable?

One process: the same causal problem allocated three times at different addresses (a padding allocation of a
random size before each), each timed interleaved with our bf16 forward and fp8-vt variants (ring stages, grid tile
order, grid size, no ping-pong); every sample printed (min / median / max), plus the host time per call of the
fp8 launch; then (2, 16, 8192, 128) causal once; then both shapes non-causal with conditional rescaling
(``rescale_threshold=8``), polynomial exp2 shares and tile sizes.  Checked against cuDNN (< 0.05) before timing.

    PYTHONPATH=. python benchmarks/gpu_batches/i16b_causal_job.py
"""
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import tsjit.ops  # noqa: E402
from attention import BACKENDS, sdpa_call  # noqa: E402
from tsjit.ops.attention_fp8 import transpose_v_fp8  # noqa: E402

T0 = time.time()
VARIANTS = {"st3": dict(stages=3), "st4": dict(stages=4), "grid": dict(tile_table=False), "sms128": dict(sms=128),
            "nopp": dict(pingpong=False), "rt8": dict(rescale_threshold=8.0)}
#: non-causal: conditional rescaling with the polynomial share, and tile sizes
FULL_VARIANTS = {"rt8": dict(rescale_threshold=8.0), "rt8p0": dict(rescale_threshold=8.0, exp2_polynomial=0),
                 "rt8p5": dict(rescale_threshold=8.0, exp2_polynomial=5), "p5": dict(exp2_polynomial=5),
                 "bn224rt8": dict(block_n=224, stages=2, rescale_threshold=8.0),
                 "bn128rt8": dict(block_n=128, stages=2, rescale_threshold=8.0), "nopp": dict(pingpong=False),
                 "rt8p5nopp": dict(rescale_threshold=8.0, exp2_polynomial=5, pingpong=False)}


def samples_ms(fns, reps=8, inner=5):
    for fn in fns.values():
        fn(); fn()
    torch.cuda.synchronize()
    out = {n: [] for n in fns}
    for _ in range(reps):
        for n, fn in fns.items():
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            fn()
            a.record()
            for _ in range(inner):
                fn()
            b.record()
            b.synchronize()
            out[n].append(a.elapsed_time(b) / inner)
    return out


def problem(batch, heads, seqlen, head_dim, causal, pad_mib, variants=VARIANTS):
    pad = torch.empty(pad_mib * 2**20 + 4096 * pad_mib, dtype=torch.uint8, device="cuda")
    shape = (batch, seqlen, heads, head_dim)
    q8, k8, v8 = ((torch.randn(shape, device="cuda") * 2).to(torch.float8_e4m3fn) for _ in range(3))
    scales = (0.125, 0.0625, 0.25)
    q, k, v = ((t.float() * c).bfloat16() for t, c in zip((q8, k8, v8), scales))
    vt8 = transpose_v_fp8(v8)
    out, out8 = torch.empty_like(q), torch.empty_like(q)
    args = dict(causal=causal, q_scale=scales[0], k_scale=scales[1], v_scale=scales[2], out=out8, v_transposed=True)
    fns = {"bf16": lambda: tsjit.ops.attention(q, k, v, causal=causal, out=out),
           "fp8-vt": lambda: tsjit.ops.attention(q8, k8, vt8, **args)}
    for name, opts in variants.items():
        fns[name] = (lambda o: lambda: tsjit.ops.attention(q8, k8, vt8, **args, **o))(opts)
    ref = sdpa_call(BACKENDS["cudnn"], q, k, v, causal)().transpose(1, 2).float()
    for name, fn in fns.items():
        if name == "bf16":
            continue
        out8.fill_(float("nan"))
        fn()
        err = (out8.float() - ref).abs().max().item()
        assert err <= 0.05, (name, err)
    addrs = " ".join(f"{n}%2M={t.data_ptr() % 2**21:#x}" for n, t in (("q8", q8), ("k8", k8), ("vt8", vt8),
                                                                        ("out8", out8)))
    return fns, addrs, (pad, q8, k8, v8, q, k, v, vt8, out, out8, ref)


def report(shape, fns, addrs):
    batch, heads, seqlen, head_dim, causal = shape
    flops = 4 * batch * heads * seqlen * seqlen * head_dim * (0.5 if causal else 1.0)
    s = samples_ms(fns)
    med = {n: statistics.median(v) for n, v in s.items()}
    cells = []
    for n, v in s.items():
        tf = [flops / (x * 1e-3) / 1e12 for x in v]
        cells.append(f"{n} {flops / (med[n] * 1e-3) / 1e12:.0f} [{min(tf):.0f}-{max(tf):.0f}] "
                     f"x{med['bf16'] / med[n]:.3f}")
    fn = fns["fp8-vt"]
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(20):
        fn()
    host = (time.perf_counter() - t) / 20 * 1e6
    torch.cuda.synchronize()
    print(f"{shape} | " + " | ".join(cells) + f" | fp8 host {host:.0f} us/call, gpu {med['fp8-vt'] * 1e3:.0f} us | "
          f"{addrs} ({time.time() - T0:.1f} s)", flush=True)


for rep, pad in enumerate((0, 37, 301)):
    shape = (4, 16, 4096, 128, True)
    fns, addrs, keep = problem(*shape, pad)
    report(shape, fns, addrs)
    del fns, keep
    torch.cuda.empty_cache()
shape = (2, 16, 8192, 128, True)
fns, addrs, keep = problem(*shape, 0)
report(shape, fns, addrs)
del fns, keep
for shape in ((4, 16, 4096, 128, False), (2, 16, 8192, 128, False)):
    fns, addrs, keep = problem(*shape, 0, FULL_VARIANTS)
    report(shape, fns, addrs)
    del fns, keep
print(f"done in {time.time() - T0:.1f} s", flush=True)
