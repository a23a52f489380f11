"""tsjit.wgmma: matrix descriptors (bit fields against shared/reference/wgmma_sw128.md), the inline-PTX
mma_async for every operand type, fence/commit/wait, operand validation, and the plain GEMM example
assembling for sm_90a without spills."""
import re

import numpy as np
import pytest

import tsjit
from tsjit import BFloat16, Float16, Float32
from tsjit.backend import assemble
from tsjit.backend.targets import get_target
from tsjit.examples import gemm_plain
from tsjit.lang import wgmma

from .compiling import build, kernel_ir, ptx_ops

OUT64 = np.zeros(16, np.uint64)
OUT32 = np.zeros(1 << 15, np.float32)
SW128_K_MAJOR = 0x4000004000010000   # wgmma_sw128.md §4: (1 << 62) | (64 << 32) | (1 << 16)


# -- descriptor bit fields ---------------------------------------------------------------------
def test_k_major_128b_constant_bits_match_the_verified_descriptor():
    bits = wgmma.descriptor_constant_bits(leading_byte_offset=16, stride_byte_offset=1024, swizzle="128B")
    assert bits == SW128_K_MAJOR


@pytest.mark.parametrize("swizzle,mode", [("none", 0), ("128B", 1), ("64B", 2), ("32B", 3)])
def test_swizzle_mode_is_bits_62_and_63(swizzle, mode):
    bits = wgmma.descriptor_constant_bits(leading_byte_offset=128, stride_byte_offset=256, swizzle=swizzle)
    assert bits >> 62 == mode
    assert (bits >> 16) & 0x3FFF == 128 >> 4 and (bits >> 32) & 0x3FFF == 256 >> 4


def test_base_offset_is_bits_49_to_51():
    bits = wgmma.descriptor_constant_bits(leading_byte_offset=16, stride_byte_offset=1024, swizzle="128B",
                                          base_offset=5)
    assert (bits >> 49) & 7 == 5


@pytest.mark.parametrize("field", ["leading_byte_offset", "stride_byte_offset"])
@pytest.mark.parametrize("value", [8, 1 << 18])
def test_offsets_must_be_16_byte_multiples_that_fit_14_bits(field, value):
    args = {"leading_byte_offset": 16, "stride_byte_offset": 1024, field: value}
    with pytest.raises(tsjit.CompilationError, match=field):
        wgmma.descriptor_constant_bits(swizzle="128B", **args)


@tsjit.kernel
def descriptors(out):
    a = tsjit.shared_array(tsjit.BFloat16, (2, 64, 64), align=1024)
    b = tsjit.shared_array(tsjit.BFloat16, (4, 64, 64), align=1024)     # (n-box, k, n): N-major B
    da = tsjit.wgmma.make_descriptor(a[1], major="K", swizzle="128B")
    db = tsjit.wgmma.make_descriptor(b, major="MN", swizzle="128B")
    out[0] = da
    out[1] = da.k_step(1)
    out[2] = da.k_step(3)
    out[3] = db
    out[4] = db.k_step(1)


def test_descriptor_is_address_field_or_constant_bits():
    body = kernel_ir(build(descriptors, OUT64).llir)
    assert re.search(r"ptrtoint ptr addrspace\(3\) %\S+ to i64", body)
    assert re.search(r"lshr i64 %\S+, 4\b", body)
    assert re.search(r"and i64 %\S+, 16383\b", body)
    assert re.search(rf"or i64 %\S+, {SW128_K_MAJOR}\b", body)


def test_n_major_descriptor_defaults_lbo_to_the_box_stride_and_sbo_to_1024():
    body = kernel_ir(build(descriptors, OUT64).llir)
    expected = (1 << 62) | ((1024 >> 4) << 32) | ((64 * 64 * 2 >> 4) << 16)     # LBO = one 64x64 box
    assert re.search(rf"or i64 %\S+, {expected}\b", body)


def test_k_steps_advance_32_bytes_k_major_and_2048_bytes_n_major():
    body = kernel_ir(build(descriptors, OUT64).llir)
    adds = re.findall(r"add i64 %\S+, (\d+)\b", body)
    assert {"2", "6", str(2048 >> 4)} <= set(adds)      # k=1 and k=3 K-major (+2 per 32 B), k=1 N-major


@tsjit.kernel
def misaligned_tile(out):
    a = tsjit.shared_array(tsjit.BFloat16, (64, 64), align=128)
    out[0] = tsjit.wgmma.make_descriptor(a)


