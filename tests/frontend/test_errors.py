"""Compilation errors: located at the offending expression (absolute ``file:line:col``,
the source line, a caret), free of compiler frames, naming what is wrong."""
import os
import traceback
from dataclasses import dataclass

import pytest

import tsjit
from tsjit import Float16, Float32, Int32, ts
from tsjit.backend import emit
from tsjit.examples.ts_copy import GmemDest, GmemSource

from .compiling import assert_points_at, build, compile_error, position

THIS_FILE = os.path.abspath(__file__)
TSJIT_DIR = os.path.dirname(os.path.abspath(tsjit.__file__))
F32 = tsjit.spec(32, Float32)


# -- location, rendering, traceback ------------------------------------------------------------
@tsjit.kernel
def undefined_name(x):
    i = tsjit.thread_idx().x
    x[i] = x[i] + 2.0 * not_defined_anywhere


def test_error_points_at_the_offending_expression():
    err = compile_error(undefined_name, F32)
    assert_points_at(err, undefined_name, "not_defined_anywhere")
    assert "`not_defined_anywhere`" in err.message and "not defined" in err.message


def test_error_traceback_has_no_compiler_frames():
    err = compile_error(undefined_name, F32)
    frames = [frame.filename for frame in traceback.extract_tb(err.__traceback__)]
    compiler = [f for f in frames if f.startswith(os.path.join(TSJIT_DIR, "frontend"))
                or f.startswith(os.path.join(TSJIT_DIR, "lang")) or f.startswith(os.path.join(TSJIT_DIR, "backend"))]
    assert compiler == []
    assert err.__cause__ is None and err.__suppress_context__
    assert TSJIT_DIR not in str(err)


def test_error_survives_pickling():
    import pickle

    err = compile_error(undefined_name, F32)
    copy = pickle.loads(pickle.dumps(err))
    assert str(copy) == str(err) and copy.location == err.location


# -- unsupported constructs --------------------------------------------------------------------
@tsjit.kernel
def uses_with(x):
    with open(os.devnull) as handle:
        x[0] = 1.0


def test_with_is_not_supported():
    err = compile_error(uses_with, F32)
    assert_points_at(err, uses_with, "with open")
    assert "`with` is not supported" in err.message


@tsjit.kernel
def uses_try(x):
    try:
        x[0] = 1.0
    except Exception:
        pass


def test_try_is_not_supported():
    err = compile_error(uses_try, F32)
    assert_points_at(err, uses_try, "try:")
    assert "`try` is not supported" in err.message


@tsjit.kernel
def uses_print(x):
    i = tsjit.thread_idx().x
    print(x[i])


def test_print_in_device_code_suggests_device_print():
    err = compile_error(uses_print, F32)
    assert_points_at(err, uses_print, "print(x[i])")
    assert "tsjit.device_print" in err.message


@tsjit.kernel
def returns_a_value(x):
    return x[0]


def test_kernel_returning_a_value():
    err = compile_error(returns_a_value, F32)
    assert_points_at(err, returns_a_value, "return x[0]")
    assert "kernel cannot return a value" in err.message


@tsjit.kernel
def run_time_assert(x):
    assert x[0] > 0.0


def test_assert_on_a_run_time_value():
    err = compile_error(run_time_assert, F32)
    assert_points_at(err, run_time_assert, "assert x[0]")
    assert "compile-time condition" in err.message


@tsjit.kernel
def iterate_value(x, n):
    for v in n:
        x[0] = v


def test_iterating_over_a_run_time_value():
    err = compile_error(iterate_value, F32, 4)
    assert_points_at(err, iterate_value, "n:")
    assert "range" in err.message


@tsjit.kernel
def const_expr_of_value(x, n):
    if tsjit.const_expr(n > 1):
        x[0] = 1.0


def test_const_expr_of_a_run_time_value():
    err = compile_error(const_expr_of_value, F32, 4)
    assert_points_at(err, const_expr_of_value, "tsjit.const_expr(")
    assert "Boolean" in err.message and "compile-time" in err.message


# -- types across control flow -----------------------------------------------------------------
@tsjit.kernel
def type_differs_between_branches(x, n):
    if n > 0:
        value = x[0]
    else:
        value = n
    x[1] = value


def test_variable_with_different_types_on_two_paths():
    err = compile_error(type_differs_between_branches, F32, 3)
    assert_points_at(err, type_differs_between_branches, "if n > 0")
    assert "`value`" in err.message and "Float32" in err.message and "Int32" in err.message


