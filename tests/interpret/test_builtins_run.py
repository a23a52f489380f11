"""Device builtins executed by the CPU interpreter, each against its PTX semantics (issue 13, "builtins").

tests/lang/test_builtins.py checks the IR and PTX these builtins emit; here the interpreter runs them on
fresh random inputs and the results are checked against numpy: votes under a member mask (PTX ISA §9.7.13.3
``vote.sync``), ``elect.sync`` (§9.7.13.6), atomics on global and shared memory (§9.7.13.5 ``atom``),
``cp.async`` with its mbarrier arrive (§9.7.9.25, §9.7.13.15.14), ``mbarrier.try_wait`` polling (§9.7.13.15.16),
the split cluster barrier with DSMEM and a remote mbarrier arrive (§9.7.13.4 ``barrier.cluster``, ``mapa``), and
a torch-like CPU tensor as an argument (written in place)."""
import numpy as np
import pytest

import tsjit
from tsjit.errors import InterpretError

HALF = 0x0000FFFF


@tsjit.kernel
def votes(x, out):
    i = tsjit.thread_idx().x
    p = x[i] > 0
    out[5 * i] = tsjit.Int32(tsjit.vote_all(p))
    out[5 * i + 1] = tsjit.Int32(tsjit.vote_any(p))
    out[5 * i + 2] = tsjit.Int32(tsjit.vote_ballot(p))
    if tsjit.lane_idx() < 16:                 # only the mask's lanes take part
        out[5 * i + 3] = tsjit.Int32(tsjit.vote_ballot(p, mask=HALF))
        out[5 * i + 4] = tsjit.Int32(tsjit.vote_all(p, mask=HALF))


def test_votes_over_the_full_warp_and_a_member_mask():
    rng = np.random.default_rng()
    x = rng.standard_normal(64).astype(np.float32)
    x[32:] = np.abs(x[32:]) + 1                    # warp 1: every predicate true
    out = np.full(5 * 64, -7, np.int32)
    votes.interpret[(1,), (64,)](x, out)
    got = out.reshape(64, 5)
    for w in range(2):
        p = x[32 * w:32 * w + 32] > 0
        ballot = sum(1 << j for j in range(32) if p[j])
        half = sum(1 << j for j in range(16) if p[j])
        rows = got[32 * w:32 * w + 32]
        np.testing.assert_array_equal(rows[:, 0], int(p.all()))
        np.testing.assert_array_equal(rows[:, 1], int(p.any()))
        np.testing.assert_array_equal(rows[:, 2].view(np.uint32), ballot)
        np.testing.assert_array_equal(rows[:16, 3].view(np.uint32), half)
        np.testing.assert_array_equal(rows[:16, 4], int(p[:16].all()))
        np.testing.assert_array_equal(rows[16:, 3:], -7)          # lanes outside the mask wrote nothing


@tsjit.kernel
def elects(out, count):
    i = tsjit.thread_idx().x
    warp = tsjit.warp_idx()                   # a full-warp collective itself: not inside the elected branch
    if tsjit.elect_one():
        out[i] = 1
        tsjit.atomic_add(count.ptr + warp, 1)
    if tsjit.lane_idx() >= 8:
        if tsjit.elect_one(0xFFFFFF00):
            out[i] = out[i] + 2


def test_elect_one_picks_exactly_one_member_lane_per_warp():
    out = np.zeros(96, np.int32)
    count = np.zeros(3, np.int32)
    elects.interpret[(1,), (96,)](out, count)
    np.testing.assert_array_equal(count, 1)
    per_warp = out.reshape(3, 32)
    np.testing.assert_array_equal((per_warp & 1).sum(axis=1), 1)
    np.testing.assert_array_equal((per_warp >> 1).sum(axis=1), 1)
    assert ((per_warp[:, :8] >> 1) == 0).all(), "elect_one chose a lane outside its mask"


@tsjit.kernel
def atomics(x, bins, extremes, tickets, n):
    i = tsjit.block_idx().x * tsjit.block_dim().x + tsjit.thread_idx().x
    counts = tsjit.shared_array(tsjit.Int32, 8)
    if tsjit.thread_idx().x < 8:
        counts[tsjit.thread_idx().x] = 0
    tsjit.syncthreads()
    if i < n:
        v = x[i]
        tsjit.atomic_add(tsjit.address_of(counts, v & 7), 1)
        tsjit.atomic_max(extremes.ptr, v)
        tsjit.atomic_min(extremes.ptr + 1, v)
        tsjit.atomic_add(extremes.ptr + 2, v)
        tickets[i] = tsjit.atomic_add(extremes.ptr + 4, 1)      # the old value: each thread's place in the order
        tsjit.atomic_cas(extremes.ptr + 3, -1, i)               # exactly one thread swaps in its index
    tsjit.syncthreads()
    if tsjit.thread_idx().x < 8:
        tsjit.atomic_add(bins.ptr + tsjit.thread_idx().x, counts[tsjit.thread_idx().x])


