"""tsjit.math.tanh / erf (formulas over exp, no libdevice) and the listing of a missing name.

The error bounds their docstrings state are measured here on dense Float32 grids against
float64 references (``math.erf``, ``numpy.tanh``), evaluating the very formula the device
code is built from (``tanh_formula`` / ``erf_formula``) with numpy's exact-rounding ``exp``.
The device numbers (with ``ex2.approx``) are checked by the ``gpu_or_interpret`` test at the end.
"""
import math

import numpy as np
import pytest

import tsjit
from tsjit import Float16, Float32, Float64
from tsjit.lang import math as device_math

from .compiling import build, ptx_ops


def _host(formula, x):
    with np.errstate(invalid="ignore", over="ignore"):
        return formula(x, np.exp, np.abs, np.where)


def test_erf_absolute_error_on_a_dense_grid_is_within_the_documented_bound():
    x = np.linspace(-6, 6, 1_200_001, dtype=np.float32)
    got = _host(device_math.erf_formula, x)
    assert got.dtype == np.float32
    ref = np.array([math.erf(float(v)) for v in x])
    assert np.max(np.abs(got - ref)) <= 5e-7


def test_erf_relative_error_near_zero_is_within_the_documented_bound():
    x = np.logspace(-30, np.log10(0.4999), 200_001).astype(np.float32)
    x = np.concatenate([x, -x])
    ref = np.array([math.erf(float(v)) for v in x])
    assert np.max(np.abs(_host(device_math.erf_formula, x) - ref) / np.abs(ref)) <= 1e-6


def test_tanh_relative_error_on_dense_grids_is_within_the_documented_bound():
    x = np.concatenate([np.linspace(-20, 20, 2_000_001, dtype=np.float32),
                        np.logspace(-30, 1.5, 200_001).astype(np.float32)])
    x = x[x != 0]
    ref = np.tanh(x.astype(np.float64))
    assert np.max(np.abs(_host(device_math.tanh_formula, x) - ref) / np.abs(ref)) <= 1e-6


def test_tanh_and_erf_saturate_and_keep_zero_and_nan():
    special = np.float32([np.inf, -np.inf, 1e30, -1e30, 0.0, np.nan])
    for formula in (device_math.tanh_formula, device_math.erf_formula):
        got = _host(formula, special)
        assert list(got[:5]) == [1.0, -1.0, 1.0, -1.0, 0.0] and np.isnan(got[5])


@tsjit.kernel
def tanh_erf(x, out_t, out_e, n):
    i = tsjit.thread_idx().x + tsjit.block_idx().x * tsjit.block_dim().x
    if i < n:
        out_t[i] = tsjit.math.tanh(x[i])
        out_e[i] = tsjit.math.erf(x[i])


@pytest.mark.parametrize("dtype", [Float32, Float16])
def test_tanh_and_erf_compile_to_exp_and_selects(dtype):
    compiled = build(tanh_erf, *(tsjit.spec(64, dtype) for _ in range(3)), 64)
    assert len(ptx_ops(compiled.ptx, "ex2.approx")) >= 2
    assert ptx_ops(compiled.ptx, "selp") or ptx_ops(compiled.ptx, "slct")


@tsjit.kernel
def tanh64(x, out):
    out[0] = tsjit.math.tanh(x[0])


@tsjit.kernel
def erf64(x, out):
    out[0] = tsjit.math.erf(x[0])


@pytest.mark.parametrize("kernel, name", [(tanh64, "tanh"), (erf64, "erf")])
def test_float64_tanh_and_erf_are_refused(kernel, name):
    with pytest.raises(tsjit.CompilationError, match=f"tsjit.math.{name} is not available for Float64"):
        build(kernel, tsjit.spec(4, Float64), tsjit.spec(4, Float64))


def test_a_missing_tsjit_math_name_lists_the_functions_closest_first():
    with pytest.raises(AttributeError) as err:
        tsjit.math.tanhh  # noqa: B018
    message = str(err.value)
    assert message.startswith("module 'tsjit.math' has no attribute 'tanhh'; it has: tanh, ")
    for name in ("erf", "exp", "sqrt", "pi"):
        assert f" {name}," in message or message.endswith(f" {name}")
    assert not hasattr(tsjit.math, "gelu") and hasattr(tsjit.math, "erf")
    assert "erf_formula" not in device_math.available() and "LOG2E" not in device_math.available()


def test_dir_of_tsjit_math_shows_only_the_public_builtins():
    shown = dir(tsjit.math)
    assert shown == sorted(tsjit.math.__all__) == device_math.available()
    assert {"exp", "sqrt", "tanh", "erf", "fma", "min", "max", "pi", "inf"} <= set(shown)
    for internal in ("Value", "emit", "dt", "difflib", "builtins", "cast_to", "LOG2E", "erf_formula", "available"):
        assert internal not in shown
    assert all(not name.startswith("_") for name in shown)
    assert callable(device_math.erf_formula) and callable(tsjit.math.available)   # still importable


@tsjit.kernel
def uses_missing(x, out):
    out[0] = tsjit.math.atanh(x[0])


def test_a_missing_tsjit_math_name_in_a_kernel_lists_the_functions():
    with pytest.raises(tsjit.CompilationError) as err:
        build(uses_missing, tsjit.spec(4, Float32), tsjit.spec(4, Float32))
    message = str(err.value)
    assert "has no attribute `atanh`; tsjit.math has: tanh, " in message, message


@pytest.mark.gpu_or_interpret
def test_tanh_and_erf_on_the_device_match_float64_references():
    """With ex2.approx: the formula bounds plus 2.5e-7; fresh random inputs, poisoned outputs.  Under the CPU
    interpreter (2^12 elements instead of 2^20) ``ex2.approx`` is an exact-rounding exp2, so this pins the
    compiled formula, its Float32 rounding and the grid's masking."""
    rng = np.random.default_rng()
    n = 1 << 12 if tsjit.env.interpret() else 1 << 20
    small = min(4096, n // 4)
    host = np.concatenate([rng.uniform(-8, 8, n - small), rng.uniform(-0.5, 0.5, small)]).astype(np.float32)
    x = tsjit.to_device(host)
    out_t, out_e = tsjit.to_device(np.full(n, np.nan, np.float32)), tsjit.to_device(np.full(n, np.nan, np.float32))
    tanh_erf[((n + 255) // 256,), (256,)](x, out_t, out_e, n)
    ref_t = np.tanh(host.astype(np.float64))
    ref_e = np.array([math.erf(float(v)) for v in host])
    got_t, got_e = out_t.numpy(), out_e.numpy()
    assert np.max(np.abs(got_t - ref_t) - 1e-6 * np.abs(ref_t)) <= 2.5e-7
    assert np.max(np.abs(got_e - ref_e)) <= 5e-7 + 2.5e-7
