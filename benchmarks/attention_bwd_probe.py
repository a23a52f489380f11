"""Probe of tsjit.ops.attention_backward on the GPU: max abs errors of dq / dk / dv against float64 autograd (and
torch flash's, same inputs) per case, each case guarded (an exception is printed, the next case runs), stopping
before ``--budget`` seconds; then optionally a timing against torch SDPA's backward (flash and cuDNN), interleaved.

    python3 benchmarks/attention_bwd_probe.py [--budget 30] [--cases 0,1,2] \
        [--time "4,2048,16,128 4,2048,16,128,c"] [--variants atomics,s3,own]
"""
import argparse
import math
import os
import sys
import time
import traceback

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "gpu"))
import torch  # noqa: E402

import test_attention_bwd_gpu as t  # noqa: E402

import tsjit.ops  # noqa: E402


def check(budget, cases):
    start = time.time()
    for case in cases:
        if time.time() - start > budget:
            print("budget reached; skipped", t.case_id(case), flush=True)
            continue
        try:
            c0 = time.time()
            grads, errors, scales, flash = t.run_case(case)
            finite = [bool(torch.isfinite(g).all()) for g in grads]
            print(f"{t.case_id(case)}: err dq/dk/dv {['%.3g' % e for e in errors]} flash "
                  f"{None if flash is None else ['%.3g' % e for e in flash]} max|ref| {['%.3g' % s for s in scales]} "
                  f"finite {finite} ({time.time() - c0:.1f} s)", flush=True)
        except Exception:  # noqa: BLE001
            print(f"{t.case_id(case)}: FAILED", flush=True)
            traceback.print_exc()


def timing(shapes, reps=10, variants=""):
    """Median CUDA-event times of one tsjit.ops.attention_backward call (preprocess, zeroed dQ workspace, kernel,
    dQ conversion: the whole call) and of torch SDPA's backward alone (flash, cuDNN: autograd.grad on a retained
    graph), interleaved in one loop; the inputs' out / lse are those of a float32 forward (timing only)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    for b, s, h, d, causal in shapes:
        q, k, v, do = (torch.randn((b, s, h, d), device="cuda", dtype=torch.bfloat16) for _ in range(4))
        scale = 1 / math.sqrt(d)
        scores = (q.transpose(1, 2).float() @ k.transpose(1, 2).float().transpose(-1, -2)) * scale
        if causal:
            scores = scores.masked_fill(torch.ones(s, s, device="cuda", dtype=torch.bool).triu(1), float("-inf"))
        lse = torch.logsumexp(scores, -1)
        out = (torch.softmax(scores, -1) @ v.transpose(1, 2).float()).transpose(1, 2).to(torch.bfloat16)
        del scores
        qt, kt, vt = (x.transpose(1, 2).detach().requires_grad_() for x in (q, k, v))
        fns = {"tsjit": lambda: tsjit.ops.attention_backward(q, k, v, out, lse, do, causal=causal, scale=scale)}
        options = {"atomics": dict(dq_tma=False), "s3": dict(stages=3), "own": dict(dq_shared=False),
                   "kv2": dict(kv_stages=2)}
        for name in [n for n in variants.split(",") if n]:
            if (name == "own" and d != 128) or (name == "kv2" and d != 64):
                continue                     # head_dim 64 computes dQ over its own keys; 128 has no room for kv2
            fns["tsjit_" + name] = (lambda option=options[name]: tsjit.ops.attention_backward(
                q, k, v, out, lse, do, causal=causal, scale=scale, **option))
        for name, backend in (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)):
            with sdpa_kernel(backend):
                o = torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=causal, scale=scale)
            fns[name] = (lambda o=o: torch.autograd.grad(o, (qt, kt, vt), do.transpose(1, 2), retain_graph=True))
        for fn in fns.values():
            fn()
            fn()
        # every variant checked before it is timed: its gradients against flash's (same inputs), max |diff| / max |ref|
        reference = [g.transpose(1, 2) for g in fns["flash"]()]
        checks = {}
        for name, fn in fns.items():
            if name.startswith("tsjit"):
                got = fn()
                checks[name] = max(((a.float() - b.float()).abs().max() / b.float().abs().max()).item()
                                   for a, b in zip(got, reference))
        times = {n: [] for n in fns}
        for _ in range(reps):
            for name, fn in fns.items():
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                e0.record()
                fn()
                e1.record()
                torch.cuda.synchronize()
                times[name].append(e0.elapsed_time(e1))
        med = {n: sorted(v)[len(v) // 2] for n, v in times.items()}
        flops = 2.5 * 4 * b * h * s * s * d / (2 if causal else 1)
        print(f"timing b{b} s{s} h{h} d{d} {'causal' if causal else 'full'}: " + ", ".join(
            f"{n} {ms:.3f} ms {flops / ms / 1e9:.0f} TFLOP/s" for n, ms in med.items())
            + "".join(f" | default vs {n} {med[n] / med['tsjit']:.3f}x" for n in med if n.startswith("tsjit_"))
            + f" | tsjit/flash {med['flash'] / med['tsjit']:.3f}x, tsjit/cudnn {med['cudnn'] / med['tsjit']:.3f}x "
              f"(speed ratios)" + " | max rel diff vs flash: " + ", ".join(f"{n} {e:.2e}" for n, e in checks.items()),
              flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--budget", type=float, default=30.0)
    parser.add_argument("--cases", default="all")
    parser.add_argument("--time", default="", help='shapes "b,s,h,d[,c] ..." (c: causal) to time')
    parser.add_argument("--variants", default="", help="comma-separated, also timed: atomics (dq_tma=False), s3 "
                                                         "(stages=3), own (dq_shared=False, head_dim 128), kv2 (kv_stages=2, head_dim 64)")
    args = parser.parse_args()
    cases = t.CASES if args.cases == "all" else [t.CASES[int(i)] for i in args.cases.split(",")]
    check(args.budget, cases)
    if args.time:
        timing([tuple(int(x) for x in shape.split(",")[:4]) + (shape.endswith("c"),) for shape in args.time.split()],
               variants=args.variants)