@tsjit.kernel
def type_changes_in_loop(x, n):
    total = 0
    for i in range(n):
        total = total + x[i]
    x[0] = total


def test_loop_carried_variable_changing_type():
    err = compile_error(type_changes_in_loop, F32, 3)
    assert_points_at(err, type_changes_in_loop, "for i in range(n)")
    assert "`total`" in err.message and "Int32" in err.message and "Float32" in err.message
    assert "tsjit.Float32(0)" in err.message  # says what to change


@tsjit.kernel
def tensor_rebound_in_loop(x, y, n):
    t = x
    for i in range(n):
        t = y
    t[0] = 1.0


def test_rebinding_a_tensor_inside_a_run_time_loop():
    err = compile_error(tensor_rebound_in_loop, F32, F32, 3)
    assert_points_at(err, tensor_rebound_in_loop, "for i in range(n)")
    assert "`t`" in err.message and "range_constexpr" in err.message


@tsjit.kernel
def loop_over_float_argument(x, n):
    for i in range(n):
        x[i] = 1.0


@tsjit.kernel
def loop_to_float_argument(x, first, n):
    for i in range(first, n):
        x[i] = 1.0


@pytest.mark.parametrize("given", [8.0, __import__("numpy").float64(8.0)], ids=["float", "float64"])
def test_loop_bound_passed_a_float_names_the_argument(given):
    err = compile_error(loop_over_float_argument, F32, given)
    assert_points_at(err, loop_over_float_argument, "range(n)")
    assert "'n'" in err.message and "int(n)" in err.message  # names the argument, says what to pass


def test_float_loop_bound_named_among_several_arguments():
    err = compile_error(loop_to_float_argument, F32, 0, 8.0)
    assert "'n'" in err.message and "'first'" not in err.message


@tsjit.kernel
def loop_over_computed_float(x, n):
    m = n * 2.0
    for i in range(m):
        x[i] = 1.0


def test_computed_float_loop_bound_does_not_blame_an_argument():
    err = compile_error(loop_over_computed_float, F32, 4)
    assert "needs integers" in err.message and "kernel argument" not in err.message


@tsjit.kernel
def defined_in_one_branch(x, n):
    if n > 0:
        only_here = 1.0
    x[0] = only_here


def test_variable_defined_in_one_branch_only():
    err = compile_error(defined_in_one_branch, F32, 3)
    assert_points_at(err, defined_in_one_branch, "only_here", occurrence=1)
    assert "`only_here`" in err.message and "one branch" in err.message


# -- tensors -----------------------------------------------------------------------------------
@tsjit.kernel
def wrong_index_count(x):
    i = tsjit.thread_idx().x
    x[i] = x[i, 0] + 1.0


def test_wrong_number_of_tensor_indices():
    err = compile_error(wrong_index_count, F32)
    assert_points_at(err, wrong_index_count, "x[i, 0]")
    assert "rank-1" in err.message and "got 2" in err.message


@tsjit.kernel
def indexed_by_the_whole_thread_idx(x):
    x[tsjit.thread_idx()] = 1.0


@tsjit.kernel
def arithmetic_on_the_whole_thread_idx(x, C: tsjit.Constexpr[int]):
    if tsjit.const_expr(C == 0):
        x[0] = x[tsjit.block_idx() * 128 + 1]
    else:
        if tsjit.thread_idx() < 4:
            x[0] = 1.0


def test_indexing_with_a_whole_dim3_says_to_take_a_component():
    err = compile_error(indexed_by_the_whole_thread_idx, F32)
    assert_points_at(err, indexed_by_the_whole_thread_idx, "x[tsjit.thread_idx()]")
    assert "(x, y, z) triple" in err.message and "tsjit.thread_idx().x" in err.message, err.message


@pytest.mark.parametrize("variant, snippet", [(0, "tsjit.block_idx() * 128"), (1, "tsjit.thread_idx() < 4")])
def test_arithmetic_or_a_comparison_on_a_whole_dim3_says_to_take_a_component(variant, snippet):
    err = compile_error(arithmetic_on_the_whole_thread_idx, F32, variant)
    assert_points_at(err, arithmetic_on_the_whole_thread_idx, snippet)
    assert "(x, y, z) triple, not a number" in err.message and ".x" in err.message, err.message
    assert "concatenate" not in err.message


