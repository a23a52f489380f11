"""tsjit.shared_array's element type (newcomer report 8, item 4): numpy dtypes and names are accepted
as everywhere else in tsjit (tsjit.lang.dtypes.lookup); anything else is named with the fix."""
import numpy as np
import pytest

import tsjit
from tsjit.errors import CompilationError


def _reverse(dtype):
    @tsjit.kernel
    def rev(x, out):
        buf = tsjit.shared_array(dtype, (2, 64))
        t = tsjit.thread_idx().x
        buf[1, t] = x[t]
        tsjit.syncthreads()
        out[t] = buf[1, 63 - t]
    x = np.random.default_rng(4).standard_normal(64).astype(np.float32)
    out = np.full(64, np.nan, np.float32)
    rev.interpret[(1,), (64,)](x, out)
    return x, out


@pytest.mark.parametrize("dtype", [np.float32, np.dtype("float32"), "float32", "Float32", tsjit.Float32],
                         ids=["np.float32", "np.dtype", "numpy-name", "tsjit-name", "tsjit"])
def test_shared_array_accepts_numpy_dtypes_and_names(dtype):
    x, out = _reverse(dtype)
    assert np.array_equal(out, x[::-1])


@pytest.mark.parametrize("dtype, shown", [(3, "3 (of type int)"), ("floaty", "'floaty'")])
def test_shared_array_names_a_bad_element_type_and_the_fix(dtype, shown):
    with pytest.raises(CompilationError) as info:
        _reverse(dtype)
    text = str(info.value)
    assert f"shared_array: the element type {shown} is not a dtype" in text
    assert "tsjit.Float32" in text and "np.float32" in text
    assert "test_shared_array_dtype.py" in text      # at the user's line
