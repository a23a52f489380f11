"""``MemoryResource.name`` is "used in debug prints and PTX comments": the PTX carries
``// <resource>_<operation>`` per step and ``// <task> warp: [a, b)`` per task (switched off by
``emit_ptx_comments=False``); ``Task(debug_print=True)`` prints every step at run time.
"""
import re

import numpy as np
import pytest

import tsjit
from tsjit import ts
from test_pipeline_config import ring_kernel

conformance = pytest.mark.conformance


def _ring_kernel(debug_print, emit_ptx_comments):
    return ring_kernel(lambda: ts.PipelineConfig.create_async_async_pipeline_cfg(
        2, ts.CooperativeGroup(ts.Agent.Thread, 32), ts.CooperativeGroup(ts.Agent.Thread, 32)),
        task_options=dict(debug_print=debug_print, emit_ptx_comments=emit_ptx_comments))


PLAIN, QUIET, DEBUG = _ring_kernel(False, True), _ring_kernel(False, False), _ring_kernel(True, True)


def _ptx(kernel):
    x = np.zeros(256, np.float32)
    return tsjit.compile(kernel, x, x, 8, target="sm_90a").ptx


def _comments(ptx):
    return [line.strip()[3:] for line in ptx.splitlines()
            if line.strip().startswith("// ") and "inline asm" not in line and "warp: [" in line
            or re.match(r"\s*// (ring|out)_", line)]


def _opcodes(ptx):
    """The multiset of instruction opcodes, without branches, labels and branch conditions (the
    comment statements may change LLVM's block placement, never the work)."""
    body = ptx[ptx.index(".entry"):]
    ops = [line.split()[0] for line in body.splitlines()
           if line.strip() and not line.strip().startswith(("//", "$", "@", "{", "}", "bra", "setp", "ret"))]
    return sorted(ops)


@conformance("§1.1", "MemoryResource.name in errors, printouts, PTX comments")
@conformance("§1.1", "PTX comments (task.emit_ptx_comments)")
def test_ptx_carries_resource_operation_and_task_comments():
    assert _comments(_ptx(PLAIN)) == [
        "consumer warp: [1, 2)", "ring_wait", "ring_take", "out_write", "ring_release",
        "producer warp: [0, 1)", "ring_acquire", "ring_fill", "ring_commit"]


def test_emit_ptx_comments_false_drops_them_and_nothing_else():
    plain, quiet = _ptx(PLAIN), _ptx(QUIET)
    assert _comments(quiet) == [] and "inline asm" not in quiet
    assert _opcodes(quiet) == _opcodes(plain)
    assert plain.count("mbarrier.") == quiet.count("mbarrier.")


@conformance("§1.1", "Task.debug_print")
def test_debug_print_emits_one_guarded_print_per_step():
    ptx = _ptx(DEBUG)
    assert "vprintf" not in _ptx(PLAIN)
    assert ptx.count("call.uni (retval0), vprintf") == 7     # one per step of both tasks
    strings = [bytes(int(b) for b in m.split(",")).rstrip(b"\0").decode()
               for m in re.findall(r"\.b8 str_\S+\[\d+\] = \{([^}]*)\}", ptx)]
    assert any(t.startswith("[ts] block 0 thread %d task consumer step #0 ring_wait stage %d Loop iteration %d")
               for t in strings), strings
    assert sum("task producer" in t for t in strings) == 3


def test_debug_print_is_a_task_option_in_the_reference_order():
    with pytest.raises(TypeError, match="emit_ptx_comments"):
        ts.Task([], [], 0, 1, schedule=None, emit_ptx_comments="yes")


@pytest.mark.gpu_or_interpret
def test_debug_print_prints_each_step_from_block_zero(capfd):
    chunks = 3
    x = np.random.default_rng().standard_normal(chunks * 32).astype(np.float32)
    y = tsjit.empty(chunks * 32, tsjit.Float32).fill_bytes(0x7F)
    DEBUG[(2,), (64,)](tsjit.to_device(x), y, chunks)
    np.testing.assert_allclose(y.numpy(), x.astype(np.float64) * 2.0, rtol=1e-6)   # synchronizes
    lines = [line for line in capfd.readouterr().out.splitlines() if line.startswith("[ts]")]
    assert len(lines) == 7 * chunks                       # 3 producer + 4 consumer steps per chunk
    assert all(line.startswith("[ts] block 0 thread ") for line in lines)
    assert sum("task producer" in line and "ring_fill" in line for line in lines) == chunks
    assert any("ring_release stage 1 Loop iteration 1" in line for line in lines)
