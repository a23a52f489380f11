"""fp8 (e4m3 / e5m2) in tsjit.ops.matmul without a GPU: the program compiles for sm_90a with the
fp8 wgmma and no spills and verifies SAFE; the host side reads K-major fp8 operands in place
through 128-element TMA boxes, stages any other layout, maps scale_a / scale_b to the epilogue's
row / column scales (swapped under swap-AB), folds number scales into alpha, and names bad scale
arguments.  The numbers are checked on the GPU (tests/gpu/test_ops_matmul_gpu.py, test_fp8_*)."""
import re
import sys

import pytest

import tsjit
import tsjit.ops
from tsjit.lang.epilogue import FusedEpilogue
from tsjit.ops import configs
from tsjit.ops.gemm_program import compile_program
from tsjit.runtime.arrays import DeviceArray

from tests.ops.test_matmul_host import fake_gpu  # noqa: F401  (the fixture)

mm = sys.modules["tsjit.ops.matmul"]
E4M3, E5M2 = tsjit.Float8E4M3, tsjit.Float8E5M2
_ADDRESS = [1 << 44]


def _array(shape, dtype=E4M3, strides=None):
    """A device array at a fresh fake 16-byte aligned address (no memory behind it)."""
    _ADDRESS[0] += 1 << 30
    return DeviceArray(shape, dtype, strides=strides, data_ptr=_ADDRESS[0])


def _weight_t(n, k, dtype=E4M3):
    """``w.t()`` of a row-major (N, K) weight: a (K, N) view with K contiguous (what fp8 wants)."""
    return _array((k, n), dtype, strides=(1, k))


def _plan(a, b, scale_a=None, scale_b=None, **kw):
    return mm._call(a, b, kw.get("bias"), None, None, kw.get("alpha", 1.0), 0.0, kw.get("out"), kw.get("out_dtype"),
                    scale_a, scale_b, None, None, False, plan_only=True)


FP8_CONFIGS = [
    # (BM, BN, splits, epilogue, staged, x dtype, y dtype, out dtype, fused)
    (128, 256, 1, "tma", 128, E4M3, E4M3, tsjit.BFloat16, FusedEpilogue(scale_rows="tensor", scale_cols="tensor")),
    (128, 128, 1, "tma", 128, E5M2, E5M2, tsjit.BFloat16, FusedEpilogue(scale_rows="vector", scale_cols="vector",
                                                                        bias="col", activation="relu")),
    (64, 128, 4, "direct", 64, E4M3, E5M2, tsjit.Float32, FusedEpilogue(scale_rows="vector", scale_cols="tensor")),
    (64, 32, 2, "direct", 64, E4M3, E4M3, tsjit.BFloat16, FusedEpilogue(scale_rows="tensor", scale_cols="vector")),
]


@pytest.mark.parametrize("bm,bn,splits,epilogue,staged,x_dtype,y_dtype,out_dtype,fused", FP8_CONFIGS)
def test_fp8_config_compiles_without_spills_and_verifies_safe(monkeypatch, tmp_path, bm, bn, splits, epilogue, staged,
                                                              x_dtype, y_dtype, out_dtype, fused):
    from tests.ops.test_gemm_configs import assert_assemblers_keep_it_unspilled, record_verdicts
    verdicts = record_verdicts(monkeypatch)
    stages = configs.stages_for(bm, bn, epilogue, staged if epilogue == "tma" else 0, 1)
    cfg = configs.GemmConfig(bm, bn, stages, epilogue, staged, splits, block_k=128)
    k = compile_program(cfg, in_dtype=x_dtype, y_dtype=y_dtype, out_dtype=out_dtype, fused=fused)
    names = {E4M3: "e4m3", E5M2: "e5m2"}
    assert set(re.findall(r"wgmma\.mma_async\.sync\.aligned\.(m64n\d+k\d+\.f32\.\w+\.\w+)", k.ptx)) == {
        f"m64n{bn}k32.f32.{names[x_dtype]}.{names[y_dtype]}"}
    assert verdicts == ["SAFE"]
    assert_assemblers_keep_it_unspilled(k, tmp_path)


def test_an_mn_major_fp8_operand_is_a_compilation_error_naming_it():
    cfg = configs.GemmConfig(128, 128, 4, "tma", 128, 1, block_k=128)
    with pytest.raises(tsjit.CompilationError, match="Y is Float8E4M3 and MN-major"):
        compile_program(cfg, in_dtype=E4M3, y_major="MN")


