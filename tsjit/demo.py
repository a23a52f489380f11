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
from tsjit.examples import basic, gemm, ts_copy, ts_tma_copy
from tsjit.runtime import driver
from tsjit.runtime.events import Event
from tsjit.ts.task_manager import TaskManager


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
    a = tsjit.tensormap_spec(tsjit.BFloat16, (gemm.BM, gemm.BK), swizzle="128B")
    b = tsjit.tensormap_spec(tsjit.BFloat16, (256, gemm.BK), swizzle="128B")
    c_map = tsjit.tensormap_spec(tsjit.BFloat16, (64, 64), swizzle="128B")
    gemm_args = (a, b, tsjit.spec((4096, 4096), tsjit.BFloat16), c_map, 4096, 4096, 4096, 256, 4, 8, 1, "tma")
    return (ts_copy.demo_compile_targets() + ts_tma_copy.demo_compile_targets()
            + [("TS GEMM 128x256x64, 4 stages, wgmma + TMA", gemm.gemm_ts, gemm_args)])


def _gpu_checks(size: int):
    checks = [
        ("vector_add", lambda: basic.run_vector_add(size), 1e-6),
        ("saxpy", lambda: basic.run_saxpy(size), 1e-6),
        ("copy_grid_stride 2^24 Int16", lambda: basic.run_copy(1 << 24), 0),
        ("block_reduce_sum", lambda: basic.run_block_reduce(size), 1e-4),
        ("naive_matmul 257x130x70", lambda: basic.run_naive_matmul(), 1e-4),
    ]
    return checks + ts_copy.demo_gpu_checks() + ts_tma_copy.demo_gpu_checks()


def _gemm_demo(n: int) -> bool:
    """Run the TS GEMM at n x n x n, check it, and print TFLOP/s (next to torch.matmul's when torch is here)."""
    check_n = min(n, 1024)
    got, ref = gemm.run_gemm(check_n, check_n, check_n)
    err = float(np.linalg.norm(got - ref) / np.linalg.norm(ref))
    ok = err < 1e-2
    print(f"  {'TS GEMM ' + str(check_n) + '^3 vs numpy float64':<45} {'PASS' if ok else 'FAIL'} (rel. error {err:.1e})")
    a = tsjit.to_device(np.random.default_rng().standard_normal((n, n)).astype(np.float32), dtype=tsjit.BFloat16)
    c = tsjit.empty((n, n), tsjit.BFloat16)
    launch = gemm.gemm_launcher(a, a, c)
    start, end = Event(), Event()
    launch()
    times = []
    for _ in range(5):
        start.record()
        for _ in range(10):
            launch()
        end.record()
        end.synchronize()
        times.append(start.elapsed_ms(end) / 10)
    ms = sorted(times)[len(times) // 2]
    line = f"  TS GEMM {n}^3 bf16: {2 * n ** 3 / ms / 1e9:.0f} TFLOP/s"
    try:
        import torch  # lazily: torch is optional (only for the comparison)
        ta = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
        tc = torch.empty_like(ta)
        for _ in range(3):
            torch.matmul(ta, ta.T, out=tc)
        torch.cuda.synchronize()
        ev0, ev1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        ev0.record()
        for _ in range(10):
            torch.matmul(ta, ta.T, out=tc)
        ev1.record()
        ev1.synchronize()
        t_ms = ev0.elapsed_time(ev1) / 10
        line += f"; torch.matmul (cuBLAS) {2 * n ** 3 / t_ms / 1e9:.0f} TFLOP/s"
    except ImportError:
        line += " (torch not installed: no cuBLAS comparison)"
    print(line)
    return ok


def run_demo(size: int = 1 << 22, gemm_size: int = 4096) -> int:
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
    if TaskManager.verified_count:
        print(f"Task Scheduling programs verified while compiling: {TaskManager.verified_count} (structure, routing, "
              f"credits, bracketing, counts, bytes, queues, PDL, interleavings)")
    else:
        print("Task Scheduling programs: all came from the disk cache (verified when first compiled)")
    if not driver.gpu_available():
        print("No NVIDIA GPU/driver found: SKIPPED launching and checking the kernels on the GPU "
              "(everything above was compiled and assembled).  The demo itself launches only on a GPU; to run your "
              "own kernels without one, set TSJIT_INTERPRET=1 (the CPU interpreter: small sizes; README, 'A first "
              "kernel').")
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
    if gemm_size:
        failures += not _gemm_demo(gemm_size)
    print("all checks passed" if not failures else f"{failures} check(s) FAILED")
    return 1 if failures else 0
