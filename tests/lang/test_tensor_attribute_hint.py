"""Reading a TMA descriptor's attribute from a plain device array names the fix (a newcomer's stumble)."""
import numpy as np
import pytest

import tsjit
from tsjit.errors import CompilationError


@tsjit.kernel
def reads_box_shape(x):
    bm, bn = x.box_shape
    x[0, 0] = 1.0


@tsjit.kernel
def reads_a_misspelt_attribute(x):
    x[0, 0] = x.shapee[0]


def test_box_shape_of_an_array_says_to_pass_a_tensormap():
    with pytest.raises(CompilationError) as info:
        tsjit.compile(reads_box_shape, np.zeros((8, 8), np.float32), target="sm_90a")
    text = str(info.value)
    assert "'box_shape' belongs to a TMA descriptor" in text and "tsjit.TensorMap(array, box)" in text
    assert "x.box_shape" in text or "reads_box_shape" in text


def test_other_missing_attributes_keep_the_plain_message():
    with pytest.raises(CompilationError) as info:
        tsjit.compile(reads_a_misspelt_attribute, np.zeros((8, 8), np.float32), target="sm_90a")
    assert "TensorMap" not in str(info.value) and "shapee" in str(info.value)
