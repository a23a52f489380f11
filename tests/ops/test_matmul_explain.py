"""tsjit.ops.matmul.explain without a GPU: specs, numpy arrays and shape tuples plan like GPU
arrays of the same shapes, strides and dtypes, for DEFAULT_SMS (132, an H200) unless told."""
import re
import sys

import numpy as np
import pytest

import tsjit
import tsjit.ops
from tsjit.runtime import driver

mm = sys.modules["tsjit.ops.matmul"]


@pytest.fixture
def no_gpu(monkeypatch):
    monkeypatch.setattr(driver, "gpu_available", lambda: False)
    monkeypatch.setattr(driver, "device_properties", lambda: pytest.fail("explain must not query a device"))


def test_explain_takes_specs_and_says_it_assumed_132_sms(no_gpu, capsys):
    before = len(mm._PLANS)
    text = tsjit.ops.matmul.explain(tsjit.spec((256, 512), tsjit.BFloat16), tsjit.spec((512, 1024), tsjit.BFloat16))
    assert capsys.readouterr().out == "", "explain returns its text (print() it); it prints only with verbose=True"
    assert tsjit.ops.matmul.explain(tsjit.spec((256, 512), tsjit.BFloat16), tsjit.spec((512, 1024), tsjit.BFloat16),
                                    verbose=True) == text
    assert capsys.readouterr().out.strip() == text
    assert text.startswith("problem: D (256 x 1024) = X (256 x 512) @ Y (512 x 1024), batch 1; X K-major, Y MN-major")
    assert "on 132 SMs" in text and "sms: 132 assumed (no GPU here: tsjit.ops.matmul.DEFAULT_SMS" in text
    assert mm.DEFAULT_SMS == 132
    assert len(mm._PLANS) == before, "an explain plan must not be cached for real calls on another device"


def test_explain_of_numpy_arrays_and_of_shapes_match_the_spec_plan(no_gpu):
    spec = tsjit.ops.matmul.explain(tsjit.spec((32, 512), tsjit.Float16), tsjit.spec((512, 1024), tsjit.Float16),
                                    verbose=False)
    host = tsjit.ops.matmul.explain(np.zeros((32, 512), np.float16), np.zeros((512, 1024), np.float16), verbose=False)
    shapes = tsjit.ops.matmul.explain((32, 512), (512, 1024), dtype=tsjit.Float16, verbose=False)
    assert spec == host == shapes
    assert "roles: swapped" in spec


def test_explain_sees_strides_and_alignment_of_what_it_is_given(no_gpu):
    transposed = np.zeros((1024, 512), np.float16).T          # (512, 1024), K contiguous: K-major Y
    text = tsjit.ops.matmul.explain(np.zeros((256, 512), np.float16), transposed, verbose=False)
    assert "Y K-major" in text
    unaligned = tsjit.spec((256, 512), tsjit.BFloat16, align=2)
    staged = tsjit.ops.matmul.explain(unaligned, tsjit.spec((512, 1024), tsjit.BFloat16), verbose=False)
    assert "staging: X cannot be read in place (no unit stride, or its base or row stride is not a multiple of 16 " \
           "bytes)" in staged


def test_explain_says_why_an_fp8_operand_with_n_contiguous_is_staged(no_gpu):
    """A row-major fp8 b was explained as 'no unit stride, or rows / base not 16-byte aligned': neither was true."""
    a = tsjit.spec((256, 512), tsjit.Float8E4M3)
    text = tsjit.ops.matmul.explain(a, tsjit.spec((512, 128), tsjit.Float8E4M3))
    assert "staging: Y cannot be read in place (fp8: wgmma reads fp8 operands K-major only" in text, text
    assert "staging" not in tsjit.ops.matmul.explain(a, tsjit.spec((512, 128), tsjit.Float8E4M3, strides=(1, 512)))


def test_explain_plans_for_the_sms_given(no_gpu):
    small = tsjit.ops.matmul.explain((4096, 4096), (4096, 4096), dtype=tsjit.BFloat16, sms=16, verbose=False)
    assert "on 16 SMs" in small and "sms: 16 (given)" in small and "assumed" not in small


def test_explain_argument_errors_name_the_argument(no_gpu):
    with pytest.raises(tsjit.LaunchError, match="argument 'a' is the shape \\(256, 512\\); pass its dtype"):
        tsjit.ops.matmul.explain((256, 512), (512, 1024), verbose=False)
    with pytest.raises(tsjit.LaunchError, match="argument 'b' has shape \\(256, 1024\\); expected \\(512, N\\)"):
        tsjit.ops.matmul.explain((256, 512), (256, 1024), dtype=tsjit.BFloat16, verbose=False)
    with pytest.raises(tsjit.LaunchError, match="argument 'a' has dtype Float32"):
        tsjit.ops.matmul.explain(np.zeros((64, 64), np.float32), np.zeros((64, 64), np.float32), verbose=False)