def test_atomics_on_shared_and_global_memory():
    rng = np.random.default_rng()
    n = 300
    x = rng.integers(-1000, 1000, n, dtype=np.int32)
    bins = np.zeros(8, np.int32)
    extremes = np.array([-2**31, 2**31 - 1, 0, -1, 0], np.int32)
    tickets = np.full(n, -1, np.int32)
    atomics.interpret[(3,), (128,)](x, bins, extremes, tickets, n)
    np.testing.assert_array_equal(bins, np.bincount(x & 7, minlength=8))
    assert extremes[0] == x.max() and extremes[1] == x.min() and extremes[2] == x.sum()
    assert 0 <= extremes[3] < n and extremes[4] == n
    np.testing.assert_array_equal(np.sort(tickets), np.arange(n))     # atom.add returns distinct old values


@tsjit.kernel
def cp_async_scale(x, out):
    tid = tsjit.thread_idx().x
    bar = tsjit.shared_array(tsjit.Int64, 1)
    tile = tsjit.shared_array(tsjit.Float32, 4 * 64, align=16)
    if tid == 0:
        tsjit.mbarrier_init(tsjit.address_of(bar, 0), 64)
    tsjit.syncthreads()
    base = tsjit.block_idx().x * 256
    for j in tsjit.range_constexpr(4):            # four 4-byte copies; one arrive when all of them land
        tsjit.cp_async(tsjit.address_of(tile, 4 * tid + j), x.ptr + (base + 4 * tid + j), 4)
    tsjit.cp_async_mbarrier_arrive(tsjit.address_of(bar, 0))
    tsjit.mbarrier_wait(tsjit.address_of(bar, 0), 0)
    for j in tsjit.range_constexpr(4):
        out[base + 4 * tid + j] = tile[4 * ((tid + 1) % 64) + j] * 2.0      # another thread's copy


def test_cp_async_lands_before_its_mbarrier_arrive_completes_the_phase():
    rng = np.random.default_rng()
    x = rng.standard_normal(512).astype(np.float32)
    out = np.full(512, np.nan, np.float32)
    cp_async_scale.interpret[(2,), (64,)](x, out)
    expected = np.roll(x.reshape(2, 64, 4), -1, axis=1).reshape(-1) * 2
    np.testing.assert_array_equal(out, expected)


@tsjit.kernel
def polls(out, spins):
    tid = tsjit.thread_idx().x
    bar = tsjit.shared_array(tsjit.Int64, 1)
    flag = tsjit.shared_array(tsjit.Int32, 1)
    if tid == 0:
        tsjit.mbarrier_init(tsjit.address_of(bar, 0), 1)
    tsjit.syncthreads()
    if tid == 32:
        flag[0] = 41
        tsjit.mbarrier_arrive(tsjit.address_of(bar, 0))
    if tid < 32:
        tries = 0
        while not tsjit.mbarrier_try_wait(tsjit.address_of(bar, 0), 0):
            tries += 1
        out[tid] = flag[0] + 1
        spins[tid] = tries


def test_try_wait_polling_sees_the_arrival_and_the_data_it_releases():
    out = np.zeros(32, np.int32)
    spins = np.full(32, -1, np.int32)
    polls.interpret[(1,), (64,)](out, spins)
    np.testing.assert_array_equal(out, 42)
    assert (spins >= 0).all()


@tsjit.kernel
def cluster_exchange_split(out, signalled):
    tid = tsjit.thread_idx().x
    buf = tsjit.shared_array(tsjit.Int32, 64)
    bar = tsjit.shared_array(tsjit.Int64, 1)
    rank = tsjit.cluster_ctarank()
    if tid == 0:
        tsjit.mbarrier_init(tsjit.address_of(bar, 0), 1)
        tsjit.fence_mbarrier_init()
    tsjit.cluster_arrive()
    tsjit.cluster_wait()                          # both barriers initialized before any remote arrive
    peer = tsjit.map_shared_rank(buf.ptr + tid, 1 - rank)
    peer.store((rank + 1) * 1000 + tid)
    tsjit.cluster_arrive()                        # release: the DSMEM stores before the peer's wait returns
    tsjit.cluster_wait()
    out[tsjit.block_idx().x * 64 + tid] = buf[tid]
    if rank == 0:
        if tid == 0:
            tsjit.mbarrier_arrive_cluster(tsjit.address_of(bar, 0), 1)     # only CTA 1's barrier completes
    else:
        tsjit.mbarrier_wait(tsjit.address_of(bar, 0), 0)
        signalled[tsjit.block_idx().x * 64 + tid] = 1
    tsjit.cluster_sync()                          # no CTA exits while its peer may still arrive remotely


