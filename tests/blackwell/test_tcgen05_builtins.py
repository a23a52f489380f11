"""tsjit.tcgen05: every builtin compiles and assembles (ptxas / nvJitLink) for sm_100a, emits the PTX
instruction its docstring names, and misuse is a CompilationError naming the operand before LLVM runs."""
import re

import numpy as np
import pytest

import tsjit
from tsjit import tcgen05 as tc
from tsjit.lang import umma_descriptors as ud

from lang.compiling import build, ptx_ops

OUT32 = np.zeros((128, 256), np.float32)
OUT_U32 = np.zeros(64, np.uint32)
OUT_F32 = np.zeros(128, np.float32)


def ptx_of(kernel, *args, target="sm_100a", **constexprs) -> str:
    return build(kernel, *args, target=target, **constexprs).ptx


def compile_error(kernel, *args, target="sm_100a", **constexprs) -> tsjit.CompilationError:
    with pytest.raises(tsjit.CompilationError) as info:
        tsjit.compile(kernel, *args, target=target, **constexprs)
    return info.value


# -- allocation --------------------------------------------------------------------------------------------
@tsjit.kernel
def alloc_dealloc(out, COLUMNS: tsjit.Constexpr, GROUP: tsjit.Constexpr):
    slot = tsjit.shared_array(tsjit.Uint32, (1,))
    if tsjit.warp_idx() == 0:
        tc.alloc(slot, COLUMNS, cta_group=GROUP)
        tc.relinquish_alloc_permit(cta_group=GROUP)
    tc.fence_before_thread_sync()
    tsjit.syncthreads()
    tc.fence_after_thread_sync()
    address = slot[0]
    out[tsjit.thread_idx().x % 64] = address
    tsjit.syncthreads()
    if tsjit.warp_idx() == 0:
        tc.dealloc(address, COLUMNS, cta_group=GROUP)


@pytest.mark.parametrize("group", [1, 2])
def test_alloc_relinquish_dealloc_assemble(group):
    ptx = ptx_of(alloc_dealloc, OUT_U32, COLUMNS=512, GROUP=group)
    ops = set(ptx_ops(ptx, "tcgen05."))
    assert f"tcgen05.alloc.cta_group::{group}.sync.aligned.shared::cta.b32" in ops
    assert f"tcgen05.dealloc.cta_group::{group}.sync.aligned.b32" in ops
    assert f"tcgen05.relinquish_alloc_permit.cta_group::{group}.sync.aligned" in ops
    assert {"tcgen05.fence::before_thread_sync", "tcgen05.fence::after_thread_sync"} <= ops


@pytest.mark.parametrize("columns", [16, 48, 1024])
def test_alloc_column_count_must_be_a_power_of_two_from_32_to_512(columns):
    err = compile_error(alloc_dealloc, OUT_U32, COLUMNS=columns, GROUP=1)
    assert "num_columns" in err.message and str(columns) in err.message


@tsjit.kernel
def alloc_into_float(out):
    slot = tsjit.shared_array(tsjit.Float32, (1,))
    tc.alloc(slot, 32)


def test_alloc_slot_must_be_a_32_bit_integer_in_shared_memory():
    err = compile_error(alloc_into_float, OUT_U32)
    assert "slot" in err.message


def test_tcgen05_on_sm_90a_names_the_builtin_and_the_targets():
    err = compile_error(alloc_dealloc, OUT_U32, COLUMNS=32, GROUP=1, target="sm_90a")
    assert "tsjit.tcgen05.alloc" in err.message and "sm_100a" in err.message and "sm_90a" in err.message


def test_sm_100f_builds_tcgen05_at_ptx_8_8():
    ptx = ptx_of(alloc_dealloc, OUT_U32, COLUMNS=64, GROUP=1, target="sm_100f")
    assert ".version 8.8" in ptx and "tcgen05.alloc" in ptx