def test_matmul_itself_still_needs_gpu_arrays():
    with pytest.raises(tsjit.LaunchError, match="argument 'a' must be a GPU array") as info:
        tsjit.ops.matmul(np.zeros((64, 64), np.float16), np.zeros((64, 64), np.float16))
    assert "tsjit.to_device(x)" in str(info.value)   # the fix, also under the interpreter


class CpuTorchTensor:
    """Enough of a CPU torch tensor for tsjit's argument adapter (duck-typed; CI has no torch)."""

    is_cuda = False

    def __init__(self, shape, dtype="torch.bfloat16", strides=None):
        self.shape, self.dtype = tuple(shape), dtype
        self._strides = strides or ((shape[1], 1) if len(shape) == 2 else (shape[1] * shape[2], shape[2], 1))

    def stride(self):
        return self._strides

    def data_ptr(self):
        return 1 << 20


def test_explain_takes_cpu_torch_tensors_as_their_specs(no_gpu):
    """explain needs shapes only: a CPU tensor (bf16, or fp8 with K-major b) plans as a spec of its layout."""
    spec = tsjit.ops.matmul.explain(tsjit.spec((256, 512), tsjit.BFloat16),
                                    tsjit.spec((512, 1024), tsjit.BFloat16, strides=(1, 512)))
    tensor = tsjit.ops.matmul.explain(CpuTorchTensor((256, 512)), CpuTorchTensor((512, 1024), strides=(1, 512)))
    assert tensor == spec and "Y K-major" in tensor
    fp8 = tsjit.ops.matmul.explain(CpuTorchTensor((256, 512), "torch.float8_e4m3fn"),
                                   CpuTorchTensor((512, 1024), "torch.float8_e4m3fn", strides=(1, 512)))
    assert fp8.startswith("problem: D (256 x 1024)")
    with pytest.raises(tsjit.LaunchError, match="explain: argument 'b' has dtype torch.int32; expected torch.bfloat16"):
        tsjit.ops.matmul.explain(CpuTorchTensor((256, 512)), CpuTorchTensor((512, 1024), "torch.int32"))


def test_matmul_of_a_cpu_torch_tensor_points_at_explain_or_the_interpreter(monkeypatch):
    a, b = CpuTorchTensor((64, 64)), CpuTorchTensor((64, 64))
    monkeypatch.delenv("TSJIT_INTERPRET", raising=False)
    with pytest.raises(tsjit.LaunchError, match=r"'a' is a CPU tensor; pass it on the GPU \(x.cuda\(\)\); "
                                                r"tsjit.ops.matmul.explain takes CPU tensors"):
        tsjit.ops.matmul(a, b)
    monkeypatch.setenv("TSJIT_INTERPRET", "1")
    with pytest.raises(tsjit.LaunchError, match=r"under TSJIT_INTERPRET=1 copy it with tsjit.to_device\(x\)"):
        tsjit.ops.matmul(a, b)


def test_bmm_errors_name_bmm(no_gpu):
    with pytest.raises(tsjit.LaunchError, match=r"^tsjit.ops.bmm: argument 'a' must have rank 3; got shape \(64, 32\)"):
        tsjit.ops.matmul.explain(np.zeros((64, 32), np.float16), np.zeros((32, 16), np.float16), batched=True)
    with pytest.raises(tsjit.LaunchError, match=r"^tsjit.ops.bmm: argument 'a' must be a GPU array"):
        tsjit.ops.bmm(np.zeros((2, 64, 32), np.float16), np.zeros((2, 32, 16), np.float16))


def test_an_out_of_an_unwritable_dtype_is_named_as_out(no_gpu):
    with pytest.raises(tsjit.LaunchError, match=r"argument 'out' has dtype Int32; the output can be BFloat16"):
        tsjit.ops.matmul.explain(np.zeros((64, 32), np.float16), np.zeros((32, 16), np.float16),
                                 out=np.zeros((64, 16), np.int32))
    with pytest.raises(tsjit.LaunchError, match=r"argument 'out_dtype' is Int32; the output can be BFloat16"):
        tsjit.ops.matmul.explain(np.zeros((64, 32), np.float16), np.zeros((32, 16), np.float16),
                                 out_dtype=tsjit.Int32)