def test_split_cluster_barrier_orders_dsmem_stores_and_a_remote_arrive_completes_the_peers_barrier():
    out = np.full(4 * 64, -1, np.int32)
    signalled = np.zeros(4 * 64, np.int32)
    cluster_exchange_split.interpret[(4,), (64,)](out, signalled, cluster=(2, 1, 1))
    peer_rank = 1 - np.arange(4) % 2
    expected = (peer_rank[:, None] + 1) * 1000 + np.arange(64)[None, :]
    np.testing.assert_array_equal(out.reshape(4, 64), expected)
    np.testing.assert_array_equal(signalled.reshape(4, 64), (np.arange(4) % 2)[:, None] * np.ones((1, 64), np.int32))


@tsjit.kernel
def remote_arrive_missing(out):
    bar = tsjit.shared_array(tsjit.Int64, 1)
    if tsjit.thread_idx().x == 0:
        tsjit.mbarrier_init(tsjit.address_of(bar, 0), 2)
        tsjit.fence_mbarrier_init()
    tsjit.cluster_sync()
    if tsjit.thread_idx().x == 0:
        tsjit.mbarrier_arrive_cluster(tsjit.address_of(bar, 0), 1 - tsjit.cluster_ctarank())
    tsjit.mbarrier_wait(tsjit.address_of(bar, 0), 0)
    out[tsjit.thread_idx().x] = 1


def test_a_remote_arrive_short_of_the_count_deadlocks_naming_the_barrier():
    with pytest.raises(InterpretError, match="deadlock") as info:
        remote_arrive_missing.interpret[(2,), (32,)](np.zeros(32, np.int32), cluster=(2, 1, 1))
    assert "1 of 2 arrivals" in str(info.value)


class CpuTensorLike:
    """Duck-typed like a torch CPU tensor (``data_ptr``, ``stride``, ``is_cuda``, ``dtype``) over a numpy buffer:
    how the launch reads a torch tensor (tsjit.runtime.arrays.describe_array_argument); CI has no torch."""

    def __init__(self, array):
        self.array = array
        self.shape = array.shape
        self.dtype = "torch." + {np.float32: "float32"}[array.dtype.type]
        self.is_cuda = False

    def data_ptr(self):
        return self.array.ctypes.data

    def stride(self):
        return tuple(s // self.array.itemsize for s in self.array.strides)


@tsjit.kernel
def axpy(x, y, n):
    i = tsjit.block_idx().x * tsjit.block_dim().x + tsjit.thread_idx().x
    if i < n:
        y[i] = x[i] * 3.0 + y[i]


def test_a_torch_like_cpu_tensor_is_used_in_place():
    rng = np.random.default_rng()
    x = rng.standard_normal(200).astype(np.float32)
    y = rng.standard_normal(200).astype(np.float32)
    expected = x * np.float32(3) + y
    y_tensor = CpuTensorLike(y)
    axpy.interpret[(2,), (128,)](CpuTensorLike(x), y_tensor, 200)
    np.testing.assert_array_equal(y_tensor.array, expected)


@tsjit.kernel
def handoff(data, flag, out):
    """Warp 1 writes ``data`` and raises the flag (volatile store after a fence); warp 0 polls it with
    volatile loads, then reads the data."""
    i = tsjit.thread_idx().x
    if i == 32:
        data[0] = 41
        tsjit.threadfence()
        tsjit.address_of(flag, 0).store(1, volatile=True)
    if i == 0:
        while tsjit.address_of(flag, 0).load(volatile=True) == 0:
            pass
        tsjit.threadfence()
        out[0] = data[0] + 1


def test_volatile_flag_handoff_between_warps():
    data, flag, out = np.zeros(1, np.int32), np.zeros(1, np.int32), np.full(1, -1, np.int32)
    handoff.interpret[(1,), (64,)](data, flag, out)
    assert out[0] == 42 and flag[0] == 1
