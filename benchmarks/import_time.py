"""Time ``import tsjit`` (and other imports) in fresh processes; CPU only (issue 10 §2).

Each run starts a new interpreter and measures the import with ``time.perf_counter`` inside it
(interpreter start-up excluded); the table gives the median and the spread over the runs.
``python -X importtime -c "import tsjit"`` shows where the time goes.

    PYTHONPATH=. python benchmarks/import_time.py [--runs 21] ["import tsjit.ts" ...]
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys

_PROBE = "import time; t = time.perf_counter(); {stmt}; print((time.perf_counter() - t) * 1e3)"


def time_import(stmt: str, runs: int) -> list[float]:
    """Milliseconds ``stmt`` takes in each of ``runs`` fresh interpreters."""
    env = dict(os.environ, PYTHONPATH=os.environ.get("PYTHONPATH", os.getcwd()))
    return [float(subprocess.run([sys.executable, "-P", "-c", _PROBE.format(stmt=stmt)], check=True,
                                 capture_output=True, text=True, env=env).stdout)
            for _ in range(runs)]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("statements", nargs="*",
                        default=["import tsjit", "import tsjit.ts", "import tsjit; tsjit.kernel",
                                 "import numpy", "import llvmlite.binding"])
    args = parser.parse_args(argv)
    print(f"{'statement':<32} {'median ms':>10} {'min':>8} {'max':>8}   ({args.runs} fresh processes)")
    for stmt in args.statements:
        times = time_import(stmt, args.runs)
        print(f"{stmt:<32} {statistics.median(times):>10.1f} {min(times):>8.1f} {max(times):>8.1f}")


if __name__ == "__main__":
    main()
