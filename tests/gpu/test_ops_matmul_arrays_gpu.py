"""tsjit.ops.matmul / bmm on tsjit device arrays (no torch), on the GPU and under the CPU interpreter
(``gpu_or_interpret``; issues 13 and 15): the torch-free counterpart of test_ops_matmul_gpu.py and
test_gemm_fp8_gpu.py at small shapes, so CI (no GPU, no torch) checks every configuration family and
epilogue option of the library GEMM.  Against float64 numpy references of the rounded inputs, fresh
random inputs, outputs poisoned (NaN) before each call.

Covered: odd shapes (1x1x1, 7x9x5, ragged M/N/K), both B layouts, the swap-AB narrow tiles, split-K
(and its run-to-run bit identity), the TMA and the direct epilogues, views read in place or staged
(transposed, sliced, misaligned, strided, odd K), column / row bias with each activation, residual with
alpha / beta, the three output dtypes, fp16 inputs, a user epilogue function, bmm, and fp8 (e4m3 / e5m2 /
mixed) with per-tensor and per-row / per-column scales, staged fp8 layouts, a bad scale named."""
import math

import numpy as np
import pytest

import tsjit
import tsjit.ops
from tsjit.interpret.numerics import decode, encode
from tsjit.runtime.arrays import DeviceArray

pytestmark = pytest.mark.gpu_or_interpret

BF16, F16, F32 = tsjit.BFloat16, tsjit.Float16, tsjit.Float32
E4M3, E5M2 = tsjit.Float8E4M3, tsjit.Float8E5M2


def _rand(*shape, dtype=BF16, scale=1.0, rng=None):
    """(device array of fresh N(0, scale^2) values rounded to ``dtype``, their float64 values)."""
    rng = rng or np.random.default_rng()
    values = rng.standard_normal(shape) * scale
    if dtype in (F32, F16):
        host = values.astype(dtype.numpy)
        return tsjit.to_device(host, dtype=dtype), host.astype(np.float64)
    bits = encode(values, dtype)
    return tsjit.to_device(bits, dtype=dtype), decode(bits, dtype).astype(np.float64)


def _view(array, shape, strides, offset=0):
    """A strided view of ``array`` (element strides), starting ``offset`` elements in."""
    return DeviceArray(shape, array.dtype, strides=strides, data_ptr=array.data_ptr + offset * array.itemsize,
                       owner=array)


def _transposed(array):
    return _view(array, array.shape[::-1], array.strides[::-1])


def _poisoned(*shape, dtype=BF16):
    return tsjit.empty(shape, dtype).fill_bytes(0xFF)        # NaN in every float format


def _values(array) -> np.ndarray:
    host = array.numpy()
    return host.astype(np.float64) if array.dtype is F32 else decode(host, array.dtype).astype(np.float64)


def _rel(out, ref) -> float:
    got = _values(out)
    assert np.isfinite(got).all(), f"{(~np.isfinite(got)).sum()} outputs unwritten (NaN) or not finite"
    return float(np.linalg.norm(got - ref) / max(np.linalg.norm(ref), 1e-30))


def _config(a, b, **kwargs) -> str:
    return next(line for line in tsjit.ops.matmul.explain(a, b, **kwargs).splitlines() if line.startswith("config:"))


@pytest.mark.parametrize("layout", ["NK", "KN"])
def test_192_wide_tiles_match_float64(monkeypatch, layout):
    """The 128 x 192 tile (the heuristic's at 1000 x 3000 x 777), forced at a ragged reduced size: two row tiles, a
    second column tile 8 wide."""
    import sys
    from tsjit.ops import configs
    mm = sys.modules["tsjit.ops.matmul"]
    monkeypatch.setattr(configs, "choose", lambda problem: (configs.make_config(problem, 128, 192, 1),
                                                            [(0.0, 128, 192, 1)]))
    monkeypatch.setattr(mm, "_PLANS", {})
    monkeypatch.setattr(mm, "_PLAIN_ARRAYS", {})
    M, N, K = 136, 200, 128
    a, a64 = _rand(M, K)
    if layout == "NK":
        bt, bt64 = _rand(N, K)
        b, b64 = _transposed(bt), bt64.T
    else:
        b, b64 = _rand(K, N)
    out = _poisoned(M, N)
    tsjit.ops.matmul(a, b, out=out)
    assert "128x192x64 tile" in next(iter(mm._PLANS.values())).config.describe()
    assert _rel(out, a64 @ b64) < 1e-2


