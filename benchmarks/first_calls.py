"""Issue 10 §2 on a GPU machine, each against triton measured in the same run: host launch overhead, the
GEMM cold compile, the first launch from a warm disk cache, and ``import``.

* **launch overhead**: an empty kernel (1 CTA x 32 threads), host time per launch in bursts of 64 launches
  between synchronizations (a burst stays far from the launch queue's capacity, so the host never waits for
  the GPU; ``benchmarks/launch_floor.py`` shows the driver's own cost and the queue profile), median over
  interleaved rounds: tsjit with a torch tensor, with a tsjit array, a ``Kernel.bind`` replay; triton.
* **cold compile**: tsjit's Hopper TS GEMM (``benchmarks/cold_compile.py``'s child) vs triton's
  ``matmul`` (a 128x128x64 bf16 tile kernel, the tutorial's shape), each in a fresh process with an empty
  cache: the compile (tsjit: ``tsjit.compile``; triton: ``kernel.warmup``), minimum of the runs (wall and
  CPU).  Also tsjit's compile in a cache directory it has used before (the toolchain memos, e.g.
  ``tsjit-memo-ptxas.json``, present; no entry for the kernel): a new or edited kernel's cold compile.
* **first launch from a warm disk cache**: a fresh process whose cache holds the kernel: tsjit's
  ``vector_add`` first launch (cache hit, module load, launch, sync) vs triton's vector add, same steps,
  timed after the CUDA context exists; tsjit's is split into the ``tsjit.compile`` hit (source digest,
  assembler version for the key, key + entry read: the issue's <= 10 ms), the module load and the launch.
* **import**: ``import tsjit`` vs ``import triton`` in fresh processes, median; and, since tsjit loads its
  names on first use, ``import tsjit.examples.basic`` (five kernels) vs ``import triton.language``.

    PYTHONPATH=. python benchmarks/first_calls.py [--runs 3] [--only disk_hit,cold_compile]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from cold_compile import GEMM_CHILD  # benchmarks/cold_compile.py

TRITON_MATMUL_CHILD = r"""
import json, time
t0 = time.perf_counter()
import torch, triton, triton.language as tl

