"""``tsjit.ops.attention`` on CPU torch tensors (no GPU): a shape or head_dim mistake is named before the
device (so it can be found on a machine without a GPU), a CPU tensor with ``out=`` is a LaunchError naming the
argument, not torch's "not compiled with CUDA" from the launch fast path, and under ``TSJIT_INTERPRET=1`` the
call runs on the CPU interpreter, checked against a float64 reference.

A duck-typed torch stands in for PyTorch for the messages (CI has none); the tests with the real one run where
it is installed."""
import itertools
import sys
import types

import pytest

import tsjit


class FakeTensor:
    """A contiguous torch tensor as the argument checks read it (shape, dtype, strides, device)."""

    _addresses = itertools.count(1)

    def __init__(self, shape, dtype="float16", device="cpu"):
        self.shape, self.dtype, self.device = tuple(shape), dtype, device
        self._ptr = next(self._addresses) << 20
        self.is_cuda = device.startswith("cuda")
        strides, step = [], 1
        for extent in reversed(self.shape):
            strides.insert(0, step)
            step *= extent
        self._strides = tuple(strides)

    def dim(self):
        return len(self.shape)

    def stride(self, axis=None):
        return self._strides if axis is None else self._strides[axis]

    def element_size(self):
        return 2

    def data_ptr(self):
        return self._ptr


def _cpu_only_stream(device):
    raise AssertionError("Torch not compiled with CUDA enabled")    # what a CPU-only torch raises


@pytest.fixture
def fake_torch(monkeypatch):
    torch = types.ModuleType("torch")
    torch.Tensor, torch.float16, torch.bfloat16, torch.float32 = FakeTensor, "float16", "bfloat16", "float32"
    torch.cuda = types.SimpleNamespace(current_stream=_cpu_only_stream)
    monkeypatch.setitem(sys.modules, "torch", torch)
    return torch


def _launch_error(*args, **kwargs):
    with pytest.raises(tsjit.LaunchError) as err:
        tsjit.ops.attention(*args, **kwargs)
    return str(err.value)


@pytest.mark.parametrize("head_dim", [96, 32])
def test_unsupported_head_dim_is_named_before_the_device(fake_torch, head_dim):
    q = FakeTensor((1, 128, 2, head_dim))
    message = _launch_error(q, q, q)
    assert f"head_dim {head_dim} is not supported" in message and "64, 128, 256" in message, message


def test_mismatched_head_dim_of_k_is_named_before_the_device(fake_torch):
    q, k = FakeTensor((1, 128, 2, 64)), FakeTensor((1, 128, 2, 128))
    message = _launch_error(q, k, k)
    assert "'k' has head_dim 128" in message and "'q' has head_dim 64" in message, message


def test_heads_that_do_not_divide_are_named_before_the_device(fake_torch):
    q, k = FakeTensor((1, 128, 3, 64)), FakeTensor((1, 128, 2, 64))
    message = _launch_error(q, k, k)
    assert "'k' has 2 heads" in message and "3 heads of 'q'" in message, message


def test_a_bad_scale_or_out_is_named_before_the_device(fake_torch):
    q = FakeTensor((1, 128, 2, 64))
    assert "argument 'scale' must be a finite number > 0" in _launch_error(q, q, q, scale=-1.0)
    message = _launch_error(q, q, q, out=FakeTensor((1, 128, 2, 32)))
    assert "argument 'out' must be a float16 tensor of shape (1, 128, 2, 64), got float16 (1, 128, 2, 32)" in message, \
        message


@pytest.mark.parametrize("aliased", ["k", "v"])
def test_out_that_is_k_or_v_is_refused_naming_it(fake_torch, aliased):
    q, k, v = (FakeTensor((1, 128, 2, 64)) for _ in range(3))
    message = _launch_error(q, k, v, out=k if aliased == "k" else v)
    assert f"argument 'out' is the memory of argument '{aliased}'" in message, message


def test_well_formed_cpu_tensors_name_the_device(fake_torch, monkeypatch):
    monkeypatch.delenv("TSJIT_INTERPRET", raising=False)      # (the CPU interpreter takes CPU tensors)
    q = FakeTensor((1, 128, 2, 64))
    message = _launch_error(q, q, q)
    assert "argument 'q' is on cpu" in message and "q.cuda()" in message, message


