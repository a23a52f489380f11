"""Issue 9 §4: constructs that used to compile to a wrong kernel, raise a raw Python exception or
never finish.  Each now compiles to the right code or fails with a located CompilationError
(absolute file:line:col, the line, a caret) that says what to write instead."""
import itertools
import math as MATH
import re
import time
import warnings

import numpy as np
import pytest

import tsjit
from tsjit import BFloat16, Float16, Float32, Int32, Uint32
from tsjit.errors import TsjitError
from tsjit.lang.values import round_to_float

from .compiling import assert_points_at, blocks, build, compile_error, instructions, kernel_ir

F32 = tsjit.spec(32, Float32)
I32 = tsjit.spec(32, Int32)


# -- membership tests with run-time values ---------------------------------------------------
@tsjit.kernel
def store_if_in_set(x):
    i = tsjit.thread_idx().x
    if i in {3, 5}:
        x[i] = 1.0


@tsjit.kernel
def store_if_not_in_tuple(x):
    i = tsjit.thread_idx().x
    if i not in (3, 5):
        x[i] = 1.0


def test_in_set_with_a_run_time_value_compares_each_element_at_run_time():
    llir = build(store_if_in_set, F32).llir
    compares = [" ".join(line.split()) for line in kernel_ir(llir).splitlines() if "icmp eq" in line]
    assert len(compares) == 2 and compares[0].endswith(", 3") and compares[1].endswith(", 5")
    assert "if.then" in blocks(llir) and any("store float" in line for line in blocks(llir)["if.then"])


def test_not_in_tuple_with_a_run_time_value_negates_the_run_time_test():
    llir = build(store_if_not_in_tuple, F32).llir
    assert len([line for line in kernel_ir(llir).splitlines() if "icmp eq" in line]) == 2
    assert instructions(llir, "xor")  # the negation of the `or` of the compares
    assert any("store float" in line for line in blocks(llir)["if.then"])


@tsjit.kernel
def store_if_in_range(x, n):
    i = tsjit.thread_idx().x
    if i in range(2, n, 3):
        x[i] = 1.0


def test_in_range_with_run_time_values_tests_bounds_and_step():
    llir = build(store_if_in_range, F32, 20).llir
    body = kernel_ir(llir)
    assert "icmp sge" in body and "icmp slt" in body and "srem" in body


@tsjit.kernel
def in_a_device_array(x):
    i = tsjit.thread_idx().x
    if i in x:
        x[i] = 1.0


def test_in_a_device_array_is_a_located_error():
    err = compile_error(in_a_device_array, F32)
    assert_points_at(err, in_a_device_array, "i in x")
    assert "tuple, list, set or range" in err.message


# -- f-strings, sets and other Python protocols on device values -------------------------------
@tsjit.kernel
def print_fstring(x):
    i = tsjit.thread_idx().x
    tsjit.device_print(f"x[{i}] = {x[i]:.3f} ({i:04x}, {'tag'})")


def test_fstring_of_device_values_prints_them_at_run_time():
    compiled = build(print_fstring, F32)
    assert re.search(r'c"x\[%d\] = %\.3f \(%04x, tag\)\\0a\\00"', compiled.llir), compiled.llir
    assert "Value(" not in compiled.llir
    allocas = instructions(compiled.llir, "alloca")
    assert len(allocas) == 1 and "{i32, double, i32}" in allocas[0]


@tsjit.kernel
def print_with_format_spec(x):
    tsjit.device_print("{:>8.2e} and {:+d}", x[0], tsjit.thread_idx().x)


def test_format_argument_form_takes_printf_specs():
    assert re.search(r'c"%8\.2e and %\+d\\0a\\00"', build(print_with_format_spec, F32).llir)


@tsjit.kernel
def fstring_outside_device_print(x):
    i = tsjit.thread_idx().x
    label = str(f"{x[i]}")
    tsjit.static_print(label)


def test_fstring_of_device_values_used_as_python_text_is_an_error():
    err = compile_error(fstring_outside_device_print, F32)
    assert_points_at(err, fstring_outside_device_print, 'str(f"{x[i]}")')
    assert "device_print" in err.message


