"""``python -m tsjit demo``: compile every example kernel; on a GPU, run and check them.

Without a GPU it compiles each kernel for sm_90a (LLVM IR -> PTX -> cubin), prints the
resource usage, verifies the Task Scheduling programs, and says plainly which launches it
skipped.  With a GPU it also launches each kernel on fresh random data with poisoned
outputs and compares against float64 numpy references.
"""
from __future__ import annotations

import time

import numpy as np

import tsjit
from tsjit.examples import basic
from tsjit.runtime import driver


def _compile_targets():
    f32 = np.zeros(64, np.float32)
    i16 = np.zeros(64, np.int16)
    return [
        ("vector_add", basic.vector_add, (f32, f32, f32, 64)),
        ("saxpy", basic.saxpy, (1.0, f32, f32, f32, 64)),
        ("copy_grid_stride (Int16, 16-byte vectors)", basic.copy_grid_stride, (i16, i16, 64, basic.COPY_VECTOR)),
        ("block_reduce_sum (shuffles + atomics)", basic.block_reduce_sum, (f32, f32[:1], 64, 256)),
        ("naive_matmul", basic.naive_matmul, (np.zeros((4, 4), np.float32),) * 3 + (4, 4, 4)),
    ] + _ts_compile_targets()


def _ts_compile_targets():
    from tsjit.examples import ts_copy, ts_tma_copy
    return ts_copy.demo_compile_targets() + ts_tma_copy.demo_compile_targets()


def _gpu_checks(size: int):
    checks = [
        ("vector_add", lambda: basic.run_vector_add(size), 1e-6),
        ("saxpy", lambda: basic.run_saxpy(size), 1e-6),
        ("copy_grid_stride 2^24 Int16", lambda: basic.run_copy(1 << 24), 0),
        ("block_reduce_sum", lambda: basic.run_block_reduce(size), 1e-4),
        ("naive_matmul 257x130x70", lambda: basic.run_naive_matmul(), 1e-4),
    ]
    from tsjit.examples import ts_copy, ts_tma_copy
    return checks + ts_copy.demo_gpu_checks() + ts_tma_copy.demo_gpu_checks()


def run_demo(size: int = 1 << 22) -> int:
    """Run the demo; returns a process exit code (0 = everything compiled and every check passed)."""
    failures = 0
    print(f"tsjit {tsjit.__version__}: compiling the example kernels for sm_90a")
    for name, kern, args in _compile_targets():
        t0 = time.perf_counter()
        compiled = tsjit.compile(kern, *args)
        ms = (time.perf_counter() - t0) * 1e3
        meta = compiled.metadata
        origin = "disk cache" if meta.get("from_cache") else f"compiled in {ms:.0f} ms"
        print(f"  {name:<45} {origin:<22} registers {meta['registers']:>3}  spills {meta['spill_stores_bytes']} B  "
              f"smem {meta['smem_bytes']} B  ({meta['tool']})")
    if not driver.gpu_available():
        print("No NVIDIA GPU/driver found: SKIPPED launching and checking the kernels on the GPU "
              "(everything above was compiled and assembled).")
        return 0
    props = driver.device_properties()
    print(f"GPU: {props.name} (sm_{props.capability[0]}{props.capability[1]}): launching and checking")
    for name, check, tol in _gpu_checks(size):
        got, ref = check()
        got64 = np.asarray(got, dtype=np.float64)
        ok = np.array_equal(got, ref) if tol == 0 else bool(
            np.allclose(got64, ref, rtol=tol, atol=tol * max(1.0, float(np.sqrt(np.size(ref))))))
        failures += not ok
        print(f"  {name:<45} {'PASS' if ok else 'FAIL'}")
    print("all checks passed" if not failures else f"{failures} check(s) FAILED")
    return 1 if failures else 0
