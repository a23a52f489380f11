"""Host cost of a warm ``kernel[grid, block](...)`` launch without the driver (issue 9 §2).

The driver's ``cuLaunchKernelEx`` is replaced by a no-op and the loaded function by a stand-in,
so this times only tsjit's Python launch path: argument signature, plan lookup, the cached
launch-contract verdict, argument packing.  Runs on any machine (no GPU):

    PYTHONPATH=. python benchmarks/launch_check_cpu.py            # this tree
    PYTHONPATH=/work/main python benchmarks/launch_check_cpu.py   # another tree, for a before/after

Prints the median over repetitions of the mean time per launch, in microseconds.
"""
from __future__ import annotations

import os
import statistics
import tempfile
import time

os.environ.setdefault("TSJIT_TARGET", "sm_90a")
os.environ.setdefault("TSJIT_CACHE_DIR", tempfile.mkdtemp())

import tsjit  # noqa: E402
from tsjit.runtime import driver, kernel as kernel_module  # noqa: E402


@tsjit.kernel
def empty(n, x: tsjit.Float32):
    if tsjit.thread_idx().x > n:
        tsjit.device_print("never")


class _StandInFunction:
    handle = 0
    name = "empty"
    max_dynamic_smem = None

    def __init__(self):
        self._prepared = {}


def main(calls: int = 20000, repetitions: int = 15) -> None:
    function = _StandInFunction()
    kernel_module.CompiledKernel.function = lambda self: function
    prepared = object()
    # a pre-filled driver cache: the real prepare_launch returns it on every hit
    function._prepared[((64,), (128,), 0, None, False)] = prepared
    driver.launch_prepared = lambda fn, prep, params, stream=0: None
    original_prepare = driver.prepare_launch

    def prepare(fn, grid, block, smem_bytes=0, cluster=None, pdl=False):
        return function._prepared.get((grid, block, smem_bytes, cluster, pdl)) or prepared
    driver.prepare_launch = prepare
    try:
        launch = empty[(64,), (128,)]
        launch(5, 1.0)
        samples = []
        for _ in range(repetitions):
            t0 = time.perf_counter()
            for i in range(calls):
                launch(i, 2.0)
            samples.append((time.perf_counter() - t0) / calls * 1e6)
    finally:
        driver.prepare_launch = original_prepare
    print(f"warm launch, Python part: median {statistics.median(samples):.3f} us/launch "
          f"(min {min(samples):.3f}, {repetitions} x {calls} calls)")


if __name__ == "__main__":
    main()