@tsjit.kernel
def format_a_device_value(x):
    i = tsjit.thread_idx().x
    text = "{}".format(x[i])
    tsjit.static_print(text)


def test_formatting_a_device_value_in_python_points_to_device_print():
    err = compile_error(format_a_device_value, F32)
    assert_points_at(err, format_a_device_value, '"{}".format(x[i])')
    assert 'device_print("x = {}", x)' in err.message


@tsjit.kernel
def set_of_device_values(x):
    i = tsjit.thread_idx().x
    s = {x[i], x[i]}
    x[i] = len(s)


def test_set_of_device_values_is_refused_instead_of_deduplicated_by_identity():
    err = compile_error(set_of_device_values, I32)
    assert_points_at(err, set_of_device_values, "{x[i], x[i]}")
    assert "set element" in err.message and "tuple" in err.message


@tsjit.kernel
def dict_keyed_by_device_value(x):
    i = tsjit.thread_idx().x
    table = {x[i]: 1}
    x[i] = table[x[i]]


def test_dict_keyed_by_a_device_value_is_refused():
    err = compile_error(dict_keyed_by_device_value, I32)
    assert_points_at(err, dict_keyed_by_device_value, "{x[i]: 1}")
    assert "dict key" in err.message


# -- integer division and shifts never hand LLVM undefined behaviour --------------------------
@tsjit.kernel
def floor_divide_by_zero(x):
    i = tsjit.thread_idx().x
    x[i] = x[i] // 0


@tsjit.kernel
def modulo_by_zero(x):
    i = tsjit.thread_idx().x
    x[i] = x[i] % tsjit.Int32(0)


@pytest.mark.parametrize("kernel, snippet", [(floor_divide_by_zero, "x[i] // 0"),
                                             (modulo_by_zero, "x[i] % tsjit.Int32(0)")])
def test_integer_division_by_constant_zero_is_a_located_error(kernel, snippet):
    err = compile_error(kernel, I32)
    assert_points_at(err, kernel, snippet)
    assert "by zero" in err.message


@tsjit.kernel
def divide_then_test_divisor(x, b: Int32):
    i = tsjit.thread_idx().x
    x[i] = x[i] // b
    if b == 0:
        x[i + 1] = -7


def test_run_time_division_does_not_let_llvm_delete_the_zero_check():
    # LLVM's sdiv by zero is UB, so `if b == 0` after `a // b` used to fold away.
    compiled = build(divide_then_test_divisor, I32, 3)
    assert "-7" in compiled.ptx
    assert re.search(r"\bdiv\.s32\b", compiled.ptx)


@tsjit.kernel
def divide_by_minus_one(x):
    i = tsjit.thread_idx().x
    x[i] = x[i] // -1
    x[i + 1] = x[i + 1] % -1


def test_division_by_constant_minus_one_wraps_instead_of_overflowing():
    llir = build(divide_by_minus_one, I32).llir
    assert not instructions(llir, "sdiv") and not instructions(llir, "srem")
    assert instructions(llir, "sub")  # 0 - x wraps INT_MIN to INT_MIN
    assert any("store i32 0," in line for line in kernel_ir(llir).splitlines())


@tsjit.kernel
def shift_too_far(x):
    i = tsjit.thread_idx().x
    x[i] = x[i] << 32


def test_constant_shift_beyond_the_width_is_a_located_error():
    err = compile_error(shift_too_far, I32)
    assert_points_at(err, shift_too_far, "x[i] << 32")
    assert "0..31" in err.message and "Int64" in err.message


@tsjit.kernel
def shift_by_run_time_amount(x, n: Int32):
    i = tsjit.thread_idx().x
    x[i] = x[i] << n
    x[i + 1] = x[i + 1] >> n


