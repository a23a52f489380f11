"""Tensor memory in the Task Scheduling model, as the reference describes it (sm_100a):

* ``MemoryResource.get_tmem_requirements()``: "returns TmemAllocation objects for TMEM columns this
  resource needs [...] The returned TmemAllocation objects should be stored as instance attributes
  so the resource can read their .offset later";
* ``StageInfo.context``: "Unified context carrying smem_base, tmem_ptr_i32";
* the feature inventory's ``SmemAllocator.add_tmem_ptr(alloc)`` (the shared-memory mailbox of the
  TMEM base address), ``TmemAllocator`` (the column layout) and the TaskManager's
  ``smem_allocator=`` / ``tmem_allocator=`` options.

One warp stores each chunk into its resource's TMEM columns with ``tcgen05.st`` and reads it back
with ``tcgen05.ld`` at ``stage_info.context.tmem_ptr_i32 + alloc.offset``; the TaskManager allocates
the columns into the mailbox (tcgen05.alloc) and frees them after the tasks.  Compiled for sm_100a
and run on the CPU interpreter (which models TMEM and reports a column read before it is written, or
a CTA exiting with columns allocated) on fresh data into a poisoned output."""
import re
from dataclasses import dataclass

import numpy as np
import pytest

import tsjit
from tsjit import tcgen05, ts

conformance = pytest.mark.conformance
CHUNK = 32                  # one 32x32b column: lane i of the warp holds element i


@dataclass(kw_only=True)
class Chunks(ts.MemoryResource):
    x: object

    @ts.consumer_work
    def read(self, stage_info):
        pass


@dataclass(kw_only=True)
class TmemRoundTrip(ts.MemoryResource):
    """y = 2 * x + 1, each chunk passing through this resource's TMEM columns."""

    x: object
    y: object
    acc: object = None

    def __post_init__(self):
        self.acc = ts.TmemAllocation("roundtrip.acc", 32)

    def get_tmem_requirements(self):
        return [self.acc]

    @ts.producer_work
    def through_tmem(self, stage_info):
        lane = tsjit.lane_idx()
        column = stage_info.context.tmem_ptr_i32 + self.acc.offset
        value = self.x[stage_info.loop_offset * CHUNK + lane]
        tcgen05.st(column, tsjit.Fragment([value]))
        tcgen05.wait_st()
        back = tcgen05.ld(column)
        tcgen05.wait_ld()
        self.y[stage_info.loop_offset * CHUNK + lane] = back[0] * 2.0 + 1.0


@tsjit.kernel
def tmem_roundtrip(x, y, n_chunks):
    chunks = Chunks(name="chunks", x=x)
    roundtrip = TmemRoundTrip(name="roundtrip", x=x, y=y)

    @ts.schedule
    def body(c: Chunks, r: TmemRoundTrip):
        with ts.domain_loop(0, n_chunks, 1):
            c.read()
            r.through_tmem()

    smem = ts.SmemAllocator()
    smem.add_tmem_ptr()                                   # the mailbox tcgen05.alloc writes the base to
    tmem = ts.TmemAllocator()
    tmem.add(ts.TmemAllocation("scratch", 64))            # columns 0-63: the resource's start at 64
    task = ts.Task("t", [chunks], [roundtrip], 0, 1, schedule=body(chunks, roundtrip))
    manager = ts.TaskManager([task], {roundtrip: [chunks]}, verbose=False, smem_allocator=smem,
                             tmem_allocator=tmem)
    manager.setup_resources_and_tasks()
    manager.run()


@conformance("§1.8", "TmemAllocation(name, num_columns)")
@conformance("§1.8", "add_tmem_ptr(alloc)")
@conformance("§1.8", "TmemAllocator")
@conformance("§1.9", "smem_allocator, tmem_allocator, tmem_ptr_i32")
def test_work_bodies_reach_their_tmem_columns_through_the_context(monkeypatch):
    x = np.zeros(4 * CHUNK, np.float32)
    compiled = tsjit.compile(tmem_roundtrip, x, x, 4, target="sm_100a")
    ptx = compiled.ptx
    assert compiled.cubin[:4] == b"\x7fELF" and ptx.count("tcgen05.alloc") == ptx.count("tcgen05.dealloc") == 1
    assert "tcgen05.st.sync.aligned.32x32b.x1.b32" in ptx and "tcgen05.ld.sync.aligned.32x32b.x1.b32" in ptx
    assert re.search(r"tcgen05\.alloc\.shared\.cg1\"?\(ptr addrspace\(3\) [^,]+, i32 128\)", compiled.llir)
    assert re.search(r"= add i32 %\S+, 64\n", compiled.llir)           # tmem_ptr_i32 + acc.offset
    monkeypatch.setenv("TSJIT_INTERPRET", "1")
    monkeypatch.setenv("TSJIT_TARGET", "sm_100a")
    n_chunks = 5
    x = np.random.default_rng().standard_normal(n_chunks * CHUNK).astype(np.float32)
    y = tsjit.empty(n_chunks * CHUNK, tsjit.Float32).fill_bytes(0xFF)
    tmem_roundtrip[(1,), (32,)](tsjit.to_device(x), y, n_chunks)
    assert np.array_equal(y.numpy(), x * np.float32(2.0) + np.float32(1.0))


def test_the_layout_puts_the_resources_columns_after_the_allocators_own():
    tmem = ts.TmemAllocator()
    scratch = tmem.add(ts.TmemAllocation("scratch", 64))
    roundtrip = TmemRoundTrip(name="roundtrip", x=None, y=None)
    from tsjit.ts.tmem import allocation_columns, layout_tmem_requirements
    assert layout_tmem_requirements([roundtrip], tmem) is tmem
    assert (scratch.offset, roundtrip.acc.offset, roundtrip.acc.owner) == (0, 64, roundtrip)
    assert allocation_columns(tmem) == 128                # 96 columns, allocated as a power of 2
