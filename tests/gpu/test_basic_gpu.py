"""GPU tests of the plain example kernels (issue 2): fresh random inputs, poisoned outputs,
float64 numpy references.  Each also runs under the CPU interpreter at reduced sizes
(``gpu_or_interpret``, see tests/conftest.py)."""
import numpy as np
import pytest

from tsjit import env
from tsjit.examples import basic

pytestmark = pytest.mark.gpu_or_interpret


def small(gpu_value, interpret_value):
    """The GPU size, or the reduced one under the interpreter."""
    return interpret_value if env.interpret() else gpu_value


@pytest.mark.parametrize("n", [1, 1000, 1 << 20])
def test_vector_add_matches_numpy(n):
    got, ref = basic.run_vector_add(small(n, min(n, 3000)))
    np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-6)


def test_saxpy_matches_numpy():
    got, ref = basic.run_saxpy(small(3_000_001, 3001))
    np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("n,blocks,threads", [(1 << 24, 1024, 256), (1 << 24, 132, 512), ((1 << 24) - 3, 77, 128),
                                              (0, 8, 128), (5, 1, 32)])
def test_int16_grid_stride_copy_is_exact(n, blocks, threads):
    got, ref = basic.run_copy(small(n, min(n, 20_003)), small(blocks, min(blocks, 4)), threads)
    np.testing.assert_array_equal(got, ref)


def test_block_reduction_with_shuffles_and_atomics():
    n = small(1 << 22, 20_000)
    got, ref = basic.run_block_reduce(n, small(264, 3))
    assert abs(got - ref) <= 1e-4 * np.sqrt(n) + 1e-3 * abs(ref)


@pytest.mark.parametrize("shape", [(257, 130, 70), (64, 64, 64), (1, 1, 1)])
def test_naive_matmul_matches_numpy(shape):
    got, ref = basic.run_naive_matmul(*(small(shape, tuple(min(n, 40) for n in shape))))
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)