@triton.jit
def matmul(a, b, c, M, N, K, sam, sak, sbk, sbn, scm, scn,
           BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pm, pn = tl.program_id(0), tl.program_id(1)
    rm, rn, rk = pm * BM + tl.arange(0, BM), pn * BN + tl.arange(0, BN), tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        x = tl.load(a + rm[:, None] * sam + (k + rk)[None, :] * sak)
        y = tl.load(b + (k + rk)[:, None] * sbk + rn[None, :] * sbn)
        acc = tl.dot(x, y, acc)
    tl.store(c + rm[:, None] * scm + rn[None, :] * scn, acc.to(tl.bfloat16))

a = torch.empty((4096, 4096), device="cuda", dtype=torch.bfloat16)
t1, cpu1 = time.perf_counter(), time.process_time()
matmul.warmup(a, a, a, 4096, 4096, 4096, 4096, 1, 4096, 1, 4096, 1, BM=128, BN=128, BK=64, grid=(32, 32),
              num_warps=8, num_stages=4)
t2, cpu2 = time.perf_counter(), time.process_time()
print(json.dumps({"compile_ms": (t2 - t1) * 1e3, "cpu_ms": (cpu2 - cpu1) * 1e3}))
"""

TSJIT_HIT_CHILD = r"""
import json, time
t_start = time.perf_counter()
import numpy as np, tsjit
from tsjit.examples import basic
t_import = time.perf_counter()
x = tsjit.to_device(np.ones(1024, np.float32)); out = tsjit.empty(1024, tsjit.Float32)
tsjit.synchronize()
t0 = time.perf_counter()
from tsjit.runtime import specialize
from tsjit.backend import assemble
specialize.tsjit_version_digest()
t_digest = time.perf_counter()
getattr(specialize, "assembler_key", assemble.assembler_version)()   # what the disk key asks for
t_tool = time.perf_counter()
c = basic.vector_add.compile(x, x, out, 1024)
t_hit = time.perf_counter()
c.function()
t_load = time.perf_counter()
basic.vector_add[(4,), (256,)](x, x, out, 1024)
tsjit.synchronize()
t_end = time.perf_counter()
ms = lambda a, b: (b - a) * 1e3
print(json.dumps({"ms": ms(t0, t_end), "from_cache": bool(c.metadata["from_cache"]), "ok": bool((out.numpy() == 2).all()),
                  "split": {"import": ms(t_start, t_import), "context": ms(t_import, t0), "source_digest": ms(t0, t_digest),
                            "assembler_version": ms(t_digest, t_tool), "rest_of_hit": ms(t_tool, t_hit),
                            "compile_hit": ms(t0, t_hit), "module_load": ms(t_hit, t_load),
                            "launch_sync": ms(t_load, t_end)}}))
"""

TRITON_HIT_CHILD = r"""
import json, time
import torch, triton, triton.language as tl

@triton.jit
def vector_add(x, y, out, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out + i, tl.load(x + i, mask=i < n) + tl.load(y + i, mask=i < n), mask=i < n)

x = torch.ones(1024, device="cuda"); out = torch.empty_like(x)
torch.cuda.synchronize()
t0 = time.perf_counter()
vector_add[(4,)](x, x, out, 1024, BLOCK=256)
torch.cuda.synchronize()
ms = (time.perf_counter() - t0) * 1e3
print(json.dumps({"ms": ms, "ok": bool((out == 2).all())}))
"""


def _child(code: str, env: dict) -> dict:
    """The JSON line ``code`` prints, run as a script file in a fresh interpreter (triton's ``@jit`` needs
    its source in a file)."""
    with tempfile.TemporaryDirectory() as folder:
        script = os.path.join(folder, "child.py")
        with open(script, "w") as fh:
            fh.write(code)
        out = subprocess.run([sys.executable, script], env=env, capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def _fresh_env(**extra) -> dict:
    env = dict(os.environ, **extra)
    env.pop("TSJIT_ALWAYS_COMPILE", None)
    return env


def launch_overhead(rows: list, rounds: int = 15, burst: int = 64) -> None:
    import torch
    import triton

    import tsjit

    @tsjit.kernel
    def empty_kernel(x, n):
        pass

    @triton.jit
    def empty_triton(x, n):
        pass

    x = torch.empty(16, device="cuda")
    darr = tsjit.empty(16, tsjit.Float32)
    launch = empty_kernel[(1,), (32,)]
    bound = empty_kernel.bind(darr, 16, grid=(1,), block=(32,))
    fns = {"torch": lambda: launch(x, 16), "array": lambda: launch(darr, 16), "bound": lambda: bound(0),
           "triton": lambda: empty_triton[(1,)](x, 16)}
    for fn in fns.values():
        for _ in range(50):
            fn()
    samples = {k: [] for k in fns}
    for _ in range(rounds):   # interleaved: every round times each launcher once
        for k, fn in fns.items():
            torch.cuda.synchronize()
            t0 = time.perf_counter_ns()
            for _ in range(burst):
                fn()
            samples[k].append((time.perf_counter_ns() - t0) / burst / 1e3)
    torch.cuda.synchronize()
    med = {k: statistics.median(v) for k, v in samples.items()}
    theirs = med["triton"]
    note = f"host time per launch, bursts of {burst}, median of {rounds} interleaved rounds"
    for key, label in (("torch", "launch overhead (torch tensor arg)"), ("array", "launch overhead (tsjit array arg)"),
                       ("bound", "launch overhead (Kernel.bind replay)")):
        rows.append((label, f"{med[key]:.2f} us", f"{theirs:.2f} us (triton)", f"{theirs / med[key]:.2f}", note))
        note = ""


def cold_compile(rows: list, runs: int = 3) -> None:
    ours, theirs, remembered = [], [], []
    with tempfile.TemporaryDirectory() as used:   # a cache directory tsjit has used: its toolchain memos, no entry
        _child(GEMM_CHILD, _fresh_env(TSJIT_CACHE_DIR=used))
        memos = {name: open(os.path.join(used, name), "rb").read() for name in os.listdir(used)
                 if name.startswith("tsjit-memo-")}
    for _ in range(runs):   # alternating fresh processes, each with an empty cache
        with tempfile.TemporaryDirectory() as cache:
            ours.append(_child(GEMM_CHILD, _fresh_env(TSJIT_CACHE_DIR=cache)))
        with tempfile.TemporaryDirectory() as cache:
            theirs.append(_child(TRITON_MATMUL_CHILD, _fresh_env(TRITON_CACHE_DIR=cache)))
        with tempfile.TemporaryDirectory() as cache:
            for name, data in memos.items():
                with open(os.path.join(cache, name), "wb") as fh:
                    fh.write(data)
            remembered.append(_child(GEMM_CHILD, _fresh_env(TSJIT_CACHE_DIR=cache)))
    assert not any(r["from_cache"] for r in ours + remembered), "a cold compile hit the cache"
    wall, cpu = min(r["compile_ms"] for r in ours), min(r["cpu_ms"] for r in ours)
    t_wall, t_cpu = min(r["compile_ms"] for r in theirs), min(r["cpu_ms"] for r in theirs)
    stages = {k: min(r["stages"][k] for r in ours) for k in ("frontend", "llvm", "assemble")}
    rows.append(("GEMM cold compile (fresh process, empty cache), wall min", f"{wall:.0f} ms",
                 f"{t_wall:.0f} ms (triton matmul)", f"{t_wall / wall:.2f}",
                 "tsjit stages frontend %.0f / llvm %.0f / assemble %.0f ms (%s); goal <= 250 ms" % (
                     stages["frontend"], stages["llvm"], stages["assemble"], ours[0].get("tool"))))
    rows.append(("GEMM cold compile, CPU min", f"{cpu:.0f} ms", f"{t_cpu:.0f} ms (triton matmul)",
                 f"{t_cpu / cpu:.2f}", f"min of {runs} runs each; ptxas runs as a subprocess (not in CPU time)"))
    m_wall, m_cpu = min(r["compile_ms"] for r in remembered), min(r["cpu_ms"] for r in remembered)
    rows.append(("GEMM cold compile, cache dir in use (toolchain memos, no entry), wall / CPU min",
                 f"{m_wall:.0f} / {m_cpu:.0f} ms", f"{t_wall:.0f} / {t_cpu:.0f} ms (triton, empty cache)",
                 f"{t_wall / m_wall:.2f}", "a new or edited kernel on a machine that has compiled before: the "
                 "assembler is not searched for (tsjit-memo-ptxas.json)"))


def disk_hit(rows: list, runs: int = 3) -> None:
    with tempfile.TemporaryDirectory() as ours_cache, tempfile.TemporaryDirectory() as their_cache:
        env_ours, env_theirs = _fresh_env(TSJIT_CACHE_DIR=ours_cache), _fresh_env(TRITON_CACHE_DIR=their_cache)
        _child(TSJIT_HIT_CHILD, env_ours)          # fill each cache
        _child(TRITON_HIT_CHILD, env_theirs)
        ours, theirs = [], []
        for _ in range(runs):
            ours.append(_child(TSJIT_HIT_CHILD, env_ours))
            theirs.append(_child(TRITON_HIT_CHILD, env_theirs))
    assert all(r["from_cache"] and r["ok"] for r in ours) and all(r["ok"] for r in theirs), (ours, theirs)
    mine, other = statistics.median(r["ms"] for r in ours), statistics.median(r["ms"] for r in theirs)
    split = {k: statistics.median(r["split"][k] for r in ours) for k in ours[0]["split"]}
    rows.append(("first launch from a warm disk cache (fresh process)", f"{mine:.1f} ms",
                 f"{other:.1f} ms (triton)", f"{other / mine:.2f}",
                 f"vector add: cache hit + module load + launch + sync, median of {runs}; after import "
                 f"{split['import']:.0f} ms and context creation {split['context']:.0f} ms (not counted)"))
    rows.append(("tsjit.compile from the disk cache (fresh process)", f"{split['compile_hit']:.1f} ms", "", "",
                 "goal <= 10 ms; of it: source digest %.1f, assembler version %.1f, key + entry read %.1f ms; "
                 "then module load %.1f, launch + sync %.1f ms" % (
                     split["source_digest"], split["assembler_version"], split["rest_of_hit"],
                     split["module_load"], split["launch_sync"])))


def import_time(rows: list, runs: int = 5) -> None:
    probe = "import time; t = time.perf_counter(); import {0}; print((time.perf_counter() - t) * 1e3)"
    # ``import tsjit`` loads its names on first use, so the second pair is what a script pays before its
    # first kernel: a module of five @tsjit.kernel functions and a @tsjit.func (numpy included), against
    # triton.language (what @triton.jit kernels import)
    pairs = (("tsjit", "triton"), ("tsjit.examples.basic", "triton.language"))
    times = {}
    for _ in range(runs):
        for name in (n for pair in pairs for n in pair):
            out = subprocess.run([sys.executable, "-c", probe.format(name)], env=_fresh_env(), check=True,
                                 capture_output=True, text=True)
            times.setdefault(name, []).append(float(out.stdout))
    mine, other = statistics.median(times["tsjit"]), statistics.median(times["triton"])
    rows.append(("import (fresh process)", f"{mine:.0f} ms", f"{other:.0f} ms (import triton)", f"{other / mine:.2f}",
                 f"median of {runs}; goal <= 120 ms"))
    mine, other = statistics.median(times["tsjit.examples.basic"]), statistics.median(times["triton.language"])
    rows.append(("import tsjit + a module of 5 kernels (tsjit.examples.basic)", f"{mine:.0f} ms",
                 f"{other:.0f} ms (import triton.language)", f"{other / mine:.2f}",
                 f"median of {runs}; numpy included; what a script pays before its first cached kernel"))


MEASURES = ("launch_overhead", "import_time", "disk_hit", "cold_compile")


def all_rows(rows: list, runs: int = 3, progress: bool = False, only=MEASURES) -> None:
    """The four rows, cheapest first, each measured even if another fails (a failure becomes a row saying
    why); ``progress`` prints each row as soon as it is measured; ``only`` names a subset."""
    for measure in (globals()[name] for name in MEASURES if name in only):
        done = len(rows)
        try:
            measure(rows) if measure is launch_overhead else measure(rows, runs)
        except Exception as exc:  # noqa: BLE001 - report and go on with the others
            rows.append((measure.__name__, "failed", "", "", f"{type(exc).__name__}: {str(exc)[-300:]}"))
        if progress:
            for row in rows[done:]:
                print(" | ".join(str(cell) for cell in row), flush=True)


def print_table(rows: list) -> None:
    header = ("benchmark", "tsjit", "baseline", "ratio (baseline time / tsjit time)", "notes")
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(5)]
    line = lambda r: "| " + " | ".join(str(c).ljust(w) for c, w in zip(r, widths)) + " |"
    print(line(header))
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in rows:
        print(line(r))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--only", default=",".join(MEASURES), help="comma-separated subset of " + ", ".join(MEASURES))
    args = parser.parse_args()
    rows: list = []
    all_rows(rows, args.runs, progress=True, only=args.only.split(","))
    print_table(rows)


if __name__ == "__main__":
    main()
