"""Issue 9 §3 on the H200: under TSJIT_DEBUG=1 a program that really hangs ends in under 5 s with a
LaunchError that names the kernel, CTA, task, warp, resource, stage, iteration and phase.

Each hanging program runs in its own process (tests/gpu/hang_programs.py): the trap that ends it
leaves that process's CUDA context unusable.  The child reports the time from the launch to the
error; the parent also bounds the whole child.

Also under the CPU interpreter (``gpu_or_interpret``): the same TSJIT_DEBUG=1 builds run in this process
(no CUDA context to lose) and the interpreter's deadlock detector must end each within 5 s with an
InterpretError naming the kernel, CTA, warps, task, resource, stage, loop iteration, the barrier and
its phase, and the source line, where the GPU's watchdog needs its time budget.  The watchdog budget
itself (``TSJIT_DEBUG_TIMEOUT_MS``) is a GPU timing fact: that test stays GPU-only."""
import json
import os
import pathlib
import subprocess
import sys
import tempfile

import numpy as np
import pytest

from tsjit import env as tsjit_env

pytestmark = [pytest.mark.gpu_or_interpret,
              pytest.mark.filterwarnings("ignore::tsjit.ts.diagnostics.VerificationWarning")]

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = pathlib.Path(__file__).with_name("hang_programs.py")


@pytest.fixture
def debug_build(monkeypatch):
    """Under the interpreter, TSJIT_DEBUG=1 in this process (the interpreted variant runs the programs here;
    on the GPU each child process gets it)."""
    if tsjit_env.interpret():
        monkeypatch.delenv("TSJIT_DEBUG_TIMEOUT_MS", raising=False)
        monkeypatch.setenv("TSJIT_DEBUG", "1")


def _run(case: str, **extra_env) -> dict:
    if tsjit_env.interpret():
        sys.path.insert(0, str(SCRIPT.parent))
        try:
            import hang_programs
        finally:
            sys.path.remove(str(SCRIPT.parent))
        result = hang_programs.run_case(case)
    else:
        env = dict(os.environ)
        env.pop("TSJIT_DEBUG_TIMEOUT_MS", None)
        env.update(TSJIT_DEBUG="1", TSJIT_CACHE_DIR=tempfile.mkdtemp(), PYTHONPATH=str(ROOT), **extra_env)
        done = subprocess.run([sys.executable, str(SCRIPT), case], env=env, capture_output=True, text=True,
                              timeout=180)
        lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
        assert lines, f"the child printed no result (rc {done.returncode}):\n{done.stdout}\n{done.stderr[-4000:]}"
        result = json.loads(lines[-1])
    print(result["message"], f"\n[{case}: {result['seconds']:.2f} s to the message]")
    return result


def _interpreted(result, kernel: str) -> str:
    """The interpreter's deadlock report: within 5 s, naming the kernel, a CTA and the source line."""
    assert result["error"] == "InterpretError", result
    assert result["seconds"] < 5.0, f"{result['seconds']:.2f} s to the message"
    text = result["message"]
    assert text.startswith(f"deadlock: all ") and f"of kernel {kernel!r} are blocked" in text, text
    assert "CTA (0, 0, 0)" in text and ".py:" in text
    return text


def _common(result, kernel: str) -> str:
    assert result["error"] == "LaunchError", result
    assert result["seconds"] < 5.0, f"{result['seconds']:.2f} s to the message"
    text = result["message"]
    assert f"kernel {kernel!r} hung (TSJIT_DEBUG=1)" in text and "2000 ms budget" in text
    assert "CTA" in text and "the driver:" in text
    return text


def test_missing_commit_is_reported(debug_build):
    """The producer never commits, so its cursor never advances: every acquire re-opens stage 0 with the
    fresh barrier's parity and passes, and the producer finishes; the consumer waits forever."""
    if tsjit_env.interpret():
        text = _interpreted(_run("missing_commit"), "missing_commit")
        assert "CTA (0, 0, 0), warp 1, task 'consumer (warps 1-1)', resource 'chunks', stage 0, step chunks_wait, " \
               "loop iteration 0, waits for the phase of parity 0" in text
        assert "waiting on mbarrier chunks.full[0] (CTA rank 0): in phase 0 (parity 0)" in text
        blocked, _, exited = text.partition("Tasks that already exited:")
        assert "task 'producer" not in blocked      # it finished: listed as exited, and no trip-count hint
        assert "task 'producer (warps 0-0)' exited after 16 iteration(s)" in exited
        assert "domain_loop" not in exited
        return
    text = _common(_run("missing_commit"), "missing_commit")
    assert "1 wait(s) outlived" in text
    assert "blocked: task 'consumer' (warp 1) warp 1 of CTA (0, 0, 0) at 'chunks' ConsumerWait" in text
    assert "(stage 0, iteration 0, loop offset 0): waits for chunks.full[0] to complete the phase of parity 0" in text


