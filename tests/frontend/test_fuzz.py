"""Fuzz test: random scalar kernels (``fuzz_kernels.py``) each compile or fail with a located
CompilationError, never another exception, a crash or a hang.

``TSJIT_FUZZ_COUNT`` kernels (default 300) of seed ``TSJIT_FUZZ_SEED`` (default: a fresh random
seed, printed) are written to files and compiled for sm_90a by two worker processes, many kernels
per process.  Each worker announces a kernel before compiling it, so the parent attributes a
kernel that takes longer than ``TSJIT_FUZZ_TIMEOUT_S`` (default 60 s) or kills its worker (a
segfault, an LLVM abort) to that kernel, then starts a new worker for the rest.

Reproduce one kernel: ``python tests/frontend/fuzz_kernels.py SEED INDEX > k.py`` and compile it
with ``fuzz_kernels.compile_one("k.py")``, or rerun with ``TSJIT_FUZZ_SEED=SEED``.
"""
from __future__ import annotations

import json
import os
import queue
import random
import subprocess
import sys
import threading
import time

import pytest

from . import fuzz_kernels

WORKERS = 2
_GENERATOR = os.path.abspath(fuzz_kernels.__file__)
_REPOSITORY = os.path.dirname(os.path.dirname(os.path.dirname(_GENERATOR)))
_PASSING = ("compiled", "located")


def _setting(name: str, default: int) -> int:
    text = os.environ.get(name, "").strip()
    return int(text) if text else default


def _read_lines(stream, sink: queue.Queue) -> None:
    for line in stream:
        sink.put(line)
    sink.put(None)


def _run_worker_chain(paths: list[str], timeout_s: float, results: dict, env: dict, log_dir: str) -> None:
    """Compile ``paths`` in worker processes, restarting after a hang or crash; fill ``results``."""
    pending = list(paths)
    restarts = 0
    while pending:
        stderr_path = os.path.join(log_dir, f"worker-{threading.get_ident()}-{restarts}.err")
        with open(stderr_path, "w") as stderr:
            proc = subprocess.Popen([sys.executable, _GENERATOR, "--worker", *pending], stdout=subprocess.PIPE,
                                    stderr=stderr, text=True, env=env, cwd=log_dir)
        lines: queue.Queue = queue.Queue()
        threading.Thread(target=_read_lines, args=(proc.stdout, lines), daemon=True).start()
        current = None
        while True:
            try:
                line = lines.get(timeout=timeout_s)
            except queue.Empty:
                proc.kill()
                proc.wait()
                results[current or pending[0]] = {"outcome": "timeout",
                                                  "detail": f"no result after {timeout_s:.0f} s"}
                break
            if line is None:  # the worker exited
                proc.wait()
                if current is not None:
                    with open(stderr_path) as fh:
                        tail = fh.read()[-3000:]
                    results[current] = {"outcome": "crash", "detail": f"worker exit status {proc.returncode}\n{tail}"}
                break
            record = json.loads(line)
            if "start" in record:
                current = record["start"]
            else:
                results[record["path"]] = record
                current = None
        pending = [p for p in pending if p not in results]
        restarts += 1


