"""Time of a disk-cache hit in a fresh process (issue 10 §2): ``tsjit.compile`` of a small kernel that
calls a device function in another module, measured inside each fresh process (after ``import
tsjit`` and the kernel module), the cache filled beforehand.  Prints the median and range, wall and CPU,
and the same for what comes before it in that process: ``import tsjit`` and the kernel's module (the
``@tsjit.kernel`` decoration), i.e. a script's time to its first compiled kernel is the sum.

    python benchmarks/disk_hit.py [--runs 15] [--root /path/to/tsjit/checkout]

No GPU is needed.  ``--root`` times another checkout (e.g. before/after a change).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HELPER = """
import tsjit

@tsjit.func
def shift(v):
    return v + 1.0
"""

KERNEL = """
import tsjit
import bench_helper

SCALE = 2.0

@tsjit.kernel
def k(x, out, n):
    i = tsjit.thread_idx().x
    if i < n:
        out[i] = bench_helper.shift(x[i]) * SCALE
"""

DRIVER = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
import numpy as np
t0, c0 = time.perf_counter(), time.process_time()
import tsjit
import bench_kernel
t1, c1 = time.perf_counter(), time.process_time()
x = np.zeros(32, np.float32)
compiled = tsjit.compile(bench_kernel.k, x, x, 32)
t2, c2 = time.perf_counter(), time.process_time()
print(json.dumps({"ms": (t2 - t1) * 1e3, "cpu_ms": (c2 - c1) * 1e3, "import_ms": (t1 - t0) * 1e3,
                  "import_cpu_ms": (c1 - c0) * 1e3, "from_cache": compiled.metadata["from_cache"]}))
"""


def run_once(root: str, source_dir: str, cache_dir: str) -> dict:
    env = dict(os.environ, PYTHONPATH=root, TSJIT_CACHE_DIR=cache_dir)
    env.pop("TSJIT_ALWAYS_COMPILE", None)
    out = subprocess.run([sys.executable, "-c", DRIVER, source_dir], env=env, capture_output=True, text=True,
                         timeout=300, cwd=source_dir)
    if out.returncode != 0:
        raise SystemExit(out.stderr)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as source_dir, tempfile.TemporaryDirectory() as cache_dir:
        for name, text in (("bench_helper.py", HELPER), ("bench_kernel.py", KERNEL)):
            with open(os.path.join(source_dir, name), "w") as fh:
                fh.write(text)
        cold = run_once(args.root, source_dir, cache_dir)
        hits = [run_once(args.root, source_dir, cache_dir) for _ in range(args.runs)]
    if cold["from_cache"] or not all(h["from_cache"] for h in hits):
        raise SystemExit(f"expected one miss then hits: {cold}, {hits}")
    times = sorted(h["ms"] for h in hits)
    print(f"disk-cache hit in a fresh process ({args.root}): median {statistics.median(times):.1f} ms, "
          f"min {times[0]:.1f}, max {times[-1]:.1f} over {len(times)} runs (cold compile {cold['ms']:.0f} ms); "
          f"CPU median {statistics.median(h['cpu_ms'] for h in hits):.1f}, min {min(h['cpu_ms'] for h in hits):.1f} ms")
    print(f"before it, `import tsjit` + the kernel's module (@tsjit.kernel): wall median "
          f"{statistics.median(h['import_ms'] for h in hits):.1f}, min {min(h['import_ms'] for h in hits):.1f} ms; "
          f"CPU median {statistics.median(h['import_cpu_ms'] for h in hits):.1f}, "
          f"min {min(h['import_cpu_ms'] for h in hits):.1f} ms (numpy imported before, not counted)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