def test_run_time_shift_amount_is_clamped_like_ptx():
    llir = build(shift_by_run_time_amount, I32, 3).llir
    assert len([line for line in kernel_ir(llir).splitlines() if "icmp uge" in line and ", 32" in line]) == 2
    assert len(instructions(llir, "select")) == 2  # shl: 0 past the width; ashr: the amount clamps to 31


# -- raw Python exceptions become located errors ----------------------------------------------
@tsjit.kernel
def generator_kernel(x):
    x[0] = 1.0
    yield x


def test_yield_is_a_located_error():
    err = compile_error(generator_kernel, F32)
    assert_points_at(err, generator_kernel, "yield x")
    assert "`yield` is not supported" in err.message


@tsjit.func
def forever(n):
    return forever(n - 1) + 1


@tsjit.kernel
def calls_a_recursion_without_end(x):
    i = tsjit.thread_idx().x
    x[i] = forever(i)


def test_recursion_that_does_not_end_at_compile_time_is_a_located_error():
    err = compile_error(calls_a_recursion_without_end, I32)
    assert_points_at(err, forever, "forever(n - 1)")
    assert "`forever` calls itself" in err.message and "loop" in err.message
    text = str(err)
    assert "more calls" in text and len(text.splitlines()) < 30  # the chain is shortened
    assert f"called from {err.call_chain[0]}" in text  # the kernel's call is shown


@tsjit.func
def countdown(n: tsjit.Constexpr[int], v):
    if tsjit.const_expr(n == 0):
        return v
    return countdown(n - 1, v + 1)


@tsjit.kernel
def calls_a_recursion_with_end(x):
    i = tsjit.thread_idx().x
    x[i] = countdown(5, x[i])


def test_recursion_ending_at_compile_time_still_compiles():
    assert len(instructions(build(calls_a_recursion_with_end, I32).llir, "add")) == 5


@tsjit.kernel
def half_constants(x, y):
    x[0] = tsjit.Float16(70000.0)
    x[1] = tsjit.Float16(-1e300)
    y[0] = tsjit.BFloat16(1e39)
    y[1] = tsjit.BFloat16(10 ** 400)


def test_float_constants_beyond_the_range_round_to_inf_like_the_run_time_conversion():
    llir = build(half_constants, tsjit.spec(2, Float16), tsjit.spec(2, BFloat16)).llir
    body = kernel_ir(llir)
    assert "store half 0x7ff0000000000000" in body  # +inf
    assert "store half 0xfff0000000000000" in body  # -inf
    assert body.count("store bfloat 0xR7F80") == 2


def test_float_constant_rounding_matches_numpy():
    for value in (70000.0, 65519.0, 65520.0, 1e-8, -3.3, 10 ** 400, float("nan")):
        with np.errstate(over="ignore"):
            expected = float(np.float16(value)) if value != 10 ** 400 else float("inf")
        got = round_to_float(value, Float16)
        assert got == expected or (got != got and expected != expected)
    assert round_to_float(1e39, Float32) == float("inf")


@tsjit.kernel
def appends_in_a_run_time_loop(x, n: Int32):
    i = tsjit.thread_idx().x
    acc = []
    for j in range(n):
        acc.append(x[j])
    x[i] = acc[0]


def test_appending_device_values_to_a_list_in_a_run_time_loop_is_located():
    err = compile_error(appends_in_a_run_time_loop, F32, 3)
    assert_points_at(err, appends_in_a_run_time_loop, "acc.append(x[j])")
    assert "`acc`" in err.message and "run-time loop" in err.message


@tsjit.kernel
def stores_into_a_list_under_a_run_time_if(x):
    i = tsjit.thread_idx().x
    values = [0.0, 0.0]
    if i > 3:
        values[0] = x[i]
    x[i] = values[0]


def test_item_assignment_into_a_list_under_a_run_time_if_is_located():
    err = compile_error(stores_into_a_list_under_a_run_time_if, F32)
    assert_points_at(err, stores_into_a_list_under_a_run_time_if, "values[0] = x[i]")
    assert "`values`" in err.message and "run-time `if`" in err.message


def add_to(collection, value):
    collection.append(value)


