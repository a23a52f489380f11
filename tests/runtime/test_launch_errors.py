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


@tsjit.kernel
def scaled(x, out, n, SCALE: tsjit.Constexpr[float]):
    i = tsjit.thread_idx().x
    if i < n:
        out[i] = x[i] * SCALE


def test_misspelled_keyword_is_named_with_the_closest_parameter():
    """``SCALEE=2.0`` used to say only "missing a required argument: 'SCALE'" (newcomer report 6, item 10)."""
    x = np.zeros(32, np.float32)
    with pytest.raises(tsjit.LaunchError) as err:
        scaled.interpret[(1,), (32,)](x, x, n=32, SCALEE=2.0)
    message = str(err.value)
    assert "'SCALEE'" in message and "Did you mean 'SCALE'?" in message and "x, out, n, SCALE" in message


def test_misspelled_compile_option_suggests_it():
    x = np.zeros(32, np.float32)
    with pytest.raises(tsjit.errors.CompileArgumentError, match=r"'targt'. Did you mean 'target'"):
        tsjit.compile(scaled, x, x, 32, 2.0, targt="sm_90a")


def test_annotation_accepts_matching_arrays():
    c = tsjit.compile(annotated, np.zeros(8, np.float32), np.zeros(8, np.float32), 8)
    assert c.cubin[:4] == b"\x7fELF"


@tsjit.kernel
def blocked(x, BLOCK: tsjit.Constexpr[int], SCALE: tsjit.Constexpr[float], FLAG: tsjit.Constexpr[bool]):
    x[tsjit.thread_idx().x] = SCALE * BLOCK if FLAG else 0.0


@pytest.mark.parametrize("block, scale, flag, name, given", [
    (256.0, 1.0, True, "'BLOCK'", "float 256.0"), ("256", 1.0, True, "'BLOCK'", "str '256'"),
    (True, 1.0, True, "'BLOCK'", "bool True"), (256, "1", True, "'SCALE'", "str '1'"),
    (256, 1.0, 1, "'FLAG'", "int 1")])
def test_constexpr_annotation_type_is_enforced_naming_the_argument(block, scale, flag, name, given):
    with pytest.raises(tsjit.LaunchError) as err:
        tsjit.compile(blocked, np.zeros(8, np.float32), block, scale, flag)
    text = str(err.value)
    assert name in text and given in text and "tsjit.Constexpr[" in text
    assert text.endswith({"'BLOCK'": "pass an int", "'SCALE'": "pass a float", "'FLAG'": "pass a bool"}[name])


def test_constexpr_accepts_numpy_integers_and_ints_for_float():
    compiled = tsjit.compile(blocked, np.zeros(8, np.float32), np.int64(4), 2, np.True_)
    assert compiled.metadata["registers"] > 0


def test_compile_argument_errors_are_usage_errors_and_still_launch_errors():
    with pytest.raises(tsjit.CompileArgumentError) as err:
        tsjit.compile(blocked, np.zeros(8, np.float32), 4, 1.0)  # FLAG missing
    assert isinstance(err.value, tsjit.UsageError) and isinstance(err.value, TypeError)
    assert isinstance(err.value, tsjit.LaunchError)  # what compile raised before: except-compatible
    assert "'FLAG'" in str(err.value)
    with pytest.raises(tsjit.UsageTypeError) as err:
        tsjit.compile(len)
    assert "@tsjit.kernel" in str(err.value)


@tsjit.kernel
def reverse_through_shared(x, N: tsjit.Constexpr[int]):
    buf = tsjit.shared_array(tsjit.Float32, (N,))
    i = tsjit.thread_idx().x
    buf[i] = x[i]
    tsjit.syncthreads()
    x[i] = buf[N - 1 - i]


def test_a_numpy_integer_constexpr_is_a_python_int_in_the_kernel():
    """newcomer 7, item 5: ``N = a.shape[0]`` arrives as np.int64; shared_array needs a compile-time int."""
    x = np.random.default_rng().standard_normal(32).astype(np.float32)
    expected = x[::-1].copy()
    reverse_through_shared.interpret[(1,), (32,)](x, np.int64(32))
    np.testing.assert_array_equal(x, expected)


def test_calling_interpret_instead_of_indexing_it_shows_the_launch_form():
    """newcomer 7, item 14: ``k.interpret((1,), (32,))(...)``."""
    with pytest.raises(tsjit.LaunchError, match=r"reverse_through_shared\.interpret\[grid, block\]\(\*args\)"):
        reverse_through_shared.interpret((1,), (32,))(np.zeros(32, np.float32), 32)


@tsjit.kernel
def unannotated(x, out, n):
    i = tsjit.thread_idx().x
    if i < n:
        out[i] = x[i]


def test_unsupported_element_type_names_it_and_the_supported_ones():
    with pytest.raises(tsjit.LaunchError) as err:
        tsjit.compile(unannotated, np.zeros(8, np.float32), np.zeros(8, np.complex64), 8)
    text = str(err.value)
    assert "'out'" in text and "complex64" in text and "Float32" in text and "BFloat16" in text


def test_a_list_argument_says_what_compile_accepts():
    with pytest.raises(tsjit.LaunchError) as err:
        tsjit.compile(unannotated, [1.0, 2.0], np.zeros(8, np.float32), 8)
    assert "'x'" in str(err.value) and "numpy array" in str(err.value)


def test_launching_the_compiled_kernel_says_to_launch_the_kernel_function():
    compiled = tsjit.compile(annotated, np.zeros(8, np.float32), np.zeros(8, np.float32), 8)
    with pytest.raises(tsjit.LaunchError) as err:
        compiled[(1,), (32,)]
    assert "annotated[grid, block](...)" in str(err.value) and "CompiledKernel" in str(err.value)
