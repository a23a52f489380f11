"""``tsjit.ops.operands.shares_memory``: whether two matmul operands have a byte in common, which decides whether
``out`` may be written while an input is read.  Checked against numpy's exact ``np.shares_memory`` on views of one
buffer, including the slices beside each other that a fused projection writes into."""
import numpy as np
import pytest

from tsjit.lang import dtypes as dt
from tsjit.ops.operands import Operand, shares_memory


def _operand(view, base):
    """The rank-3 Operand of a 2-D numpy view of ``base`` (element strides, address = base's + offset)."""
    strides = tuple(s // view.itemsize for s in view.strides)
    ptr = view.__array_interface__["data"][0]
    assert base.__array_interface__["data"][0] <= ptr
    return Operand((1,) + view.shape, (0,) + strides, dt.Float16, ptr, view, False)


BUFFER = np.zeros((64, 384), np.float16)
VIEWS = {
    "cols 0-127": BUFFER[:, :128], "cols 128-383": BUFFER[:, 128:], "cols 64-319": BUFFER[:, 64:320],
    "cols 100-101": BUFFER[:, 100:102], "rows 0-31": BUFFER[:32], "rows 32-63": BUFFER[32:],
    "rows 16-47": BUFFER[16:48], "transposed cols 0-127": BUFFER[:, :128].T, "last row tail": BUFFER[63:, 300:],
    "column 383": BUFFER[:, 383:], "one element": BUFFER[5:6, 7:8],
}


@pytest.mark.parametrize("x, y", [(x, y) for x in VIEWS for y in VIEWS if x < y])
def test_shares_memory_matches_numpy_on_views_of_one_buffer(x, y):
    a, b = VIEWS[x], VIEWS[y]
    assert shares_memory(_operand(a, BUFFER), _operand(b, BUFFER)) == np.shares_memory(a, b), (x, y)


def test_views_without_a_unit_stride_are_compared_element_by_element():
    """Even and odd columns interleave but share no byte; a column against a row block does."""
    even, odd = BUFFER[:, 0:128:2], BUFFER[:, 1:128:2]
    for a, b in ((even, odd), (even, BUFFER[:, 128:]), (even, BUFFER[:, 126:130]), (BUFFER[::2, 5:6], BUFFER[1::2])):
        assert shares_memory(_operand(a, BUFFER), _operand(b, BUFFER)) == np.shares_memory(a, b)


def test_separate_buffers_never_share():
    other = np.zeros((64, 384), np.float16)
    assert not shares_memory(_operand(BUFFER, BUFFER), _operand(other, other))
