"""``tsjit.ops.attention_backward`` and ``tsjit.ops.attention`` with inputs that require grad, on the duck-typed torch
of test_attention_args.py (no GPU, no torch): each mistake is a LaunchError naming the argument, before the device
(head_dim 256, mismatched shapes and dtypes, a bad LSE or scale, CPU tensors), and the forward with inputs that require
grad refuses the options its backward does not run (naming them and the way to run the forward alone)."""
import pytest

import tsjit

from .test_attention_args import FakeTensor, fake_torch  # noqa: F401  (fake_torch: a fixture)


class GradTensor(FakeTensor):
    """A fake tensor that requires grad."""

    requires_grad = True


def _launch_error(function, *args, **kwargs):
    with pytest.raises(tsjit.LaunchError) as err:
        function(*args, **kwargs)
    return str(err.value)


def _backward_error(*args, **kwargs):
    return _launch_error(tsjit.ops.attention_backward, *args, **kwargs)


def test_head_dim_256_is_refused_naming_it(fake_torch):
    q = FakeTensor((1, 64, 2, 256))
    lse = FakeTensor((1, 2, 64), dtype="float32")
    message = _backward_error(q, q, q, q, lse, q)
    assert "head_dim 256 is not supported by tsjit.ops.attention_backward" in message and "[64, 128]" in message


def test_mismatched_shapes_and_dtypes_are_named(fake_torch):
    q, k = FakeTensor((1, 64, 2, 64)), FakeTensor((1, 80, 1, 64))
    lse = FakeTensor((1, 2, 64), dtype="float32")
    assert "argument 'dout' must have q's shape (1, 64, 2, 64)" in _backward_error(q, k, k, q, lse,
                                                                                  FakeTensor((1, 64, 2, 32)))
    assert "must have one dtype" in _backward_error(q, k, k, q, lse, FakeTensor(q.shape, dtype="bfloat16"))
    assert "'k' and 'v' must have the same shape" in _backward_error(q, k, FakeTensor((1, 81, 1, 64)), q, lse, q)
    assert "3 heads, which must divide the 2 heads" in _backward_error(q, FakeTensor((1, 80, 3, 64)),
                                                                        FakeTensor((1, 80, 3, 64)), q, lse, q)


def test_a_bad_lse_or_scale_is_named(fake_torch):
    q = FakeTensor((1, 64, 2, 64))
    message = _backward_error(q, q, q, q, FakeTensor((1, 2, 63), dtype="float32"), q)
    assert "argument 'lse' must be the forward's torch.float32 log-sum-exp of shape (1, 2, 64)" in message, message
    assert "got float16 (1, 2, 64)" in _backward_error(q, q, q, q, FakeTensor((1, 2, 64)), q)
    lse = FakeTensor((1, 2, 64), dtype="float32")
    assert "argument 'scale' must be a finite number > 0" in _backward_error(q, q, q, q, lse, q, scale=0.0)
    assert "argument 'causal' must be a bool" in _backward_error(q, q, q, q, lse, q, causal=1)


def test_cpu_tensors_name_the_device(fake_torch, monkeypatch):
    monkeypatch.delenv("TSJIT_INTERPRET", raising=False)
    q = FakeTensor((1, 64, 2, 64))
    message = _backward_error(q, q, q, q, FakeTensor((1, 2, 64), dtype="float32"), q)
    assert "argument 'q' is on cpu" in message, message


@pytest.mark.parametrize("option, value", [("window", (16, 0)), ("out", "tensor"), ("lse_out", "tensor")])
def test_forward_with_grad_refuses_what_the_backward_does_not_run(fake_torch, option, value):
    fake_torch.is_grad_enabled = lambda: True
    q = GradTensor((1, 64, 2, 64))
    value = FakeTensor(q.shape) if value == "tensor" else value
    message = _launch_error(tsjit.ops.attention, q, q, q, **{option: value})
    assert f"does not support argument(s) {option}" in message and "torch.no_grad()" in message, message


def test_forward_with_grad_refuses_head_dim_256(fake_torch):
    fake_torch.is_grad_enabled = lambda: True
    q = GradTensor((1, 64, 2, 256))
    message = _launch_error(tsjit.ops.attention, q, q, q)
    assert "the backward supports head_dim [64, 128], not 256" in message, message
