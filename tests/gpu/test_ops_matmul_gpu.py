"""tsjit.ops.matmul / bmm on the GPU (issue 15): against float64 references on fresh random inputs
with poisoned outputs, for every configuration family the heuristic picks (swap-AB narrow tiles,
64- and 128-row tiles, split-K, TMA and direct epilogues), every operand layout (K-major, MN-major,
sliced, misaligned -> staging copy), every fused epilogue option, bmm, split-K determinism,
streams, tsjit arrays, and the argument errors."""
import pytest

REASON = ("needs torch CUDA tensors and streams; the interpreter checks every configuration's numerics in "
          "test_ops_matmul_arrays_gpu.py")
torch = pytest.importorskip("torch", reason=REASON)

import tsjit  # noqa: E402
import tsjit.ops  # noqa: E402

pytestmark = pytest.mark.gpu(reason=REASON)

DT = torch.bfloat16


def _rand(*shape, dtype=DT):
    return torch.randn(*shape, device="cuda", dtype=torch.float32).to(dtype)


def _poisoned(*shape, dtype=DT):
    return torch.full(shape, float("nan"), device="cuda", dtype=dtype)


def _rel(got, ref):
    assert torch.isfinite(got).all(), "unwritten (NaN) or non-finite outputs"
    return (torch.linalg.norm(got.double() - ref) / torch.linalg.norm(ref)).item()