@tsjit.kernel
def appends_through_a_helper(x):
    i = tsjit.thread_idx().x
    acc = []
    if i > 3:
        add_to(acc, x[i])
    x[i] = 1.0


def test_a_list_changed_out_of_sight_is_reported_at_the_run_time_if():
    err = compile_error(appends_through_a_helper, F32)
    assert_points_at(err, appends_through_a_helper, "if i > 3:")
    assert "`acc`" in err.message


@tsjit.kernel
def builds_a_list_at_compile_time(x):
    i = tsjit.thread_idx().x
    acc = []
    for j in tsjit.range_constexpr(4):
        acc.append(x[i + j])
    if i > 3:
        local = []
        local.append(acc[0])
        x[i] = local[0] + acc[3]


def test_lists_built_at_compile_time_or_inside_the_branch_still_work():
    llir = build(builds_a_list_at_compile_time, F32).llir
    assert len(instructions(llir, "load")) == 4


@tsjit.kernel
async def async_kernel(x):
    x[0] = 1.0


def test_async_def_kernel_is_a_located_error():
    err = compile_error(async_kernel, F32)
    assert_points_at(err, async_kernel, "async def async_kernel")
    assert "remove `async`" in err.message


# -- compiles that never end ------------------------------------------------------------------
@tsjit.func
def first_of(*values):
    return values[0]


@tsjit.kernel
def star_unpacks_a_device_array(x):
    x[0] = first_of(*x)


@tsjit.kernel
def loops_over_a_device_array(x):
    for v in x:
        x[0] = v


@pytest.mark.parametrize("kernel, snippet", [(star_unpacks_a_device_array, "first_of(*x)"),
                                             (loops_over_a_device_array, "x:")])
def test_iterating_a_device_array_at_compile_time_is_a_located_error(kernel, snippet):
    start = time.process_time()
    err = compile_error(kernel, F32)
    assert time.process_time() - start < 5
    assert_points_at(err, kernel, snippet)
    assert "range(x.shape[0])" in err.message


@tsjit.kernel
def loops_over_an_endless_iterator(x):
    for j in itertools.count():
        x[0] = 1.0


def test_endless_compile_time_loop_stops_at_the_unroll_limit():
    start = time.process_time()
    err = compile_error(loops_over_an_endless_iterator, F32)
    assert time.process_time() - start < 10
    assert_points_at(err, loops_over_an_endless_iterator, "itertools.count()")
    assert "4096" in err.message and "unroll_limit" in err.message and "TSJIT_UNROLL_LIMIT" in err.message


@tsjit.kernel
def unrolls_a_million(x):
    for j in tsjit.range_constexpr(10 ** 6):
        x[0] = 1.0


def test_oversized_range_constexpr_fails_before_unrolling():
    start = time.process_time()
    err = compile_error(unrolls_a_million, F32)
    assert time.process_time() - start < 1
    assert_points_at(err, unrolls_a_million, "tsjit.range_constexpr(10 ** 6)")
    assert "1000000 iterations" in err.message


@tsjit.kernel
def unrolls_five(x):
    for j in tsjit.range_constexpr(5):
        x[j] = 1.0


def test_unroll_limit_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("TSJIT_UNROLL_LIMIT", "4")
    err = compile_error(unrolls_five, F32)
    assert "5 iterations" in err.message and "limit of 4" in err.message


def test_unroll_limit_kernel_option_wins_over_the_environment(monkeypatch):
    monkeypatch.setenv("TSJIT_UNROLL_LIMIT", "4")
    generous = tsjit.kernel(unroll_limit=5)(unrolls_five.fn)
    assert len(instructions(build(generous, F32).llir, "store")) == 5
    strict = tsjit.kernel(unroll_limit=2)(unrolls_five.fn)
    monkeypatch.delenv("TSJIT_UNROLL_LIMIT")
    assert "limit of 2" in compile_error(strict, F32).message


@tsjit.kernel
def unpacks_too_many(x):
    a, *rest = tsjit.range_constexpr(10 ** 5)
    x[0] = a


