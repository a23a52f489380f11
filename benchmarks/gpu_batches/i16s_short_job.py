"""Issue 16 GPU job (helper i16s, 2026-12-02): the bf16 forward at head_dim 128 over the benchmark's full shape
list vs cuDNN SDPA, with variants (first run, 05:33 UTC: a 1-stage Q ring, 64- and 96-key KV tiles, the grid
tile order; second run: the default twice, for the noise, 160-key tiles with O staged in Q or one Q stage, a
128-CTA grid).  The measurement of ``benchmarks/attention.py --variant ...`` (each configuration checked against
cuDNN, < 0.05, before timing; interleaved CUDA-event medians, primed), with cuDNN as the only SDPA column and a
time budget: the shapes run in the order given until ``--budget`` seconds are spent.

    PYTHONPATH=. python benchmarks/gpu_batches/i16s_short_job.py [--reps N] [--budget S]
        [--shape B,H,H_kv,S,D,causal ...] [--variant NAME:key=value,... ... | --variant none]
"""
import argparse
import os
import sys
import time

T0 = time.time()
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import torch  # noqa: E402

import attention as bench  # noqa: E402  benchmarks/attention.py

#: the head_dim-128 shapes of ``--shapes all``, the weakest of the first run (05:33 UTC) first
SHAPES = [(1, 16, 16, 16384, 128, False), (4, 32, 8, 4096, 128, False), (16, 16, 16, 1024, 128, False),
          (16, 16, 16, 1024, 128, True), (8, 16, 16, 2048, 128, False), (8, 16, 16, 2048, 128, True),
          (1, 16, 16, 16384, 128, True), (4, 32, 8, 4096, 128, True), (4, 16, 16, 4096, 128, False),
          (4, 16, 16, 4096, 128, True), (2, 16, 16, 8192, 128, False), (2, 16, 16, 8192, 128, True)]
#: ``same`` is the default configuration again (the same kernel and launch): its spread from ``tsjit`` is the noise
VARIANTS = ["same:q_stages=2", "bn160oq:block_n=160,o_in_q=true", "bn160q1:block_n=160,q_stages=1", "sms128:sms=128"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--budget", type=float, default=33.0)
    parser.add_argument("--shape", action="append", default=[])
    parser.add_argument("--variant", action="append", default=[])
    args = parser.parse_args()
    shapes = [bench.parse_shape(t) for t in args.shape] or SHAPES
    bench.TSJIT_VARIANTS.clear()
    if args.variant != ["none"]:                    # --variant none: the default configuration alone
        bench.TSJIT_VARIANTS.update(bench.parse_variant(v) for v in (args.variant or VARIANTS))
    bench.BACKENDS.clear()
    bench.BACKENDS["cudnn"] = bench.SDPBackend.CUDNN_ATTENTION
    props = torch.cuda.get_device_properties(0)
    print(f"device {props.name}, {props.multi_processor_count} SMs, torch {torch.__version__}, reps {args.reps}, "
          f"start-up {time.time() - T0:.1f} s", flush=True)
    columns = ["tsjit", "cudnn"] + list(bench.TSJIT_VARIANTS)
    print("| B, H, H_kv, S, D | causal | " + " | ".join(columns) +
          " | tsjit / cuDNN | best / cuDNN | max |tsjit - cuDNN| | s |")
    print("|---|---|" + "---|" * (len(columns) + 4), flush=True)
    for shape in shapes:
        if time.time() - T0 > args.budget:
            print(f"budget spent: {shape} not run", flush=True)
            continue
        t = time.time()
        tf, diff = bench.bench_shape(*shape, reps=args.reps, variants=True)
        cells = [f"{tf[n]:.0f}" if n in tf else "-" for n in columns]
        best = max((n for n in tf if n != "cudnn"), key=tf.get)
        b, h, hkv, s, d, causal = shape
        print(f"| {b}, {h}, {hkv}, {s}, {d} | {causal} | " + " | ".join(cells) +
              f" | {tf['tsjit'] / tf['cudnn']:.3f} | {best} {tf[best] / tf['cudnn']:.3f} | {diff:.2e} | "
              f"{time.time() - t:.1f} |", flush=True)
    print(f"total {time.time() - T0:.1f} s", flush=True)


if __name__ == "__main__":
    main()
