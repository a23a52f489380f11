"""Core JIT benchmarks on the GPU (issue 2), printed as one table.

1. Grid-stride Int16 copy bandwidth (tsjit) vs torch's device copy (``dst.copy_(src)``), same buffers.
2. Host launch overhead per call: an empty tsjit kernel vs an empty triton kernel (median of reps).
3. Cold compile time of ``vector_add`` in a fresh process with an empty cache, and time to the first
   finished launch in a fresh process whose disk cache is warm.

Timing: CUDA events around many launches after warm-up; medians of repetitions.

    PYTHONPATH=. python benchmarks/core.py
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import statistics
import tempfile
import time

import numpy as np
import torch

import tsjit
from tsjit.examples import basic
from timing import event_time_ms  # benchmarks/timing.py
from cold_compile import GEMM_CHILD as _GEMM_CHILD  # benchmarks/cold_compile.py




def copy_bandwidth(rows: list) -> None:
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for n in (1 << 24, 1 << 27, 1 << 30):
        src = torch.randint(-2**15, 2**15, (n,), dtype=torch.int16, device="cuda")
        dst = torch.empty_like(src)
        best = None
        for blocks_per_sm, threads in ((4, 256), (8, 256), (2, 512)):
            blocks = sms * blocks_per_sm
            launch = basic.copy_grid_stride[(blocks,), (threads,)]
            ms = event_time_ms(lambda: launch(src, dst, n, basic.COPY_VECTOR, stream=torch.cuda.current_stream().cuda_stream))
            if best is None or ms < best[0]:
                best = (ms, blocks, threads)
        torch.cuda.synchronize()
        assert torch.equal(src, dst), "tsjit copy mismatch"
        ref = event_time_ms(lambda: dst.copy_(src))
        gbs = lambda ms: 2 * n * 2 / ms / 1e6  # read + write bytes
        rows.append((f"copy int16 {n * 2 >> 20} MiB", f"{gbs(best[0]):.0f} GB/s", f"{gbs(ref):.0f} GB/s",
                     f"{ref / best[0]:.3f}", f"grid {best[1]}x{best[2]}"))


def ts_copy_bandwidth(rows: list) -> None:
    """Tutorial 1: the TS grid-stride copy vs the same loop as a plain kernel vs torch (Int16, scalar loads)."""
    from tsjit.examples import ts_copy
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    stream = torch.cuda.current_stream().cuda_stream
    for n in (1 << 24, 1 << 28):
        src = torch.randint(-2**15, 2**15, (n,), dtype=torch.int16, device="cuda")
        dst = torch.empty_like(src)
        results = {}
        for name, kern in (("ts", ts_copy.copy_ts), ("plain", ts_copy.copy_plain),
                           ("ts16", ts_copy.copy_ts_vectorized)):
            best = None
            for warps, blocks_per_sm in ((8, 8), (4, 16), (16, 4)):
                launch = kern[(sms * blocks_per_sm,), (warps * 32,)]
                ms = event_time_ms(lambda: launch(src, dst, n, warps, stream=stream))
                best = ms if best is None or ms < best else best
            torch.cuda.synchronize()
            assert torch.equal(src, dst), f"{name} copy mismatch"
            dst.zero_()
            results[name] = best
        ref = event_time_ms(lambda: dst.copy_(src))
        gbs = lambda ms: 2 * n * 2 / ms / 1e6
        rows.append((f"TS copy (tutorial 1) int16 {n * 2 >> 20} MiB", f"{gbs(results['ts']):.0f} GB/s",
                     f"{gbs(results['plain']):.0f} GB/s (plain tsjit)", f"{results['plain'] / results['ts']:.3f}",
                     f"vs torch copy {gbs(ref):.0f} GB/s: {ref / results['ts']:.3f}"))
        rows.append((f"TS copy, 16-byte vectors, int16 {n * 2 >> 20} MiB", f"{gbs(results['ts16']):.0f} GB/s",
                     f"{gbs(ref):.0f} GB/s (torch copy)", f"{ref / results['ts16']:.3f}", "tutorial 1b"))


def launch_overhead(rows: list) -> None:
    @tsjit.kernel
    def empty_kernel(x, n):
        pass

    import triton

    @triton.jit
    def empty_triton(x, n):
        pass

    x = torch.empty(16, device="cuda")
    stream = torch.cuda.current_stream().cuda_stream
    tsjit_launch = lambda: empty_kernel[(1,), (32,)](x, 16, stream=stream)
    triton_launch = lambda: empty_triton[(1,)](x, 16)

    def per_call_us(fn, calls=2000, reps=7):
        for _ in range(200):
            fn()
        torch.cuda.synchronize()
        samples = []
        for _ in range(reps):
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            samples.append((time.perf_counter() - t0) / calls * 1e6)
            torch.cuda.synchronize()
        return statistics.median(samples)

    darr = tsjit.empty(16, tsjit.Float32)
    bound = empty_kernel.bind(darr, 16, grid=(1,), block=(32,))
    fns = {"torch": tsjit_launch, "array": lambda: empty_kernel[(1,), (32,)](darr, 16),
           "bound": lambda: bound(0), "triton": triton_launch}
    samples = {k: [] for k in fns}
    for f in fns.values():
        per_call_us(f, calls=200, reps=1)
    for _ in range(7):   # interleaved: every round times each launcher once
        for k, f in fns.items():
            samples[k].append(per_call_us(f, calls=2000, reps=1))
    med = {k: statistics.median(v) for k, v in samples.items()}
    theirs = med["triton"]
    rows.append(("launch overhead (torch tensor arg)", f"{med['torch']:.2f} us", f"{theirs:.2f} us (triton)",
                 f"{theirs / med['torch']:.2f}", "host time per call, median of 7 interleaved rounds"))
    rows.append(("launch overhead (tsjit array arg)", f"{med['array']:.2f} us", f"{theirs:.2f} us (triton)",
                 f"{theirs / med['array']:.2f}", ""))
    rows.append(("launch overhead (Kernel.bind: the driver call alone)", f"{med['bound']:.2f} us",
                 f"{theirs:.2f} us (triton)", f"{theirs / med['bound']:.2f}",
                 "the floor: one cuLaunchKernelEx through ctypes"))


_CHILD = r"""
import time, json, sys
t0 = time.perf_counter()
import numpy as np, tsjit
from tsjit.examples import basic
t1 = time.perf_counter()
x = tsjit.to_device(np.ones(1024, np.float32)); out = tsjit.empty(1024, tsjit.Float32)
tsjit.runtime.driver.synchronize()
t2 = time.perf_counter()
basic.vector_add[(4,), (256,)](x, x, out, 1024)
tsjit.runtime.driver.synchronize()
t3 = time.perf_counter()
c = basic.vector_add.compile(x, x, out, 1024)
print(json.dumps({"import_ms": (t1 - t0) * 1e3, "init_ms": (t2 - t1) * 1e3, "first_launch_ms": (t3 - t2) * 1e3,
                  "from_cache": c.metadata.get("from_cache", False), "compile_ms": c.metadata.get("compile_ms"),
                  "ok": bool((out.numpy() == 2).all())}))
