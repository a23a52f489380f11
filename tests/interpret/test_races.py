"""The interpreter's shared-memory race and uninitialized-read checks (issue 13, TSJIT_INTERPRET_CHECK)."""
import numpy as np
import pytest

import tsjit
from tsjit.errors import InterpretError


@tsjit.kernel
def neighbours(x, out, SYNC: tsjit.Constexpr[bool]):
    """out[i] = x[i] + x[i + 1 mod 64] through shared memory; SYNC=False forgets the barrier."""
    tid = tsjit.thread_idx().x
    tile = tsjit.shared_array(tsjit.Float32, 64)
    tile[tid] = x[tid]
    if tsjit.const_expr(SYNC):
        tsjit.syncthreads()
    out[tid] = tile[tid] + tile[(tid + 1) % 64]


@tsjit.kernel
def reads_unwritten(out):
    tid = tsjit.thread_idx().x
    tile = tsjit.shared_array(tsjit.Float32, 64)
    if tid < 32:
        tile[tid] = tsjit.Float32(1)
    tsjit.syncthreads()
    out[tid] = tile[tid]


@pytest.fixture
def race_check(monkeypatch):
    monkeypatch.setenv("TSJIT_INTERPRET_CHECK", "race")


def test_missing_syncthreads_is_a_race_naming_both_lines(race_check):
    x = np.random.default_rng().standard_normal(64).astype(np.float32)
    with pytest.raises(InterpretError) as info:
        neighbours.interpret[(1,), (64,)](x, np.zeros(64, np.float32), False)
    text = str(info.value)
    assert "shared-memory race" in text and ("write then read" in text or "read then write" in text)
    assert text.count("test_races.py:") >= 2, text


def test_race_message_lists_the_accesses_in_the_order_it_names_and_suggests_syncthreads(race_check):
    import inspect
    lines, first = inspect.getsourcelines(neighbours.fn)
    store = first + next(i for i, line in enumerate(lines) if "tile[tid] = x[tid]" in line)
    load = first + next(i for i, line in enumerate(lines) if "out[tid] = tile[tid]" in line)
    x = np.random.default_rng().standard_normal(64).astype(np.float32)
    with pytest.raises(InterpretError) as info:
        neighbours.interpret[(1,), (64,)](x, np.zeros(64, np.float32), False)
    text = str(info.value)
    kind = "write then read" if "write then read" in text else "read then write"
    order = [store, load] if kind == "write then read" else [load, store]
    at = [text.index(f"test_races.py:{line}") for line in order]
    assert at[0] < at[1], text
    assert "tsjit.syncthreads()" in text


def test_the_same_program_with_its_barrier_is_race_free_and_exact(race_check):
    x = np.random.default_rng().standard_normal(64).astype(np.float32)
    out = np.full(64, np.nan, np.float32)
    neighbours.interpret[(1,), (64,)](x, out, True)
    np.testing.assert_array_equal(out, x + np.roll(x, -1))


def test_uninitialized_shared_read_is_reported_under_uninit(monkeypatch):
    monkeypatch.setenv("TSJIT_INTERPRET_CHECK", "uninit")
    with pytest.raises(InterpretError, match="uninitialized shared memory") as info:
        reads_unwritten.interpret[(1,), (64,)](np.zeros(64, np.float32))
    text = str(info.value)      # the reservation named first, the read last: the shown line is the read (newcomer 8)
    assert text.index("reserved at") < text.index("is read by"), text
    assert "\n    out[tid] = tile[tid]\n    ^" in text, text


def test_uninitialized_read_is_not_checked_by_default():
    out = np.full(64, np.nan, np.float32)
    reads_unwritten.interpret[(1,), (64,)](out)
    np.testing.assert_array_equal(out[:32], 1)


@tsjit.kernel
def barrier_then_arrivals(out, SYNC: tsjit.Constexpr[bool]):
    """Thread 0 initializes an mbarrier for 64 arrivals; every thread arrives and waits.  SYNC=False
    forgets the syncthreads between the init and the other threads' use (found by a newcomer)."""
    tid = tsjit.thread_idx().x
    bar = tsjit.shared_array(tsjit.Int64, 1, align=8)
    if tid == 0:
        tsjit.mbarrier_init(bar.ptr, 64)
        tsjit.fence_mbarrier_init()
    if tsjit.const_expr(SYNC):
        tsjit.syncthreads()
    tsjit.mbarrier_arrive(bar.ptr)
    tsjit.mbarrier_wait(bar.ptr, 0)
    out[tid] = tid


def test_an_mbarrier_used_before_its_init_is_ordered_is_a_race(race_check):
    with pytest.raises(InterpretError, match=r"race \(write then atomic\).*test_races.py:\d+.*then .*thread [1-9]"):
        barrier_then_arrivals.interpret[(1,), (64,)](np.zeros(64, np.int32), False)
    out = np.zeros(64, np.int32)
    barrier_then_arrivals.interpret[(1,), (64,)](out, True)   # arrivals among themselves never race
    assert np.array_equal(out, np.arange(64))
