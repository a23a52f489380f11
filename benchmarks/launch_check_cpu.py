"""Host cost of a warm ``kernel[grid, block](...)`` launch without the driver (issue 9 §2).

The driver's ``cuLaunchKernelEx`` (the ctypes function of the warm path) is replaced by a Python
no-op and the loaded function by a stand-in, so this times only tsjit's Python launch path: the
generated warm call (argument signature, HotLaunch lookup, argument packing) without the ctypes
call itself (``benchmarks/launch_floor.py`` measures that on a GPU).  Runs on any machine (no GPU):

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
from tsjit.runtime import kernel as kernel_module, launch, launch_config  # noqa: E402


@tsjit.kernel
def empty(n, x: tsjit.Float32):
    if tsjit.thread_idx().x > n:
        tsjit.device_print("never")


class _StandInPrepared:
    config = "stand-in"

    def for_stream(self, stream):
        class Config:
            def getPtr(self):  # noqa: N802 - the driver object's method name
                return 0x1000
        return Config()


class _StandInFunction:
    handle = 0
    name = "empty"
    max_dynamic_smem = None

    def __init__(self):
        self._prepared = {}


def main(calls: int = 20000, repetitions: int = 15) -> None:
    function = _StandInFunction()
    kernel_module.CompiledKernel.function = lambda self: function
    prepared = _StandInPrepared()
    launch._RAW_LAUNCH_EX[:] = [lambda config, function, params, extra: 0]
    # a pre-filled driver cache: the real prepare_launch returns it on every hit
    function._prepared[((64,), (128,), 0, None, False)] = prepared
    launch_config.launch_prepared = lambda fn, prep, params, stream=0: None
    original_prepare = launch_config.prepare_launch

    def prepare(fn, grid, block, smem_bytes=0, cluster=None, pdl=False):
        return function._prepared.get((grid, block, smem_bytes, cluster, pdl)) or prepared
    launch_config.prepare_launch = prepare
    try:
        launcher = empty[(64,), (128,)]
        launcher(5, 1.0)
        launcher(5, 1.0)
        assert launcher.hot, "the warm path was not taken"
        samples = []
        for _ in range(repetitions):
            t0 = time.perf_counter()
            for i in range(calls):
                launcher(i, 2.0)
            samples.append((time.perf_counter() - t0) / calls * 1e6)
    finally:
        launch_config.prepare_launch = original_prepare
    print(f"warm launch, Python part: median {statistics.median(samples):.3f} us/launch "
          f"(min {min(samples):.3f}, {repetitions} x {calls} calls)")


if __name__ == "__main__":
    main()