def test_a_misspelled_keyword_is_refused_not_planned_without_it(no_gpu):
    a, b = np.zeros((64, 32), np.float16), np.zeros((32, 16), np.float16)
    with pytest.raises(tsjit.LaunchError, match=r"unexpected keyword argument 'activaton'.*Did you mean 'activation'"):
        tsjit.ops.matmul.explain(a, b, activaton="relu")
    assert tsjit.ops.matmul.explain(a, b, stream=None, activation="relu", verbose=False).startswith("problem:")


def test_bmm_has_its_own_explain(no_gpu):
    a, b = np.zeros((2, 64, 32), np.float16), np.zeros((2, 32, 16), np.float16)
    assert tsjit.ops.bmm.explain(a, b) == tsjit.ops.matmul.explain(a, b, batched=True)
    assert "batch 2" in tsjit.ops.bmm.explain(a, b)


def test_bmm_of_a_cpu_torch_tensor_points_at_bmm_explain(monkeypatch):
    monkeypatch.delenv("TSJIT_INTERPRET", raising=False)
    a, b = CpuTorchTensor((2, 64, 64)), CpuTorchTensor((2, 64, 64))
    with pytest.raises(tsjit.LaunchError, match=r"^tsjit.ops.bmm: argument 'a' is a CPU tensor; .*; "
                                                r"tsjit.ops.bmm.explain takes CPU tensors"):
        tsjit.ops.bmm(a, b)


@pytest.mark.parametrize("name, value", [("alpha", "2"), ("alpha", [2.0]), ("beta", True), ("alpha", None)])
def test_a_coefficient_that_is_not_a_number_is_named(no_gpu, name, value):
    """alpha="2" was a TypeError "can't multiply sequence by non-int of type 'float'" naming nothing."""
    a, b = np.zeros((64, 32), np.float16), np.zeros((32, 16), np.float16)
    with pytest.raises(tsjit.LaunchError, match=rf"^tsjit.ops.matmul: argument '{name}' must be a real number"):
        tsjit.ops.matmul.explain(a, b, out=np.zeros((64, 16), np.float16), **{name: value})
    assert tsjit.ops.matmul.explain(a, b, alpha=np.float32(0.5), beta=2, out=np.zeros((64, 16), np.float16),
                                    verbose=False).startswith("problem:")


@pytest.mark.parametrize("shape", [(3,), (1, 3), (64, 2)])
def test_a_scale_of_a_wrong_shape_is_reported_as_passed(no_gpu, shape):
    """A (3,) scale_a was reported as 'has shape (1, 3)' (its rank-3 padding)."""
    a = tsjit.spec((64, 128), tsjit.Float8E4M3)
    b = tsjit.spec((128, 32), tsjit.Float8E4M3, strides=(1, 128))
    with pytest.raises(tsjit.LaunchError, match=rf"argument 'scale_a' has shape {re.escape(str(shape))}; "
                                                r"expected one element \(per-tensor scale\), \(64,\) or \(64, 1\)"):
        tsjit.ops.matmul.explain(a, b, scale_a=tsjit.spec(shape, tsjit.Float32))


@pytest.mark.parametrize("sms", [0, -4, 1.5, "8", True])
def test_explain_names_an_sm_count_that_is_not_a_positive_int(no_gpu, sms):
    """sms=0 was a ZeroDivisionError, sms=-4 planned silently, sms='8' a TypeError."""
    with pytest.raises(tsjit.LaunchError, match=rf"^tsjit.ops.matmul.explain: argument 'sms' must be an int >= 1"):
        tsjit.ops.matmul.explain((256, 512), (512, 128), dtype=tsjit.BFloat16, sms=sms)


def test_explain_of_shapes_takes_torch_and_numpy_dtypes_and_names_a_bad_one(no_gpu):
    """dtype=torch.bfloat16 was a TsjitError listing tsjit's dtypes only (and torch's fp8 ones were unknown)."""
    class TorchDtype:                         # what explain reads of a torch dtype (CI has no torch): its name
        def __init__(self, name):
            self.name = name

        def __str__(self):
            return f"torch.{self.name}"

    plan = tsjit.ops.matmul.explain((256, 512), (512, 128), dtype=tsjit.BFloat16)
    assert tsjit.ops.matmul.explain((256, 512), (512, 128), dtype=TorchDtype("bfloat16")) == plan
    assert tsjit.ops.matmul.explain((256, 512), (512, 128), dtype="bfloat16") == plan
    assert tsjit.ops.matmul.explain((256, 512), (512, 128), dtype=np.float16) == \
        tsjit.ops.matmul.explain((256, 512), (512, 128), dtype=tsjit.Float16)
    fp8 = tsjit.ops.matmul.explain((256, 512), (512, 128), dtype=TorchDtype("float8_e4m3fn"))
    assert "(fp8 inputs)" in fp8, fp8
    with pytest.raises(tsjit.LaunchError, match=r"^tsjit.ops.bmm.explain: argument 'dtype' is 'nonsense', which "
                                                r"names no dtype"):
        tsjit.ops.bmm.explain((2, 64, 64), (2, 64, 64), dtype="nonsense")


