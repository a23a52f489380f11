"""tsjit.ops.matmul on the memory-bound small-M shapes (issue 15), whose streamed operand (B, read once) takes
evict-first TMA loads (configs.stream_policies): against float64 on fresh random inputs with NaN-poisoned outputs,
both B layouts, split-K bit-identical run to run, and the policy visible in explain."""
import pytest

REASON = "needs torch CUDA tensors"
torch = pytest.importorskip("torch", reason=REASON)

import tsjit  # noqa: E402
import tsjit.ops  # noqa: E402

pytestmark = pytest.mark.gpu(reason=REASON)

SHAPES = [(1, 4096, 4096), (512, 4096, 4096), (16, 14336, 4096), (64, 28672, 4096), (64, 4096, 14336), (128, 4096, 4096),
          (16, 4096, 14336), (1, 28672, 4096), (128, 14336, 4096), (256, 4096, 14336), (256, 28672, 4096)]


def _rand(*shape):
    return torch.randn(*shape, device="cuda", dtype=torch.float32).to(torch.bfloat16)


@pytest.mark.parametrize("M,N,K", SHAPES)
@pytest.mark.parametrize("layout", ["NK", "KN"])
def test_streamed_products_match_float64(M, N, K, layout):
    a = _rand(M, K)
    b = _rand(N, K).t() if layout == "NK" else _rand(K, N)
    out = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
    tsjit.ops.matmul(a, b, out=out)
    assert torch.isfinite(out).all(), "unwritten (NaN) outputs"
    ref = a.double() @ b.double()
    assert ((out.double() - ref).norm() / ref.norm()).item() < 1e-2


@pytest.mark.parametrize("M,N,K", [(64, 4096, 4096), (1, 4096, 14336), (16, 28672, 4096)])
def test_streamed_products_say_so_and_split_k_is_bit_identical(M, N, K):
    a, b = _rand(M, K), _rand(N, K).t()
    text = tsjit.ops.matmul.explain(a, b)
    assert "loads evict_first" in text, text
    first = tsjit.ops.matmul(a, b)
    for _ in range(3):
        again = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
        tsjit.ops.matmul(a, b, out=again)
        assert torch.equal(first, again)
