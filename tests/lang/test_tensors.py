"""Array arguments as tensors: indexing, shape and strides (unit strides compile-time),
pointer arithmetic, 16-byte vector accesses and dynamic shared memory."""
import re

import numpy as np
import pytest

import tsjit
from tsjit import BFloat16, Float16, Float32, Float64, Int8, Int32, Int64

from frontend.compiling import build, instructions, kernel_ir, ptx_ops, signature


# -- indexing, shape, strides ------------------------------------------------------------------
@tsjit.kernel
def matrix_ops(x, out):
    i, j, _ = tsjit.thread_idx()
    if i < x.shape[0] and j < x.shape[1]:
        out[i, j] = x[i, j] + Float32(x.stride(0)) + Float32(x.stride(1))


def test_contiguous_matrix_passes_no_unit_stride():
    compiled = build(matrix_ops, tsjit.spec((4, 8), Float32), tsjit.spec((4, 8), Float32))
    params = signature(compiled.llir)
    assert 'i32 %"x.shape0", i32 %"x.shape1", i32 %"x.stride0"' in params
    assert "x.stride1" not in params and "out.stride1" not in params
    sitofp = instructions(compiled.llir, "sitofp")
    assert len(sitofp) == 1 and '%"x.stride0"' in sitofp[0]  # stride(1) is the Python int 1
    assert re.search(r'mul i32 %"?\S+, %"x.stride0"', kernel_ir(compiled.llir))


def test_non_unit_strides_become_parameters():
    compiled = build(matrix_ops, tsjit.spec((4, 8), Float32, strides=(16, 2)), tsjit.spec((4, 8), Float32))
    params = signature(compiled.llir)
    assert '%"x.stride0"' in params and '%"x.stride1"' in params
    assert len(instructions(compiled.llir, "sitofp")) == 2


def test_transposed_view_keeps_only_the_outer_stride():
    compiled = build(matrix_ops, tsjit.spec((4, 8), Float32, strides=(1, 4)), tsjit.spec((4, 8), Float32))
    params = signature(compiled.llir)
    assert '%"x.stride1"' in params and '%"x.stride0"' not in params


def test_numpy_arrays_stand_in_for_device_arrays():
    x = np.zeros((4, 8), np.float32)
    compiled = build(matrix_ops, x, x[:, ::2].copy().repeat(2, axis=1))
    assert "x.stride1" not in signature(compiled.llir)


@tsjit.kernel
def rank3(x, out):
    out[0] = x[1, 2, 3] + x.shape[2] + x.numel()


def test_rank3_constant_index_and_shape():
    compiled = build(rank3, tsjit.spec((2, 3, 4), Int32), tsjit.spec(1, Int32))
    params = signature(compiled.llir)
    assert params.count('%"x.shape') == 3 and params.count('%"x.stride') == 2
    assert len(instructions(compiled.llir, "mul")) >= 2 + 2  # two strided indices, numel


@tsjit.kernel
def large_array(x, out):
    i = tsjit.block_idx().x * tsjit.block_dim().x + tsjit.thread_idx().x
    if i < x.shape[0]:
        out[i] = x[i]


def test_arrays_of_2_31_elements_index_in_int64():
    big = tsjit.spec(2**31, Int8)
    compiled = build(large_array, big, big)
    assert 'i64 %"x.shape0"' in signature(compiled.llir)
    geps = instructions(compiled.llir, "getelementptr")
    assert all(", i64 " in g for g in geps)


# -- pointers ----------------------------------------------------------------------------------
@tsjit.kernel
def pointer_arithmetic(x, out, n):
    base = x.ptr + 4
    p = base + tsjit.thread_idx().x
    q = p - 1
    out[0] = p[0] + base[1] + (x.ptr + n)[0] + q.load()
    (out.ptr + 1).store(2.0)
    out.ptr[2] = 3.0