@tsjit.kernel
def misaligned_vector(x, out, C: tsjit.Constexpr[int]):
    tx = tsjit.thread_idx().x
    if tsjit.const_expr(C == 0):
        a, b, c, d = x.load_vector(tx * 4 + 1, 4)
    else:
        a, b, c, d = x.load_vector(2, 4)
    out[tx] = a + b + c + d


def test_vector_access_at_an_index_that_is_not_a_multiple_of_its_length():
    err = compile_error(misaligned_vector, F32, F32, 0)
    assert_points_at(err, misaligned_vector, "x.load_vector(tx * 4 + 1, 4)")
    assert "16-byte" in err.message and "4-byte aligned" in err.message


def test_vector_access_at_a_constant_misaligned_index():
    err = compile_error(misaligned_vector, F32, F32, 1)
    assert_points_at(err, misaligned_vector, "x.load_vector(2, 4)")
    assert "8-byte aligned" in err.message


@tsjit.kernel
def vector_too_wide(x):
    values = x.load_vector(0, 8)
    x[0] = values[0]


def test_vector_access_wider_than_16_bytes():
    err = compile_error(vector_too_wide, F32)
    assert_points_at(err, vector_too_wide, "x.load_vector(0, 8)")
    assert "at most 16 bytes" in err.message and "32" in err.message


@tsjit.kernel
def store_float_into_int(x, out):
    out[0] = x[0]


def test_storing_a_float_into_integer_memory_needs_a_conversion():
    err = compile_error(store_float_into_int, F32, tsjit.spec(1, Int32))
    assert_points_at(err, store_float_into_int, "out[0] = x[0]")
    assert "tsjit.Int32(value)" in err.message


# -- device functions and the call chain -------------------------------------------------------
@tsjit.func
def add_pair(a, b):
    return a + b


@tsjit.func
def forwards_one_argument(a):
    return add_pair(a) * 2.0


@tsjit.kernel
def calls_with_wrong_arguments(x):
    x[0] = forwards_one_argument(x[1])


def test_device_function_called_with_wrong_arguments_shows_the_call_chain():
    err = compile_error(calls_with_wrong_arguments, F32)
    assert_points_at(err, forwards_one_argument, "add_pair(a)")
    assert "add_pair" in err.message and "'b'" in err.message
    (caller,) = err.call_chain
    assert (caller.line, caller.col) == position(calls_with_wrong_arguments, "forwards_one_argument(x[1])")[1:]
    assert caller.function == "calls_with_wrong_arguments"
    text = str(err)
    assert f"called from {THIS_FILE}:{caller.line}:{caller.col + 1} (in calls_with_wrong_arguments)" in text


@tsjit.func
def innermost(v):
    return v + missing_name


@tsjit.func
def middle(v):
    return innermost(v) + 1.0


@tsjit.kernel
def calls_two_levels(x):
    x[0] = middle(x[1])


def test_call_chain_lists_the_innermost_caller_first():
    err = compile_error(calls_two_levels, F32)
    assert_points_at(err, innermost, "missing_name")
    _, middle_line, _ = position(middle, "innermost(v)")
    _, kernel_line, _ = position(calls_two_levels, "middle(x[1])")
    assert [site.line for site in err.call_chain] == [kernel_line, middle_line]  # outermost first
    called_from = [line for line in str(err).splitlines() if line.startswith("  called from")]
    assert f":{middle_line}:" in called_from[0] and "(in middle)" in called_from[0]
    assert f":{kernel_line}:" in called_from[1] and "(in calls_two_levels)" in called_from[1]


def failing_helper(n):
    raise ValueError(f"cannot tile {n} elements")


@tsjit.kernel
def calls_failing_helper(x, N: tsjit.Constexpr[int]):
    x[0] = failing_helper(N)


def test_python_helper_raising_at_compile_time_is_reported_at_the_call():
    err = compile_error(calls_failing_helper, F32, 7)
    assert_points_at(err, calls_failing_helper, "failing_helper(N)")
    assert "ValueError" in err.message and "cannot tile 7 elements" in err.message


# -- builtins misused --------------------------------------------------------------------------
@tsjit.kernel
def shuffle_width_three(x):
    i = tsjit.lane_idx()
    x[i] = tsjit.shuffle_xor(x[i], 1, width=3)


def test_shuffle_width_must_be_a_power_of_two():
    err = compile_error(shuffle_width_three, F32)
    assert_points_at(err, shuffle_width_three, "tsjit.shuffle_xor(")
    assert "width" in err.message and "3" in err.message