def test_unpacking_is_bounded_by_the_unroll_limit():
    assert "unpacking" in compile_error(unpacks_too_many, F32).message


@tsjit.kernel
def huge_compile_time_integer(x):
    x[0] = (2 ** 10 ** 9) % 7


def test_enormous_compile_time_integers_are_refused_quickly():
    start = time.process_time()
    err = compile_error(huge_compile_time_integer, I32)
    assert time.process_time() - start < 1
    assert_points_at(err, huge_compile_time_integer, "2 ** 10 ** 9")
    assert "bits" in err.message


@tsjit.kernel
def large_power(x):
    x[0] = x[0] ** 1000000


def test_large_integer_power_of_a_device_value_uses_square_and_multiply():
    assert len(instructions(build(large_power, F32).llir, "fmul")) < 40


# -- names and columns --------------------------------------------------------------------------
@tsjit.kernel
def k_é(x):
    x[0] = 1.0


@tsjit.kernel
def k_è(x):
    x[0] = 2.0


def test_non_ascii_kernel_names_become_legal_distinct_ptx_symbols():
    names = set()
    for kernel in (k_é, k_è):
        compiled = build(kernel, F32)  # ptxas / nvJitLink accepted the symbol
        assert re.fullmatch(r"[A-Za-z][A-Za-z0-9_$]*|[_$%][A-Za-z0-9_$]+", compiled.name)
        assert f".entry {compiled.name}(" in compiled.ptx
        names.add(compiled.name)
    assert len(names) == 2 and all(name.startswith("k_e_") for name in names)


@tsjit.kernel
def error_after_non_ascii_text(x):
    é = 1; x[0] = undefined_after_accent  # noqa: E702, F821


def test_caret_column_counts_characters_not_utf8_bytes():
    err = compile_error(error_after_non_ascii_text, F32)
    assert_points_at(err, error_after_non_ascii_text, "undefined_after_accent")


# -- immediates are range-checked, never truncated --------------------------------------------
@tsjit.kernel
def syncwarp_wide_mask(x):
    tsjit.syncwarp(2 ** 40)
    x[0] = 1.0


@tsjit.kernel
def shuffle_negative_mask(x):
    x[0] = tsjit.shuffle(x[1], 0, mask=-1)


@tsjit.kernel
def vote_wide_mask(x):
    x[0] = tsjit.Float32(tsjit.vote_any(x[1] > 0, mask=1 << 32))


@tsjit.kernel
def elect_wide_mask(x):
    if tsjit.elect_one(1 << 33):
        x[0] = 1.0


@pytest.mark.parametrize("kernel, snippet", [(syncwarp_wide_mask, "tsjit.syncwarp(2 ** 40)"),
                                             (shuffle_negative_mask, "tsjit.shuffle(x[1], 0, mask=-1)"),
                                             (vote_wide_mask, "tsjit.vote_any(x[1] > 0, mask=1 << 32)"),
                                             (elect_wide_mask, "tsjit.elect_one(1 << 33)")])
def test_lane_masks_beyond_32_bits_are_located_errors(kernel, snippet):
    err = compile_error(kernel, F32)
    assert_points_at(err, kernel, snippet)
    assert "lane mask" in err.message and "0xffffffff" in err.message


@tsjit.kernel
def run_time_mask(x, mask: Uint32):
    tsjit.syncwarp(mask)
    x[0] = tsjit.shuffle(x[1], 0, mask=mask)


def test_run_time_lane_mask_is_passed_through():
    llir = build(run_time_mask, F32, 5).llir
    assert 'call void @"llvm.nvvm.bar.warp.sync"(i32 %"mask")' in llir


@tsjit.kernel
def wait_group_too_large(x):
    tsjit.cp_async_wait_group(2 ** 40)
    x[0] = 1.0


def test_intrinsic_constants_must_fit_their_parameter_width():
    err = compile_error(wait_group_too_large, F32)
    assert_points_at(err, wait_group_too_large, "tsjit.cp_async_wait_group(2 ** 40)")
    assert "32 bits" in err.message


