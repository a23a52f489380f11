"""Tensor memory in a TaskManager program (sm_100a): resources declare columns with get_tmem_requirements,
the TaskManager lays them out (M2: at most 512 columns), allocates them in setup_resources_and_tasks
(tcgen05.alloc of a power of 2 >= 32 columns into the mailbox, relinquish), hands the base to work bodies
as stage_info.context.tmem_ptr_i32, and deallocates after the tasks."""
import re
from dataclasses import dataclass

import numpy as np
import pytest

import tsjit
from tsjit import tcgen05, ts

from lang.compiling import build

OUT = np.zeros(64, np.uint32)


@dataclass(kw_only=True)
class Accumulators(ts.MemoryResource):
    out: object
    columns: tuple = (128,)
    allocations: list = None

    def __post_init__(self):
        self.allocations = [ts.TmemAllocation(f"acc{i}", n) for i, n in enumerate(self.columns)]

    def get_tmem_requirements(self):
        return self.allocations

    @ts.producer_work()
    def fill(self, stage_info):
        last = self.allocations[-1]
        address = stage_info.context.tmem_ptr_i32 + last.offset
        if tsjit.thread_idx().x == 0:
            self.out[0] = address


@dataclass(kw_only=True)
class Source(ts.MemoryResource):
    @ts.consumer_work()
    def read(self, stage_info):
        pass


def _program(out, columns, allocator):
    source = Source(name="source")
    acc = Accumulators(name="acc", out=out, columns=columns)

    @ts.schedule
    def body(s: Source, a: Accumulators):
        with ts.domain_loop(0, 1, 1):
            s.read()
            a.fill()

    task = ts.Task("t", [source], [acc], warp_idx=0, num_warps=4, schedule=body(source, acc))
    options = {}
    if allocator:
        smem = ts.SmemAllocator()
        smem.add_tmem_ptr()
        options["smem_allocator"] = smem
    manager = ts.TaskManager([task], {acc: [source]}, verbose=False, **options)
    manager.setup_resources_and_tasks()
    manager.run()


@tsjit.kernel
def tmem_program(out, COLUMNS: tsjit.Constexpr, ALLOCATOR: tsjit.Constexpr):
    _program(out, COLUMNS, ALLOCATOR)


@pytest.mark.parametrize("columns,allocated", [((128,), 128), ((20,), 32), ((256, 44), 512), ((64, 64), 128)])
def test_columns_are_allocated_as_a_power_of_two_and_freed(columns, allocated):
    compiled = build(tmem_program, OUT, COLUMNS=columns, ALLOCATOR=False, target="sm_100a")
    ptx, llir = compiled.ptx, compiled.llir
    alloc = ptx.index("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32")
    dealloc = ptx.index("tcgen05.dealloc.cta_group::1.sync.aligned.b32")
    assert alloc < ptx.index("tcgen05.relinquish_alloc_permit") < dealloc
    assert ptx.count("tcgen05.alloc") == 1 and ptx.count("tcgen05.dealloc") == 1
    assert re.search(rf"call void @\"?llvm\.nvvm\.tcgen05\.alloc\.shared\.cg1\"?\(ptr addrspace\(3\) [^,]+, i32 {allocated}\)",
                     llir)
    assert re.search(rf"call void @\"?llvm\.nvvm\.tcgen05\.dealloc\.cg1\"?\(ptr addrspace\(6\) [^,]+, i32 {allocated}\)",
                     llir)


def test_work_bodies_see_the_base_plus_their_column_offset():
    llir = build(tmem_program, OUT, COLUMNS=(256, 44), ALLOCATOR=False, target="sm_100a").llir
    assert "add i32" in llir and ", 256" in llir           # the second allocation starts at column 256


def test_the_smem_allocators_tmem_mailbox_receives_the_address():
    compiled = build(tmem_program, OUT, COLUMNS=(128,), ALLOCATOR=True, target="sm_100a")
    assert "tcgen05.alloc" in compiled.ptx


def test_more_than_512_columns_is_m2():
    with pytest.raises(tsjit.VerificationError) as err:
        tsjit.compile(tmem_program, OUT, COLUMNS=(256, 300), ALLOCATOR=False, target="sm_100a")
    assert err.value.check == "M2" and "556" in str(err.value) and "512" in str(err.value)


def test_tensor_memory_on_sm90a_names_the_resource():
    with pytest.raises(tsjit.CompilationError) as err:
        tsjit.compile(tmem_program, OUT, COLUMNS=(128,), ALLOCATOR=False, target="sm_90a")
    assert "'acc'" in str(err.value) and "sm_100a" in str(err.value)


def test_add_tmem_ptr_twice_is_refused():
    smem = ts.SmemAllocator()
    smem.add_tmem_ptr()
    with pytest.raises(tsjit.UsageStateError):
        smem.add_tmem_ptr()


def test_tmem_allocation_offset_is_its_column():
    allocator = ts.TmemAllocator()
    first, second = allocator.add(ts.TmemAllocation("a", 96)), allocator.add(ts.TmemAllocation("b", 32))
    allocator.compute_layout()
    assert (first.offset, second.offset) == (0, 96)
    from tsjit.ts.tmem import allocation_columns
    assert allocation_columns(allocator) == 128