def test_random_kernels_compile_or_fail_with_a_located_error(tmp_path):
    seed = _setting("TSJIT_FUZZ_SEED", random.randrange(2 ** 32))
    count = _setting("TSJIT_FUZZ_COUNT", 300)
    timeout_s = _setting("TSJIT_FUZZ_TIMEOUT_S", 60)
    print(f"\ntsjit fuzz: seed {seed}, {count} kernels (TSJIT_FUZZ_SEED={seed} reproduces this run)")
    paths = []
    for index in range(count):
        source = fuzz_kernels.kernel_source(seed, index)
        compile(source, f"kernel {index}", "exec")  # the generator writes valid Python
        path = tmp_path / f"fuzz_{index:04d}.py"
        path.write_text(source)
        paths.append(str(path))
    env = dict(os.environ, TSJIT_DISABLE_CACHE="1", PYTHONPATH=_REPOSITORY + os.pathsep
               + os.environ.get("PYTHONPATH", ""), PYTHONFAULTHANDLER="1")
    env.pop("TSJIT_DUMP_DIR", None)
    env.pop("TSJIT_UNROLL_LIMIT", None)
    results: dict = {}
    start = time.perf_counter()
    chains = [threading.Thread(target=_run_worker_chain, args=(paths[k::WORKERS], timeout_s, results, env,
                                                               str(tmp_path)))
              for k in range(WORKERS)]
    for chain in chains:
        chain.start()
    for chain in chains:
        chain.join()
    elapsed = time.perf_counter() - start
    outcomes = {path: results.get(path, {"outcome": "missing", "detail": ""}) for path in paths}
    tally: dict = {}
    for record in outcomes.values():
        tally[record["outcome"]] = tally.get(record["outcome"], 0) + 1
    print(f"tsjit fuzz: {tally} in {elapsed:.1f} s")
    failures = [(paths.index(path), record) for path, record in outcomes.items()
                if record["outcome"] not in _PASSING]
    report = "\n\n".join(
        f"kernel {index} ({record['outcome']}): python {os.path.relpath(_GENERATOR, _REPOSITORY)} {seed} {index}\n"
        f"{record['detail'][-2500:]}" for index, record in failures[:5])
    assert not failures, f"seed {seed}: {len(failures)} of {count} kernels failed ({tally}):\n\n{report}"
    # the generator must keep exercising code generation, not only error paths
    assert tally.get("compiled", 0) >= count // 4, f"seed {seed}: too few kernels compiled: {tally}"


def _compile_construct(tmp_path, construct: str) -> dict:
    body = "\n".join("    " + line for line in construct.splitlines())
    source = (f'import tsjit\n\nX_DTYPE = "Int32"\nY_DTYPE = "Int32"\nC_VALUE = 1\nGLOBAL_NAME = 1\n\n\n'
              f"@tsjit.kernel\ndef kernel(x, y, n: tsjit.Int32, C: tsjit.Constexpr[int]):\n"
              f"    i = tsjit.thread_idx().x\n    v0 = x[i]\n{body}\n")
    path = tmp_path / "construct.py"
    path.write_text(source)
    return fuzz_kernels.compile_one(str(path))


@pytest.mark.parametrize("construct", fuzz_kernels.UNSUPPORTED)
def test_each_unsupported_construct_is_a_located_error(tmp_path, construct):
    result = _compile_construct(tmp_path, construct)
    assert result["outcome"] == "located", result["detail"]


@pytest.mark.parametrize("construct", fuzz_kernels.EDGE_CASES)
def test_each_edge_case_compiles_or_is_a_located_error(tmp_path, construct):
    result = _compile_construct(tmp_path, construct)
    assert result["outcome"] in _PASSING, result["detail"]


def test_harness_attributes_a_hang_and_a_crash_to_their_kernels(tmp_path):
    good = fuzz_kernels.kernel_source(1, 0, unsupported_rate=0.0)
    sources = {"good_a": good, "hangs": "while True:\n    pass\n", "crashes": "import os\nos.abort()\n",
               "good_b": good}
    paths = []
    for name, source in sources.items():
        path = tmp_path / f"{name}.py"
        path.write_text(source)
        paths.append(str(path))
    env = dict(os.environ, TSJIT_DISABLE_CACHE="1", PYTHONPATH=_REPOSITORY)
    results: dict = {}
    _run_worker_chain(paths, 10, results, env, str(tmp_path))
    outcomes = {os.path.basename(path)[:-3]: results[path]["outcome"] for path in paths}
    assert outcomes["hangs"] == "timeout" and outcomes["crashes"] == "crash"
    assert outcomes["good_a"] in _PASSING and outcomes["good_b"] in _PASSING