@tsjit.kernel
def named_barrier_sixteen(x):
    tsjit.named_barrier_sync(16, 64)
    x[0] = 1.0


def test_named_barrier_id_out_of_range():
    err = compile_error(named_barrier_sixteen, F32)
    assert_points_at(err, named_barrier_sixteen, "tsjit.named_barrier_sync(16, 64)")
    assert "0..15" in err.message and "16" in err.message


@tsjit.kernel
def named_barrier_odd_count(x):
    tsjit.named_barrier_arrive(1, 48)
    x[0] = 1.0


def test_named_barrier_thread_count_must_be_whole_warps():
    err = compile_error(named_barrier_odd_count, F32)
    assert_points_at(err, named_barrier_odd_count, "tsjit.named_barrier_arrive(1, 48)")
    assert "multiple of 32" in err.message


@tsjit.kernel
def atomic_on_half(x):
    tsjit.atomic_add(x.ptr, 1.0)


def test_atomic_add_on_float16_is_rejected():
    err = compile_error(atomic_on_half, tsjit.spec(8, Float16))
    assert_points_at(err, atomic_on_half, "tsjit.atomic_add(")
    assert "Float16" in err.message


@tsjit.kernel
def atomic_max_on_float(x):
    tsjit.atomic_max(x.ptr, 1.0)


def test_atomic_max_on_float_is_rejected():
    err = compile_error(atomic_max_on_float, F32)
    assert_points_at(err, atomic_max_on_float, "tsjit.atomic_max(")
    assert "integers" in err.message and "Float32" in err.message


@tsjit.kernel
def atomic_on_tensor(x):
    tsjit.atomic_add(x, 1.0)


def test_atomic_needs_a_pointer():
    err = compile_error(atomic_on_tensor, F32)
    assert "pointer" in err.message and "Tensor" in err.message


@tsjit.kernel
def print_placeholder_mismatch(x):
    tsjit.device_print("{} and {}", x[0])


def test_device_print_placeholders_must_match_arguments():
    err = compile_error(print_placeholder_mismatch, F32)
    assert_points_at(err, print_placeholder_mismatch, "tsjit.device_print(")
    assert "2" in err.message and "1 arguments" in err.message


@tsjit.kernel
def literal_out_of_range(x):
    x[0] = x[0] + 300


def test_literal_that_does_not_fit_the_values_dtype():
    err = compile_error(literal_out_of_range, tsjit.spec(4, tsjit.Int8))
    assert_points_at(err, literal_out_of_range, "x[0] + 300")
    assert "300" in err.message and "Int8" in err.message


# -- targets -----------------------------------------------------------------------------------
def wgmma_fence():
    """Trace-time helper emitting an sm_90a-only intrinsic (wgmma is not on sm_100a)."""
    emit.current().intrinsic("llvm.nvvm.wgmma.fence.sync.aligned", [])


@tsjit.kernel
def uses_wgmma_fence(x):
    wgmma_fence()
    x[0] = 1.0


def test_intrinsic_the_target_lacks_is_a_compilation_error():
    assert build(uses_wgmma_fence, F32).cubin  # fine on sm_90a
    err = compile_error(uses_wgmma_fence, F32, target="sm_100a")
    assert_points_at(err, uses_wgmma_fence, "wgmma_fence()")
    assert "sm_90a" in err.message and "sm_100a" in err.message


@tsjit.kernel
def portable(x, out):
    i = tsjit.thread_idx().x
    out[i] = tsjit.shuffle_xor(x[i], 1)


def test_plain_kernel_compiles_for_sm_100a():
    compiled = build(portable, F32, F32, target="sm_100a")
    assert ".target sm_100a" in compiled.ptx and "shfl.sync.bfly" in compiled.ptx


def test_unknown_target_is_a_compilation_error():
    with pytest.raises(tsjit.CompilationError, match="unknown target 'sm_75'"):
        tsjit.compile(portable, F32, F32, target="sm_75")


@tsjit.func
def returns_two_types(v, n):
    if n > 0:
        return v
    return n


@tsjit.kernel
def calls_returns_two_types(x, n):
    x[0] = returns_two_types(x[1], n)


def test_device_function_returning_different_types_points_at_the_function():
    err = compile_error(calls_returns_two_types, F32, 3)
    assert_points_at(err, returns_two_types, "def returns_two_types")
    assert "returned value" in err.message and "Float32" in err.message and "Int32" in err.message
    (caller,) = err.call_chain
    assert caller.line == position(calls_returns_two_types, "returns_two_types(x[1], n)")[1]


