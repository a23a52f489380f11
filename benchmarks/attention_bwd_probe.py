"""Probe of tsjit.ops.attention_backward on the GPU: max abs errors of dq / dk / dv against float64 autograd (and
torch flash's, same inputs) per case, each case guarded (an exception is printed, the next case runs), stopping
before ``--budget`` seconds; then optionally a timing against torch SDPA's backward (flash and cuDNN), interleaved.

    python3 benchmarks/attention_bwd_probe.py [--budget 30] [--time]
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


def timing(shapes, reps=10):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    for b, s, h, d, causal in shapes:
        q, k, v, do = (torch.randn((b, s, h, d), device="cuda", dtype=torch.bfloat16) for _ in range(4))
        scale = 1 / math.sqrt(d)
        out, lse = tsjit.ops.attention(q, k, v, causal=causal, scale=scale, return_lse=True)
        qt, kt, vt = (x.transpose(1, 2).detach().requires_grad_() for x in (q, k, v))
        runs = {}

        def ours():
            tsjit.ops.attention_backward(q, k, v, out, lse, do, causal=causal, scale=scale)

        def sdpa(backend):
            def run():
                with sdpa_kernel(backend):
                    o = torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=causal, scale=scale)
                torch.autograd.grad(o, (qt, kt, vt), do.transpose(1, 2))
            return run
        fns = {"tsjit": ours, "flash": sdpa(SDPBackend.FLASH_ATTENTION), "cudnn": sdpa(SDPBackend.CUDNN_ATTENTION)}
        fwd = {}
        for name, fn in fns.items():      # the SDPA timings include their forward: measured alone to subtract
            fn()
        for name in ("flash", "cudnn"):
            backend = SDPBackend.FLASH_ATTENTION if name == "flash" else SDPBackend.CUDNN_ATTENTION

            def fwd_only(backend=backend):
                with sdpa_kernel(backend), torch.no_grad():
                    torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=causal, scale=scale)
            fwd[name] = fwd_only
            fwd_only()
        times = {n: [] for n in list(fns) + ["flash_fwd", "cudnn_fwd"]}
        for _ in range(reps):
            for name, fn in list(fns.items()) + [("flash_fwd", fwd["flash"]), ("cudnn_fwd", fwd["cudnn"])]:
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                e0.record()
                fn()
                e1.record()
                torch.cuda.synchronize()
                times[name].append(e0.elapsed_time(e1))
        med = {n: sorted(v)[len(v) // 2] for n, v in times.items()}
        flops = 2.5 * 4 * b * h * s * s * d / (2 if causal else 1)
        bwd = {"tsjit": med["tsjit"], "flash": med["flash"] - med["flash_fwd"], "cudnn": med["cudnn"] - med["cudnn_fwd"]}
        print(f"timing b{b} s{s} h{h} d{d} {'causal' if causal else 'full'}: " + ", ".join(
            f"{n} {ms:.3f} ms {flops / ms / 1e9:.0f} TFLOP/s" for n, ms in bwd.items())
            + f" | ratio flash/tsjit {bwd['flash'] / bwd['tsjit']:.3f} cudnn/tsjit {bwd['cudnn'] / bwd['tsjit']:.3f}"
            + f" (raw medians {', '.join(f'{n} {v:.3f}' for n, v in med.items())})", flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--budget", type=float, default=30.0)
    parser.add_argument("--cases", default="all")
    parser.add_argument("--time", action="store_true")
    args = parser.parse_args()
    cases = t.CASES if args.cases == "all" else [t.CASES[int(i)] for i in args.cases.split(",")]
    check(args.budget, cases)
    if args.time:
        timing([(4, 2048, 16, 128, False), (4, 2048, 16, 128, True), (4, 2048, 16, 64, False)])
