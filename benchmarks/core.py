"""Core JIT benchmarks on the GPU (issue 2), printed as one table.

1. Grid-stride Int16 copy bandwidth (tsjit) vs torch's device copy (``dst.copy_(src)``), same buffers.
2. Cold compile time of ``vector_add`` in a fresh process with an empty cache (its warm-cache rerun is
   checked to hit the cache).
3. Issue 10 §2's four rows against triton in the same run (``benchmarks/first_calls.py``): host launch
   overhead, the GEMM cold compile (empty cache; and a cache directory in use, holding the toolchain memos
   but no entry), the first launch from a warm disk cache with its ``tsjit.compile`` hit split out (source
   digest, assembler version, key and entry read; then module load, launch), ``import``.

Timing: CUDA events around many launches after warm-up; medians of repetitions.

    PYTHONPATH=. python benchmarks/core.py
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

import tsjit
from tsjit.examples import basic
import first_calls  # benchmarks/first_calls.py
from timing import event_time_ms  # benchmarks/timing.py




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
    assert warm["from_cache"] and warm["ok"] and cold["ok"], (cold, warm)


def main() -> None:
    rows: list = []
    copy_bandwidth(rows)
    ts_copy_bandwidth(rows)
    compile_times(rows)
    first_calls.all_rows(rows)   # launch overhead, GEMM cold compile, warm-cache first launch, import: vs triton
    first_calls.print_table(rows)
    print(f"device: {torch.cuda.get_device_name(0)}, torch {torch.__version__}, tsjit {tsjit.__version__}")


if __name__ == "__main__":
    main()