def test_fp8_stages_hold_128_k_elements(fake_gpu):
    plan = _plan(_array((4096, 4096)), _weight_t(4096, 4096))
    assert plan.config.block_k == 128 and "x128 tile" in plan.config.describe()
    assert not plan.x_staged and not plan.y_staged and plan.problem.in_bytes == 1
    assert plan.out_dtype is tsjit.BFloat16                        # the default output of fp8 inputs
    tsjit.ops.matmul(_array((4096, 4096)), _weight_t(4096, 4096))
    (name, grid, block, params, stream), = fake_gpu
    assert name.startswith("gemm_program")


def test_fp8_operand_with_mn_contiguous_b_is_staged_k_major(fake_gpu):
    a, b = _array((256, 512)), _array((512, 384))                   # b (K, N) row-major: N contiguous
    plan = _plan(a, b)
    assert not plan.x_staged and plan.y_staged and "staging" in plan.explain()
    tsjit.ops.matmul(a, b, out=_array((256, 384), tsjit.BFloat16))
    assert [launch[0] for launch in fake_gpu][0] == "copy_matrix"


def test_e4m3_and_e5m2_may_mix_but_not_with_bf16(fake_gpu):
    assert _plan(_array((256, 512)), _weight_t(384, 512, E5M2)).problem.in_bytes == 1
    with pytest.raises(tsjit.LaunchError, match="'b'"):
        _plan(_array((256, 512)), _weight_t(384, 512, tsjit.BFloat16))


def test_scales_reach_the_epilogue_as_row_and_column_scales(fake_gpu):
    M, N, K = 512, 1024, 256
    a, b = _array((M, K)), _weight_t(N, K)
    plan = _plan(a, b, _array((1,), tsjit.Float32), _array((1, N), tsjit.Float32))
    assert not plan.swapped and (plan.fused.scale_rows, plan.fused.scale_cols) == ("tensor", "vector")
    plan = _plan(a, b, _array((M, 1), tsjit.Float32), _array((), tsjit.Float32))
    assert (plan.fused.scale_rows, plan.fused.scale_cols) == ("vector", "tensor")
    assert "scale_x[row]*scale_y*acc" in plan.explain()


def test_swap_ab_swaps_the_scales(fake_gpu):
    M, N, K = 16, 4096, 1024
    plan = _plan(_array((M, K)), _weight_t(N, K), _array((M, 1), tsjit.Float32), _array((1,), tsjit.Float32))
    assert plan.swapped and (plan.fused.scale_rows, plan.fused.scale_cols) == ("tensor", "vector")


def test_number_scales_fold_into_alpha(fake_gpu):
    plan = _plan(_array((256, 512)), _weight_t(384, 512), 0.5, 4.0)
    assert plan.fused.alpha and plan.fused.scale_rows == "none" and plan.fused.scale_cols == "none"
    assert not _plan(_array((256, 512)), _weight_t(384, 512), 0.5, 2.0).fused.alpha     # 0.5 * 2 = 1


@pytest.mark.parametrize("scale_a,scale_b,name", [
    (((256,), tsjit.Float32), None, None),                          # (M,) is per row: fine
    (((255,), tsjit.Float32), None, "'scale_a'"),
    (None, ((384, 1), tsjit.Float32), "'scale_b'"),                 # a column vector is not per column of b
    (None, ((1,), tsjit.BFloat16), "'scale_b'"),
])
def test_bad_scales_are_named(fake_gpu, scale_a, scale_b, name):
    sa = None if scale_a is None else _array(*scale_a)
    sb = None if scale_b is None else _array(*scale_b)
    if name is None:
        _plan(_array((256, 512)), _weight_t(384, 512), sa, sb)
        return
    with pytest.raises(tsjit.LaunchError, match=name):
        _plan(_array((256, 512)), _weight_t(384, 512), sa, sb)


def test_tensor_scales_with_bf16_inputs_are_refused(fake_gpu):
    with pytest.raises(tsjit.LaunchError, match="'scale_a'"):
        _plan(_array((256, 512), tsjit.BFloat16), _array((512, 384), tsjit.BFloat16), _array((1,), tsjit.Float32))