def test_pointer_arithmetic_advances_by_elements():
    compiled = build(pointer_arithmetic, tsjit.spec(64, Float32), tsjit.spec(4, Float32), 8)
    geps = instructions(compiled.llir, "getelementptr")
    assert all("getelementptr inbounds float, ptr addrspace(1)" in g for g in geps)
    assert geps[0].endswith(", i32 4")
    assert any(g.endswith(", i32 -1") or g.endswith(", i32 4294967295") for g in geps)
    assert len(instructions(compiled.llir, "load")) == 4 and len(instructions(compiled.llir, "store")) == 3


def test_constant_offsets_keep_known_alignment():
    compiled = build(pointer_arithmetic, tsjit.spec(64, Float32), tsjit.spec(4, Float32), 8)
    loads = instructions(compiled.llir, "load")
    assert any(line.endswith("align 4") for line in loads)
    stores = instructions(compiled.llir, "store")
    assert stores[1].endswith("align 4") and stores[2].endswith("align 8")  # out + 1, out + 2


# -- vector access -----------------------------------------------------------------------------
@tsjit.kernel
def vector_copy(x, out, N: tsjit.Constexpr[int]):
    i = tsjit.thread_idx().x * N
    values = x.load_vector(i, N)
    out.store_vector(i, tuple(reversed(values)))


@pytest.mark.parametrize("dtype, count, ptx", [
    (Float32, 4, "v4.b32"), (Float16, 8, "v4.b32"), (BFloat16, 8, "v4.b32"), (Int8, 16, "v4.b32"),
    (Float64, 2, "v2.b64"), (Int64, 2, "v2.b64"), (Float32, 2, "v2.b32"), (Int32, 1, "b32"),
], ids=lambda v: getattr(v, "name", str(v)))
def test_vector_load_and_store_move_up_to_16_bytes_at_once(dtype, count, ptx):
    compiled = build(vector_copy, tsjit.spec(256, dtype), tsjit.spec(256, dtype), count)
    (load,) = instructions(compiled.llir, "load")
    width = count * dtype.itemsize
    if count > 1:
        assert re.search(rf"load <{count} x \w+>, .*align {width}$", load)
    assert ptx_ops(compiled.ptx, "ld.global") == [f"ld.global.{ptx}"]
    assert ptx_ops(compiled.ptx, "st.global") == [f"st.global.{ptx}"]


@tsjit.kernel
def row_vectors(x, out):
    r = tsjit.thread_idx().y
    c = tsjit.thread_idx().x * 4
    a, b, cc, d = x.load_vector((r, c), 4)
    out.store_vector((r, c), (d, cc, b, a))


def test_vector_access_in_rows_whose_starts_are_16_byte_aligned():
    compiled = build(row_vectors, tsjit.spec((8, 32), Float32), tsjit.spec((8, 32), Float32))
    assert ptx_ops(compiled.ptx, "ld.global") == ["ld.global.v4.b32"]


def test_vector_access_rejected_when_rows_are_not_16_byte_aligned():
    with pytest.raises(tsjit.CompilationError, match="16-byte aligned"):
        build(row_vectors, tsjit.spec((8, 30), Float32), tsjit.spec((8, 32), Float32))


def test_vector_access_rejected_when_the_base_may_be_unaligned():
    with pytest.raises(tsjit.CompilationError, match="only known to be 4-byte aligned"):
        build(vector_copy, tsjit.spec(256, Float32, align=4), tsjit.spec(256, Float32), 4)


# -- alignment of a run-time index and tsjit.assume_aligned (newcomer 7, item 2) ------------------
@tsjit.kernel
def stage_chunks(src, out, offsets, PROMISE: tsjit.Constexpr[bool]):
    """Each of 16 threads cp.asyncs 4 Float32 of ``src`` into stage 1 of a (2, 64) shared buffer."""
    buf = tsjit.shared_array(Float32, (2, 64), align=128)
    lane = tsjit.thread_idx().x
    if tsjit.const_expr(PROMISE):
        e = offsets[lane]            # loaded: only the caller knows it is a multiple of 4
        dst = tsjit.assume_aligned(tsjit.address_of(buf, 1, e), 16)
        source = tsjit.assume_aligned(tsjit.address_of(src, e), 16)
    else:
        e = lane * 4                 # provably a multiple of 4 elements: 16 bytes
        dst, source = tsjit.address_of(buf, 1, e), tsjit.address_of(src, e)
    tsjit.cp_async(dst, source, 16)
    tsjit.cp_async_commit_group()
    tsjit.cp_async_wait_group(0)
    tsjit.syncthreads()
    for k in tsjit.range_constexpr(4):
        out[e + k] = buf[1, e + k]


