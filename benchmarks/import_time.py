"""Time ``import tsjit`` (and other imports) in fresh processes; no GPU needed (issue 10 §2).

Each run starts a new interpreter and measures the import with ``time.perf_counter`` (wall) and
``time.process_time`` (CPU: on a loaded machine the wall time mostly measures the neighbours) inside it
(interpreter start-up excluded); the table gives the median and minimum of both over the runs.
``python -X importtime -c "import tsjit"`` shows where the time goes.

    PYTHONPATH=. python benchmarks/import_time.py [--runs 21] ["import tsjit.ts" ...]

``import tsjit.examples.basic`` is a module of five ``@tsjit.kernel`` functions and a ``@tsjit.func``:
what a script pays before its first (cached) kernel, numpy included.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys

_PROBE = ("import time; t, c = time.perf_counter(), time.process_time(); {stmt}; "
          "print((time.perf_counter() - t) * 1e3, (time.process_time() - c) * 1e3)")


def time_import(stmt: str, runs: int) -> list[tuple[float, float]]:
    """(wall, CPU) milliseconds ``stmt`` takes in each of ``runs`` fresh interpreters."""
    env = dict(os.environ, PYTHONPATH=os.environ.get("PYTHONPATH", os.getcwd()))
    return [tuple(float(v) for v in subprocess.run(
                [sys.executable, "-P", "-c", _PROBE.format(stmt=stmt)], check=True, capture_output=True,
                text=True, env=env).stdout.split())
            for _ in range(runs)]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("statements", nargs="*",
                        default=["import tsjit", "import tsjit.examples.basic", "import tsjit.ts",
                                 "import tsjit; tsjit.kernel",
                                 "import numpy", "import llvmlite.binding"])
    args = parser.parse_args(argv)
    print(f"{'statement':<32} {'wall median':>11} {'min':>7} {'CPU median':>11} {'min':>7}   "
          f"(ms, {args.runs} fresh processes)")
    for stmt in args.statements:
        walls, cpus = zip(*time_import(stmt, args.runs))
        print(f"{stmt:<32} {statistics.median(walls):>11.1f} {min(walls):>7.1f} {statistics.median(cpus):>11.1f} "
              f"{min(cpus):>7.1f}")


if __name__ == "__main__":
    main()
