"""tsjit.Fragment: compile-time-indexed register arrays that survive SSA construction, and the
documented wgmma accumulator thread -> (row, col) mapping."""
import re

import numpy as np
import pytest

import tsjit
from tsjit import Float32, Fragment
from tsjit.lang.fragment import accumulator_coords

from .compiling import blocks, build, kernel_ir, phis

F32 = np.zeros(1 << 16, np.float32)


@tsjit.kernel
def accumulate_in_loop(x, out, K):
    acc = tsjit.Fragment.zeros(128)
    for k in range(K):
        for i in tsjit.range_constexpr(128):
            acc[i] += x[k * 128 + i]
    tid = tsjit.thread_idx().x
    for i in tsjit.range_constexpr(128):
        out[tid * 128 + i] = acc[i]


def test_fragment_carried_across_loop_is_one_phi_per_element():
    compiled = build(accumulate_in_loop, F32, F32, np.int32(4))
    assert len(phis(compiled.llir, "loop.header", "float")) == 128
    assert "alloca" not in kernel_ir(compiled.llir)


def test_fragment_of_128_floats_in_a_loop_does_not_spill():
    compiled = build(accumulate_in_loop, F32, F32, np.int32(4))
    assert compiled.metadata["spill_stores_bytes"] == 0
    assert compiled.metadata["spill_loads_bytes"] == 0
    assert compiled.metadata["stack_frame_bytes"] == 0
    assert ".local" not in compiled.ptx


@tsjit.kernel
def rebind_in_branch(out):
    acc = tsjit.Fragment.full(8, 2.0)
    tid = tsjit.thread_idx().x
    if tid == 3:
        acc[5] = 1.0
    for i in tsjit.range_constexpr(8):
        out[tid * 8 + i] = acc[i]


def test_item_assignment_in_one_branch_merges_only_that_element():
    compiled = build(rebind_in_branch, F32)
    merged = phis(compiled.llir, "if.end", "float")
    assert len(merged) == 1
    assert merged[0].startswith('%"acc_5_" = phi float [0x3ff0000000000000')  # 1.0 from the branch


@tsjit.kernel
def fragment_helpers(out):
    acc = tsjit.Fragment.zeros(4)
    acc = acc.fill(3.0)
    doubled = acc.map(lambda v: v * 2.0)
    as_int = doubled.to(tsjit.Int32)
    total = tsjit.Float32(0)
    for v in doubled:
        total += v
    out[0] = total + len(acc) + as_int[3]


def test_fill_map_iteration_len_and_conversion_compile():
    compiled = build(fragment_helpers, F32)
    body = kernel_ir(compiled.llir)
    assert "llvm.fptosi.sat.i32.f32" in body
    assert "alloca" not in body


@tsjit.kernel
def runtime_index(out, j):
    acc = tsjit.Fragment.zeros(4)
    out[0] = acc[j]


def test_runtime_index_raises_naming_range_constexpr():
    with pytest.raises(tsjit.CompilationError, match=r"range_constexpr") as err:
        build(runtime_index, F32, np.int32(1))
    assert "acc[j]" in str(err.value)


@tsjit.kernel
def mixed_dtype_assignment(out):
    acc = tsjit.Fragment.zeros(4, tsjit.Int32)
    acc[0] = 1.5
    out[0] = acc[0]


def test_assigned_value_is_converted_to_the_fragment_dtype():
    compiled = build(mixed_dtype_assignment, np.zeros(4, np.int32))
    assert compiled.cubin


@tsjit.kernel
def out_of_range(out):
    acc = tsjit.Fragment.zeros(4)
    out[0] = acc[4]


def test_out_of_range_index_is_a_compilation_error():
    with pytest.raises(tsjit.CompilationError, match=r"index 4 is out of range for 4 elements"):
        build(out_of_range, F32)


@tsjit.kernel
def fragment_changes_type_in_loop(out, n):
    acc = tsjit.Fragment.zeros(2)
    for k in range(n):
        acc = tsjit.Fragment.zeros(2, tsjit.Int32)
    out[0] = acc[0]


def test_fragment_changing_dtype_in_a_loop_is_a_compilation_error():
    with pytest.raises(tsjit.CompilationError, match=r"Float32 before the loop and an Int32"):
        build(fragment_changes_type_in_loop, F32, np.int32(2))


def test_fragment_concatenation_is_refused():
    with pytest.raises(tsjit.CompilationError, match=r"map"):
        Fragment.__add__(None, None)


# -- the wgmma accumulator layout ---------------------------------------------------------------
def test_accumulator_coords_follow_the_documented_formula():
    # wgmma_sw128.md §6: row = 16*warp + lane/4 + 8*((i%4)/2), col = 8*(i/4) + 2*(lane%4) + (i%2)
    for tid, i, expected in ((0, 0, (0, 0)), (0, 1, (0, 1)), (0, 2, (8, 0)), (0, 3, (8, 1)), (0, 4, (0, 8)),
                             (37, 6, (25, 10)), (127, 127, (63, 255)), (128 + 37, 6, (25, 10))):
        assert accumulator_coords(i, tid) == expected


@pytest.mark.parametrize("n", [8, 64, 136, 256])
def test_accumulator_coords_cover_the_64_by_n_tile_once(n):
    seen = np.zeros((64, n), np.int32)
    for tid in range(128):
        for i in range(n // 2):
            row, col = accumulator_coords(i, tid)
            seen[row, col] += 1
    assert (seen == 1).all()


@tsjit.kernel
def coords_kernel(out):
    acc = tsjit.Fragment.zeros(128)
    for i in tsjit.range_constexpr(128):
        row, col = acc.accumulator_coords(i)
        out[row * 256 + col] = acc[i]


def test_accumulator_coords_compile_from_the_thread_index():
    compiled = build(coords_kernel, F32)
    assert "llvm.nvvm.read.ptx.sreg.tid.x" in compiled.llir
    assert compiled.metadata["spill_stores_bytes"] == 0
