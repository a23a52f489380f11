"""CPU interpreter speed (issue 13 §5): the TS TMA copy at 256x256 fp32 and the Hopper GEMM at 256x256x128,
under TSJIT_INTERPRET=1, each checked against numpy before its time counts.

    PYTHONPATH=. python benchmarks/interpret.py [repeats]

Prints one line per case: wall and CPU seconds of the first run (lowering and translation included) and
the median of the following ones (the lowered program is cached per specialization); on a shared machine
the CPU time is the figure to compare.  No GPU needed.
"""
from __future__ import annotations

import os
import statistics
import sys
import time

os.environ["TSJIT_INTERPRET"] = "1"

import numpy as np  # noqa: E402

import tsjit  # noqa: E402
from tsjit.examples import gemm, ts_tma_copy  # noqa: E402
from tsjit.runtime.arrays import bfloat16_bits_to_float32  # noqa: E402


def tma_copy():
    got, ref = ts_tma_copy.run_tma_copy_ts(256, 256, box=(64, 64), stages=4, blocks=4)
    assert np.array_equal(got, ref)


def gemm_256(b_layout="NK", cluster_m=1):
    def run():
        got, ref = gemm.run_gemm(256, 256, 128, b_layout=b_layout, cluster_m=cluster_m)
        err = np.linalg.norm(got - ref) / np.linalg.norm(ref)
        assert np.isfinite(got).all() and err < 1e-2, err
    return run


def main(repeats: int = 2) -> None:
    cases = [("TS TMA copy 256x256 fp32 (4 CTAs, 64x64 box, 4 stages)", tma_copy),
             ("Hopper GEMM 256x256x128 bf16, B (N, K)", gemm_256()),
             ("Hopper GEMM 256x256x128 bf16, B (K, N)", gemm_256("KN")),
             ("Hopper GEMM 256x256x128 bf16, 2x1 cluster", gemm_256("NK", 2))]
    for name, fn in cases:
        times, cpu = [], []
        for _ in range(1 + repeats):
            start, start_cpu = time.perf_counter(), time.process_time()
            fn()
            times.append(time.perf_counter() - start)
            cpu.append(time.process_time() - start_cpu)
        print(f"{name}: first {times[0]:.2f} s wall / {cpu[0]:.2f} s CPU, then median {statistics.median(times[1:]):.2f} s "
              f"wall / {statistics.median(cpu[1:]):.2f} s CPU", flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2)
