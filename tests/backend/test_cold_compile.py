"""Cold-compile speed-ups (issue 10 §2) change nothing that is emitted: the assembler's discovery runs on a
background thread (:func:`tsjit.backend.assemble.prewarm`) exactly once, and the GEMM example compiled in a
fresh process with an empty cache gives the same PTX and cubin with and without it (and the attention
example too).  The PTX from before these changes (main at c3429cb) was compared byte for byte by hand: see
benchmarks/cold_compile.py."""
import functools
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

import pytest

from tsjit.backend import assemble as asm


def no_ptx_compiler(monkeypatch):
    """A machine without nvPTXCompiler (no wheel or no C compiler): auto goes on to ptxas, then nvJitLink."""
    monkeypatch.setattr(asm.ptx_compiler, "state", lambda: ("unavailable", "not installed (a test's stand-in)"))


def test_prewarm_loads_the_assembler_once_even_when_the_compile_asks_first(monkeypatch):
    monkeypatch.delenv(asm.ASSEMBLER_ENV, raising=False)
    calls = []

    @functools.cache
    def slow_load():
        calls.append(threading.current_thread().name)
        time.sleep(0.2)  # the compiling thread asks while the background load still runs
        return (13, 5), "nvJitLink 13.5.0"

    monkeypatch.setattr(asm, "_load_nvjitlink", slow_load)
    thread = asm.prewarm("nvjitlink")
    assert thread is not None and thread.daemon
    assert asm._nvjitlink() == ((13, 5), "nvJitLink 13.5.0")  # waits for the thread, does not load again
    thread.join(5)
    assert len(calls) == 1  # loaded once, by whichever thread took the lock first
    assert asm.prewarm("nvjitlink") is None  # already loaded: no thread


def test_prewarm_finds_ptxas_without_loading_nvjitlink_and_ignores_a_bad_setting(monkeypatch):
    monkeypatch.setattr(asm, "_load_nvjitlink", functools.cache(lambda: pytest.fail("loaded nvJitLink")))
    found = []
    monkeypatch.setattr(asm, "_find_ptxas", functools.cache(lambda: found.append(1) or ("/x/ptxas", "ptxas 13.0.88")))
    monkeypatch.setattr(asm, "_known_ptxas", [])
    thread = asm.prewarm("ptxas")
    assert thread is not None
    thread.join(5)
    assert asm._ptxas() == ("/x/ptxas", "ptxas 13.0.88") and found == [1]   # found once, on the thread
    monkeypatch.setenv(asm.ASSEMBLER_ENV, "ptxas")
    assert asm.prewarm() is None   # already found
    monkeypatch.setenv(asm.ASSEMBLER_ENV, "no-such-tool")
    assert asm.prewarm() is None  # select_tool reports the bad setting at assembly time


def test_auto_passes_over_an_old_nvjitlink_wheel_without_loading_it(monkeypatch):
    """The H200 image: an nvJitLink 13.0 wheel (which auto skips) and ptxas 13.0.88, no nvPTXCompiler."""
    monkeypatch.delenv(asm.ASSEMBLER_ENV, raising=False)
    no_ptx_compiler(monkeypatch)
    monkeypatch.setattr(asm, "_load_nvjitlink", functools.cache(lambda: pytest.fail("loaded nvJitLink")))
    monkeypatch.setattr(asm, "_wheel_nvjitlink", lambda: ((13, 0), "nvJitLink 13.0.88"))
    monkeypatch.setattr(asm, "_find_ptxas", functools.cache(lambda: ("/x/ptxas", "ptxas 13.0.88")))
    monkeypatch.setattr(asm, "_known_ptxas", [])
    thread = asm.prewarm()
    assert thread is not None and thread.name == "tsjit-assembler-prewarm"
    thread.join(5)
    assert asm.select_tool() == "ptxas"
    assert asm.assembler_version() == "ptxas 13.0.88"


def test_auto_loads_an_old_nvjitlink_when_it_is_the_only_tool(monkeypatch):
    monkeypatch.delenv(asm.ASSEMBLER_ENV, raising=False)
    no_ptx_compiler(monkeypatch)
    monkeypatch.setattr(asm, "_load_nvjitlink", functools.cache(lambda: ((13, 0), "nvJitLink 13.0.88")))
    monkeypatch.setattr(asm, "_wheel_nvjitlink", lambda: ((13, 0), "nvJitLink 13.0.88"))
    monkeypatch.setattr(asm, "_find_ptxas", functools.cache(lambda: (None, "ptxas not found")))
    monkeypatch.setattr(asm, "_known_ptxas", [])
    with pytest.warns(UserWarning, match="misaligns dynamic shared memory"):
        assert asm.select_tool() == "nvjitlink"


