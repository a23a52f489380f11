"""Shared-memory / TMEM allocators (inventory §1.8) and the M1/M2 capacity checks."""
import pytest

from tsjit.errors import VerificationError
from tsjit.lang.dtypes import Float16
from tsjit.ts import SmemAllocation, SmemAllocator, TmemAllocation, TmemAllocator
from ts_pipeline_fakes import build, tma_config, tma_copy, SmemTiles


def test_size_from_dtype_and_count():
    assert SmemAllocation("a", dtype=Float16, count=100).size_bytes == 200
    with pytest.raises(TypeError):
        SmemAllocation("a")
    with pytest.raises(ValueError):
        SmemAllocation("a", 64, alignment=48)


def test_offsets_aligned_and_sorted_by_alignment():
    alloc = SmemAllocator()
    small = alloc.add(SmemAllocation("small", 100, alignment=16))
    tile = alloc.add(SmemAllocation("tile", 4096, alignment=1024))
    mid = alloc.add(SmemAllocation("mid", 300, alignment=128))
    assert small.offset is None
    total = alloc.compute_layout()
    assert (tile.offset, mid.offset, small.offset) == (0, 4096, 4400)
    for a in (small, tile, mid):
        assert a.offset % a.alignment == 0
    assert small.range == (4400, 4500)
    assert alloc.data_bytes == 4500 and total == 4500 and alloc.barrier_bytes == 0


def test_barriers_follow_data_8_byte_aligned():
    alloc = SmemAllocator()
    smem = SmemTiles(name="smem", pipeline_config=tma_config(stages=3))
    allocs = alloc.add_resource(smem)
    alloc.add(SmemAllocation("odd", 5, alignment=1))
    alloc.compute_layout()
    assert allocs[0].owner is smem and allocs[0].size_bytes == 3 * 64 * 64 * 4
    assert alloc.data_bytes == 3 * 16384 + 5
    assert alloc.barrier_offset(smem) == 3 * 16384 + 8       # padded to 8
    assert alloc.barrier_bytes == 48 and alloc.total_bytes == 3 * 16384 + 8 + 48
    with pytest.raises(KeyError):
        alloc.barrier_offset(SmemTiles(name="other", pipeline_config=tma_config()))


def test_alias_group_shrinks_total_and_reports_pairs():
    def layout(aliased):
        alloc = SmemAllocator()
        a = SmemAllocation("a", 8192, alignment=1024)
        b = SmemAllocation("b", 4096)
        c = SmemAllocation("c", 10000)
        if aliased:
            alloc.add_alias_group([[a, b], [c]])
        else:
            for x in (a, b, c):
                alloc.add(x)
        alloc.compute_layout()
        return alloc, a, b, c
    plain, *_ = layout(False)
    alloc, a, b, c = layout(True)
    assert alloc.total_bytes == 12288 < plain.total_bytes == 22288
    assert alloc.savings_bytes == 10000
    assert (a.offset, b.offset, c.offset) == (0, 8192, 0)
    assert [(x.name, y.name) for x, y in alloc.alias_pairs()] == [("a", "c"), ("b", "c")]
    assert plain.alias_pairs() == []


def test_alias_group_needs_two_phases():
    with pytest.raises(ValueError, match="2 phases"):
        SmemAllocator().add_alias_group([[SmemAllocation("a", 8)]])


def test_second_compute_layout_raises():
    alloc = SmemAllocator()
    alloc.compute_layout()
    with pytest.raises(RuntimeError, match="already"):
        alloc.compute_layout()
    with pytest.raises(RuntimeError):
        alloc.add(SmemAllocation("late", 8))


def test_usage_report_snapshot():
    alloc = SmemAllocator(capacity_bytes=65536)
    alloc.add(SmemAllocation("acc", 1024, alignment=128))
    alloc.add_alias_group([[SmemAllocation("a", 8192, alignment=1024)],
                           [SmemAllocation("epi", 4096, alignment=1024)]])
    alloc.add_resource(SmemTiles(name="ring", pipeline_config=tma_config(stages=1)))
    alloc.compute_layout()
    assert alloc.usage_report() == "\n".join([
        "[smem-layout] 4 allocation(s), 1 barrier set(s)",
        "   name               size     align    offset       end",
        "  *a                  8192      1024         0      8192",
        "  *epi                4096      1024         0      4096",
        "   ring.tiles        16384      1024      8192     24576",
        "   acc                1024       128     24576     25600",
        "   ring.barriers        16         8     25600     25616",
        "  alias group 0 at 0: region 8192 B",
        "    phase 0 (8192 B): a",
        "    phase 1 (4096 B): epi",
        "  data 25600 B + barriers 16 B = total 25616 B / 65536 B",
        "  aliasing saves 4096 B",
    ])


def test_m1_allocator_over_capacity_names_totals():
    alloc = SmemAllocator(capacity_bytes=10000)
    alloc.add(SmemAllocation("big", 12000))
    alloc.compute_layout()
    with pytest.raises(VerificationError) as err:
        alloc.check_capacity()
    text = str(err.value)
    assert err.value.check == "M1" and "12000" in text and "10000" in text and "2000" in text
    assert "add_alias_group" in text


def test_manager_builds_allocator_and_passes_m1():
    tasks, graph, smem, _ = tma_copy()
    m = build(tasks, graph)
    alloc = m.smem_allocator
    assert alloc.is_laid_out and alloc.total_bytes == 4 * 16384 + 64
    assert alloc.barrier_offset(smem) == 4 * 16384


def test_manager_m1_with_small_capacity():
    tasks, graph, _, _ = tma_copy()
    with pytest.raises(VerificationError) as err:
        build(tasks, graph, smem_capacity_bytes=32768)
    assert err.value.check == "M1" and "65600" in str(err.value) and "32768" in str(err.value)


def test_manager_adds_barriers_to_user_allocator_and_prints_report(capsys):
    tasks, graph, smem, _ = tma_copy()
    alloc = SmemAllocator()
    alloc.add(SmemAllocation("staging", 2048))
    m = build(tasks, graph, smem_allocator=alloc, verbose=True)
    assert m.smem_allocator is alloc and alloc.barrier_offset(smem) == 2048
    assert "[smem-layout]" in capsys.readouterr().out


def test_manager_rejects_laid_out_allocator_without_barriers():
    tasks, graph, _, _ = tma_copy()
    alloc = SmemAllocator()
    alloc.compute_layout()
    with pytest.raises(VerificationError) as err:
        build(tasks, graph, smem_allocator=alloc)
    assert err.value.check == "M1" and "'smem'" in str(err.value)


def test_tmem_layout_and_m2():
    tmem = TmemAllocator()
    acc = tmem.add(TmemAllocation("acc", 256))
    sf = tmem.add(TmemAllocation("sf", 128))
    assert tmem.compute_layout() == 384 and (acc.column, sf.column) == (0, 256)
    tmem.check_capacity()
    over = TmemAllocator(capacity_columns=256)
    over.add(TmemAllocation("acc", 512))
    with pytest.raises(VerificationError) as err:
        over.check_capacity()
    assert err.value.check == "M2" and "512" in str(err.value) and "256" in str(err.value)


def test_manager_runs_m2():
    tasks, graph, _, _ = tma_copy()
    tmem = TmemAllocator()
    tmem.add(TmemAllocation("acc", 1024))
    with pytest.raises(VerificationError) as err:
        build(tasks, graph, tmem_allocator=tmem)
    assert err.value.check == "M2"
