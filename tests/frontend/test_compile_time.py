"""Compile-time Python inside kernels: ``Constexpr`` parameters, ``const_expr``,
``range_constexpr``, module-level constants and dtypes, compile-time calls, nested ``def``
closures, lambdas, comprehensions and tuples."""
import re

import pytest

import tsjit
from tsjit import Float16, Float32, Float64, Int32, Int64

from .compiling import blocks, build, calls, instructions, kernel_ir, signature

BLOCK = 4
ACCUMULATOR = tsjit.Float64
OFFSETS = (1, 2, 3)


# -- Constexpr parameters ----------------------------------------------------------------------
@tsjit.kernel
def scale_by(x, out, SCALE: tsjit.Constexpr[int], DTYPE: tsjit.Constexpr):
    i = tsjit.thread_idx().x
    out[i] = DTYPE(x[i] * SCALE)


def test_constexpr_parameters_are_not_kernel_parameters():
    compiled = build(scale_by, tsjit.spec(8, Float32), tsjit.spec(8, Float16), 3, Float16)
    assert "SCALE" not in signature(compiled.llir) and "DTYPE" not in signature(compiled.llir)
    (multiply,) = instructions(compiled.llir, "fmul")
    assert multiply.endswith("0x4008000000000000")  # the constant 3.0
    assert instructions(compiled.llir, "fptrunc")  # Float16(...) of a Float32


def test_each_constexpr_value_is_its_own_specialization():
    three = build(scale_by, tsjit.spec(8, Float32), tsjit.spec(8, Float32), 3, Float32)
    five = build(scale_by, tsjit.spec(8, Float32), tsjit.spec(8, Float32), 5, Float32)
    assert three.metadata["key"] != five.metadata["key"]
    assert instructions(five.llir, "fmul")[0].endswith("0x4014000000000000")


def test_constexpr_given_by_keyword():
    compiled = build(scale_by, tsjit.spec(8, Float32), tsjit.spec(8, Float64), SCALE=2, DTYPE=Float64)
    assert instructions(compiled.llir, "fpext")


# -- const_expr --------------------------------------------------------------------------------
@tsjit.kernel
def pick_function(x, out, USE_SIN: tsjit.Constexpr[bool], MODE: tsjit.Constexpr[int]):
    v = x[0]
    if tsjit.const_expr(USE_SIN):
        out[0] = tsjit.math.sin(v)
    else:
        out[0] = tsjit.math.cos(v)
    if tsjit.const_expr(MODE == 0):
        out[1] = tsjit.math.exp2(v)
    elif tsjit.const_expr(MODE == 1):
        out[1] = tsjit.math.sqrt(v)
    else:
        out[1] = tsjit.math.floor(v)


@pytest.mark.parametrize("use_sin, mode, present, absent", [
    (True, 0, ["sin.approx", "ex2.approx"], ["cos.approx", "sqrt", "floor"]),
    (False, 1, ["cos.approx", "llvm.sqrt"], ["sin.approx", "ex2.approx", "floor"]),
    (False, 2, ["cos.approx", "llvm.floor"], ["sin.approx", "ex2.approx", "sqrt"]),
])
def test_const_expr_compiles_only_the_taken_arm(use_sin, mode, present, absent):
    compiled = build(pick_function, tsjit.spec(1, Float32), tsjit.spec(2, Float32), use_sin, mode)
    called = " ".join(calls(compiled.llir))
    for name in present:
        assert name in called
    for name in absent:
        assert name not in called
    assert list(blocks(compiled.llir)) == ["entry"]  # no branch was emitted
    assert not instructions(compiled.llir, "br")


@tsjit.kernel
def constant_if(out, N: tsjit.Constexpr[int]):
    if N > 2:
        out[0] = 1
    else:
        out[0] = tsjit.thread_idx().x


def test_plain_if_on_a_compile_time_value_also_folds():
    compiled = build(constant_if, tsjit.spec(1, Int32), 3)
    assert not instructions(compiled.llir, "br") and not calls(compiled.llir)