@pytest.mark.parametrize("epilogue", ["tma", "direct"])
def test_224_wide_tiles_match_float64(monkeypatch, epilogue):
    """The 128 x 224 tile (14336 and 28672 are multiples of 224), forced at a ragged reduced size: two row tiles,
    three column tiles (the last 8 wide), a column bias + ReLU applied per 32-column pass (TMA: seven 64 x 32 boxes
    through two staging tiles in turn; direct: seven 32-column store passes); B given as the (N, K) transpose (a
    224-wide tile needs a K-major B)."""
    import dataclasses
    import sys
    from tsjit.ops import configs
    mm = sys.modules["tsjit.ops.matmul"]

    def make(problem):
        config = configs.make_config(problem, 128, 224, 1)
        if epilogue == "direct":
            config = dataclasses.replace(config, epilogue="direct", staged_columns=64, stages=5)
        return config, [(0.0, 128, 224, 1)]
    monkeypatch.setattr(configs, "choose", make)
    monkeypatch.setattr(mm, "_PLANS", {})
    monkeypatch.setattr(mm, "_PLAIN_ARRAYS", {})
    M, N, K = 136, 456, 136
    (a, a64), (bt, bt64), (bias, bias64) = _rand(M, K), _rand(N, K), _rand(N)
    out = _poisoned(M, N)
    tsjit.ops.matmul(a, _transposed(bt), bias=bias, activation="relu", out=out)
    config = next(iter(mm._PLANS.values())).config
    assert (config.block_n, config.epilogue) == (224, epilogue), config.describe()
    assert _rel(out, np.maximum(a64 @ bt64.T + bias64, 0.0)) < 1e-2


@pytest.mark.parametrize("layout", ["NK", "KN"])
@pytest.mark.parametrize("M,N,K", [(1, 1, 1), (7, 9, 5), (64, 128, 64), (127, 130, 136)])
def test_matmul_matches_float64(M, N, K, layout):
    a, a64 = _rand(M, K)
    if layout == "NK":
        bt, bt64 = _rand(N, K)
        b, b64 = _transposed(bt), bt64.T
    else:
        b, b64 = _rand(K, N)
    out = _poisoned(M, N)
    assert tsjit.ops.matmul(a, b, out=out) is out
    assert _rel(out, a64 @ b64) < 1e-2


@pytest.mark.parametrize("M,N,K,family", [(16, 256, 64, "swapped"), (128, 128, 64, "tma epilogue"),
                                          (65, 70, 64, "direct epilogue")])
def test_each_config_family(M, N, K, family):
    a, a64 = _rand(M, K)
    b, b64 = _rand(K, N)
    out = _poisoned(M, N)
    text = tsjit.ops.matmul.explain(a, b, out=out)
    assert family in text, text
    tsjit.ops.matmul(a, b, out=out)
    assert _rel(out, a64 @ b64) < 1e-2


def test_split_k_matches_float64_and_is_bit_identical_run_to_run():
    a, a64 = _rand(64, 2048)
    b, b64 = _rand(2048, 64)
    assert "split-K" in _config(a, b)
    first = tsjit.ops.matmul(a, b)
    assert _rel(first, a64 @ b64) < 1e-2
    again = _poisoned(64, 64)
    tsjit.ops.matmul(a, b, out=again)
    np.testing.assert_array_equal(again.numpy(), first.numpy())


@pytest.mark.parametrize("view", ["a_transposed", "both_transposed", "row_sliced", "odd_k", "misaligned_base",
                                  "col_strided"])
def test_non_contiguous_inputs(view):
    M, N, K = 70, 80, 72
    if view == "a_transposed":
        at, at64 = _rand(K, M)
        (a, a64), (b, b64) = (_transposed(at), at64.T), _rand(K, N)
    elif view == "both_transposed":
        at, at64 = _rand(K, M)
        bt, bt64 = _rand(N, K)
        (a, a64), (b, b64) = (_transposed(at), at64.T), (_transposed(bt), bt64.T)
    elif view == "row_sliced":
        wide_a, wa64 = _rand(M, 2 * K)
        wide_b, wb64 = _rand(K, 3 * N)
        a, a64 = _view(wide_a, (M, K), (2 * K, 1)), wa64[:, :K]
        b, b64 = _view(wide_b, (K, N), (3 * N, 1), N), wb64[:, N:2 * N]
    elif view == "odd_k":
        K = 77
        (a, a64), (b, b64) = _rand(M, K), _rand(K, N)
    elif view == "misaligned_base":
        wide_a, wa64 = _rand(M, K + 1)
        a, a64 = _view(wide_a, (M, K), (K + 1, 1), 1), wa64[:, 1:]
        b, b64 = _rand(K, N)
    else:
        wide_a, wa64 = _rand(M, 2 * K)
        a, a64 = _view(wide_a, (M, K), (2 * K, 2)), wa64[:, ::2]
        b, b64 = _rand(K, N)
    out = _poisoned(M, N)
    tsjit.ops.matmul(a, b, out=out)
    assert _rel(out, a64 @ b64) < 1e-2


