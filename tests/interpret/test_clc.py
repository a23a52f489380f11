"""Cluster launch control under the interpreter (issue 13): a simulated launch queue answers
``clusterlaunchcontrol.try_cancel`` (PTX ISA 9.1 §9.7.13.17-18).  Clusters run one after another; a
try_cancel takes the next not-yet-started cluster off the queue (it never runs by itself) and returns its
first ctaid; on an empty queue the answer is "not canceled".  The CLC persistent copy matches numpy."""
import numpy as np
import pytest

import tsjit
from tsjit import clc

TILE, WARPS = 256, 2


@pytest.fixture(autouse=True)
def blackwell_interpreter(monkeypatch):
    monkeypatch.setenv("TSJIT_INTERPRET", "1")
    monkeypatch.setenv("TSJIT_TARGET", "sm_100a")


@tsjit.kernel
def cancel_once(out, TRIES: tsjit.Constexpr[int]):
    """Thread 0 of each CTA that runs issues TRIES try_cancels; out[4 * bid + 2 * i + 0 / 1] = (canceled,
    first ctaid.x) of try i, out[4 * bid + 3] = 7 (the CTA ran)."""
    response = tsjit.shared_array(tsjit.Uint8, 16 * TRIES, align=16)
    bar = tsjit.shared_array(tsjit.Int64, 1, align=8)
    bid = tsjit.block_idx().x
    if tsjit.thread_idx().x == 0:
        tsjit.mbarrier_init(bar.ptr, 1)
        tsjit.fence_mbarrier_init()
        for i in tsjit.range_constexpr(TRIES):
            tsjit.mbarrier_arrive_expect_tx(bar.ptr, 16)
            clc.try_cancel(clc.response_slot(response, i), bar.ptr)
            tsjit.mbarrier_wait(bar.ptr, i % 2)
            canceled, first = clc.query_cancel(clc.response_slot(response, i))
            out[4 * bid + 2 * i] = tsjit.Int32(canceled)
            if canceled:
                out[4 * bid + 2 * i + 1] = first.x
        out[4 * bid + 3] = tsjit.Int32(7)


def test_try_cancel_takes_the_next_cluster_that_has_not_started():
    out = np.full(4 * 5, -1, np.int32)
    cancel_once[(5,), (32,)](out, TRIES=1)
    rows = out.reshape(5, 4)
    # CTA 0 runs, cancels 1; CTA 2 runs, cancels 3; CTA 4 runs and finds the queue empty
    np.testing.assert_array_equal(rows[:, 3], [7, -1, 7, -1, 7])
    np.testing.assert_array_equal(rows[[0, 2, 4], 0], [1, 1, 0])
    np.testing.assert_array_equal(rows[[0, 2], 1], [1, 3])
    assert rows[4, 1] == -1


def test_a_cta_keeps_canceling_until_the_queue_is_empty():
    out = np.full(4 * 3, -1, np.int32)
    cancel_once[(3,), (32,)](out, TRIES=2)
    rows = out.reshape(3, 4)
    np.testing.assert_array_equal(rows[0], [1, 1, 1, 7])       # CTA 0 took clusters 1 and 2
    np.testing.assert_array_equal(rows[1:, 3], [-1, -1])       # they never ran


@pytest.mark.parametrize("num_tiles", [1, 6])
def test_the_clc_persistent_copy_matches_numpy(num_tiles, monkeypatch):
    """CTA 0 runs first and steals every other tile (the others never launch), then sees "not canceled"."""
    from tsjit.examples import bw_clc_copy
    from tsjit.interpret import clc as interpreted
    answers = []
    original = interpreted.cancel_next
    monkeypatch.setattr(interpreted, "cancel_next", lambda machine: answers.append(original(machine)) or answers[-1])
    src = np.random.default_rng().standard_normal(num_tiles * TILE).astype(np.float32)
    dst = tsjit.empty((num_tiles * TILE,), tsjit.Float32).fill_bytes(0xFF)
    bw_clc_copy.clc_copy[(num_tiles,), ((1 + WARPS) * 32,)](tsjit.to_device(src), dst, num_tiles, TILE, WARPS)
    np.testing.assert_array_equal(dst.numpy(), src)
    assert answers[:num_tiles] == [(t, 0, 0) for t in range(1, num_tiles)] + [None]