# -- environment --------------------------------------------------------------------------------
@tsjit.kernel
def plain(x):
    x[0] = 3.0


@pytest.mark.parametrize("make_bad", ["file", pytest.param("unwritable", marks=pytest.mark.file_permissions)])
def test_unusable_dump_dir_warns_once_and_the_compile_goes_on(tmp_path, monkeypatch, make_bad):
    from tsjit.runtime import dumps as dumps_module
    if make_bad == "file":
        bad = tmp_path / "not_a_directory"
        bad.write_text("")
    else:                                       # as root: reruns without CAP_DAC_OVERRIDE (tests/conftest.py)
        bad = tmp_path / "read_only"
        bad.mkdir()
        bad.chmod(0o500)
    monkeypatch.setenv("TSJIT_DUMP_DIR", str(bad))
    monkeypatch.setattr(dumps_module, "_dump_warned", set())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        build(plain, F32)
        build(tsjit.kernel(plain.fn), F32)
    messages = [str(w.message) for w in caught if "TSJIT_DUMP_DIR" in str(w.message)]
    assert len(messages) == 1 and str(bad) in messages[0]


def test_unknown_target_in_the_environment_names_the_variable(monkeypatch):
    monkeypatch.setenv("TSJIT_TARGET", "sm_12")
    with pytest.raises(TsjitError, match="TSJIT_TARGET='sm_12'") as info:
        tsjit.compile(plain, F32)
    assert "sm_90a" in str(info.value)


# -- float -> int conversions saturate instead of being LLVM poison ----------------------------
@tsjit.kernel
def converts_out_of_range(x, y):
    y[0] = tsjit.Int32(tsjit.Float32(1e30))
    y[1] = tsjit.Int32(x[0])
    y[2] = tsjit.Uint8(tsjit.Float32(-3.0))


def test_float_to_int_conversion_saturates_like_ptx_cvt():
    compiled = build(converts_out_of_range, F32, I32)
    assert re.search(r"st\.global\.b32\s+\[%rd\d+\], 2147483647;", compiled.ptx), compiled.ptx
    assert re.search(r"st\.global\.b32\s+\[%rd\d+\+8\], 0;", compiled.ptx)
    assert "cvt.rzi.s32.f32" in compiled.ptx  # the run-time conversion


@tsjit.kernel
def concatenates_device_text(x):
    i = tsjit.thread_idx().x
    tsjit.static_print(f"{x[i]}" + "!")


def test_text_operations_on_an_fstring_of_device_values_point_to_device_print():
    err = compile_error(concatenates_device_text, F32)
    assert_points_at(err, concatenates_device_text, 'f"{x[i]}" + "!"')
    assert "device_print" in err.message


@tsjit.kernel
def compile_time_float_modulo_by_zero(x):
    x[0] = 1.5 % 0.0


def test_compile_time_division_by_zero_says_so():
    err = compile_error(compile_time_float_modulo_by_zero, F32)
    assert_points_at(err, compile_time_float_modulo_by_zero, "1.5 % 0.0")
    assert "division by zero" in err.message


# -- `and` / `or` keep Python's value semantics -------------------------------------------------
@tsjit.kernel
def or_gives_an_operand(x, y):
    i = tsjit.thread_idx().x
    y[i] = x[i] or 2.5
    y[i + 1] = x[i] and x[i + 1]
    if x[i] > 0 and i:
        y[i + 2] = 1.0


def test_and_or_of_one_dtype_give_an_operand_not_a_boolean():
    llir = build(or_gives_an_operand, F32, F32).llir
    phis = instructions(llir, "phi")
    two_and_a_half = "0x4004000000000000"
    assert any("phi float" in line and two_and_a_half in line for line in phis), phis
    assert any("phi float" in line for line in phis if two_and_a_half not in line)
    assert any("phi i1" in line for line in phis)  # mixed dtypes in a condition: the Boolean


@tsjit.kernel
def identity_of_device_values(x):
    i = tsjit.thread_idx().x
    if x[i] is x[i]:
        x[i] = 1.0


