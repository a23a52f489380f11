"""Issue 9 §3, compile side: TSJIT_DEBUG=1 bounds every mbarrier wait; release builds are unchanged.

The three GPU hang programs (tests/gpu/hang_programs.py) are compiled here without a GPU, in
release and debug builds, and assembled (nvJitLink, and ptxas for sm_90a / sm_100a)."""
import os
import re
import sys

import numpy as np
import pytest

import tsjit

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "gpu"))
import hang_programs  # noqa: E402

MBARRIER_CASES = ("missing_commit", "short_tma_bytes", "wrong_block")
CASES = MBARRIER_CASES + ("named_barrier_short",)
# the hang programs are compiled with skip_validation=True on purpose: their findings are warnings
pytestmark = pytest.mark.filterwarnings("ignore::tsjit.ts.diagnostics.VerificationWarning")


def _compile(case: str, monkeypatch, target=None, **environment):
    """Compile ``case`` with exactly ``environment``'s debug variables, through a fresh Kernel object
    (a Kernel's in-memory memo does not see environment changes)."""
    for name in ("TSJIT_DEBUG", "TSJIT_DEBUG_TIMEOUT_MS"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    fresh = tsjit.kernel(hang_programs.kernel_of(case).fn)
    return hang_programs.compile_case(case, fresh, target)


def _instructions(ptx: str) -> list[str]:
    out = []
    for line in ptx.splitlines():
        text = line.strip()
        if text.endswith(";") and not text.startswith((".", "//")):
            out.append(text)
    return out


@pytest.mark.parametrize("case", CASES)
def test_release_build_is_unchanged_with_the_debug_flag_off(case, monkeypatch):
    unset = _compile(case, monkeypatch)
    off = _compile(case, monkeypatch, TSJIT_DEBUG="0")
    assert len(_instructions(off.ptx)) == len(_instructions(unset.ptx))
    assert off.ptx == unset.ptx
    for marker in ("globaltimer", "trap;", "tsjit_hang", "fence.sc.sys", "nanosleep"):
        assert marker not in unset.ptx
    assert unset.metadata["debug_waits"] == []


@pytest.mark.parametrize("case", MBARRIER_CASES)
def test_debug_build_bounds_every_mbarrier_wait(case, monkeypatch):
    release = _compile(case, monkeypatch)
    debug = _compile(case, monkeypatch, TSJIT_DEBUG="1")
    waits = debug.metadata["debug_waits"]
    assert waits, "no bounded wait was emitted"
    try_waits = lambda ptx: len(re.findall(r"mbarrier\.try_wait", ptx))  # noqa: E731
    # each wait of the release build becomes a fast try_wait plus the bounded loop's try_wait
    assert try_waits(debug.ptx) == try_waits(release.ptx) + len(waits)
    assert debug.ptx.count("trap;") == len(waits)
    assert "%globaltimer" in debug.ptx and "2000000000" in debug.ptx  # the 2 s budget in ns
    assert ".visible .global .align 8 .u64 tsjit_hang_record" in debug.ptx
    assert ".visible .global .align 8 .u32 tsjit_hang_claims" in debug.ptx
    assert debug.metadata["key"] != release.metadata["key"]
    assert len(_instructions(debug.ptx)) > len(_instructions(release.ptx))


def test_timeout_variable_sets_the_budget_and_the_key(monkeypatch):
    default = _compile("missing_commit", monkeypatch, TSJIT_DEBUG="1")
    short = _compile("missing_commit", monkeypatch, TSJIT_DEBUG="1", TSJIT_DEBUG_TIMEOUT_MS="250")
    assert "250000000" in short.ptx and "2000000000" not in short.ptx
    assert short.metadata["key"] != default.metadata["key"]


def test_wait_sites_name_task_operation_resource_and_barrier(monkeypatch):
    sites = _compile("wrong_block", monkeypatch, TSJIT_DEBUG="1").metadata["debug_waits"]
    acquire = [s for s in sites if "ProducerAcquire at schedule step" in s["operation"]]
    assert acquire and acquire[0]["task"] == "task 'load' (warp 0)" and acquire[0]["barrier"] == "smem.empty"
    assert acquire[0]["resource"] == "smem" and "ts_tma_copy.py:" in acquire[0]["operation"]
    tail = [s for s in sites if "producer tail" in s["operation"]]
    assert len(tail) == hang_programs.STAGES and all(s["barrier"] == "smem.empty" for s in tail)
    wait = [s for s in sites if "ConsumerWait" in s["operation"]]
    assert wait and wait[0]["task"] == "task 'store' (warps 1-4)" and wait[0]["barrier"] == "smem.full"


@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_debug_builds_assemble_with_ptxas(target, monkeypatch):
    monkeypatch.setenv("TSJIT_ASSEMBLER", "ptxas")
    for case in CASES:
        compiled = _compile(case, monkeypatch, target, TSJIT_DEBUG="1")
        assert compiled.metadata["tool"] == "ptxas" and compiled.cubin[:4] == b"\x7fELF"
        assert compiled.metadata["target"] == target and "trap;" in compiled.ptx


def test_plain_mbarrier_wait_is_bounded_and_named(monkeypatch):
    monkeypatch.setenv("TSJIT_DEBUG", "1")

    @tsjit.kernel
    def waits_forever(out):
        bar = tsjit.shared_array(tsjit.Int64, 1)
        if tsjit.thread_idx().x == 0:
            tsjit.mbarrier_init(bar.ptr, 2)
        tsjit.fence_mbarrier_init()
        tsjit.syncthreads()
        tsjit.mbarrier_arrive(bar.ptr)
        tsjit.mbarrier_wait(bar.ptr, 0)
        out[0] = 1.0

    compiled = tsjit.compile(waits_forever, np.zeros(1, np.float32))
    assert compiled.metadata["debug_waits"] == [{"task": "", "operation": "tsjit.mbarrier_wait", "resource": "",
                                                 "barrier": "mbarrier"}]
    assert compiled.ptx.count("trap;") == 1


def test_named_barrier_becomes_a_bounded_software_barrier(monkeypatch):
    release = _compile("named_barrier_short", monkeypatch)
    debug = _compile("named_barrier_short", monkeypatch, TSJIT_DEBUG="1")
    assert re.search(r"bar\.sync\s+1, 64;", release.ptx) and "fence.acq_rel.cta" not in release.ptx
    assert not re.search(r"bar\.sync\s+1", debug.ptx)
    # every thread zeroes the counters at entry, then one hardware bar.sync 0 (cannot hang there)
    assert re.search(r"bar\.sync\s+0;", debug.ptx) and debug.ptx.count("fence.acq_rel.cta") == 2
    assert "ld.acquire" in debug.ptx and "bar.warp.sync" in debug.ptx
    assert debug.metadata["smem_bytes"] == release.metadata["smem_bytes"] + 128
    assert debug.launch_requirements.min_smem_bytes == debug.metadata["smem_bytes"]
    assert debug.metadata["debug_waits"] == [{"task": "", "operation": "tsjit.named_barrier_sync", "resource": "",
                                              "barrier": "named barrier"}]