"""




def gemm_cold_compile(rows: list, runs: int = 3) -> None:
    """The Hopper TS GEMM (tsjit/examples/gemm.py) compiled in a fresh process with an empty cache
    (issue 10 §2 goal: <= 250 ms); median of ``runs`` processes."""
    samples = []
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as cache:
            out = subprocess.run([sys.executable, "-c", _GEMM_CHILD], env=dict(os.environ, TSJIT_CACHE_DIR=cache),
                                 capture_output=True, text=True, check=True)
            samples.append(json.loads(out.stdout.strip().splitlines()[-1]))
    samples.sort(key=lambda r: r["compile_ms"])
    mid = samples[len(samples) // 2]
    st = mid["stages"] or {}
    rows.append(("TS GEMM cold compile (fresh process, empty cache)", f"{mid['compile_ms']:.0f} ms", "", "",
                 "frontend %.0f + llvm %.0f + assemble %.0f ms; goal <= 250 ms; range %.0f-%.0f ms; CPU min %.0f ms" % (
                     st.get("frontend", 0), st.get("llvm", 0), st.get("assemble", 0),
                     samples[0]["compile_ms"], samples[-1]["compile_ms"], min(r["cpu_ms"] for r in samples))))


def compile_times(rows: list) -> None:
    with tempfile.TemporaryDirectory() as cache:
        envv = dict(os.environ, TSJIT_CACHE_DIR=cache)
        runs = []
        for _ in range(2):
            out = subprocess.run([sys.executable, "-c", _CHILD], env=envv, capture_output=True, text=True, check=True)
            runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    cold, warm = runs
    stages = cold["compile_ms"]
    rows.append(("vector_add cold compile (fresh process)", f"{cold['first_launch_ms']:.1f} ms", "",
                 "", "frontend %.1f + llvm %.1f + assemble %.1f ms" % (stages["frontend"], stages["llvm"],
                                                                       stages["assemble"])))
    rows.append(("vector_add first launch from disk cache", f"{warm['first_launch_ms']:.1f} ms", "", "",
                 f"from_cache={warm['from_cache']} ok={warm['ok'] and cold['ok']}"))


def main() -> None:
    rows: list = []
    copy_bandwidth(rows)
    ts_copy_bandwidth(rows)
    launch_overhead(rows)
    compile_times(rows)
    gemm_cold_compile(rows)
    header = ("benchmark", "tsjit", "baseline", "ratio (baseline time / tsjit time)", "notes")
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(5)]
    line = lambda r: "| " + " | ".join(str(c).ljust(w) for c, w in zip(r, widths)) + " |"
    print(line(header))
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in rows:
        print(line(r))
    print(f"device: {torch.cuda.get_device_name(0)}, torch {torch.__version__}, tsjit {tsjit.__version__}")


if __name__ == "__main__":
    main()