def test_tma_byte_count_one_tile_short_is_reported(debug_build):
    if tsjit_env.interpret():
        text = _interpreted(_run("short_tma_bytes"), "short_tma_bytes")
        assert "warps 1-4, task 'store (warps 1-4)', resource 'smem', stage 0, step smem_wait, loop iteration 0, " \
               "waits for the phase of parity 0" in text
        assert "waiting on mbarrier smem.full[0] (CTA rank 0): in phase 0 (parity 0), 0 of 1 arrivals and 16384 " \
               "transaction bytes pending" in text
        # the loader re-opens stage 0 at iteration 2 and waits for a release that never comes
        assert "warp 0, task 'load (warps 0-0)', resource 'smem', stage 0, step smem_acquire, loop iteration 2" in text
        assert "waiting on mbarrier smem.empty[0]" in text
        return
    text = _common(_run("short_tma_bytes"), "short_tma_bytes")
    assert "blocked: task 'store' (warps 1-4) warp 1 of CTA" in text   # one line per CTA: their loop offsets differ
    assert "'smem' ConsumerWait" in text and "waits for smem.full[0] to complete the phase of parity 0" in text
    # the loader re-opens stage 0 at iteration 2 and waits for a release that never comes
    assert "blocked: task 'load' (warp 0) warp 0 of CTA" in text and "waits for smem.empty[0]" in text


def test_block_too_small_with_the_check_disabled_is_reported(debug_build):
    if tsjit_env.interpret():
        text = _interpreted(_run("wrong_block"), "tma_copy_ts")
        assert "all 32 live threads" in text
        assert "warp 0, task 'load (warps 0-0)', resource 'smem', stage 0, step smem_acquire, loop iteration 2, " \
               "waits for the phase of parity 0" in text and "waiting on mbarrier smem.empty[0]" in text
        assert "task 'store" not in text  # those warps do not exist in a 32-thread CTA
        return
    text = _common(_run("wrong_block"), "tma_copy_ts")
    assert "blocked: task 'load' (warp 0) warp 0 of CTA" in text and "'smem' ProducerAcquire" in text
    assert "waits for smem.empty[0] to complete the phase of parity 0" in text and "iteration 2" in text
    assert "task 'store'" not in text  # those warps do not exist in a 32-thread CTA


def test_named_barrier_missing_a_warp_is_reported(debug_build):
    if tsjit_env.interpret():
        # the debug build's software named barrier polls a shared word (ld.acquire): the interpreter
        # parks the poll and reports the loop that nothing can end
        text = _interpreted(_run("named_barrier_short"), "named_barrier_short")
        assert "all 32 live threads" in text and "CTA (0, 0, 0), warp 0\n" in text
        assert "a polling loop whose atomic load keeps reading 0 (nothing writes it)" in text
        assert "hang_programs.py:88" in text
        return
    text = _common(_run("named_barrier_short"), "named_barrier_short")
    assert "blocked: warp 0 of CTAs (0, 0, 0), (1, 0, 0) at tsjit.named_barrier_sync (stage 1): waits for named " \
           "barrier[1] to complete the phase of parity 0" in text or \
           "blocked: warp 0 of CTAs (1, 0, 0), (0, 0, 0) at tsjit.named_barrier_sync (stage 1)" in text


def test_budget_follows_the_timeout_variable():
    if tsjit_env.interpret():
        pytest.skip("the watchdog's time budget is a GPU timing fact (the interpreter reports the deadlock itself)")
    result = _run("missing_commit", TSJIT_DEBUG_TIMEOUT_MS="300")
    assert result["error"] == "LaunchError" and "300 ms budget" in result["message"]
    assert result["seconds"] < 2.0


def test_the_launch_check_refuses_the_wrong_block_without_hanging():
    import tsjit
    from tsjit.examples import ts_tma_copy
    src = tsjit.to_device(np.zeros((256, 256), np.float32))
    dst = tsjit.empty((256, 256), tsjit.Float32)
    with pytest.raises(tsjit.LaunchError) as err:
        ts_tma_copy.tma_copy_ts[(4,), (32,)](tsjit.TensorMap(src, (64, 64)), dst, 16, 4, 64, 64, 2)
    assert "'tma_copy_ts'" in str(err.value) and "exactly 160 threads" in str(err.value)


def test_debug_build_of_a_correct_program_is_exact(debug_build):
    if tsjit_env.interpret():   # reduced sizes; the debug build's bounded waits and software named barriers
        from tsjit.examples import gemm, ts_async, ts_tma_copy
        got, ref = ts_tma_copy.run_tma_copy_ts(131, 132, blocks=3)
        np.testing.assert_array_equal(got, ref)
        got, ref = ts_async.run_async("pingpong", 4096, 2)
        np.testing.assert_array_equal(got, ref.astype(np.float32))
        errs = [np.linalg.norm(g - r) / np.linalg.norm(r) for g, r in
                (gemm.run_gemm(256, 128, 64, cluster_m=m) for m in (1, 2))]
        assert max(errs) < 1e-2, errs
        return
    code = ("import numpy as np; from tsjit.examples import ts_tma_copy, ts_async;"
            "got, ref = ts_tma_copy.run_tma_copy_ts(1000, 780); np.testing.assert_array_equal(got, ref);"
            "got, ref = ts_async.run_async('pingpong', 1 << 20, 132);"
            "np.testing.assert_array_equal(got, ref.astype(np.float32));"
            "from tsjit.examples import gemm;"  # named barriers in the epilogue, cluster sync with cluster_m=2
            "errs = [np.linalg.norm(g - r) / np.linalg.norm(r) for g, r in"
            " (gemm.run_gemm(1000, 1000, 1000, cluster_m=m) for m in (1, 2))];"
            "assert max(errs) < 1e-2, errs; print('exact')")
    env = dict(os.environ, TSJIT_DEBUG="1", TSJIT_CACHE_DIR=tempfile.mkdtemp(), PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "exact" in done.stdout, done.stderr[-4000:]