@tsjit.kernel
def conditional_expression_arms_differ(x, n):
    x[0] = x[1] if n > 0 else n


def test_conditional_expression_arms_of_different_types():
    err = compile_error(conditional_expression_arms_differ, F32, 3)
    assert_points_at(err, conditional_expression_arms_differ, "x[1] if n > 0 else n")
    assert "conditional expression" in err.message and "Float32" in err.message and "Int32" in err.message
    assert "<" not in err.message


@tsjit.kernel
def atomic_float_into_int(x, counts):
    tsjit.atomic_add(counts.ptr, x[0])


def test_atomic_never_truncates_a_float_into_integer_memory():
    err = compile_error(atomic_float_into_int, F32, tsjit.spec(4, Int32))
    assert_points_at(err, atomic_float_into_int, "tsjit.atomic_add(")
    assert "Float32" in err.message and "tsjit.Int32(value)" in err.message


@tsjit.kernel
def run_time_break_in_unrolled_loop(x, n):
    for k in tsjit.range_constexpr(4):
        if k < n:
            break
        x[k] = 1.0


def test_run_time_break_inside_an_unrolled_loop():
    err = compile_error(run_time_break_in_unrolled_loop, F32, 2)
    assert_points_at(err, run_time_break_in_unrolled_loop, "break", occurrence=1)
    assert "compile-time (unrolled) loop" in err.message


# -- host math on device values ----------------------------------------------------------------
import math  # noqa: E402

import numpy as np  # noqa: E402


@tsjit.kernel
def python_math_on_a_device_value(x, which: tsjit.Constexpr[int]):
    i = tsjit.thread_idx().x
    if tsjit.const_expr(which == 0):
        x[i] = math.exp(x[i])
    elif tsjit.const_expr(which == 1):
        x[i] = math.sqrt(x[i])
    elif tsjit.const_expr(which == 2):
        x[i] = np.exp(x[i])
    elif tsjit.const_expr(which == 3):
        x[i] = math.fabs(x[i])
    else:
        x[i] = math.gamma(x[i])


@pytest.mark.parametrize("which, host, hint", [(0, "math.exp", "tsjit.math.exp"), (1, "math.sqrt", "tsjit.math.sqrt"),
                                               (2, "numpy.exp", "tsjit.math.exp"), (3, "math.fabs", "tsjit.math.abs"),
                                               (4, "math.gamma", "tsjit.math functions (")])
def test_host_math_function_on_a_device_value_names_the_tsjit_math_replacement(which, host, hint):
    err = compile_error(python_math_on_a_device_value, F32, which)
    assert host in err.message and hint in err.message and "index" not in err.message
    assert_points_at(err, python_math_on_a_device_value, host.replace("numpy", "np"))


@tsjit.kernel
def misspelled_builtin_keyword(x):
    s = tsjit.shared_array(Float32, 32, alignn=128)
    s[0] = 1.0
    x[0] = s[0]


def test_misspelled_builtin_keyword_suggests_the_closest_keyword():
    """``shared_array(..., alignn=128)`` (newcomer report 6, item 10)."""
    err = compile_error(misspelled_builtin_keyword, F32)
    assert_points_at(err, misspelled_builtin_keyword, "tsjit.shared_array")
    assert "'alignn'" in err.message and "Did you mean 'align'?" in err.message


@tsjit.kernel
def scales_a_row(x, out):
    i = tsjit.thread_idx().x
    out[i] = x[i] * 2.0


@tsjit.kernel
def stores_two_indices(x, out):
    i = tsjit.thread_idx().x
    out[i, 0] = x[i]


def test_sub_array_in_arithmetic_names_the_array_its_rank_and_the_indices():
    """A rank-2 `x` indexed once used to say "unsupported operand type(s) for *: 'Tensor' and 'float'"
    (newcomer report 6, item 13)."""
    err = compile_error(scales_a_row, tsjit.spec((32, 4), Float32), F32)
    assert_points_at(err, scales_a_row, "x[i] * 2.0")
    assert "`x[i]`" in err.message and "rank-2 array `x`" in err.message and "`x[i, j]`" in err.message


def test_too_many_indices_names_the_array():
    err = compile_error(stores_two_indices, F32, F32)
    assert_points_at(err, stores_two_indices, "out[i, 0]")
    assert err.message.startswith("`out` (rank 1): ") and "got 2" in err.message


