"""tcgen05.mma completes when its tcgen05.commit's mbarrier arrival fires (issue 13; PTX ISA 9.1 §9.7.16.12.1):
the interpreter queues the MMAs per CTA and executes them at the commit's arrival (as late as the hardware
may), so reading TMEM before waiting on the commit's barrier gives poison and overwriting the shared-memory
operands before the arrival changes the product."""
import numpy as np
import pytest

import tsjit
from interpret.tensor_tcgen05_kernels import umma_tile
from tsjit.errors import InterpretError
from tsjit.interpret import numerics

BF16 = tsjit.BFloat16


@pytest.fixture(autouse=True)
def blackwell_interpreter(monkeypatch):
    monkeypatch.setenv("TSJIT_INTERPRET", "1")
    monkeypatch.setenv("TSJIT_TARGET", "sm_100a")


def _run(mode: str, n: int = 64):
    rng = np.random.default_rng()
    a = numerics.encode(rng.standard_normal((128, 64)), BF16)
    b = numerics.encode(rng.standard_normal((n, 64)), BF16)
    a_map = tsjit.TensorMap(tsjit.to_device(a, BF16), (128, 64), swizzle="128B")
    b_map = tsjit.TensorMap(tsjit.to_device(b, BF16), (n, 64), swizzle="128B")
    out = tsjit.empty((128, n), tsjit.Float32).fill_bytes(0x00)
    umma_tile[(1,), (128,)](a_map, b_map, out, N=n, MODE=mode)
    want = numerics.decode(a, BF16).astype(np.float64) @ numerics.decode(b, BF16).astype(np.float64).T
    return out.numpy(), want


def test_waiting_on_the_commit_barrier_gives_the_product():
    got, want = _run("ok")
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_reading_tmem_before_the_commit_arrives_gives_poison():
    got, _ = _run("early")
    assert np.isnan(got).all()


def test_overwriting_an_operand_before_the_commit_arrives_changes_the_product():
    got, want = _run("overwrite")
    assert np.abs(want).max() > 1
    np.testing.assert_array_equal(got, np.zeros_like(got))


def test_overwriting_an_operand_before_the_commit_arrives_is_a_race_under_the_checker(monkeypatch):
    monkeypatch.setenv("TSJIT_INTERPRET_CHECK", "race")
    with pytest.raises(InterpretError, match="still reads") as info:
        _run("overwrite")
    assert "tensor_tcgen05_kernels.py:" in str(info.value)


def test_freeing_tmem_that_an_mma_in_flight_writes_is_reported():
    with pytest.raises(InterpretError, match="still writes columns 0..63") as info:
        _run("free")
    assert "wait on its tcgen05.commit" in str(info.value)
