"""TSJIT_AUTOTUNE=1 on the GPU (issue 15): the first call of a shape bucket measures the shortlist on
its own operands and gives the right numbers (outputs poisoned, float64 reference), the winner lands
in TSJIT_CACHE_DIR, and a second shape of the bucket uses it without measuring.

GPU-only (no ``[interpret]`` variant): the autotuner picks by measured kernel times (CUDA events), which
the CPU interpreter cannot give; the numerics of every configuration it can pick are checked under the
interpreter by test_ops_matmul_arrays_gpu.py."""
import json
import sys

import pytest

REASON = ("needs real timing: the autotuner picks by CUDA-event kernel times (torch CUDA tensors); the "
          "interpreter checks every configuration's numerics in test_ops_matmul_arrays_gpu.py")
torch = pytest.importorskip("torch", reason=REASON)

import tsjit  # noqa: E402
import tsjit.ops  # noqa: E402
from tsjit.ops import autotune  # noqa: E402

pytestmark = pytest.mark.gpu(reason=REASON)
mm = sys.modules["tsjit.ops.matmul"]


def test_autotune_measures_once_per_bucket_and_persists(monkeypatch, tmp_path):
    monkeypatch.setenv("TSJIT_AUTOTUNE", "1")
    monkeypatch.setenv("TSJIT_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(autotune, "_LOADED", [])
    monkeypatch.setattr(autotune, "_STORE", {})
    monkeypatch.setattr(mm, "_PLANS", {})
    monkeypatch.setattr(mm, "_FAST", {})
    monkeypatch.setattr(mm, "_PLAIN", {})
    calls = []
    original = autotune.measure
    monkeypatch.setattr(autotune, "measure", lambda launches, stream: calls.append(1) or original(launches, stream))
    a = torch.randn(3000, 1000, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(5000, 1000, device="cuda", dtype=torch.bfloat16).t()
    out = torch.full((3000, 5000), float("nan"), device="cuda", dtype=torch.bfloat16)
    tsjit.ops.matmul(a, b, out=out)
    ref = a.double() @ b.double()
    assert (torch.linalg.norm(out.double() - ref) / torch.linalg.norm(ref)).item() < 1e-2
    assert calls == [1]
    (entry,) = json.loads((tmp_path / autotune.FILE_NAME).read_text()).values()
    assert len(entry["us"]) == autotune.SHORTLIST and all(t > 0 for t in entry["us"].values())
    assert "measured fastest" in tsjit.ops.matmul.explain(a, b, out=out, verbose=False) or \
        "stored winner" in tsjit.ops.matmul.explain(a, b, out=out, verbose=False)
    a2 = torch.randn(2560, 1000, device="cuda", dtype=torch.bfloat16)
    b2 = torch.randn(4608, 1000, device="cuda", dtype=torch.bfloat16).t()
    out2 = torch.full((2560, 4608), float("nan"), device="cuda", dtype=torch.bfloat16)
    tsjit.ops.matmul(a2, b2, out=out2)
    assert calls == [1]                                   # the bucket's stored winner, no measurement
    ref2 = a2.double() @ b2.double()
    assert (torch.linalg.norm(out2.double() - ref2) / torch.linalg.norm(ref2)).item() < 1e-2
