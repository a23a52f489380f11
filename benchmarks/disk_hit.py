"""Time of a disk-cache hit in a fresh process (issue 10 §2): ``tsjit.compile`` of a small kernel that
calls a device function in another module, measured inside each fresh process (after ``import
tsjit`` and the kernel module), the cache filled beforehand.  Prints the median and range.

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
import tsjit
import bench_kernel
x = np.zeros(32, np.float32)
start = time.perf_counter()
compiled = tsjit.compile(bench_kernel.k, x, x, 32)
elapsed = time.perf_counter() - start
print(json.dumps({"ms": elapsed * 1e3, "from_cache": compiled.metadata["from_cache"]}))
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
          f"min {times[0]:.1f}, max {times[-1]:.1f} over {len(times)} runs (cold compile {cold['ms']:.0f} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