SHAPES = [(1, 4096, 4096), (16, 4096, 4096), (64, 8192, 1024), (64, 4096, 4096), (128, 4096, 4096), (256, 4096, 14336 // 2),
          (512, 512, 8192), (384, 384, 16384), (2048, 2048, 2048), (1000, 3000, 777), (3000, 5000, 1000),
          (127, 255, 64), (4096, 4096, 256), (1, 1, 1), (7, 9, 5), (65, 130, 200), (300, 17, 4096)]


@pytest.mark.parametrize("M,N,K", SHAPES)
@pytest.mark.parametrize("layout", ["NK", "KN"])
def test_matmul_matches_float64(M, N, K, layout):
    a = _rand(M, K)
    b = _rand(N, K).t() if layout == "NK" else _rand(K, N)
    out = _poisoned(M, N)
    tsjit.ops.matmul(a, b, out=out)
    assert _rel(out, a.double() @ b.double()) < 1e-2


def test_the_heuristic_covers_every_config_family():
    families = set()
    for M, N, K in SHAPES:
        a, b = _rand(M, K), _rand(K, N)
        text = tsjit.ops.matmul.explain(a, b)
        line = next(s for s in text.splitlines() if s.startswith("config:"))
        families.add(("swapped" in text, line.split(" tile")[0].split("config: ")[1], "split-K" in line,
                      "tma epilogue" in line))
    assert any(f[0] for f in families) and any(f[2] for f in families)
    assert any(f[1].startswith("64x") for f in families) and any(f[1].startswith("128x") for f in families)
    assert any(f[3] for f in families) and any(not f[3] for f in families)


@pytest.mark.parametrize("M,N,K", [(512, 512, 8192), (384, 384, 16384), (16, 4096, 4096), (256, 1024, 14336)])
def test_split_k_is_bit_identical_run_to_run(M, N, K):
    a, b = _rand(M, K), _rand(K, N)
    assert "split-K" in tsjit.ops.matmul.explain(a, b)
    first = tsjit.ops.matmul(a, b)
    for _ in range(5):
        again = _poisoned(M, N)
        tsjit.ops.matmul(a, b, out=again)
        assert torch.equal(first, again)
    assert _rel(first, a.double() @ b.double()) < 1e-2


@pytest.mark.parametrize("view", ["a_transposed", "both_transposed", "row_sliced", "odd_k", "misaligned_base",
                                  "col_strided"])
def test_non_contiguous_inputs(view):
    M, N, K = 300, 500, 384
    if view == "a_transposed":
        a, b = _rand(K, M).t(), _rand(K, N)
    elif view == "both_transposed":
        a, b = _rand(K, M).t(), _rand(N, K).t()
    elif view == "row_sliced":
        a, b = _rand(M, 2 * K)[:, :K], _rand(K, 3 * N)[:, N:2 * N]
    elif view == "odd_k":
        K = 777
        a, b = _rand(M, K), _rand(K, N)
    elif view == "misaligned_base":
        a, b = _rand(M, K + 1)[:, 1:], _rand(K, N)
    else:
        a, b = _rand(M, 2 * K)[:, ::2], _rand(K, N)
    out = _poisoned(M, N)
    tsjit.ops.matmul(a, b, out=out)
    assert _rel(out, a.double() @ b.double()) < 1e-2


def _gelu_tanh(y):
    return 0.5 * y * (1 + torch.tanh(0.7978845608028654 * (y + 0.044715 * y ** 3)))


ACTS = {None: lambda y: y, "relu": torch.relu, "gelu_tanh": _gelu_tanh, "silu": lambda y: y * torch.sigmoid(y)}


@pytest.mark.parametrize("M,N,K", [(1000, 768, 512), (16, 2048, 1024), (256, 512, 8192)])
@pytest.mark.parametrize("activation", list(ACTS))
def test_bias_and_activation(M, N, K, activation):
    a, b, bias = _rand(M, K), _rand(K, N), _rand(N)
    out = _poisoned(M, N)
    tsjit.ops.matmul(a, b, bias=bias, activation=activation, out=out)
    ref = ACTS[activation](a.double() @ b.double() + bias.double())
    assert _rel(out, ref) < 1e-2


@pytest.mark.parametrize("M,N,K", [(1000, 768, 512), (16, 2048, 1024), (256, 512, 8192)])
def test_row_bias_residual_alpha_beta(M, N, K):
    a, b = _rand(M, K), _rand(K, N)
    bias, residual = _rand(M, 1, dtype=torch.float32), _rand(M, N)
    out = _rand(M, N)
    old = out.double().clone()
    tsjit.ops.matmul(a, b, bias=bias, residual=residual, alpha=0.5, beta=-2.0, activation="relu", out=out)
    ref = torch.relu(0.5 * (a.double() @ b.double()) - 2.0 * old + bias.double()) + residual.double()
    assert _rel(out, ref) < 1e-2


@pytest.mark.parametrize("out_dtype", [torch.float16, torch.float32, torch.bfloat16])
@pytest.mark.parametrize("M,N,K", [(1000, 768, 512), (16, 2048, 1024), (384, 384, 16384)])
def test_output_dtypes(M, N, K, out_dtype):
    a, b = _rand(M, K), _rand(K, N)
    out = _poisoned(M, N, dtype=out_dtype)
    tsjit.ops.matmul(a, b, out=out)
    assert _rel(out, a.double() @ b.double()) < (1e-4 if out_dtype == torch.float32 else 1e-2)
    assert tsjit.ops.matmul(a, b, out_dtype=out_dtype).dtype == out_dtype


def test_fp16_inputs():
    a, b = _rand(500, 300, dtype=torch.float16), _rand(300, 700, dtype=torch.float16)
    out = _poisoned(500, 700, dtype=torch.float16)
    tsjit.ops.matmul(a, b, out=out)
    assert _rel(out, a.double() @ b.double()) < 1e-2


@tsjit.func
def clipped_plus_row(y, row, col):
    return tsjit.math.min(y, 1.0) + row * 0.001 - col * 0.0005


@pytest.mark.parametrize("M,N,K", [(600, 700, 256), (16, 1024, 512)])
def test_user_epilogue_function_gets_global_coordinates(M, N, K):
    a, b = _rand(M, K), _rand(K, N)
    out = _poisoned(M, N, dtype=torch.float32)
    tsjit.ops.matmul(a, b, out=out, epilogue_fn=clipped_plus_row)
    rows = torch.arange(M, device="cuda", dtype=torch.float64)[:, None]
    cols = torch.arange(N, device="cuda", dtype=torch.float64)[None, :]
    ref = torch.clamp(a.double() @ b.double(), max=1.0) + rows * 0.001 - cols * 0.0005
    assert _rel(out, ref) < 1e-4


@pytest.mark.parametrize("L,M,N,K", [(4, 256, 384, 512), (3, 100, 200, 64), (8, 16, 1024, 2048)])
def test_bmm_matches_float64(L, M, N, K):
    a, b = _rand(L, M, K), _rand(L, K, N)
    out = _poisoned(L, M, N)
    tsjit.ops.bmm(a, b, out=out)
    assert _rel(out, a.double() @ b.double()) < 1e-2


@pytest.mark.parametrize("force", [None, "x", "y", "both"])
@pytest.mark.parametrize("layout", ["NK", "KN"])
def test_realigned_rows_match_float64_and_follow_new_contents(monkeypatch, force, layout):
    """Operands whose rows are 16- but not 128-byte aligned (K = 1000: 2000-byte rows; N = 1000 for KN) copied
    into 128-byte aligned rows first (the cost model's choice, or forced): right numbers, and a second call
    with new contents at the same addresses copies them again."""
    mm = __import__("sys").modules["tsjit.ops.matmul"]
    monkeypatch.setattr(__import__("sys").modules["tsjit.ops.matmul_plan"], "REALIGN", force)
    monkeypatch.setattr(mm, "_PLANS", {})
    monkeypatch.setattr(mm, "_FAST", {})
    monkeypatch.setattr(mm, "_PLAIN", {})
    M, N, K = 2000, 1000, 1000
    a = _rand(M, K)
    b = _rand(N, K).t() if layout == "NK" else _rand(K, N)
    if force is not None:
        assert "realign:" in tsjit.ops.matmul.explain(a, b)
    for _ in range(2):
        out = _poisoned(M, N)
        tsjit.ops.matmul(a, b, out=out)
        assert _rel(out, a.double() @ b.double()) < 1e-2
        a.copy_(_rand(M, K))                       # new contents, same addresses: the staged copy must follow
        b.copy_(_rand(*b.shape))


def test_runs_on_torchs_current_stream():
    a, b = _rand(2048, 2048), _rand(2048, 2048)
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        out = tsjit.ops.matmul(a, b)
        ref = (a.double() @ b.double())
    s.synchronize()
    assert _rel(out, ref) < 1e-2


def test_allocating_calls_write_every_new_output_block():
    """``matmul(a, b)`` takes the allocating lookup once it has seen an output block of torch's allocator: the
    block handed back (poisoned first), a new block while the previous output lives, and that block again each
    get the right product; a changed view of a at the same address (its transpose) is not taken for a."""
    a, b = _rand(320, 256), _rand(256, 384)
    ref = a.double() @ b.double()

    def poisoned_block():
        block = _poisoned(320, 384)
        address = block.data_ptr()
        del block                                  # freed: the next (320, 384) bf16 allocation gets it back
        return address

    first = tsjit.ops.matmul(a, b)
    address = first.data_ptr()
    first.fill_(float("nan"))
    del first
    again = tsjit.ops.matmul(a, b)                 # the same block (NaN now): the allocating lookup's hit
    assert again.data_ptr() == address and _rel(again, ref) < 1e-2
    for _ in range(2):                             # a new block while `again` lives, then that block again
        block = poisoned_block()
        other = tsjit.ops.matmul(a, b)
        assert other.data_ptr() == block and _rel(other, ref) < 1e-2
        del other
    square = _rand(256, 256)
    swapped = tsjit.ops.matmul(square.t(), b)      # same address as `square`, transposed
    assert _rel(swapped, square.t().double() @ b.double()) < 1e-2
    assert _rel(tsjit.ops.matmul(square, b), square.double() @ b.double()) < 1e-2


def test_tsjit_device_arrays():
    import numpy as np
    from tsjit.runtime.arrays import bfloat16_bits_to_float32, float_to_bfloat16_bits
    rng = np.random.default_rng()
    a_bits = float_to_bfloat16_bits(rng.standard_normal((200, 128)))
    b_bits = float_to_bfloat16_bits(rng.standard_normal((128, 320)))
    a = tsjit.to_device(a_bits, dtype=tsjit.BFloat16)
    b = tsjit.to_device(b_bits, dtype=tsjit.BFloat16)
    out = tsjit.ops.matmul(a, b)
    got = bfloat16_bits_to_float32(out.numpy()).astype(np.float64)
    ref = bfloat16_bits_to_float32(a_bits).astype(np.float64) @ bfloat16_bits_to_float32(b_bits).astype(np.float64)
    assert np.linalg.norm(got - ref) / np.linalg.norm(ref) < 1e-2


def test_shape_mismatch_names_b():
    with pytest.raises(tsjit.LaunchError, match="'b'"):
        tsjit.ops.matmul(_rand(4, 8), _rand(9, 4))


def test_dtype_mismatch_names_b():
    with pytest.raises(tsjit.LaunchError, match="'b'"):
        tsjit.ops.matmul(_rand(4, 8), _rand(8, 4, dtype=torch.float16))


def test_bad_bias_and_out_are_named():
    a, b = _rand(4, 8), _rand(8, 6)
    with pytest.raises(tsjit.LaunchError, match="'bias'"):
        tsjit.ops.matmul(a, b, bias=_rand(5))
    with pytest.raises(tsjit.LaunchError, match="'out'"):
        tsjit.ops.matmul(a, b, out=_rand(4, 7))
    with pytest.raises(tsjit.LaunchError, match="'a'"):
        tsjit.ops.matmul(a.cpu(), b)


def _hit_twice(call, out, ref, what):
    """``call()`` twice into a NaN-poisoned ``out``: the first may plan and pack, the second is a cache hit; both
    must write the product ``ref``."""
    for attempt in range(2):
        out.fill_(float("nan"))
        got = call()
        torch.cuda.synchronize()
        assert _rel(got, ref) < 1e-2, f"{what}, call {attempt + 1}"


def test_warm_calls_never_reuse_a_launch_packed_for_other_metadata_at_the_same_addresses():
    """The host caches key on data addresses and check the metadata: the same memory seen with other strides
    (a transposed view), another dtype, another shape of out, another stream, or an address off 16 bytes must
    each get its own launch, never the warm one of the previous call (every product checked against float64, the
    output poisoned before each call)."""
    square, b = _rand(256, 256), _rand(256, 384)
    out = _poisoned(256, 384)
    _hit_twice(lambda: tsjit.ops.matmul(square, b, out=out), out, square.double() @ b.double(), "plain")
    _hit_twice(lambda: tsjit.ops.matmul(square.t(), b, out=out), out, square.t().double() @ b.double(), "a.t()")
    halves_a, halves_b, halves_out = square.view(torch.float16), b.view(torch.float16), out.view(torch.float16)
    halves_a.copy_(_rand(256, 256, dtype=torch.float16))
    halves_b.copy_(_rand(256, 384, dtype=torch.float16))
    _hit_twice(lambda: tsjit.ops.matmul(halves_a, halves_b, out=halves_out), halves_out,
               halves_a.double() @ halves_b.double(), "the same memory as float16")
    square.copy_(_rand(256, 256))
    b.copy_(_rand(256, 384))
    narrow = out[:, :192]                                   # out's address, another shape and the same strides
    _hit_twice(lambda: tsjit.ops.matmul(square, b[:, :192], out=narrow), narrow,
               square.double() @ b[:, :192].double(), "narrower out at the same address")
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())         # the inputs written above are visible there
    with torch.cuda.stream(stream):
        _hit_twice(lambda: tsjit.ops.matmul(square, b, out=out), out, square.double() @ b.double(), "another stream")
    padded = _rand(256, 264)
    for offset in (8, 1):                                   # 16-byte aligned view, then a 2-byte offset (staged)
        view = padded[:, offset:offset + 256]
        _hit_twice(lambda: tsjit.ops.matmul(view, b, out=out), out, view.double() @ b.double(), f"offset {offset}")
    _hit_twice(lambda: tsjit.ops.matmul(square, b, out=out, alpha=0.5), out, 0.5 * (square.double() @ b.double()),
               "alpha")
    allocating = [tsjit.ops.matmul(square, b) for _ in range(3)]
    for got in allocating:
        assert _rel(got, square.double() @ b.double()) < 1e-2