@pytest.mark.parametrize("force", ["y", "both"])
def test_realigned_rows_match_float64(monkeypatch, force):
    """Rows 16- but not 128-byte aligned (288 bytes) forced through the realigning 16-byte copies (copy_rows into
    128-byte rows, then the GEMM on the copies)."""
    import sys
    mm = sys.modules["tsjit.ops.matmul"]
    monkeypatch.setattr(sys.modules["tsjit.ops.matmul_plan"], "REALIGN", force)
    monkeypatch.setattr(mm, "_PLANS", {})
    monkeypatch.setattr(mm, "_PLAIN_ARRAYS", {})
    M, N, K = 70, 80, 72
    wide_a, wa64 = _rand(M, 2 * K)
    wide_b, wb64 = _rand(N, 2 * K)
    a, a64 = _view(wide_a, (M, K), (2 * K, 1)), wa64[:, :K]
    b, b64 = _view(wide_b, (K, N), (1, 2 * K)), wb64[:, :K].T
    out = _poisoned(M, N)
    tsjit.ops.matmul(a, b, out=out)
    assert next(iter(mm._PLANS.values())).realign == force
    assert _rel(out, a64 @ b64) < 1e-2


def _gelu_tanh(y):
    return 0.5 * y * (1 + np.tanh(0.7978845608028654 * (y + 0.044715 * y ** 3)))


ACTS = {None: lambda y: y, "relu": lambda y: np.maximum(y, 0.0), "gelu_tanh": _gelu_tanh,
        "silu": lambda y: y / (1 + np.exp(-y))}


@pytest.mark.parametrize("activation", list(ACTS))
def test_bias_and_activation(activation):
    M, N, K = 65, 72, 64
    (a, a64), (b, b64), (bias, bias64) = _rand(M, K), _rand(K, N), _rand(N)
    out = _poisoned(M, N)
    tsjit.ops.matmul(a, b, bias=bias, activation=activation, out=out)
    assert _rel(out, ACTS[activation](a64 @ b64 + bias64)) < 1e-2


def test_row_bias_residual_alpha_beta():
    M, N, K = 65, 72, 64
    (a, a64), (b, b64) = _rand(M, K), _rand(K, N)
    (bias, bias64), (residual, residual64) = _rand(M, 1, dtype=F32), _rand(M, N)
    out, old = _rand(M, N)
    tsjit.ops.matmul(a, b, bias=bias, residual=residual, alpha=0.5, beta=-2.0, activation="relu", out=out)
    ref = np.maximum(0.5 * (a64 @ b64) - 2.0 * old + bias64, 0.0) + residual64
    assert _rel(out, ref) < 1e-2


@pytest.mark.parametrize("out_dtype", [F16, F32, BF16], ids=["f16", "f32", "bf16"])
def test_output_dtypes(out_dtype):
    M, N, K = 65, 72, 64
    (a, a64), (b, b64) = _rand(M, K), _rand(K, N)
    out = _poisoned(M, N, dtype=out_dtype)
    tsjit.ops.matmul(a, b, out=out)
    assert _rel(out, a64 @ b64) < (1e-4 if out_dtype is F32 else 1e-2)
    made = tsjit.ops.matmul(a, b, out_dtype=out_dtype)
    assert made.dtype is out_dtype and _rel(made, a64 @ b64) < 1e-2


def test_fp16_inputs():
    (a, a64), (b, b64) = _rand(50, 72, dtype=F16), _rand(72, 70, dtype=F16)
    out = _poisoned(50, 70, dtype=F16)
    tsjit.ops.matmul(a, b, out=out)
    assert _rel(out, a64 @ b64) < 1e-2


@tsjit.func
def clipped_plus_row(y, row, col):
    return tsjit.math.min(y, 1.0) + row * 0.001 - col * 0.0005


def test_user_epilogue_function_gets_global_coordinates():
    M, N, K = 130, 72, 64                         # three row tiles, two column tiles: global coordinates
    (a, a64), (b, b64) = _rand(M, K), _rand(K, N)
    out = _poisoned(M, N, dtype=F32)
    tsjit.ops.matmul(a, b, out=out, epilogue_fn=clipped_plus_row)
    rows, cols = np.arange(M, dtype=np.float64)[:, None], np.arange(N, dtype=np.float64)[None, :]
    assert _rel(out, np.minimum(a64 @ b64, 1.0) + rows * 0.001 - cols * 0.0005) < 1e-4


def test_bmm_matches_float64():
    L, M, N, K = 3, 40, 72, 64
    (a, a64), (b, b64) = _rand(L, M, K), _rand(L, K, N)
    out = _poisoned(L, M, N)
    assert tsjit.ops.bmm(a, b, out=out) is out
    assert _rel(out, a64 @ b64) < 1e-2