_CHILD = r"""
import hashlib, json, sys
import tsjit
from tsjit.backend import assemble
from tsjit.examples import attention, gemm
if sys.argv[1] == "off":
    assemble.prewarm = lambda tool=None: None
a = tsjit.tensormap_spec(tsjit.BFloat16, (gemm.BM, gemm.BK), swizzle="128B")
b = tsjit.tensormap_spec(tsjit.BFloat16, (128, gemm.BK), swizzle="128B")
c_map = tsjit.tensormap_spec(tsjit.BFloat16, (64, 64), swizzle="128B")
c = tsjit.compile(gemm.gemm_ts, a, b, tsjit.spec((4096, 4096), tsjit.BFloat16), c_map,
                  4096, 4096, 4096, 256, 4, 8, 2, "tma", target="sm_90a")
kernels = {"gemm_ts": c, "attention": attention.compile_config(64, True, tsjit.BFloat16)}
print(json.dumps({name: {"ptx": hashlib.sha256(k.ptx.encode()).hexdigest(), "cubin": hashlib.sha256(k.cubin).hexdigest(),
                         "tool": k.metadata.get("tool"), "version": k.metadata.get("tool_version"),
                         "from_cache": k.metadata.get("from_cache", False)} for name, k in kernels.items()}))
"""


def _fresh_compile(mode: str) -> dict:
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, TSJIT_CACHE_DIR=cache)
        env.pop("TSJIT_ALWAYS_COMPILE", None)
        out = subprocess.run([sys.executable, "-c", _CHILD, mode], env=env, capture_output=True, text=True,
                             timeout=300)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout.strip().splitlines()[-1])


def test_cold_compile_emits_the_same_ptx_and_cubin_with_and_without_prewarm():
    """The GEMM and attention examples, each process with an empty cache: byte-identical PTX and cubin,
    the same assembler and version text."""
    if not asm.available_tools():
        pytest.skip("no PTX assembler installed")
    off, on = _fresh_compile("off"), _fresh_compile("on")
    assert not any(k["from_cache"] for k in (*off.values(), *on.values()))
    assert on == off


_HIT_CHILD = r"""
import json, sys
import numpy as np
import tsjit

@tsjit.kernel
def copy(x, out):
    i = tsjit.thread_idx().x
    out[i] = x[i]

x = np.zeros(8, np.float32)
c = tsjit.compile(copy, x, x)
print(json.dumps({"from_cache": c.metadata["from_cache"],
                  "loaded": [m for m in ("llvmlite.binding", "cuda.bindings.driver", "cuda.bindings.nvjitlink",
                                         "cuda.pathfinder", "llvmlite.ir", "tsjit.frontend.codegen",
                                         "tsjit.lang.values", "tsjit.lang.memory") if m in sys.modules]}))
"""


@pytest.mark.parametrize("assembler", ["auto", "ptxas"])
def test_a_disk_cache_hit_loads_neither_llvm_nor_the_cuda_bindings(tmp_path, assembler):
    """Issue 10 §2: a process whose kernels come from the disk cache does not pay for LLVM's native library
    or cuda-bindings (they load on the first compile and the first launch), nor, with ptxas, for
    cuda.pathfinder's search (the cache directory remembers the ptxas found: runtime.specialize.assembler_key),
    nor for the code generator, the device language and llvmlite.ir (``@tsjit.kernel`` and the hit's
    dependency check load none of them: about half of a fresh process's time to its first kernel)."""
    if assembler == "ptxas" and asm._find_ptxas()[0] is None:
        pytest.skip("no ptxas here")
    script = tmp_path / "hit.py"
    script.write_text(_HIT_CHILD)
    env = dict(os.environ, TSJIT_CACHE_DIR=str(tmp_path / "cache"), TSJIT_ASSEMBLER=assembler)
    env.pop("TSJIT_ALWAYS_COMPILE", None)
    runs = [json.loads(subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True,
                                      check=True).stdout.splitlines()[-1]) for _ in range(2)]
    assert runs[0]["from_cache"] is False and "llvmlite.binding" in runs[0]["loaded"]   # the cold compile
    assert runs[1]["from_cache"] is True
    assert not {"llvmlite.binding", "cuda.bindings.driver", "cuda.pathfinder", "llvmlite.ir", "tsjit.frontend.codegen",
                "tsjit.lang.values", "tsjit.lang.memory"} & set(runs[1]["loaded"]), runs[1]


def test_llvm_prewarm_builds_the_target_machine_once_on_a_daemon_thread():
    from tsjit.backend import nvptx, prewarm
    thread = prewarm.llvm("sm_90a")
    if thread is not None:   # (an earlier test of this process may have started it)
        assert thread.daemon and thread.name == "tsjit-llvm-prewarm"
        thread.join(60)
    assert ("sm_90a", 3) in nvptx._pass_builders and ("sm_90a", 3) in nvptx._machines
    assert prewarm.llvm("sm_90a") is None   # once per process and target
