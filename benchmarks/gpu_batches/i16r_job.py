"""Issue 16 GPU job (helper i16r, 2026-12-03): the bf16 forward vs cuDNN SDPA, per shape with its own variants of
``tsjit.ops.attention`` (the measurement of ``benchmarks/attention.py --variant ...``: every configuration checked
against cuDNN (< 0.05) with its output NaN-poisoned first, interleaved CUDA-event medians, each timed repetition
primed), every kernel compiled first in worker processes (``--precompile``), under a time budget.

    PYTHONPATH=. python benchmarks/gpu_batches/i16r_job.py [--reps N] [--budget S] [--precompile N]
        [--errors] --case "B,H,H_kv,S,D,causal[;NAME:key=value,...;...]" ...

``--errors`` adds the flash backend and the max abs errors against float64 of tsjit and flash on the same inputs
(fresh random inputs per case: a repeated case is another seed).
"""
import argparse
import os
import sys
import time

T0 = time.time()
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import torch  # noqa: E402

import attention as bench  # noqa: E402  benchmarks/attention.py


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--budget", type=float, default=33.0)
    parser.add_argument("--precompile", type=int, default=8)
    parser.add_argument("--case", action="append", default=[])
    parser.add_argument("--errors", action="store_true", help="also the max abs errors vs float64 of tsjit and flash")
    args = parser.parse_args()
    bench.BACKENDS.clear()
    bench.BACKENDS["cudnn"] = bench.SDPBackend.CUDNN_ATTENTION
    if args.errors:
        bench.BACKENDS["flash"] = bench.SDPBackend.FLASH_ATTENTION
    cases = []
    for case in args.case:
        shape_text, *variants = case.split(";")
        cases.append((bench.parse_shape(shape_text), dict(bench.parse_variant(v) for v in variants)))
    if args.precompile:
        print(f"precompiled in {bench.precompile(cases, args.precompile):.1f} s", flush=True)
    props = torch.cuda.get_device_properties(0)
    print(f"device {props.name}, {props.multi_processor_count} SMs, torch {torch.__version__}, reps {args.reps}, "
          f"start-up {time.time() - T0:.1f} s", flush=True)
    for shape, variants in cases:
        if time.time() - T0 > args.budget:
            print(f"budget spent: {shape} not run", flush=True)
            continue
        bench.TSJIT_VARIANTS.clear()
        bench.TSJIT_VARIANTS.update(variants)
        t = time.time()
        errors = {} if args.errors else None
        tf, diff = bench.bench_shape(*shape, reps=args.reps, variants=True, errors=errors)
        others = [n for n in tf if n not in ("tsjit", "cudnn")]
        if errors:
            cells_err = f"max |tsjit - f64| {errors['tsjit']:.3e}, flash {errors['flash']:.3e}, ratio " \
                        f"{errors['tsjit'] / errors['flash']:.3f} | "
        else:
            cells_err = ""
        cells = " | ".join(f"{n} {tf[n]:.0f} ({tf[n] / tf['cudnn']:.3f})" for n in others)
        print(f"| {shape} | tsjit {tf['tsjit']:.0f} | cudnn {tf['cudnn']:.0f} | {tf['tsjit'] / tf['cudnn']:.3f} | "
              f"{cells} | {diff:.2e} | {cells_err}{time.time() - t:.1f} s |", flush=True)
    print(f"total {time.time() - T0:.1f} s", flush=True)


if __name__ == "__main__":
    main()
