"""Launch-time argument errors name the argument and say expected vs given (no GPU needed: they are
raised before the driver is touched)."""
import numpy as np
import pytest

import tsjit


@tsjit.kernel
def annotated(x: tsjit.Tensor[tsjit.Float32, 1], out: tsjit.Tensor[tsjit.Float32, 1], n):
    i = tsjit.thread_idx().x
    if i < n:
        out[i] = x[i]


def test_wrong_dtype_names_argument_and_types():
    with pytest.raises(tsjit.LaunchError) as err:
        tsjit.compile(annotated, np.zeros(8, np.int16), np.zeros(8, np.float32), 8)
    assert "'x'" in str(err.value) and "Float32" in str(err.value) and "Int16" in str(err.value)


def test_wrong_rank_names_argument_and_ranks():
    with pytest.raises(tsjit.LaunchError) as err:
        tsjit.compile(annotated, np.zeros(8, np.float32), np.zeros((2, 4), np.float32), 8)
    assert "'out'" in str(err.value) and "rank 1" in str(err.value) and "rank 2" in str(err.value)


def test_scalar_where_array_expected():
    with pytest.raises(tsjit.LaunchError) as err:
        tsjit.compile(annotated, 3.0, np.zeros(8, np.float32), 8)
    assert "'x'" in str(err.value)


def test_host_numpy_array_at_launch_says_to_copy_it():
    with pytest.raises(tsjit.LaunchError) as err:
        annotated[(1,), (32,)](np.zeros(8, np.float32), np.zeros(8, np.float32), 8)
    assert "'x'" in str(err.value) and "to_device" in str(err.value)


def test_unsupported_object_is_named():
    with pytest.raises(tsjit.LaunchError) as err:
        annotated[(1,), (32,)]({"not": "an array"}, np.zeros(8, np.float32), 8)
    assert "'x'" in str(err.value)


def test_missing_argument_is_reported():
    with pytest.raises(tsjit.LaunchError) as err:
        annotated[(1,), (32,)](np.zeros(8, np.float32))
    assert "missing" in str(err.value)


def test_annotation_accepts_matching_arrays():
    c = tsjit.compile(annotated, np.zeros(8, np.float32), np.zeros(8, np.float32), 8)
    assert c.cubin[:4] == b"\x7fELF"