def test_bmm_shape_errors_of_bias_out_and_residual_name_bmm(no_gpu):
    a = b = np.zeros((2, 64, 64), np.float16)
    for keyword, value in (("bias", np.zeros((2, 64), np.float16)), ("out", np.zeros((2, 64, 32), np.float16)),
                           ("residual", np.zeros((2, 64, 64), np.int32))):
        with pytest.raises(tsjit.LaunchError, match=rf"^tsjit.ops.bmm: argument '{keyword}' has "):
            tsjit.ops.bmm.explain(a, b, **{keyword: value})


@pytest.mark.parametrize("strides", [(0, 1), (128, 0), (1, 1), (64, 1)])
def test_an_out_whose_elements_share_memory_is_refused(no_gpu, strides):
    """An expand()ed or overlapping out (strides (128, 0), (1, 1)) was planned with the direct epilogue: stores of
    different elements to one address, a silently wrong product."""
    a, b = tsjit.spec((256, 512), tsjit.BFloat16), tsjit.spec((512, 128), tsjit.BFloat16)
    with pytest.raises(tsjit.LaunchError, match=rf"^tsjit.ops.matmul: argument 'out' has strides "
                                                rf"{re.escape(str(strides))} for shape \(256, 128\): several of its "
                                                rf"elements share memory"):
        tsjit.ops.matmul.explain(a, b, out=tsjit.spec((256, 128), tsjit.BFloat16, strides=strides))
    for fine in ((128, 1), (1, 256), (256, 2)):          # row-major, transposed, every other column of a buffer
        tsjit.ops.matmul.explain(a, b, out=tsjit.spec((256, 128), tsjit.BFloat16, strides=fine))
    with pytest.raises(tsjit.LaunchError, match=r"^tsjit.ops.bmm: argument 'out' has strides \(0, 64, 1\) for "
                                                r"shape \(2, 64, 64\)"):
        tsjit.ops.bmm.explain(tsjit.spec((2, 64, 64), tsjit.BFloat16), tsjit.spec((2, 64, 64), tsjit.BFloat16),
                              out=tsjit.spec((2, 64, 64), tsjit.BFloat16, strides=(0, 64, 1)))


def test_bmm_explain_refuses_the_scales_bmm_does_not_take(no_gpu):
    """bmm.explain(..., scale_a=2.0) planned a call that bmm itself refuses (no scale_a parameter)."""
    a = b = np.zeros((2, 64, 64), np.float16)
    with pytest.raises(tsjit.LaunchError, match=r"^tsjit.ops.bmm.explain: unexpected keyword argument 'scale_a'"):
        tsjit.ops.bmm.explain(a, b, scale_a=2.0)
    with pytest.raises(TypeError, match="scale_a"):
        tsjit.ops.bmm(a, b, scale_a=2.0)


@pytest.mark.parametrize("fn, said", [("relu", r"must be a function \(y, row, col\) -> y, got 'relu' \(of type str\) "
                                               r"\(for an activation pass activation='relu'\)"),
                                      (3, r"must be a function \(y, row, col\) -> y, got 3"),
                                      (lambda y: y, r"must take \(y, row, col\), .*'<lambda>' has the signature \(y\)")])
def test_an_epilogue_fn_that_cannot_be_called_with_three_arguments_is_named(no_gpu, fn, said):
    """These were CompilationErrors inside tsjit/ops/gemm_program.py ('str' object is not callable, takes 1
    positional argument but 3 were given)."""
    a, b = np.zeros((64, 32), np.float16), np.zeros((32, 16), np.float16)
    with pytest.raises(tsjit.LaunchError, match=rf"^tsjit.ops.matmul: argument 'epilogue_fn' {said}"):
        tsjit.ops.matmul.explain(a, b, epilogue_fn=fn)

    @tsjit.func
    def double(y, row, col):
        return y * 2.0
    assert tsjit.ops.matmul.explain(a, b, epilogue_fn=double).startswith("problem:")


def test_an_empty_batch_is_named_not_a_zero_division(no_gpu):
    """bmm of L = 0 was a ZeroDivisionError (found on the H200)."""
    a = np.zeros((0, 64, 64), np.float16)
    with pytest.raises(tsjit.LaunchError, match=r"^tsjit.ops.bmm: every dimension must be >= 1; got L=0, M=64"):
        tsjit.ops.bmm.explain(a, a)