# -- range_constexpr ---------------------------------------------------------------------------
@tsjit.kernel
def unrolled_sum(x, out, N: tsjit.Constexpr[int]):
    total = 0.0
    for k in tsjit.range_constexpr(N):
        total = total + x[k * 2]
    out[0] = total


def test_range_constexpr_unrolls_into_straight_line_code():
    compiled = build(unrolled_sum, tsjit.spec(16, Float32), tsjit.spec(1, Float32), 5)
    assert len(instructions(compiled.llir, "load")) == 5
    assert not instructions(compiled.llir, "phi") and not instructions(compiled.llir, "br")
    geps = " ".join(instructions(compiled.llir, "getelementptr"))
    for offset in (2, 4, 6, 8):  # the index k * 2 is a Python int in every copy
        assert f"i32 {offset}" in geps


@tsjit.kernel
def unrolled_with_break(x, out):
    total = 0.0
    for k in tsjit.range_constexpr(10):
        if k == 3:
            break
        if k == 1:
            continue
        total = total + x[k]
    out[0] = total


def test_compile_time_break_and_continue_in_an_unrolled_loop():
    compiled = build(unrolled_with_break, tsjit.spec(16, Float32), tsjit.spec(1, Float32))
    assert len(instructions(compiled.llir, "load")) == 2  # k = 0 and k = 2


@tsjit.kernel
def loop_over_tuple(x, out):
    total = 0.0
    for offset in OFFSETS:
        total = total + x[offset]
    out[0] = total


def test_for_over_a_tuple_unrolls():
    compiled = build(loop_over_tuple, tsjit.spec(8, Float32), tsjit.spec(1, Float32))
    assert len(instructions(compiled.llir, "load")) == 3
    assert not instructions(compiled.llir, "phi")


# -- module-level constants and dtypes ---------------------------------------------------------
@tsjit.kernel
def use_module_constants(x, out):
    i = tsjit.thread_idx().x * BLOCK
    acc = ACCUMULATOR(0)
    for k in tsjit.range_constexpr(BLOCK):
        acc = acc + ACCUMULATOR(x[i + k])
    out[i] = acc


def test_module_level_constants_and_dtypes_are_compile_time_values():
    compiled = build(use_module_constants, tsjit.spec(16, Float32), tsjit.spec(16, Float64))
    assert len(instructions(compiled.llir, "fpext")) == BLOCK  # Float32 -> ACCUMULATOR
    assert len(instructions(compiled.llir, "fadd")) == BLOCK
    assert any(line.endswith(", 4") for line in instructions(compiled.llir, "mul"))


def test_module_level_constants_are_recorded_for_the_cache_key():
    recorded = build(use_module_constants, tsjit.spec(16, Float32), tsjit.spec(16, Float64)).metadata["dependencies"]
    assert recorded[f"global:{__name__}:BLOCK"] == "int:4"
    assert recorded[f"global:{__name__}:ACCUMULATOR"] == "dtype:Float64"


# -- compile-time Python calls and closures ----------------------------------------------------
def affine(v, scale, shift):
    """A plain Python function: called from a kernel it runs at compile time."""
    return v * scale + shift


@tsjit.kernel
def call_python_helper(x, out, SCALE: tsjit.Constexpr[int]):
    i = tsjit.thread_idx().x
    out[i] = affine(x[i], affine(SCALE, 2, 1), 3)


def test_plain_python_function_runs_at_compile_time_on_values():
    compiled = build(call_python_helper, tsjit.spec(8, Int32), tsjit.spec(8, Int32), 4)
    assert calls(compiled.llir)[0].startswith("llvm.nvvm.read.ptx.sreg")  # no call to `affine`
    (multiply,) = instructions(compiled.llir, "mul")
    assert multiply.endswith(", 9")  # affine(4, 2, 1) folded in Python
    (add,) = instructions(compiled.llir, "add")
    assert add.endswith(", 3")


