"""The cells of tutorial 14: the CPU interpreter finds a deadlock and a race (issue 13).

``build_notebooks.py`` writes it with the others.  The notebook runs its kernels under the
interpreter (``TSJIT_INTERPRET=1``), so it needs no GPU: two broken programs print the
interpreter's reports, their fixed twins run and are checked against numpy float64.  The kernels
are ``tsjit/examples/interpret_bugs.py``.
"""
from __future__ import annotations

SETUP = """import inspect, os, time, warnings
import numpy as np
import tsjit
GPU = tsjit.gpu_available()
print("GPU present:", GPU)
os.environ["TSJIT_INTERPRET"] = "1"    # every launch below runs on the CPU, GPU or not
from tsjit.errors import InterpretError
from tsjit.examples import interpret_bugs
from tsjit.ts.diagnostics import VerificationWarning
warnings.simplefilter("ignore", VerificationWarning)   # skip_validation's demoted finding

def report(launch):
    \"\"\"Run a broken launch, print the interpreter's report and how long it took to find it.\"\"\"
    start = time.perf_counter()
    try:
        launch()
    except InterpretError as err:
        print(err)
        print(f"\\n(found in {time.perf_counter() - start:.1f} s)")
        return str(err)
    raise AssertionError("the interpreter ran a broken program to the end")"""

DEADLOCK = """text = report(lambda: interpret_bugs.run_ring_scale(n=1000, chunk=128, commit=False))
assert text.startswith("deadlock") and "mbarrier chunks.full[0]" in text and "task 'consumer" in text"""

DEADLOCK_FIXED = """got, ref = interpret_bugs.run_ring_scale(n=1000, chunk=128, commit=True)
err = np.max(np.abs(got - ref) / (1 + np.abs(ref)))
print(f"fixed ring_scale: 1000 elements, max relative error vs float64 {err:.1e}")
assert err < 1e-6"""

RACE = """os.environ["TSJIT_INTERPRET_CHECK"] = "race"
text = report(lambda: interpret_bugs.run_tile_scale_store(fence=False))
assert "missing fence.proxy.async" in text and text.count("interpret_bugs.py:") >= 2"""

RACE_FIXED = """got, ref = interpret_bugs.run_tile_scale_store(fence=True)
err = np.max(np.abs(got - ref) / (1 + np.abs(ref)))
print(f"fixed tile_scale_store (race check on): max relative error vs float64 {err:.1e}")
assert err < 1e-6
del os.environ["TSJIT_INTERPRET_CHECK"], os.environ["TSJIT_INTERPRET"]"""

NOTEBOOKS = {
    "14_interpreter_finds_bugs.ipynb": [
        ("md", "# Tutorial 14: the interpreter finds a deadlock and a race\n\n"
               "`TSJIT_INTERPRET=1` runs a kernel on the CPU: the LLVM IR the compiler's frontend and TS lowering "
               "emit executes with one fiber per GPU thread, real mbarriers, TMA and wgmma. Besides numbers it "
               "reports what a GPU does not tell you. A broken pipeline on the GPU just hangs (or, under "
               "`TSJIT_DEBUG=1`, traps after a timeout and leaves the CUDA context unusable); under the "
               "interpreter, once no thread can make progress, the launch ends with an `InterpretError` listing "
               "every blocked thread group. A missing proxy fence on the GPU reads stale bytes only now and "
               "then; the interpreter's race check (`TSJIT_INTERPRET_CHECK=race`) reports it every time, naming "
               "both lines. This notebook needs no GPU."),
        ("code", SETUP),
        ("md", "## 1. A deadlock: the producer never commits\n\n"
               "`ring_scale` computes `y = 2 x + 1` through a 2-stage AsyncAsync ring: a producer warp fills a "
               "stage, a consumer warp waits for it, writes it out and releases it. With `COMMIT=False` the "
               "producer's `commit()` is missing. The TaskManager's checker would refuse that program, so it is "
               "compiled with `skip_validation=True`, the way a mistake slips through when the check is turned off."),
        ("source", "tsjit.examples.interpret_bugs: ring_scale.fn"),
        ("md", "The launch ends in about a second. For each blocked group the report gives the CTA, the warps, the "
               "task, the resource, the stage, the TS step, the loop iteration, the mbarrier and the phase it "
               "waits for (with the arrivals and transaction bytes still missing), and the source line of the "
               "wait. Here nobody arrives on `chunks.full[0]`; the producer itself has finished, because without "
               "a commit its stage index never moves on."),
        ("code", DEADLOCK),
        ("md", "The fixed twin (`COMMIT=True`, checked by the TaskManager) runs to the end on fresh random data "
               "with a NaN-poisoned output; the result is compared with numpy in float64:"),
        ("code", DEADLOCK_FIXED),
        ("md", "## 2. A race: a TMA store without `fence.proxy.async`\n\n"
               "`tile_scale_store` writes a 32 x 32 tile to shared memory from 128 threads, synchronizes, and "
               "one thread stores the tile to global memory with TMA. The writes go through the generic proxy, "
               "the TMA engine reads through the asynchronous proxy; `syncthreads` does not order the two "
               "proxies, a `fence.proxy.async` after the writes does (PTX ISA, memory consistency model: "
               "proxies). With `FENCE=False` the fence is missing."),
        ("source", "tsjit.examples.interpret_bugs: tile_scale_store.fn"),
        ("md", "Under `TSJIT_INTERPRET_CHECK=race` the interpreter tracks, per shared-memory byte, which thread "
               "wrote it, through which proxy and in which barrier epoch. The report names the two accesses no "
               "fence orders: the TMA store's line and the line of the generic write, with their threads."),
        ("code", RACE),
        ("md", "With the fence, the same launch under the race check passes and the tile is exact:"),
        ("code", RACE_FIXED),
    ],
}
