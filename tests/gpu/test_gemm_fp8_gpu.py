"""fp8 tsjit.ops.matmul on the GPU (issue 15): e4m3 / e5m2 inputs (and the mix) with per-tensor,
per-row / per-column and number scales, bf16 and fp32 outputs, checked against a float64 product of
the dequantized inputs on fresh random inputs with poisoned outputs; staged layouts, split-K
determinism and agreement with torch._scaled_mm."""
import pytest

REASON = ("needs torch fp8 CUDA tensors and torch._scaled_mm (the second reference); the interpreter checks the"
          " fp8 numerics in test_ops_matmul_arrays_gpu.py")
torch = pytest.importorskip("torch", reason=REASON)

import tsjit  # noqa: E402
import tsjit.ops  # noqa: E402

pytestmark = pytest.mark.gpu(reason=REASON)

E4M3, E5M2 = torch.float8_e4m3fn, torch.float8_e5m2


def _fp8(*shape, dtype=E4M3):
    return (torch.randn(*shape, device="cuda") * 2).to(dtype)


def _weight_t(n, k, dtype=E4M3):
    return _fp8(n, k, dtype=dtype).t()                   # (K, N) with K contiguous


def _poisoned(*shape, dtype=torch.bfloat16):
    return torch.full(shape, float("nan"), device="cuda", dtype=dtype)


def _rel(got, ref):
    assert torch.isfinite(got).all(), "unwritten (NaN) or non-finite outputs"
    return (torch.linalg.norm(got.double() - ref) / torch.linalg.norm(ref)).item()


def _reference(a, b, sa, sb):
    da, db = a.float().double(), b.float().double()
    sa = sa.double() if isinstance(sa, torch.Tensor) else sa
    sb = sb.double() if isinstance(sb, torch.Tensor) else sb
    return (da * sa) @ (db * sb)


SHAPES = [(1, 4096, 4096), (16, 4096, 4096), (64, 8192, 1024), (128, 1024, 1024), (256, 4096, 4096),
          (1000, 3000, 768), (3000, 5000, 1000), (127, 255, 64), (384, 384, 16384), (4096, 4096, 4096)]


@pytest.mark.parametrize("M,N,K", SHAPES)
@pytest.mark.parametrize("dtypes", [(E4M3, E4M3), (E5M2, E5M2), (E4M3, E5M2)], ids=["e4m3", "e5m2", "mixed"])
def test_fp8_per_tensor_scales_match_float64(M, N, K, dtypes):
    a, b = _fp8(M, K, dtype=dtypes[0]), _weight_t(N, K, dtype=dtypes[1])
    sa = torch.rand((), device="cuda") + 0.5
    sb = torch.rand((), device="cuda") + 0.5
    out = _poisoned(M, N)
    tsjit.ops.matmul(a, b, scale_a=sa, scale_b=sb, out=out)
    assert _rel(out, _reference(a, b, sa, sb)) < 1e-2


@pytest.mark.parametrize("M,N,K", [(16, 4096, 2048), (512, 768, 1024), (3000, 5000, 1000), (384, 384, 16384)])
@pytest.mark.parametrize("out_dtype", [torch.bfloat16, torch.float32])
def test_fp8_row_and_column_scales_match_float64(M, N, K, out_dtype):
    a, b = _fp8(M, K), _weight_t(N, K)
    sa = torch.rand(M, 1, device="cuda") + 0.5
    sb = torch.rand(1, N, device="cuda") + 0.5
    out = _poisoned(M, N, dtype=out_dtype)
    tsjit.ops.matmul(a, b, scale_a=sa, scale_b=sb, out=out)
    assert _rel(out, _reference(a, b, sa, sb)) < (2e-3 if out_dtype == torch.float32 else 1e-2)


def test_fp8_number_scales_bias_and_activation():
    M, N, K = 700, 900, 512
    a, b, bias = _fp8(M, K), _weight_t(N, K), torch.randn(N, device="cuda", dtype=torch.bfloat16)
    out = tsjit.ops.matmul(a, b, scale_a=0.25, scale_b=3.0, bias=bias, activation="relu")
    assert out.dtype == torch.bfloat16
    assert _rel(out, torch.relu(_reference(a, b, 0.25, 3.0) + bias.double())) < 1e-2


@pytest.mark.parametrize("layout", ["b_row_major", "a_transposed", "odd_k"])
def test_fp8_other_layouts_are_staged_k_major(layout):
    M, N, K = 300, 500, 384
    if layout == "b_row_major":
        a, b = _fp8(M, K), _fp8(K, N)
    elif layout == "a_transposed":
        a, b = _fp8(K, M).t(), _weight_t(N, K)
    else:
        K = 77
        a, b = _fp8(M, K), _weight_t(N, K)
    assert "staging" in tsjit.ops.matmul.explain(a, b, verbose=False)
    out = _poisoned(M, N)
    tsjit.ops.matmul(a, b, out=out)
    assert _rel(out, _reference(a, b, 1.0, 1.0)) < 1e-2


def test_fp8_split_k_is_bit_identical_run_to_run():
    a, b = _fp8(384, 16384), _weight_t(384, 16384)
    sa, sb = torch.rand(384, 1, device="cuda") + 0.5, torch.rand(1, 384, device="cuda") + 0.5
    assert "split-K" in tsjit.ops.matmul.explain(a, b, verbose=False)
    first = tsjit.ops.matmul(a, b, scale_a=sa, scale_b=sb)
    for _ in range(5):
        again = _poisoned(384, 384)
        tsjit.ops.matmul(a, b, scale_a=sa, scale_b=sb, out=again)
        assert torch.equal(first, again)


@pytest.mark.parametrize("M,N,K", [(4096, 4096, 4096), (256, 8192, 2048)])
def test_fp8_agrees_with_torch_scaled_mm(M, N, K):
    """The wgmma accumulates fp8 products in its own accumulator for a whole tile (as
    ``_scaled_mm(use_fast_accum=True)``); measured 1.3e-3 apart from ``_scaled_mm``'s default
    (promoted) accumulation at 4096^3, both ~1e-3 from float64."""
    a, b = _fp8(M, K), _weight_t(N, K)
    sa = torch.tensor(0.7, device="cuda")
    sb = torch.tensor(1.3, device="cuda")
    ours = tsjit.ops.matmul(a, b, scale_a=sa, scale_b=sb, out_dtype=torch.float32)
    fast = torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, out_dtype=torch.float32, use_fast_accum=True)
    ref = _reference(a, b, sa, sb)
    assert _rel(ours, ref) < 2e-3
    assert _rel(ours, ref) < 2 * _rel(fast, ref) + 1e-4


def test_fp8_bad_scale_is_named():
    a, b = _fp8(64, 128), _weight_t(256, 128)
    with pytest.raises(tsjit.LaunchError, match="'scale_b'"):
        tsjit.ops.matmul(a, b, scale_b=torch.ones(3, device="cuda"))
