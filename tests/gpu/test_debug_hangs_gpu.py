"""Issue 9 §3 on the H200: under TSJIT_DEBUG=1 a program that really hangs ends in under 5 s with a
LaunchError that names the kernel, CTA, task, warp, resource, stage, iteration and phase.

Each hanging program runs in its own process (tests/gpu/hang_programs.py): the trap that ends it
leaves that process's CUDA context unusable.  The child reports the time from the launch to the
error; the parent also bounds the whole child."""
import json
import os
import pathlib
import subprocess
import sys
import tempfile

import numpy as np
import pytest

pytestmark = pytest.mark.gpu

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = pathlib.Path(__file__).with_name("hang_programs.py")


def _run(case: str, **extra_env) -> dict:
    env = dict(os.environ)
    env.pop("TSJIT_DEBUG_TIMEOUT_MS", None)
    env.update(TSJIT_DEBUG="1", TSJIT_CACHE_DIR=tempfile.mkdtemp(), PYTHONPATH=str(ROOT), **extra_env)
    done = subprocess.run([sys.executable, str(SCRIPT), case], env=env, capture_output=True, text=True, timeout=180)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    assert lines, f"the child printed no result (rc {done.returncode}):\n{done.stdout}\n{done.stderr[-4000:]}"
    result = json.loads(lines[-1])
    print(result["message"], f"\n[{case}: {result['seconds']:.2f} s to the message]")
    return result


def _common(result, kernel: str) -> str:
    assert result["error"] == "LaunchError", result
    assert result["seconds"] < 5.0, f"{result['seconds']:.2f} s to the message"
    text = result["message"]
    assert f"kernel {kernel!r} hung (TSJIT_DEBUG=1)" in text and "2000 ms budget" in text
    assert "CTA" in text and "the driver:" in text
    return text


def test_missing_commit_is_reported():
    """The producer never commits, so its cursor never advances: every acquire re-opens stage 0 with the
    fresh barrier's parity and passes, and the producer finishes; the consumer waits forever."""
    text = _common(_run("missing_commit"), "missing_commit")
    assert "1 wait(s) outlived" in text
    assert "blocked: task 'consumer' (warp 1) warp 1 of CTA (0, 0, 0) at 'chunks' ConsumerWait" in text
    assert "(stage 0, iteration 0, loop offset 0): waits for chunks.full[0] to complete the phase of parity 0" in text


def test_tma_byte_count_one_tile_short_is_reported():
    text = _common(_run("short_tma_bytes"), "short_tma_bytes")
    assert "blocked: task 'store' (warps 1-4) warp 1 of CTA" in text   # one line per CTA: their loop offsets differ
    assert "'smem' ConsumerWait" in text and "waits for smem.full[0] to complete the phase of parity 0" in text
    # the loader re-opens stage 0 at iteration 2 and waits for a release that never comes
    assert "blocked: task 'load' (warp 0) warp 0 of CTA" in text and "waits for smem.empty[0]" in text


def test_block_too_small_with_the_check_disabled_is_reported():
    text = _common(_run("wrong_block"), "tma_copy_ts")
    assert "blocked: task 'load' (warp 0) warp 0 of CTA" in text and "'smem' ProducerAcquire" in text
    assert "waits for smem.empty[0] to complete the phase of parity 0" in text and "iteration 2" in text
    assert "task 'store'" not in text  # those warps do not exist in a 32-thread CTA


def test_named_barrier_missing_a_warp_is_reported():
    text = _common(_run("named_barrier_short"), "named_barrier_short")
    assert "blocked: warp 0 of CTAs (0, 0, 0), (1, 0, 0) at tsjit.named_barrier_sync (stage 1): waits for named " \
           "barrier[1] to complete the phase of parity 0" in text or \
           "blocked: warp 0 of CTAs (1, 0, 0), (0, 0, 0) at tsjit.named_barrier_sync (stage 1)" in text


def test_budget_follows_the_timeout_variable():
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


def test_debug_build_of_a_correct_program_is_exact():
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