# -- fp8 ----------------------------------------------------------------------------------------------------
def _fp8(*shape, dtype=E4M3):
    return _rand(*shape, dtype=dtype, scale=2.0)


def _weight_t(n, k, dtype=E4M3):
    """(K, N) with K contiguous (``w.t()`` of an (N, K) weight), as fp8 GEMMs take B."""
    w, w64 = _fp8(n, k, dtype=dtype)
    return _transposed(w), w64.T


def _scale(*shape, rng=None):
    """Fresh scales in [0.5, 1.5) as a Float32 device array and their values."""
    values = ((rng or np.random.default_rng()).random(shape) + 0.5).astype(np.float32)
    return tsjit.to_device(values), values.astype(np.float64)


@pytest.mark.parametrize("M,N,K", [(64, 128, 64), (127, 100, 96)])
@pytest.mark.parametrize("dtypes", [(E4M3, E4M3), (E5M2, E5M2), (E4M3, E5M2)], ids=["e4m3", "e5m2", "mixed"])
def test_fp8_per_tensor_scales_match_float64(M, N, K, dtypes):
    (a, a64), (b, b64) = _fp8(M, K, dtype=dtypes[0]), _weight_t(N, K, dtype=dtypes[1])
    (sa, sa64), (sb, sb64) = _scale(1), _scale(1)
    out = _poisoned(M, N)
    tsjit.ops.matmul(a, b, scale_a=sa, scale_b=sb, out=out)
    assert _rel(out, (a64 * sa64[0]) @ (b64 * sb64[0])) < 1e-2


@pytest.mark.parametrize("out_dtype", [BF16, F32], ids=["bf16", "f32"])
def test_fp8_row_and_column_scales_match_float64(out_dtype):
    M, N, K = 70, 136, 128
    (a, a64), (b, b64) = _fp8(M, K), _weight_t(N, K)
    (sa, sa64), (sb, sb64) = _scale(M, 1), _scale(1, N)
    out = _poisoned(M, N, dtype=out_dtype)
    tsjit.ops.matmul(a, b, scale_a=sa, scale_b=sb, out=out)
    assert _rel(out, (a64 * sa64) @ (b64 * sb64)) < (2e-3 if out_dtype is F32 else 1e-2)


def test_fp8_number_scales_bias_and_activation():
    M, N, K = 70, 90, 64
    (a, a64), (b, b64), (bias, bias64) = _fp8(M, K), _weight_t(N, K), _rand(N)
    out = tsjit.ops.matmul(a, b, scale_a=0.25, scale_b=3.0, bias=bias, activation="relu")
    assert out.dtype is BF16
    assert _rel(out, np.maximum(0.75 * (a64 @ b64) + bias64, 0.0)) < 1e-2


@pytest.mark.parametrize("layout", ["b_row_major", "a_transposed", "odd_k"])
def test_fp8_other_layouts_are_staged_k_major(layout):
    M, N, K = 60, 70, 64
    if layout == "b_row_major":
        (a, a64), (b, b64) = _fp8(M, K), _fp8(K, N)
    elif layout == "a_transposed":
        at, at64 = _fp8(K, M)
        (a, a64), (b, b64) = (_transposed(at), at64.T), _weight_t(N, K)
    else:
        K = 77
        (a, a64), (b, b64) = _fp8(M, K), _weight_t(N, K)
    assert "staging" in tsjit.ops.matmul.explain(a, b, verbose=False)
    out = _poisoned(M, N)
    tsjit.ops.matmul(a, b, out=out)
    assert _rel(out, a64 @ b64) < 1e-2


def test_fp8_bad_scale_is_named():
    (a, _), (b, _) = _fp8(64, 128), _weight_t(256, 128)
    with pytest.raises(tsjit.LaunchError, match="'scale_b'"):
        tsjit.ops.matmul(a, b, scale_b=tsjit.to_device(np.ones(3, np.float32)))


def test_bad_arguments_are_named():
    (a, _), (b, _) = _rand(4, 8), _rand(9, 4)
    with pytest.raises(tsjit.LaunchError, match="'b'"):
        tsjit.ops.matmul(a, b)
    (b, _) = _rand(8, 6)
    with pytest.raises(tsjit.LaunchError, match="'bias'"):
        tsjit.ops.matmul(a, b, bias=_rand(5)[0])
    with pytest.raises(tsjit.LaunchError, match="'out'"):
        tsjit.ops.matmul(a, b, out=_rand(4, 7)[0])
    assert math.isfinite(_rel(tsjit.ops.matmul(a, b), _values(a) @ _values(b)))