def test_is_with_device_values_is_refused_instead_of_folding_on_identity():
    err = compile_error(identity_of_device_values, F32)
    assert_points_at(err, identity_of_device_values, "x[i] is x[i]")
    assert "==" in err.message


@tsjit.kernel
def python_math_module(x):
    x[0] = MATH.floor(x[1])




def test_python_math_on_a_device_value_points_to_tsjit_math():
    err = compile_error(python_math_module, F32)
    assert_points_at(err, python_math_module, "MATH.floor(x[1])")
    assert "tsjit.math.floor" in err.message


MIXED_HALF_REMAINDER = '''
import tsjit

@tsjit.kernel
def kernel(x, y):
    i = tsjit.thread_idx().x
    y[i] = y[i] % x[i]
    x[i] = tsjit.math.exp2(y[i]) % x[i]

compiled = tsjit.compile(kernel, tsjit.spec((32,), tsjit.Float16), tsjit.spec((32,), tsjit.BFloat16), target="sm_90a")
print("compiled", "shl.b32" in compiled.ptx)
'''


def test_mixed_float16_bfloat16_remainder_compiles_without_aborting_llvm(tmp_path):
    """fptrunc(frem(fpext half, fpext bfloat)) made LLVM's InstCombine build a half<->bfloat cast and
    abort the process (fuzz seed 2292326099, kernel 9); the BFloat16 side now widens through its bits."""
    import subprocess
    import sys
    script = tmp_path / "mixed_half.py"
    script.write_text(MIXED_HALF_REMAINDER)
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "compiled True" in result.stdout


MIXED_HALF_TRUNCATION = '''
import tsjit

@tsjit.kernel
def kernel(x, y, n: tsjit.Int32):
    i = tsjit.thread_idx().x
    y[(i + 4) % 32] = tsjit.Float64(n == 2) % x[(n + tsjit.thread_idx().y) % 32]
    x[i] = tsjit.math.sin(y[i])

compiled = tsjit.compile(kernel, tsjit.spec((32,), tsjit.Float16), tsjit.spec((32,), tsjit.BFloat16), 7,
                         target="sm_90a")
print("compiled", compiled.ptx.count("cvt.rn.bf16.f64") + compiled.ptx.count("cvt.rn.bf16.f32") > 0)
'''


def test_truncating_a_widened_float16_to_bfloat16_compiles_without_aborting_llvm(tmp_path):
    """fptrunc(frem(Float64 constant, fpext half) to bfloat): InstCombine narrowed the remainder to
    half and built a half->bfloat cast, aborting the process (fuzz seed 692104572, kernel 122).
    Kernels mixing the two 16-bit floats now fence each truncation (tsjit.backend.half_fences)."""
    import subprocess
    import sys
    script = tmp_path / "mixed_truncation.py"
    script.write_text(MIXED_HALF_TRUNCATION)
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "compiled True" in result.stdout


def test_kernels_with_one_sixteen_bit_float_type_get_no_fences():
    from llvmlite import ir
    from tsjit.backend import emit
    from tsjit.backend.half_fences import fence_mixed_half_truncations
    for narrow in (ir.HalfType(), emit.BFLOAT):
        module = ir.Module()
        fn = ir.Function(module, ir.FunctionType(narrow, [ir.FloatType()]), "f")
        b = ir.IRBuilder(fn.append_basic_block())
        b.ret(b.fptrunc(fn.args[0], narrow))
        assert fence_mixed_half_truncations(module) == 0 and "asm" not in str(module)
    module = ir.Module()
    fn = ir.Function(module, ir.FunctionType(emit.BFLOAT, [ir.HalfType()]), "g")
    b = ir.IRBuilder(fn.append_basic_block())
    b.ret(b.fptrunc(b.fpext(fn.args[0], ir.DoubleType()), emit.BFLOAT))
    assert fence_mixed_half_truncations(module) == 1 and '"mov.b64 $0, $1;"' in str(module)