# -- MMA ----------------------------------------------------------------------------------------------------
@tsjit.kernel
def one_mma(out, M: tsjit.Constexpr, N: tsjit.Constexpr, DT: tsjit.Constexpr, GROUP: tsjit.Constexpr,
            WS: tsjit.Constexpr, A_TMEM: tsjit.Constexpr):
    slot = tsjit.shared_array(tsjit.Uint32, (1,))
    bar = tsjit.shared_array(tsjit.Int64, (1,))
    a = tsjit.shared_array(DT, (128, 128 // DT.itemsize), align=1024)
    b = tsjit.shared_array(DT, (256, 128 // DT.itemsize), align=1024)
    if tsjit.warp_idx() == 0:
        tc.alloc(slot, 512, cta_group=GROUP)
    tc.fence_before_thread_sync()
    tsjit.syncthreads()
    tc.fence_after_thread_sync()
    tmem = slot[0]
    if tsjit.thread_idx().x == 0:
        da = tc.make_smem_descriptor(a)
        db = tc.make_smem_descriptor(b)
        if tsjit.const_expr(WS):
            idesc = tc.mma_ws(tmem, da, db, m=M, n=N, accumulate=False)
        elif tsjit.const_expr(A_TMEM):
            idesc = tc.mma(tmem, tc.tmem_address(tmem, column=256), db, m=M, n=N, a_dtype=DT, b_dtype=DT,
                           accumulate=tsjit.thread_idx().y > 0, cta_group=GROUP)
        else:
            idesc = tc.mma(tmem, da, db.k_step(1), m=M, n=N, accumulate=False, cta_group=GROUP)
        tc.commit(bar.ptr, cta_group=GROUP)
        out[0] = idesc


@pytest.mark.parametrize("dtype,kind", [(tsjit.BFloat16, "f16"), (tsjit.Float16, "f16"), (tsjit.Float32, "tf32"),
                                        (tsjit.Float8E4M3, "f8f6f4"), (tsjit.Int8, "i8")])
def test_mma_every_kind_assembles(dtype, kind):
    ptx = ptx_of(one_mma, OUT_U32, M=128, N=256, DT=dtype, GROUP=1, WS=False, A_TMEM=False)
    assert f"tcgen05.mma.cta_group::1.kind::{kind}" in ptx


@pytest.mark.parametrize("m,n", [(128, 256), (256, 128)])
def test_mma_cta_group_2_assembles_with_pair_shapes(m, n):
    ptx = ptx_of(one_mma, OUT_U32, M=m, N=n, DT=tsjit.BFloat16, GROUP=2, WS=False, A_TMEM=False)
    assert "tcgen05.mma.cta_group::2.kind::f16" in ptx
    assert "tcgen05.commit.cta_group::2" in ptx


def test_mma_with_a_from_tensor_memory_and_runtime_enable_input_d():
    ptx = ptx_of(one_mma, OUT_U32, M=128, N=128, DT=tsjit.BFloat16, GROUP=1, WS=False, A_TMEM=True)
    assert re.search(r"tcgen05\.mma\.cta_group::1\.kind::f16\S* \[%r\d+\], \[%r\d+\], %rd\d+", ptx)


@pytest.mark.parametrize("m,n", [(32, 64), (64, 128), (128, 256)])
def test_mma_ws_assembles(m, n):
    ptx = ptx_of(one_mma, OUT_U32, M=m, N=n, DT=tsjit.BFloat16, GROUP=1, WS=True, A_TMEM=False)
    assert "tcgen05.mma.ws.cta_group::1.kind::f16" in ptx


@pytest.mark.parametrize("m,n,group,operand", [
    (96, 128, 1, "operand m"), (256, 128, 1, "operand m"), (64, 128, 2, "operand m"),
    (128, 260, 1, "operand n"), (128, 12, 1, "operand n"), (128, 24, 2, "operand n")])
def test_illegal_mma_shape_names_the_operand(m, n, group, operand):
    err = compile_error(one_mma, OUT_U32, M=m, N=n, DT=tsjit.BFloat16, GROUP=group, WS=False, A_TMEM=False)
    assert operand in err.message and "kind::f16" in err.message


def test_ws_mma_n_must_be_64_128_or_256():
    err = compile_error(one_mma, OUT_U32, M=64, N=96, DT=tsjit.BFloat16, GROUP=1, WS=True, A_TMEM=False)
    assert "operand n" in err.message and "64, 128 or 256" in err.message


@pytest.mark.parametrize("m,n,dtype,operand", [(256, 128, tsjit.BFloat16, "operand m"), (16, 64, tsjit.BFloat16,
                                               "operand m"), (128, 32, tsjit.Float32, "operand n"),
                                               (32, 8, tsjit.Float8E4M3, "operand n")])
def test_ws_mma_shapes_follow_table_39(m, n, dtype, operand):
    """.ws: M in {32, 64, 128}, N in {64, 128, 256} for every kind (PTX ISA §9.7.16.2.1, Table 39)."""
    err = compile_error(one_mma, OUT_U32, M=m, N=n, DT=dtype, GROUP=1, WS=True, A_TMEM=False)
    assert operand in err.message and (".ws" in err.message or "64, 128 or 256" in err.message)


def test_ws_mma_has_no_cta_group_2_or_block_scaled_form():
    with pytest.raises(tsjit.CompilationError, match=r"\.ws .*cta_group=1"):
        ud.check_shape("f16", 128, 128, cta_group=2, weight_stationary=True)
    with pytest.raises(tsjit.CompilationError, match=r"\.ws .*kind='mxf4nvf4'"):
        ud.check_shape("mxf4nvf4", 128, 128, weight_stationary=True)


def test_i8_mma_on_sm_100f_is_refused_before_llvm():
    err = compile_error(one_mma, OUT_U32, M=128, N=64, DT=tsjit.Int8, GROUP=1, WS=False, A_TMEM=False,
                        target="sm_100f")
    assert "kind::i8" in err.message and "sm_100a" in err.message


def test_i8_n_rule_is_steps_of_16_above_32():
    ptx_of(one_mma, OUT_U32, M=128, N=24, DT=tsjit.Int8, GROUP=1, WS=False, A_TMEM=False)
    err = compile_error(one_mma, OUT_U32, M=128, N=40, DT=tsjit.Int8, GROUP=1, WS=False, A_TMEM=False)
    assert "operand n" in err.message and "kind::i8" in err.message


@tsjit.kernel
def mma_mixed_types(out):
    slot = tsjit.shared_array(tsjit.Uint32, (1,))
    a = tsjit.shared_array(tsjit.BFloat16, (128, 64), align=1024)
    b = tsjit.shared_array(tsjit.Float16, (256, 64), align=1024)
    tc.mma(slot[0], tc.make_smem_descriptor(a), tc.make_smem_descriptor(b), m=128, n=256)


def test_mma_operand_types_the_kind_lacks_name_the_operands():
    err = compile_error(mma_mixed_types, OUT_U32)
    assert "a_dtype" in err.message and "b_dtype" in err.message


@tsjit.kernel
def mma_bad_k(out):
    slot = tsjit.shared_array(tsjit.Uint32, (1,))
    a = tsjit.shared_array(tsjit.BFloat16, (128, 64), align=1024)
    tc.mma(slot[0], tc.make_smem_descriptor(a), tc.make_smem_descriptor(a), m=128, n=128, k=32)


def test_mma_k_must_be_the_kinds_k():
    err = compile_error(mma_bad_k, OUT_U32)
    assert "operand k" in err.message and "16" in err.message


@tsjit.kernel
def mma_float_d(out):
    a = tsjit.shared_array(tsjit.BFloat16, (128, 64), align=1024)
    tc.mma(1.5, tc.make_smem_descriptor(a), tc.make_smem_descriptor(a), m=128, n=128)


def test_mma_d_must_be_a_tmem_address():
    err = compile_error(mma_float_d, OUT_U32)
    assert "operand d" in err.message


@tsjit.kernel
def block_scaled(out, KIND: tsjit.Constexpr, ELEMENT: tsjit.Constexpr, SCALE: tsjit.Constexpr):
    slot = tsjit.shared_array(tsjit.Uint32, (1,))
    a = tsjit.shared_array(tsjit.Uint8, (128, 128), align=1024)
    b = tsjit.shared_array(tsjit.Uint8, (256, 128), align=1024)
    sf = tsjit.shared_array(tsjit.Uint8, (128, 16), align=1024)
    if tsjit.warp_idx() == 0:
        tc.alloc(slot, 512)
    tsjit.syncthreads()
    tmem = slot[0]
    if tsjit.thread_idx().x == 0:
        sf_desc = tc.make_smem_descriptor(sf, swizzle="none", leading_byte_offset=128, stride_byte_offset=128)
        scale_a = tc.tmem_address(tmem, column=256)
        scale_b = tc.tmem_address(tmem, column=260)
        tc.cp(scale_a, sf_desc, shape="32x128b", multicast="warpx4")
        tc.cp(scale_b, sf_desc, shape="32x128b", multicast="warpx4")
        da = tc.make_smem_descriptor(a, element_type=ELEMENT)
        db = tc.make_smem_descriptor(b, element_type=ELEMENT)
        out[0] = tc.mma_block_scaled(tmem, da, db, scale_a, scale_b, m=128, n=256, kind=KIND, a_dtype=ELEMENT,
                                     b_dtype=ELEMENT, scale_type=SCALE)


@pytest.mark.parametrize("kind,element,scale,vec,target", [
    ("mxf8f6f4", "e4m3", "ue8m0", "scale_vec::1X", "sm_100a"), ("mxf4nvf4", "e2m1", "ue4m3", "block16", "sm_100f"),
    ("mxf4nvf4", "e2m1", "ue8m0", "block32", "sm_100f"), ("mxf8f6f4", "e4m3", "ue8m0", "block32", "sm_100f")])
def test_block_scaled_mma_and_scale_copies_assemble(kind, element, scale, vec, target):
    ptx = ptx_of(block_scaled, OUT_U32, KIND=kind, ELEMENT=element, SCALE=scale, target=target)
    assert f"tcgen05.mma.cta_group::1.kind::{kind}.block_scale.{vec}" in ptx
    assert "tcgen05.cp.cta_group::1.32x128b.warpx4" in ptx


def test_nvfp4_needs_ptx_8_7_so_sm_100a_names_sm_100f():
    err = compile_error(block_scaled, OUT_U32, KIND="mxf4nvf4", ELEMENT="e2m1", SCALE="ue4m3")
    assert "8.7" in err.message and "sm_100f" in err.message


def test_block_scaled_scale_type_the_kind_lacks_is_refused():
    err = compile_error(block_scaled, OUT_U32, KIND="mxf8f6f4", ELEMENT="e4m3", SCALE="ue4m3")
    assert "scale_type" in err.message


# -- commit, cp ----------------------------------------------------------------------------------------------
@tsjit.kernel
def commits(out, MASK: tsjit.Constexpr):
    bar = tsjit.shared_array(tsjit.Int64, (1,))
    if tsjit.thread_idx().x == 0:
        tc.commit(bar.ptr, multicast_mask=MASK)
        tc.commit(bar.ptr, multicast_mask=tsjit.cluster_ctarank() + 1)


def test_commit_multicast_to_the_ctas_of_a_pair():
    ptx = ptx_of(commits, OUT_U32, MASK=0b11)
    assert ptx.count("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64") == 2


def test_commit_mask_must_fit_16_bits():
    err = compile_error(commits, OUT_U32, MASK=1 << 16)
    assert "multicast_mask" in err.message


@tsjit.kernel
def copies(out, SHAPE: tsjit.Constexpr, MULTICAST: tsjit.Constexpr):
    slot = tsjit.shared_array(tsjit.Uint32, (1,))
    src = tsjit.shared_array(tsjit.Uint8, (128, 128), align=1024)
    if tsjit.thread_idx().x == 0:
        tc.cp(slot[0], tc.make_smem_descriptor(src), shape=SHAPE, multicast=MULTICAST)


@pytest.mark.parametrize("shape,multicast", [("128x256b", None), ("4x256b", None), ("128x128b", None),
                                             ("64x128b", "warpx2::02_13"), ("64x128b", "warpx2::01_23"),
                                             ("32x128b", "warpx4")])
def test_cp_shapes_assemble(shape, multicast):
    ptx = ptx_of(copies, OUT_U32, SHAPE=shape, MULTICAST=multicast)
    suffix = f".{multicast}" if multicast else ""
    assert f"tcgen05.cp.cta_group::1.{shape}{suffix}" in ptx


def test_cp_shape_that_needs_multicast_is_refused_without_it():
    err = compile_error(copies, OUT_U32, SHAPE="32x128b", MULTICAST=None)
    assert "multicast" in err.message and "warpx4" in err.message


# -- ld / st -------------------------------------------------------------------------------------------------
@tsjit.kernel
def load_store(out, SHAPE: tsjit.Constexpr, NUM: tsjit.Constexpr):
    slot = tsjit.shared_array(tsjit.Uint32, (1,))
    tmem = slot[0]
    values = tc.ld(tmem, shape=SHAPE, num=NUM)
    tc.wait_ld()
    tc.st(tc.tmem_address(tmem, column=256), values, shape=SHAPE)
    tc.wait_st()
    out[tsjit.thread_idx().x] = values[len(values) - 1]


@pytest.mark.parametrize("shape,num", [("32x32b", 1), ("32x32b", 128), ("16x64b", 16), ("16x128b", 64),
                                       ("16x256b", 32), ("16x256b", 1)])
def test_ld_and_st_shapes_with_repetitions_assemble(shape, num):
    ptx = ptx_of(load_store, OUT_F32, SHAPE=shape, NUM=num)
    assert f"tcgen05.ld.sync.aligned.{shape}.x{num}.b32" in ptx
    assert f"tcgen05.st.sync.aligned.{shape}.x{num}.b32" in ptx
    assert "tcgen05.wait::ld.sync.aligned" in ptx and "tcgen05.wait::st.sync.aligned" in ptx


@pytest.mark.parametrize("shape,num", [("16x256b", 64), ("32x32b", 3), ("8x8b", 1)])
def test_ld_beyond_128_registers_or_unknown_shape_is_refused(shape, num):
    err = compile_error(load_store, OUT_F32, SHAPE=shape, NUM=num)
    assert ("num" in err.message or "shape" in err.message) and "tsjit.tcgen05.ld" in err.message


# -- the accumulator view ------------------------------------------------------------------------------------
@tsjit.kernel
def epilogue(out, COLUMNS: tsjit.Constexpr, ROWS: tsjit.Constexpr):
    slot = tsjit.shared_array(tsjit.Uint32, (1,))
    acc = tc.accumulator(slot[0], columns=COLUMNS, rows=ROWS)
    acc.store_global(out, 0, tsjit.block_idx().x * COLUMNS, chunk=32)


def test_accumulator_view_loads_32x32b_chunks_of_its_row():
    ptx = ptx_of(epilogue, OUT32, COLUMNS=96, ROWS=128)
    assert ptx.count("tcgen05.ld.sync.aligned.32x32b.x32.b32") == 3
    assert ptx.count("tcgen05.wait::ld.sync.aligned") == 3


def test_accumulator_view_refuses_the_m64_layout():
    err = compile_error(epilogue, OUT32, COLUMNS=64, ROWS=64)
    assert "rows" in err.message and "Layout F" in err.message


# -- descriptors (host arithmetic) ---------------------------------------------------------------------------
def test_instruction_descriptor_bits_match_table_42():
    shape = ud.check_shape("f16", 128, 256)
    idesc = ud.instruction_descriptor(shape, "bf16", "bf16", "f32")
    assert idesc == (1 << 4) | (1 << 7) | (1 << 10) | ((256 >> 3) << 17) | ((128 >> 4) << 24)
    fields = ud.decode_instruction_descriptor(idesc)
    assert (fields["m"], fields["n"], fields["a_type"], fields["d_type"]) == (128, 256, 1, 1)


def test_smem_descriptor_has_version_bit_46_and_sm100_swizzle_codes():
    bits = ud.smem_descriptor_bits(leading_byte_offset=16, stride_byte_offset=1024, swizzle="128B")
    assert bits == (2 << 61) | (1 << 46) | (64 << 32) | (1 << 16)
    decoded = ud.decode_smem_descriptor(bits | (0x1230 >> 4))
    assert decoded["swizzle"] == "128B" and decoded["address"] == 0x1230 and decoded["version"] == 1


def test_block_scaled_descriptor_puts_m_at_bits_27_28():
    shape = ud.check_shape("mxf4nvf4", 128, 256)
    idesc = ud.block_scaled_instruction_descriptor(shape, "e2m1", "e2m1", scale_type="ue4m3")
    assert (idesc >> 27) & 3 == 1 and (idesc >> 23) & 1 == 0 and (idesc >> 17) & 0x3F == 32


@tsjit.kernel
def descriptor_values(out):
    a = tsjit.shared_array(tsjit.BFloat16, (2, 128, 64), align=1024)
    d = tc.make_smem_descriptor(a[1])
    out[0] = tsjit.Uint32(d & 0xFFFFFFFF)
    out[1] = tsjit.Uint32(d >> 32)
    out[2] = tsjit.Uint32(d.k_step(3) & 0x3FFF)


def test_descriptor_of_a_tile_is_its_address_field_or_the_constant_bits():
    llir = build(descriptor_values, OUT_U32, target="sm_100a").llir
    upper = ud.smem_descriptor_bits(leading_byte_offset=16, stride_byte_offset=1024, swizzle="128B")
    assert re.search(rf"or i64 %\S+, {upper}\b", llir)
    assert re.search(r"add i64 %\S+, 6\b", llir)            # k_step(3): +96 bytes = +6 in the address field


@tsjit.kernel
def mixed_cta_groups(out):
    slot = tsjit.shared_array(tsjit.Uint32, (1,))
    bar = tsjit.shared_array(tsjit.Int64, (1,))
    if tsjit.warp_idx() == 0:
        tc.alloc(slot, 32, cta_group=2)
    tc.commit(bar.ptr, cta_group=1)


def test_one_cta_group_per_kernel():
    err = compile_error(mixed_cta_groups, OUT_U32)
    assert "cta_group=1" in err.message and "tsjit.tcgen05.alloc" in err.message and "cta_group=2" in err.message


# -- AccumulatorView.store_shared (TMEM -> stmatrix staging for a TMA store) --------------------------------
@tsjit.kernel
def stage_accumulator(out, COLUMNS: tsjit.Constexpr[int], ROWS_PER_BOX: tsjit.Constexpr[int],
                      DTYPE: tsjit.Constexpr[str], CHUNK: tsjit.Constexpr[int]):
    tile = tsjit.shared_array(tsjit.BFloat16, (COLUMNS // 64, ROWS_PER_BOX, 64), align=1024)
    view = tc.accumulator(tsjit.Uint32(0), columns=COLUMNS, dtype=getattr(tsjit, DTYPE))
    view.store_shared(tile, swizzle="128B", chunk=CHUNK)


def test_store_shared_loads_16x256b_and_stores_stmatrix():
    ptx = ptx_of(stage_accumulator, OUT_F32, COLUMNS=128, ROWS_PER_BOX=128, DTYPE="Float32", CHUNK=64)
    assert ptx.count("tcgen05.ld.sync.aligned.16x256b.x8.b32") == 4      # 2 slabs x 128 / 64 columns
    assert ptx.count("stmatrix.sync.aligned.m8n8.x4") == 16              # 2 slabs x 8 groups of 16 columns


@pytest.mark.parametrize("columns, rows, dtype, chunk, words", [
    (128, 64, "Float32", 32, "shape (2, 128, 64)"),          # the Hopper epilogue's 64-row boxes
    (128, 128, "Int32", 32, "Float32 accumulator"),
    (128, 128, "Float32", 8, "chunk must be 16, 32, 64 or 128"),
    (72, 128, "Float32", 32, "multiple of 16"),
])
def test_store_shared_names_what_is_wrong(columns, rows, dtype, chunk, words):
    err = compile_error(stage_accumulator, OUT_F32, COLUMNS=columns, ROWS_PER_BOX=rows, DTYPE=dtype, CHUNK=chunk)
    assert "tcgen05.accumulator.store_shared" in err.message and words in err.message