@tsjit.kernel
def stage_chunk_at_a_loaded_offset(src, offsets):
    buf = tsjit.shared_array(Float32, (2, 64), align=128)
    e = offsets[tsjit.thread_idx().x]
    tsjit.cp_async(tsjit.address_of(buf, 1, e), tsjit.address_of(src, e), 16)


def test_a_run_time_index_that_is_a_multiple_of_four_floats_is_16_byte_aligned():
    compiled = build(stage_chunks, tsjit.spec(64, Float32), tsjit.spec(64, Float32), tsjit.spec(16, Int32), False)
    assert "llvm.nvvm.cp.async.ca.shared.global.16" in compiled.llir


@pytest.mark.parametrize("promise", [False, True])
def test_cp_async_at_a_proven_or_promised_alignment_copies_the_chunks(promise):
    rng = np.random.default_rng()
    src = rng.standard_normal(64).astype(np.float32)
    out = np.full(64, np.nan, np.float32)
    offsets = rng.permutation(16).astype(np.int32) * 4
    stage_chunks.interpret[(1,), (16,)](src, out, offsets, promise)
    np.testing.assert_array_equal(out, src)


def test_an_unprovable_cp_async_alignment_names_assume_aligned():
    with pytest.raises(tsjit.CompilationError, match=r"`dst` must be 16-byte aligned; it is only known to be "
                                                     r"4-byte aligned.*dst = tsjit\.assume_aligned\(dst, 16\)"):
        build(stage_chunk_at_a_loaded_offset, tsjit.spec(64, Float32), tsjit.spec(16, Int32))


@tsjit.kernel
def vector_at_a_loaded_offset(x, out, offsets):
    i = offsets[tsjit.thread_idx().x]
    out.store_vector(i, tsjit.address_of(x, i).load_vector(4))


def test_an_unprovable_vector_alignment_names_assume_aligned():
    with pytest.raises(tsjit.CompilationError, match=r"16-byte vector access.*tsjit\.assume_aligned\(pointer, 16\)"):
        build(vector_at_a_loaded_offset, tsjit.spec(64, Float32), tsjit.spec(64, Float32), tsjit.spec(16, Int32))


@tsjit.kernel
def promise_misuse(x, CASE: tsjit.Constexpr[int]):
    if tsjit.const_expr(CASE == 0):
        tsjit.assume_aligned(x, 16)
    elif tsjit.const_expr(CASE == 1):
        tsjit.assume_aligned(x[0], 16)
    else:
        tsjit.assume_aligned(x.ptr, 12)


@pytest.mark.parametrize("case, message", [
    (0, r"takes a pointer, got a tensor.*tsjit\.assume_aligned\(tsjit\.address_of\(t, index\), 16\)"),
    (1, r"got a Float32 value.*pass tsjit\.address_of\(t, index\) instead of t\[index\]"),
    (2, r"compile-time power of two 1 \.\. 1024 bytes, got 12"),
])
def test_assume_aligned_refuses_what_is_not_a_pointer_or_an_alignment(case, message):
    with pytest.raises(tsjit.CompilationError, match=message):
        build(promise_misuse, tsjit.spec(64, Float32), case)


# -- shared memory -----------------------------------------------------------------------------
@tsjit.kernel
def shared_tiles(x, out):
    tile = tsjit.shared_array(Float32, (4, 32))
    counts = tsjit.shared_array(Int32, 8, align=16)
    tx = tsjit.thread_idx().x
    tile[tx % 4, tx] = x[tx]
    counts[tx % 8] = 0
    tsjit.syncthreads()
    out[tx] = tile[3 - tx % 4, 31 - tx] + Float32(counts[tx % 8])