def test_128b_descriptor_of_a_tile_not_1024_aligned_is_refused():
    with pytest.raises(tsjit.CompilationError, match=r"1024-byte boundary"):
        build(misaligned_tile, OUT64)


@tsjit.kernel
def wide_rows(out):
    a = tsjit.shared_array(tsjit.BFloat16, (64, 128), align=1024)
    out[0] = tsjit.wgmma.make_descriptor(a, swizzle="128B")


def test_swizzled_tile_rows_must_be_one_swizzle_span():
    with pytest.raises(tsjit.CompilationError, match=r"rows of exactly 128 bytes"):
        build(wide_rows, OUT64)


@tsjit.kernel
def unswizzled_without_offsets(out):
    a = tsjit.shared_array(tsjit.BFloat16, (64, 8), align=1024)
    out[0] = tsjit.wgmma.make_descriptor(a, swizzle="none")


def test_unswizzled_descriptor_needs_explicit_offsets():
    with pytest.raises(tsjit.CompilationError, match=r"leading_byte_offset= and stride_byte_offset="):
        build(unswizzled_without_offsets, OUT64)


# -- mma_async ---------------------------------------------------------------------------------
@tsjit.kernel
def mainloop(out, K, N: tsjit.Constexpr[int], B_MAJOR: tsjit.Constexpr[str]):
    a = tsjit.shared_array(tsjit.BFloat16, (2, 64, 64), align=1024)
    if tsjit.const_expr(B_MAJOR == "K"):
        b = tsjit.shared_array(tsjit.BFloat16, (2, N, 64), align=1024)
    else:
        b = tsjit.shared_array(tsjit.BFloat16, (2, N // 64, 64, 64), align=1024)
    acc = tsjit.Fragment.zeros(N // 2)
    for kt in range(K):
        s = kt % 2
        da = tsjit.wgmma.make_descriptor(a[s])
        db = tsjit.wgmma.make_descriptor(b[s], major=B_MAJOR)
        tsjit.wgmma.fence()
        for k in tsjit.range_constexpr(4):
            acc = tsjit.wgmma.mma_async(acc, da.k_step(k), db.k_step(k), n=N, scale_d=kt > 0 or k > 0)
        tsjit.wgmma.commit_group()
        tsjit.wgmma.wait_group(0)
    acc = tsjit.wgmma.fence_operand(acc)
    for i in tsjit.range_constexpr(N // 2):
        row, col = acc.accumulator_coords(i)
        out[row * N + col] = acc[i]


def test_mainloop_ptx_has_the_m64n256k16_bf16_instruction_and_the_group_ops():
    compiled = build(mainloop, OUT32, np.int32(4), 256, "K")
    assert ptx_ops(compiled.ptx, "wgmma.mma_async") == ["wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16"] * 4
    assert ptx_ops(compiled.ptx, "wgmma.fence") == ["wgmma.fence.sync.aligned"]
    assert ptx_ops(compiled.ptx, "wgmma.commit_group") == ["wgmma.commit_group.sync.aligned"]
    assert re.search(r"wgmma\.wait_group\.sync\.aligned\s+0;", compiled.ptx)


def test_mainloop_keeps_128_accumulators_in_registers():
    compiled = build(mainloop, OUT32, np.int32(4), 256, "K")
    assert compiled.metadata["spill_stores_bytes"] == 0 and compiled.metadata["stack_frame_bytes"] == 0
    assert "alloca" not in kernel_ir(compiled.llir)
    assert compiled.metadata["registers"] <= 168


def test_k_major_operands_use_transpose_immediates_0_0_and_n_major_b_uses_1():
    k_major = build(mainloop, OUT32, np.int32(4), 64, "K").ptx
    n_major = build(mainloop, OUT32, np.int32(4), 64, "MN").ptx
    assert re.search(r"m64n64k16\.f32\.bf16\.bf16 \{[^}]*\}, %rd\d+, %rd\d+, p, 1, 1, 0, 0;", k_major)
    assert re.search(r"m64n64k16\.f32\.bf16\.bf16 \{[^}]*\}, %rd\d+, %rd\d+, p, 1, 1, 0, 1;", n_major)


def test_scale_d_from_a_run_time_condition_is_a_predicate():
    compiled = build(mainloop, OUT32, np.int32(4), 64, "K")
    assert re.search(r"setp\.ne\.b32 p, %r\d+, 0;", compiled.ptx)


@pytest.mark.parametrize("n", [8, 24, 136, 256])
def test_every_legal_n_has_n_over_2_tied_accumulators(n):
    compiled = build(mainloop, OUT32, np.int32(2), n, "K")
    lines = re.findall(r"wgmma\.mma_async[^;]*;", compiled.ptx)
    assert len(lines) == 4
    for line in lines:
        assert line.startswith(f"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.bf16.bf16 ")
        outputs = re.search(r"\{([^}]*)\}", line).group(1).split(",")
        assert len(outputs) == n // 2


@tsjit.kernel
def other_types(out, KIND: tsjit.Constexpr[str]):
    acc = tsjit.Fragment.zeros(64)
    tsjit.wgmma.fence()
    if tsjit.const_expr(KIND == "tf32"):
        a = tsjit.shared_array(tsjit.Float32, (64, 32), align=1024)
        b = tsjit.shared_array(tsjit.Float32, (128, 32), align=1024)
        acc = tsjit.wgmma.mma_async(acc, tsjit.wgmma.make_descriptor(a), tsjit.wgmma.make_descriptor(b))
    elif tsjit.const_expr(KIND == "fp8"):
        a = tsjit.shared_array(tsjit.Float8E4M3, (64, 128), align=1024)
        b = tsjit.shared_array(tsjit.Float8E5M2, (128, 128), align=1024)
        acc = tsjit.wgmma.mma_async(acc, tsjit.wgmma.make_descriptor(a), tsjit.wgmma.make_descriptor(b),
                                    scale_a=-1)
    elif tsjit.const_expr(KIND == "f16"):
        a = tsjit.shared_array(tsjit.Float16, (64, 64), align=1024)
        b = tsjit.shared_array(tsjit.Float16, (128, 64), align=1024)
        acc = tsjit.wgmma.mma_async(acc, tsjit.wgmma.make_descriptor(a), tsjit.wgmma.make_descriptor(b), scale_d=0)
    else:   # A from registers: four packed BFloat16 pairs per thread
        b = tsjit.shared_array(tsjit.BFloat16, (128, 64), align=1024)
        regs = tsjit.Fragment([tsjit.thread_idx().x + r for r in tsjit.range_constexpr(4)])
        acc = tsjit.wgmma.mma_async(acc, regs, tsjit.wgmma.make_descriptor(b), a_dtype=tsjit.BFloat16)
    tsjit.wgmma.commit_group()
    tsjit.wgmma.wait_group(0)
    acc = tsjit.wgmma.fence_operand(acc)
    out[tsjit.thread_idx().x] = acc[0]


@pytest.mark.parametrize("kind,instruction,operands", [
    ("tf32", "m64n128k8.f32.tf32.tf32", r"%rd\d+, %rd\d+, p, 1, 1;"),
    ("fp8", "m64n128k32.f32.e4m3.e5m2", r"%rd\d+, %rd\d+, p, -1, 1;"),
    ("f16", "m64n128k16.f32.f16.f16", r"%rd\d+, %rd\d+, p, 1, 1, 0, 0;"),
    ("regs", "m64n128k16.f32.bf16.bf16", r"\{%r\d+, %r\d+, %r\d+, %r\d+\}, %rd\d+, p, 1, 1, 0;"),
])
def test_operand_types_pick_their_instruction_and_immediates(kind, instruction, operands):
    compiled = build(other_types, OUT32, kind)
    line = re.search(r"wgmma\.mma_async[^;]*;", compiled.ptx).group(0)
    assert line.startswith(f"wgmma.mma_async.sync.aligned.{instruction} ")
    assert re.search(r"\}, " + operands, line), line


# -- validation --------------------------------------------------------------------------------
@tsjit.kernel
def one_mma(out, N: tsjit.Constexpr[int], ACC: tsjit.Constexpr[int], A_DTYPE: tsjit.Constexpr[object],
            B_DTYPE: tsjit.Constexpr[object], A_TILE: tsjit.Constexpr[object], B_TILE: tsjit.Constexpr[object],
            B_MAJOR: tsjit.Constexpr[str], ACC_DTYPE: tsjit.Constexpr[object], WAIT: tsjit.Constexpr[int]):
    a = tsjit.shared_array(A_TILE, (64, 128 // A_TILE.itemsize), align=1024)
    b = tsjit.shared_array(B_TILE, (256, 128 // B_TILE.itemsize), align=1024)
    acc = tsjit.Fragment.zeros(ACC, ACC_DTYPE)
    tsjit.wgmma.fence()
    acc = tsjit.wgmma.mma_async(acc, tsjit.wgmma.make_descriptor(a),
                                tsjit.wgmma.make_descriptor(b, major=B_MAJOR, leading_byte_offset=8192),
                                n=N, a_dtype=A_DTYPE, b_dtype=B_DTYPE)
    tsjit.wgmma.commit_group()
    tsjit.wgmma.wait_group(WAIT)
    out[0] = acc[0]


GOOD = dict(N=64, ACC=32, A_DTYPE=None, B_DTYPE=None, A_TILE=BFloat16, B_TILE=BFloat16, B_MAJOR="K", ACC_DTYPE=Float32, WAIT=0)


def compile_one_mma(target="sm_90a", **changes):
    args = dict(GOOD, **changes)
    return build(one_mma, OUT32, *args.values(), target=target)


def test_the_validation_kernel_itself_compiles():
    assert ptx_ops(compile_one_mma().ptx, "wgmma.mma_async") == ["wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16"]


@pytest.mark.parametrize("n", [0, 12, 264, 512])
def test_illegal_n_is_a_compilation_error(n):
    with pytest.raises(tsjit.CompilationError, match=r"N must be a multiple of 8 from 8 to 256"):
        compile_one_mma(N=n, ACC=max(n // 2, 1))


def test_fragment_size_must_be_n_over_2():
    with pytest.raises(tsjit.CompilationError, match=r"m64n64 Float32 accumulator has 32 registers per thread, "
                                                     r"but acc has 64"):
        compile_one_mma(ACC=64)


def test_operand_dtype_must_match_the_descriptor_tile():
    with pytest.raises(tsjit.CompilationError, match=r"a_dtype is f16 but the A descriptor was made from a BFloat16"):
        compile_one_mma(A_DTYPE=Float16)


def test_bf16_times_f16_has_no_instruction():
    with pytest.raises(tsjit.CompilationError, match=r"no wgmma multiplies bf16 by f16"):
        compile_one_mma(B_TILE=Float16)


def test_tf32_operands_cannot_be_transposed():
    with pytest.raises(tsjit.CompilationError, match=r"tf32 operands must be K-major"):
        compile_one_mma(A_TILE=Float32, B_TILE=Float32, B_MAJOR="MN")


def test_accumulators_must_be_float32():
    with pytest.raises(tsjit.CompilationError, match=r"acc holds Int32; Float32 accumulators"):
        compile_one_mma(ACC_DTYPE=tsjit.Int32)


def test_wait_group_count_is_0_to_7():
    with pytest.raises(tsjit.CompilationError, match=r"wait_group needs a compile-time count in 0..7"):
        compile_one_mma(WAIT=8)


@pytest.mark.parametrize("target", ["sm_100a", "sm_90"])
def test_wgmma_on_a_target_without_it_is_a_compilation_error_not_an_abort(target):
    with pytest.raises(tsjit.CompilationError, match=rf"needs sm_90a .* compiled for {target}"):
        compile_one_mma(target=target)


# -- the plain GEMM example --------------------------------------------------------------------
GEMM_VARIANTS = [dict(), dict(epilogue="direct"), dict(b_layout="KN"), dict(b_layout="KN", epilogue="direct"),
                 dict(BM=64), dict(BM=64, BN=128, stages=2)]


@pytest.mark.parametrize("variant", GEMM_VARIANTS, ids=lambda v: "-".join(f"{k}={x}" for k, x in v.items()) or "default")
def test_gemm_plain_assembles_for_sm_90a_without_spills(variant):
    compiled = gemm_plain.compile_gemm_plain(**variant)
    meta = compiled.metadata
    assert meta["spill_stores_bytes"] == 0 and meta["spill_loads_bytes"] == 0 and meta["stack_frame_bytes"] == 0
    assert meta["smem_bytes"] <= gemm_plain.SMEM_LIMIT
    assert "wgmma.mma_async.sync.aligned.m64n" in compiled.ptx
    assert "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes" in compiled.ptx
    if variant.get("epilogue", "tma") == "tma":
        assert "stmatrix.sync.aligned.m8n8.x4.shared.b16" in compiled.ptx
        assert "cp.async.bulk.tensor.2d.global.shared::cta" in compiled.ptx


@pytest.mark.parametrize("variant", [dict(), dict(epilogue="direct")], ids=["tma", "direct"])
def test_gemm_plain_wgmma_pipeline_is_not_serialized(variant):
    compiled = gemm_plain.compile_gemm_plain(**variant)
    assembled = assemble.assemble(compiled.ptx, get_target("sm_90a"), kernel_name=compiled.name)
    assert "serialized" not in assembled.info_log


def test_gemm_plain_for_sm_100a_is_a_compilation_error():
    with pytest.raises(tsjit.CompilationError, match=r"needs sm_90a"):
        gemm_plain.compile_gemm_plain(target="sm_100a")