# -- subset messages that name the fix (newcomer 7, item 13) -------------------------------------
@tsjit.kernel
def thread_idx_not_called(x):
    x[tsjit.thread_idx.x] = 1.0


@tsjit.kernel
def range_constexpr_without_tsjit(x):
    for i in range_constexpr(4):  # noqa: F821  (the newcomer's mistake)
        x[i] = 1.0


@tsjit.kernel
def len_of_an_array(x):
    for i in range(len(x)):
        x[i] = 1.0


def test_an_attribute_of_an_uncalled_builtin_says_call_it():
    err = compile_error(thread_idx_not_called, F32)
    assert_points_at(err, thread_idx_not_called, "tsjit.thread_idx.x")
    assert "no attribute `x`" in err.message and "thread_idx().x" in err.message


def test_a_public_tsjit_name_used_bare_suggests_its_tsjit_spelling():
    err = compile_error(range_constexpr_without_tsjit, F32)
    assert_points_at(err, range_constexpr_without_tsjit, "range_constexpr(4)")
    assert "`range_constexpr` is not defined" in err.message and "did you mean tsjit.range_constexpr?" in err.message


def test_len_of_a_device_array_names_its_shape():
    err = compile_error(len_of_an_array, F32)
    assert_points_at(err, len_of_an_array, "len(x)")
    assert "len()" in err.message and "x.shape[0]" in err.message


# -- a Python for loop in a schedule (newcomer 7, item 4) ----------------------------------------
@tsjit.kernel
def schedule_with_a_python_for(src, dst, num_entries):
    cta, ctas = tsjit.block_idx().x, tsjit.grid_dim().x
    source = GmemSource(name="source", src=src)
    dest = GmemDest(name="dest", dst=dst)

    @ts.schedule
    def copy_schedule(s: GmemSource, d: GmemDest):
        for t in range(cta, num_entries, ctas):   # the newcomer's loop: meant ts.domain_loop
            d.store(s.load())

    task = ts.Task("copy", [source], [dest], warp_idx=0, num_warps=1, schedule=copy_schedule(source, dest))
    manager = ts.TaskManager([task], {dest: [source]}, verbose=False)
    manager.setup_resources_and_tasks()
    manager.run()


def test_a_python_for_over_run_time_bounds_in_a_schedule_names_domain_loop():
    err = compile_error(schedule_with_a_python_for, F32, F32, 64)
    assert_points_at(err, schedule_with_a_python_for, "range(cta, num_entries, ctas)")
    assert "run-time bound" in err.message and "with ts.domain_loop(start, end, step):" in err.message


# -- an attribute a compiler object does not have lists the ones it has (newcomer 7, item 11) -----
@dataclass(kw_only=True)
class SourceReadingAStage(GmemSource):
    @ts.consumer_work(returns="item")
    def load(self, stage_info):
        return self.src[stage_info.stage]          # the newcomer's guess; StageInfo has stage_idx


@tsjit.kernel
def stage_info_without_stage(src, dst, num_entries):
    source = SourceReadingAStage(name="source", src=src)
    dest = GmemDest(name="dest", dst=dst)

    @ts.schedule
    def copy_schedule(s: GmemSource, d: GmemDest):
        with ts.domain_loop(tsjit.thread_idx().x, num_entries, 32):
            d.store(s.load())

    task = ts.Task("copy", [source], [dest], warp_idx=0, num_warps=1, schedule=copy_schedule(source, dest))
    manager = ts.TaskManager([task], {dest: [source]}, verbose=False)
    manager.setup_resources_and_tasks()
    manager.run()


def test_a_missing_stage_info_attribute_lists_the_real_ones():
    err = compile_error(stage_info_without_stage, F32, F32, 64)
    assert_points_at(err, SourceReadingAStage.load, "stage_info.stage")
    assert "`StageInfo` object has no attribute `stage`" in err.message
    assert "did you mean 'stage_idx'" in err.message and "loop_offset" in err.message


@tsjit.kernel
def work_method_called_outside_a_schedule(src):
    source = GmemSource(name="source", src=src)
    source.load()


def test_a_work_method_called_outside_a_schedule_says_where_it_belongs():
    err = compile_error(work_method_called_outside_a_schedule, F32)
    assert_points_at(err, work_method_called_outside_a_schedule, "source.load()")
    assert "`GmemSource.load` is a Task Scheduling work method" in err.message, err.message
    assert "@ts.schedule" in err.message and "r.load()" in err.message and "stage_info" not in err.message