@pytest.fixture(scope="module")
def shared_compiled():
    return build(shared_tiles, tsjit.spec(32, Float32), tsjit.spec(32, Float32))


def test_shared_arrays_are_laid_out_in_one_dynamic_block(shared_compiled):
    assert shared_compiled.metadata["smem_bytes"] == 4 * 32 * 4 + 8 * 4


def test_shared_memory_is_one_extern_block_aligned_to_1024(shared_compiled):
    ptx = shared_compiled.ptx
    assert re.findall(r"^\s*\.extern \.shared \.align 1024 \.b8 (\w+)\[\];", ptx, flags=re.M) == ["tsjit_smem"]
    static = [line for line in ptx.splitlines() if re.match(r"^\s*(\.visible |\.global )?\.shared\b", line)]
    assert static == [], "no static .shared variable may sit next to the dynamic block"
    assert ptx_ops(ptx, "st.shared") and ptx_ops(ptx, "ld.shared")


def test_shared_array_offsets_respect_alignment(shared_compiled):
    geps = " ".join(instructions(shared_compiled.llir, "getelementptr"))
    assert "ptr addrspace(3) @\"tsjit_smem\", i32 0, i32 512" in geps  # counts after the 512-byte tile


@tsjit.kernel
def shared_run_time_extent(out, n):
    tile = tsjit.shared_array(Float32, n)
    tile[0] = 1.0


@tsjit.kernel
def shared_run_time_tuple(out, n):
    tile = tsjit.shared_array(Float32, (4, n))
    tile[0, 0] = 1.0


@tsjit.kernel
def shared_constexpr_extent(out, n: tsjit.Constexpr[int]):
    tile = tsjit.shared_array(Float32, n)
    tile[0] = 1.0
    out[0] = tile[0]


@pytest.mark.parametrize("kernel, field", [(shared_run_time_extent, "'shape'"), (shared_run_time_tuple, "'shape[1]'")])
def test_a_run_time_shared_array_extent_says_to_make_it_constexpr(kernel, field):
    with pytest.raises(tsjit.CompilationError) as err:
        build(kernel, tsjit.spec(8, Float32), 8)
    message = str(err.value)
    assert f"shared_array(Float32, ...): {field} is a run-time Int32 value" in message, message
    assert "tsjit.Constexpr[int]" in message and "not iterable" not in message
    assert "tsjit.shared_array(Float32, " in message  # the kernel line, where the argument is named


def test_a_constexpr_shared_array_extent_compiles():
    assert build(shared_constexpr_extent, tsjit.spec(8, Float32), 24).metadata["smem_bytes"] == 24 * 4


@tsjit.kernel
def dynamic_shared_view(out):
    base = tsjit.dynamic_shared(Float32)
    tx = tsjit.thread_idx().x
    base[tx] = Float32(tx)
    tsjit.syncthreads()
    out[tx] = base[31 - tx]


def test_dynamic_shared_pointer_adds_no_reservation():
    compiled = build(dynamic_shared_view, tsjit.spec(32, Float32))
    assert compiled.metadata["smem_bytes"] == 0
    assert ".extern .shared .align 1024" in compiled.ptx


@tsjit.kernel
def shared_stage_views(out):
    tiles = tsjit.shared_array(Float32, (2, 4, 32))
    tile = tiles[1]
    i = tsjit.thread_idx().x
    tile[i % 4, i] = 1.0
    a, b, c, d = tile.load_vector((1, i * 4), 4)
    out.store_vector(i * 4, (a, b, c, d))


def test_fewer_indices_than_the_rank_give_a_sub_tensor_view():
    compiled = build(shared_stage_views, tsjit.spec(128, Float32))
    assert compiled.metadata["smem_bytes"] == 2 * 4 * 32 * 4
    geps = instructions(compiled.llir, "getelementptr")
    assert any(g.endswith(", i32 128") for g in geps)  # tiles[1] starts 4 * 32 elements in
    assert ptx_ops(compiled.ptx, "ld.shared") == ["ld.shared.v4.b32"]  # the view keeps 16-byte rows
