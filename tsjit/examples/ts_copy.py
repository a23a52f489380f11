"""Task Scheduling tutorial 1: the grid-stride copy, and the same loop as a plain kernel.

Two resources without a pipeline: ``GmemSource`` (consumer work ``load`` returns the
task-local ``item``) and ``GmemDest`` (producer work ``store`` receives it).  One task of
``WARPS`` warps runs ``domain_loop(start, num_entries, stride)``; the TaskManager verifies
the program at compile time and lowers it to a warp-range branch with one loop, the same
code a hand-written grid-stride loop gives (``copy_plain``).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import tsjit
from tsjit import ts


@dataclass(kw_only=True)
class GmemSource(ts.MemoryResource):
    """Global-memory source: reading element ``loop_offset`` defines ``item``."""

    src: object
    item: ts.TaskLocalVariable = ts.TaskLocalVariable.uninitialized()

    def __post_init__(self):
        self.item = ts.TaskLocalVariable(self.src.dtype, default=0, docs="the element in flight")

    @ts.consumer_work(returns="item")
    def load(self, stage_info):
        return self.src[stage_info.loop_offset]


@dataclass(kw_only=True)
class GmemDest(ts.MemoryResource):
    """Global-memory destination: writes the routed ``item`` at ``loop_offset``."""

    dst: object

    @ts.producer_work()
    def store(self, stage_info, item):
        self.dst[stage_info.loop_offset] = item


@tsjit.kernel
def copy_ts(src, dst, num_entries, WARPS: tsjit.Constexpr[int]):
    """dst[:num_entries] = src[:num_entries] with one TS task of WARPS warps (block = WARPS * 32 threads)."""
    bx = tsjit.block_idx().x
    tx = tsjit.thread_idx().x
    gx = tsjit.grid_dim().x
    source = GmemSource(name="source", src=src)
    dest = GmemDest(name="dest", dst=dst)

    @ts.schedule
    def copy_schedule(s: GmemSource, d: GmemDest):
        with ts.domain_loop(bx * WARPS * 32 + tx, num_entries, gx * WARPS * 32):
            item = s.load()
            d.store(item)

    task = ts.Task("copy", [source], [dest], warp_idx=0, num_warps=WARPS, schedule=copy_schedule(source, dest))
    manager = ts.TaskManager([task], {dest: [source]}, verbose=False)
    manager.setup_resources_and_tasks()
    manager.run()


@tsjit.kernel
def copy_plain(src, dst, num_entries, WARPS: tsjit.Constexpr[int]):
    """The same grid-stride loop written by hand (the baseline of copy_ts)."""
    start = tsjit.block_idx().x * WARPS * 32 + tsjit.thread_idx().x
    for i in range(start, num_entries, tsjit.grid_dim().x * WARPS * 32):
        dst[i] = src[i]


def run_copy_ts(n: int, blocks: int, warps: int, rng=None):
    """Copy n fresh random Int16 values with copy_ts into a poisoned output; returns (result, expected)."""
    rng = rng or np.random.default_rng()
    src = rng.integers(-2**15, 2**15, size=max(n, 1), dtype=np.int16)[:n]
    dst = tsjit.empty(max(n, 1), tsjit.Int16).fill_bytes(0x5A)
    d_src = tsjit.to_device(src) if n else tsjit.empty(1, tsjit.Int16)
    copy_ts[(blocks,), (warps * 32,)](d_src, dst, n, warps)
    got = dst.numpy()
    expected = np.concatenate([src, got[n:]]) if n else got  # elements past n stay poisoned
    if n == 0:
        assert (got.view(np.uint16) == 0x5A5A).all(), "copy_ts wrote past num_entries"
    return got, expected


def demo_compile_targets():
    i16 = np.zeros(64, np.int16)
    return [("TS grid-stride copy (tutorial 1)", copy_ts, (i16, i16, 64, 4)),
            ("plain grid-stride copy (baseline)", copy_plain, (i16, i16, 64, 4))]


def demo_gpu_checks():
    return [("TS copy 2^24 Int16, 4 warps", lambda: run_copy_ts(1 << 24, 1056, 4), 0),
            ("TS copy 1000003 Int16, 3 warps", lambda: run_copy_ts(1_000_003, 77, 3), 0)]


# -- tutorial 1b: the same copy moving 16 bytes per thread per step -------------------------------
VECTOR_BYTES = 16


@dataclass(kw_only=True)
class VectorSource(ts.MemoryResource):
    """Reads 16 bytes (two Uint64 words) per domain index; the remainder (< 16 bytes) in the Tail."""

    src: object
    num_entries: object
    lo: ts.TaskLocalVariable = ts.TaskLocalVariable.uninitialized()
    hi: ts.TaskLocalVariable = ts.TaskLocalVariable.uninitialized()
    item: ts.TaskLocalVariable = ts.TaskLocalVariable.uninitialized()

    def __post_init__(self):
        self.lo = ts.TaskLocalVariable(tsjit.Uint64, default=0, docs="first 8 bytes of the vector")
        self.hi = ts.TaskLocalVariable(tsjit.Uint64, default=0, docs="last 8 bytes of the vector")
        self.item = ts.TaskLocalVariable(self.src.dtype, default=0, docs="one remainder element")

    @ts.consumer_work(returns=("lo", "hi"))
    def load(self, stage_info):
        words = self.src.reinterpret(tsjit.Uint64)
        return words.load_vector(stage_info.loop_offset * 2, 2)

    @ts.consumer_work(returns="item")
    def load_remainder(self, stage_info):
        per_vector = VECTOR_BYTES // self.src.dtype.itemsize
        i = self.num_entries // per_vector * per_vector + _global_thread()
        return self.src[i] if i < self.num_entries else self.src.dtype(0)


@dataclass(kw_only=True)
class VectorDest(ts.MemoryResource):
    dst: object
    num_entries: object

    @ts.producer_work()
    def store(self, stage_info, lo, hi):
        self.dst.reinterpret(tsjit.Uint64).store_vector(stage_info.loop_offset * 2, (lo, hi))

    @ts.producer_work()
    def store_remainder(self, stage_info, item):
        per_vector = VECTOR_BYTES // self.dst.dtype.itemsize
        i = self.num_entries // per_vector * per_vector + _global_thread()
        if i < self.num_entries:
            self.dst[i] = item


@tsjit.func
def _global_thread():
    return tsjit.block_idx().x * tsjit.block_dim().x + tsjit.thread_idx().x


@tsjit.kernel
def copy_ts_vectorized(src, dst, num_entries, WARPS: tsjit.Constexpr[int]):
    """dst[:num_entries] = src[:num_entries]: 16-byte vectors in the domain loop, the remainder in the Tail."""
    threads = tsjit.grid_dim().x * WARPS * 32
    first = tsjit.block_idx().x * WARPS * 32 + tsjit.thread_idx().x
    num_vectors = num_entries // (VECTOR_BYTES // src.dtype.itemsize)
    source = VectorSource(name="source", src=src, num_entries=num_entries)
    dest = VectorDest(name="dest", dst=dst, num_entries=num_entries)

    @ts.schedule
    def copy_schedule(s: VectorSource, d: VectorDest):
        with ts.domain_loop(first, num_vectors, threads):
            lo, hi = s.load()
            d.store(lo, hi)
        item = s.load_remainder()
        d.store_remainder(item)

    task = ts.Task("copy", [source], [dest], warp_idx=0, num_warps=WARPS, schedule=copy_schedule(source, dest))
    manager = ts.TaskManager([task], {dest: [source]}, verbose=False)
    manager.setup_resources_and_tasks()
    manager.run()


def run_copy_ts_vectorized(n: int, blocks: int, warps: int, rng=None):
    """Like :func:`run_copy_ts` with the 16-byte kernel."""
    rng = rng or np.random.default_rng()
    src = rng.integers(-2**15, 2**15, size=max(n, 1), dtype=np.int16)[:n]
    dst = tsjit.empty(max(n, 1), tsjit.Int16).fill_bytes(0x5A)
    d_src = tsjit.to_device(src) if n else tsjit.empty(1, tsjit.Int16)
    copy_ts_vectorized[(blocks,), (warps * 32,)](d_src, dst, n, warps)
    got = dst.numpy()
    return got, (np.concatenate([src, got[n:]]) if n else got)