@tsjit.kernel
def nested_def(x, out):
    tx = tsjit.thread_idx().x
    bx = tsjit.block_idx().x

    def linear(lane):
        return bx * BLOCK * 32 + lane

    def twice(f, v):
        return f(f(v))

    out[linear(tx)] = x[twice(linear, tx)]


def test_nested_def_is_a_closure_building_ir_with_value_operators():
    compiled = build(nested_def, tsjit.spec(512, Float32), tsjit.spec(512, Float32))
    assert len(instructions(compiled.llir, "mul")) == 3 * 2  # (bx * 4) * 32 per call of `linear`, 3 calls
    assert len(instructions(compiled.llir, "add")) == 3
    assert "linear" not in " ".join(calls(compiled.llir))


@tsjit.kernel
def lambdas_and_comprehensions(x, out):
    tx = tsjit.thread_idx().x
    square = lambda v: v * v  # noqa: E731
    values = [x[tx * BLOCK + k] for k in range(BLOCK)]
    squares = tuple(square(v) for v in values)
    weights = {k: 2 ** k for k in range(BLOCK)}
    total = sum([s * weights[k] for k, s in enumerate(squares)])
    out[tx] = total + max(squares)


def test_lambdas_and_comprehensions_over_compile_time_iterables():
    compiled = build(lambdas_and_comprehensions, tsjit.spec(64, Float32), tsjit.spec(16, Float32))
    assert len(instructions(compiled.llir, "load")) == BLOCK
    assert len(instructions(compiled.llir, "fmul")) == 2 * BLOCK  # squares and weights
    assert calls(compiled.llir).count("llvm.maxnum.f32") == BLOCK - 1
    weights = " ".join(instructions(compiled.llir, "fmul"))
    assert "0x4020000000000000" in weights  # 2 ** 3 computed in Python


# -- tuples ------------------------------------------------------------------------------------
@tsjit.kernel
def tuples_and_unpacking(x, out):
    tx, ty, tz = tsjit.thread_idx()
    pair = (x[tx], x[ty])
    a, b = pair
    a, b = b, a
    first, *rest = (a, b, x[tz])
    (c, d), e = (a, b), rest[1]
    out[tx] = a - b + c * d + e + first + len(rest) + pair[0]


def test_tuples_pack_unpack_and_swap_without_instructions():
    compiled = build(tuples_and_unpacking, tsjit.spec(8, Float32), tsjit.spec(8, Float32))
    assert len(instructions(compiled.llir, "load")) == 3
    body = kernel_ir(compiled.llir)
    assert "insertvalue" not in body and "extractvalue" not in body and "alloca" not in body
    assert instructions(compiled.llir, "fadd")[-2].endswith("0x4000000000000000")  # + len(rest)


@tsjit.func
def min_and_max(a, b):
    return min(a, b), max(a, b)


@tsjit.kernel
def tuple_from_device_function(x, out):
    low, high = min_and_max(x[0], x[1])
    out[0] = low
    out[1] = high


def test_device_function_returning_a_tuple():
    compiled = build(tuple_from_device_function, tsjit.spec(2, Float32), tsjit.spec(2, Float32))
    assert calls(compiled.llir) == ["llvm.minnum.f32", "llvm.maxnum.f32"]


@tsjit.kernel
def static_print_kernel(out, N: tsjit.Constexpr[int]):
    tsjit.static_print("compiling with N =", N)
    out[0] = N


def test_static_print_prints_at_compile_time(capsys):
    build(static_print_kernel, tsjit.spec(1, Int64), 7)
    assert "compiling with N = 7" in capsys.readouterr().out


@tsjit.kernel(max_threads=128, min_blocks=2, max_registers=64)
def with_launch_bounds(x):
    x[tsjit.thread_idx().x] = 1.0


def test_kernel_options_become_ptx_performance_directives():
    compiled = build(with_launch_bounds, tsjit.spec(128, Float32))
    for directive in (".maxntid 128", ".minnctapersm 2", ".maxnreg 64"):
        assert re.search(rf"^{re.escape(directive)}\b", compiled.ptx, flags=re.M), directive