def test_cpu_tensors_with_out_are_a_launch_error_not_a_stream_crash(fake_torch, monkeypatch):
    monkeypatch.delenv("TSJIT_INTERPRET", raising=False)
    q = FakeTensor((1, 128, 2, 64))
    message = _launch_error(q, q, q, out=FakeTensor(q.shape))
    assert "argument 'q' is on cpu" in message, message


def test_real_cpu_torch_tensors_get_the_same_messages(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.delenv("TSJIT_INTERPRET", raising=False)
    q = torch.zeros(1, 128, 2, 64, dtype=torch.float16)
    q96 = torch.zeros(1, 128, 2, 96, dtype=torch.float16)
    assert "head_dim 96 is not supported" in _launch_error(q96, q96, q96)
    assert "argument 'q' is on cpu" in _launch_error(q, q, q, out=torch.zeros_like(q))


def _reference(q, k, v, causal, torch):
    """softmax(q k^T / sqrt(d)) v in float64 with the bottom-right causal mask; (batch, seqlen, heads, head_dim)."""
    qd, kd, vd = (t.double().transpose(1, 2) for t in (q, k, v))
    group = q.shape[2] // k.shape[2]
    kd, vd = kd.repeat_interleave(group, 1), vd.repeat_interleave(group, 1)
    scores = qd @ kd.transpose(-1, -2) / q.shape[-1] ** 0.5
    rows, cols = scores.shape[-2:]
    if causal:
        seen = torch.arange(cols)[None] <= torch.arange(rows)[:, None] + (cols - rows)
        scores = scores.masked_fill(~seen, float("-inf"))
    return (scores.softmax(-1) @ vd).transpose(1, 2), torch.logsumexp(scores, -1)


@pytest.mark.parametrize("dtype, head_dim, heads, kv_heads, causal", [
    ("bfloat16", 64, 2, 2, False), ("float16", 128, 4, 2, True)])
def test_attention_runs_on_the_cpu_interpreter_with_cpu_tensors(monkeypatch, dtype, head_dim, heads, kv_heads, causal):
    torch = pytest.importorskip("torch")
    monkeypatch.setenv("TSJIT_INTERPRET", "1")
    generator = torch.Generator().manual_seed(int.from_bytes(__import__("os").urandom(4), "little"))
    dtype = getattr(torch, dtype)
    q = torch.randn(1, 100, heads, head_dim, generator=generator).to(dtype)      # a partial Q tile
    k, v = (torch.randn(1, 150, kv_heads, head_dim, generator=generator).to(dtype) for _ in range(2))
    out = torch.full_like(q, float("nan"))
    lse = torch.full((1, heads, 100), float("nan"))
    tsjit.ops.attention(q, k, v, causal=causal, out=out, lse_out=lse)
    expected, expected_lse = _reference(q, k, v, causal, torch)
    rounding = (expected.to(dtype).double() - expected).abs().max().item()
    error = (out.double() - expected).abs().max().item()
    assert error <= 3 * max(rounding, 2.0 ** -10), (error, rounding)
    assert (lse.double() - expected_lse).abs().max().item() < 2e-3


def test_a_numpy_array_points_at_torch_and_the_interpreter(fake_torch):
    import numpy as np
    q = np.zeros((1, 128, 2, 64), np.float16)
    message = _launch_error(q, q, q)
    assert "argument 'q' must be a torch tensor" in message and "TSJIT_INTERPRET=1" in message, message


@pytest.mark.parametrize("name, value", [("stages", 0), ("stages", 2.5), ("stages", True), ("sms", 0), ("sms", -1),
                                         ("sms", 1.5)])
def test_a_stage_or_sm_count_that_is_not_a_positive_int_is_named(fake_torch, name, value):
    """stages=0 was a [P3] VerificationError at tsjit/examples/attention.py, stages=2.5 named 'STAGES', sms=0 / -1 ran
    one CTA silently and sms=1.5 was "launch field 'grid' must be an int"."""
    q = FakeTensor((1, 128, 2, 64))
    message = _launch_error(q, q, q, **{name: value})
    assert message == (f"tsjit.ops.attention: argument '{name}' must be an int >= 1 (or None for the default), got "
                       f"{value!r}"), message


@pytest.mark.parametrize("given", ["cu_seqlens_q", "cu_seqlens_k"])
def test_one_cu_seqlens_without_the_other_names_the_missing_one(fake_torch, given):
    q = FakeTensor((128, 2, 64))
    missing = "cu_seqlens_k" if given == "cu_seqlens_q" else "cu_seqlens_q"
    message = _launch_error(q, q, q, **{given: FakeTensor((2,), "int32")})
    assert f"argument '{missing}' is None but '{given}' is given" in message, message


@pytest.mark.parametrize("name", ["q", "k", "out"])
def test_a_broadcast_tensor_is_named_before_tma_sees_it(fake_torch, name):
    """An expand()ed q / k / out (stride 0) reached TensorMap, whose error named no argument."""
    tensors = {n: FakeTensor((2, 128, 2, 64)) for n in ("q", "k", "v", "out")}
    tensors[name]._strides = (0,) + tensors[name]._strides[1:]        # t.expand(2, ...) of a batch of 1
    message = _launch_error(tensors["q"], tensors["k"], tensors["v"], out=tensors["out"])
    assert message.startswith(f"argument '{name}' has stride 0 in dimension 0 (a broadcast view"), message
    assert message.endswith("pass a tensor of its own (torch.empty of that shape) or none" if name == "out" else
                            f"pass {name}.contiguous()"), message


def test_a_wrong_lse_out_says_what_it_got(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setenv("TSJIT_INTERPRET", "1")           # CPU tensors pass the device check; nothing is launched
    q = torch.zeros(1, 64, 2, 64, dtype=torch.bfloat16)
    message = _launch_error(q, q, q, lse_out=torch.empty(1, 64, 2))
    assert message == ("argument 'lse_out' must be a contiguous torch.float32 tensor of shape (1, 2, 64) on cpu "
                       "((batch, heads, seqlen_q); packed: (heads, total_q)), got a contiguous torch.float32 tensor "
                       "of shape (1, 64, 2) on cpu"), message


@pytest.mark.parametrize("aliased, shift", [("k", 128), ("v", 4096), ("q", 128)])
def test_out_overlapping_q_k_or_v_is_refused(fake_torch, aliased, shift):
    """out starting inside k or v (or a shifted view of q) had its O stores overwrite rows other tiles still read;
    only out is k / v itself was refused."""
    q, k, v = (FakeTensor((1, 128, 2, 64)) for _ in range(3))
    out = FakeTensor(q.shape)
    out._ptr = {"q": q, "k": k, "v": v}[aliased]._ptr + shift
    message = _launch_error(q, k, v, out=out)
    assert f"argument 'out' overlaps the memory of argument '{aliased}'" in message, message


def test_out_that_is_q_itself_is_accepted(fake_torch, monkeypatch):
    """Each tile reads its Q rows before it writes the same O rows: out=q passes the checks (here: to the device
    check of a CPU tensor)."""
    monkeypatch.delenv("TSJIT_INTERPRET", raising=False)
    q, k = FakeTensor((1, 128, 2, 64)), FakeTensor((1, 128, 2, 64))
    assert "argument 'q' is on cpu" in _launch_error(q, k, k, out=q)


def test_empty_tensors_at_address_0_are_not_taken_for_aliases(fake_torch, monkeypatch):
    """torch gives empty CUDA tensors address 0: an empty out and empty k are not 'the memory of k'."""
    monkeypatch.delenv("TSJIT_INTERPRET", raising=False)
    q, out = FakeTensor((1, 0, 2, 64)), FakeTensor((1, 0, 2, 64))
    k = FakeTensor((1, 0, 2, 64))
    for t in (q, out, k):
        t._ptr = 0
    assert "argument 'q' is on cpu" in _launch_error(q, k, k, out=out)


def test_the_forward_fp8_and_backward_share_one_scale_check():
    """softmax_scale: None -> 1/sqrt(head_dim); any finite real > 0 (numpy's too) is kept; the rest is named."""
    import math
    import numpy as np
    from tsjit.errors import LaunchError
    from tsjit.ops.attention_args import check_causal, check_kv_heads, softmax_scale
    assert softmax_scale(None, 64) == 1 / math.sqrt(64)
    assert softmax_scale(np.float32(0.5), 128) == np.float32(0.5)
    for bad in (True, 0.0, -1.0, float("nan"), float("inf"), "0.1"):
        with pytest.raises(LaunchError, match="argument 'scale' must be a finite number > 0"):
            softmax_scale(bad, 64)
    with pytest.raises(LaunchError, match="argument 'causal' must be a bool, got 1"):
        check_causal(1)
    with pytest.raises(LaunchError, match="argument 'k' has 3 heads, which must divide the 8 heads of 'q'"):
        check_kv_heads(8, 3)
    check_kv_heads(8, 2)
