"""Arithmetic, bitwise, comparison and boolean operators, ``min/max/abs`` and ``tsjit.math``.

Semantics are those documented in :mod:`tsjit.lang.values`: C-style ``//`` and ``%`` on
integers, true division ``/`` to a float, arithmetic ``>>`` for signed and logical for
unsigned integers, ordered float comparisons except ``!=``.
"""
import re

import pytest

import tsjit
from tsjit import BFloat16, Boolean, Float16, Float32, Float64, Int8, Int16, Int32, Int64, Uint8, Uint32, Uint64

from .compiling import build, calls, instructions, kernel_ir

INTEGERS = [Int8, Int16, Int32, Int64, Uint8, Uint32, Uint64]
FLOATS = [Float16, BFloat16, Float32, Float64]
LLVM = {Int8: "i8", Int16: "i16", Int32: "i32", Int64: "i64", Uint8: "i8", Uint32: "i32", Uint64: "i64",
        Float16: "half", BFloat16: "bfloat", Float32: "float", Float64: "double", Boolean: "i1"}


def name(dtype):
    return dtype.name


@tsjit.kernel
def integer_ops(x, y, out):
    i = tsjit.thread_idx().x
    a = x[i]
    b = y[i]
    out[0] = a + b
    out[1] = a - b
    out[2] = a * b
    out[3] = a // b
    out[4] = a % b
    out[5] = a << 3
    out[6] = a >> b
    out[7] = a & b
    out[8] = a | b
    out[9] = a ^ b
    out[10] = ~a
    out[11] = -a
    out[12] = +a


@pytest.mark.parametrize("dtype", INTEGERS, ids=name)
def test_integer_arithmetic_and_bitwise_operators(dtype):
    compiled = build(integer_ops, tsjit.spec(16, dtype), tsjit.spec(16, dtype), tsjit.spec(16, dtype))
    body = kernel_ir(compiled.llir)
    t = LLVM[dtype]
    signed = dtype.is_signed
    for opcode in ("add", "sub", "mul", "sdiv" if signed else "udiv", "srem" if signed else "urem", "shl",
                   "ashr" if signed else "lshr", "and", "or"):
        assert re.search(rf"= {opcode} {t} ", body), opcode
    assert len(re.findall(rf"= xor {t} ", body)) == 2  # a ^ b and ~a (xor with -1)
    assert re.search(rf"= sub {t} 0, ", body)  # -a
    assert not re.search(r"= (s|u)div .* (s|u)div", body)


@tsjit.kernel
def float_ops(x, y, out):
    i = tsjit.thread_idx().x
    a = x[i]
    b = y[i]
    out[0] = a + b
    out[1] = a - b
    out[2] = a * b
    out[3] = a / b
    out[4] = a % b
    out[5] = a // b
    out[6] = -a
    out[7] = a ** 3


@pytest.mark.parametrize("dtype", FLOATS, ids=name)
def test_float_arithmetic_operators(dtype):
    compiled = build(float_ops, tsjit.spec(8, dtype), tsjit.spec(8, dtype), tsjit.spec(8, dtype))
    body = kernel_ir(compiled.llir)
    t = LLVM[dtype]
    for opcode in ("fadd", "fsub", "fdiv", "frem", "fneg"):
        assert re.search(rf"= {opcode} {t} ", body), opcode
    assert len(instructions(compiled.llir, "fmul")) == 1 + 2  # a * b, and a ** 3 unrolled to two
    assert len(instructions(compiled.llir, "fdiv")) == 2  # a / b and the floor division
    assert any(c.startswith("llvm.floor.") for c in calls(compiled.llir))  # a // b is floor(a / b)


@tsjit.kernel
def divide(x, y, out):
    out[0] = x[0] / y[0]


@pytest.mark.parametrize("a, b, result", [(Int32, Int32, Float32), (Int16, Uint8, Float32),
                                          (Int64, Int32, Float64), (Uint64, Uint64, Float64)], ids=name)
def test_true_division_of_integers_gives_a_float(a, b, result):
    compiled = build(divide, tsjit.spec(1, a), tsjit.spec(1, b), tsjit.spec(1, result))
    (fdiv,) = instructions(compiled.llir, "fdiv")
    assert f"fdiv {LLVM[result]} " in fdiv


@tsjit.kernel
def compare_all(x, y, out):
    a = x[0]
    b = y[0]
    out[0] = a < b
    out[1] = a <= b
    out[2] = a > b
    out[3] = a >= b
    out[4] = a == b
    out[5] = a != b


@pytest.mark.parametrize("dtype, predicates", [
    (Int32, ["slt", "sle", "sgt", "sge", "eq", "ne"]),
    (Uint16 := tsjit.Uint16, ["ult", "ule", "ugt", "uge", "eq", "ne"]),
    (Float32, ["olt", "ole", "ogt", "oge", "oeq", "une"]),
    (BFloat16, ["olt", "ole", "ogt", "oge", "oeq", "une"]),
], ids=lambda v: getattr(v, "name", "predicates"))
def test_comparisons_return_booleans_with_the_right_predicate(dtype, predicates):
    compiled = build(compare_all, tsjit.spec(1, dtype), tsjit.spec(1, dtype), tsjit.spec(6, Boolean))
    opcode = "fcmp" if dtype.is_float else "icmp"
    found = [line.split()[3] for line in instructions(compiled.llir, opcode)]
    assert found == predicates
    assert len(instructions(compiled.llir, "zext")) == 6  # i1 -> i8 for Boolean memory


@tsjit.kernel
def chained_compare(x, out):
    i = tsjit.thread_idx().x
    out[i] = 0 <= x[i] < 10


def test_chained_comparison_ands_both_parts():
    compiled = build(chained_compare, tsjit.spec(4, Int32), tsjit.spec(4, Boolean))
    predicates = [line.split()[3] for line in instructions(compiled.llir, "icmp")]
    assert predicates[:2] == ["sge", "slt"]
    assert instructions(compiled.llir, "and")


@tsjit.kernel
def boolean_ops(x, y, out):
    a = x[0]
    b = y[0]
    out[0] = a & b
    out[1] = a | b
    out[2] = a ^ b
    out[3] = ~a
    out[4] = not b


def test_boolean_operators_are_logical_on_i1():
    compiled = build(boolean_ops, tsjit.spec(1, Boolean), tsjit.spec(1, Boolean), tsjit.spec(5, Boolean))
    body = kernel_ir(compiled.llir)
    assert re.search(r"= and i1 ", body) and re.search(r"= or i1 ", body)
    assert len(re.findall(r"= xor i1 ", body)) == 3  # a ^ b, ~a, not b


@tsjit.kernel
def mixed_signedness(x, y, out):
    out[0] = x[0] < y[0]


def test_signed_with_unsigned_compares_unsigned():
    compiled = build(mixed_signedness, tsjit.spec(1, Int32), tsjit.spec(1, Uint32), tsjit.spec(1, Boolean))
    (cmp,) = instructions(compiled.llir, "icmp")
    assert "icmp ult i32" in cmp


@tsjit.kernel
def compile_time_arithmetic(out, K: tsjit.Constexpr[int]):
    out[0] = (K * 3 + 1) // 2 - K % 3


def test_operators_on_compile_time_values_fold():
    compiled = build(compile_time_arithmetic, tsjit.spec(1, Int32), 5)
    (store,) = instructions(compiled.llir, "store")
    assert store.startswith("store i32 6")  # (16 // 2) - 2, computed by Python
    assert not instructions(compiled.llir, "mul")


# -- min / max / abs ---------------------------------------------------------------------------
@tsjit.kernel
def min_max_abs(x, y, out):
    a = x[0]
    b = y[0]
    out[0] = min(a, b)
    out[1] = max(a, b, 1)
    out[2] = abs(a)
    out[3] = tsjit.math.min(a, b)


@pytest.mark.parametrize("dtype, expected", [
    (Int32, ["llvm.smin.i32", "llvm.smax.i32", "llvm.smax.i32", "llvm.abs.i32", "llvm.smin.i32"]),
    (Uint64, ["llvm.umin.i64", "llvm.umax.i64", "llvm.umax.i64", "llvm.umin.i64"]),
    (Float32, ["llvm.minnum.f32", "llvm.maxnum.f32", "llvm.maxnum.f32", "llvm.fabs.f32", "llvm.minnum.f32"]),
    (Float64, ["llvm.minnum.f64", "llvm.maxnum.f64", "llvm.maxnum.f64", "llvm.fabs.f64", "llvm.minnum.f64"]),
    (Float16, ["llvm.minnum.f32", "llvm.maxnum.f32", "llvm.maxnum.f32", "llvm.fabs.f32", "llvm.minnum.f32"]),
], ids=lambda v: getattr(v, "name", "calls"))
def test_min_max_abs_on_device_values(dtype, expected):
    compiled = build(min_max_abs, tsjit.spec(1, dtype), tsjit.spec(1, dtype), tsjit.spec(4, dtype))
    assert calls(compiled.llir) == expected  # abs of an unsigned value is the value itself


@tsjit.kernel
def min_max_of_constants(out, A: tsjit.Constexpr[int]):
    out[0] = min(A, 3) + max(A, 3) + abs(-A)


def test_min_max_abs_of_compile_time_values_are_python():
    compiled = build(min_max_of_constants, tsjit.spec(1, Int32), 7)
    assert instructions(compiled.llir, "store")[0].startswith("store i32 17")
    assert calls(compiled.llir) == []


# -- tsjit.math --------------------------------------------------------------------------------
@tsjit.kernel
def math_functions(x, out):
    i = tsjit.thread_idx().x
    v = x[i]
    out[0] = tsjit.math.sqrt(v)
    out[1] = tsjit.math.rsqrt(v)
    out[2] = tsjit.math.exp(v)
    out[3] = tsjit.math.exp2(v)
    out[4] = tsjit.math.log(v)
    out[5] = tsjit.math.log2(v)
    out[6] = tsjit.math.fma(v, v, 1.0)
    out[7] = tsjit.math.floor(v)
    out[8] = tsjit.math.ceil(v)
    out[9] = tsjit.math.sin(v)
    out[10] = tsjit.math.cos(v)


MATH_PTX = ["sqrt.rn.f32", "rsqrt.approx.f32", "ex2.approx", "lg2.approx", "fma.rn.f32", "cvt.rmi.f32.f32",
            "cvt.rpi.f32.f32", "sin.approx", "cos.approx"]


@pytest.fixture(scope="module")
def math_float32():
    return build(math_functions, tsjit.spec(32, Float32), tsjit.spec(16, Float32))


def test_math_functions_call_their_intrinsics(math_float32):
    # exp and log are exp2/log2 with a scale; names end in ".f" or ".f32" depending on the LLVM spelling
    expected = ["llvm.sqrt.f32", "llvm.nvvm.rsqrt.approx.f", "llvm.nvvm.ex2.approx.f", "llvm.nvvm.ex2.approx.f",
                "llvm.nvvm.lg2.approx.f", "llvm.nvvm.lg2.approx.f", "llvm.fma.f32", "llvm.floor.f32",
                "llvm.ceil.f32", "llvm.nvvm.sin.approx.f", "llvm.nvvm.cos.approx.f"]
    found = [c for c in calls(math_float32.llir) if not c.startswith("llvm.nvvm.read.ptx.sreg")]
    assert len(found) == len(expected)
    for name, prefix in zip(found, expected):
        assert name.startswith(prefix)


@pytest.mark.parametrize("op", MATH_PTX)
def test_math_functions_reach_the_ptx(math_float32, op):
    assert op in math_float32.ptx


def test_exp_and_log_scale_by_log2e_and_ln2(math_float32):
    multiplies = " ".join(instructions(math_float32.llir, "fmul"))
    assert "0x3ff7154760000000" in multiplies  # log2(e) as a float
    assert "0x3fe62e4300000000" in multiplies  # ln(2) as a float


@pytest.mark.parametrize("dtype", [Float16, BFloat16], ids=name)
def test_math_on_16_bit_floats_computes_in_float32(dtype):
    compiled = build(math_functions, tsjit.spec(32, dtype), tsjit.spec(16, dtype))
    assert "ex2.approx.f32" in compiled.ptx
    assert len(instructions(compiled.llir, "fptrunc")) == 11  # every result goes back to 16 bits


@tsjit.kernel
def math_float64(x, out):
    v = x[0]
    out[0] = tsjit.math.sqrt(v) + tsjit.math.fma(v, v, v) + tsjit.math.floor(v) + tsjit.math.ceil(v)


def test_math_on_float64_uses_double_instructions():
    compiled = build(math_float64, tsjit.spec(1, Float64), tsjit.spec(1, Float64))
    assert calls(compiled.llir) == ["llvm.sqrt.f64", "llvm.fma.f64", "llvm.floor.f64", "llvm.ceil.f64"]
    assert "sqrt.rn.f64" in compiled.ptx and "fma.rn.f64" in compiled.ptx


@tsjit.kernel
def math_float64_exp(x, out):
    out[0] = tsjit.math.exp(x[0])


def test_math_without_a_float64_instruction_is_a_compilation_error():
    with pytest.raises(tsjit.CompilationError, match="Float64"):
        build(math_float64_exp, tsjit.spec(1, Float64), tsjit.spec(1, Float64))


@tsjit.kernel
def math_of_int(x, out):
    out[0] = tsjit.math.sqrt(x[0])


def test_math_of_an_integer_asks_for_a_conversion():
    with pytest.raises(tsjit.CompilationError, match=r"tsjit\.Float32\(x\)"):
        build(math_of_int, tsjit.spec(1, Int32), tsjit.spec(1, Float32))


@tsjit.kernel
def power_of_values(x, out, n):
    out[0] = x[0] ** n
    out[1] = 2 ** x[1]
    out[2] = x[2] ** 0


def test_power_with_a_run_time_exponent_uses_exp2_and_log2():
    compiled = build(power_of_values, tsjit.spec(4, Float32), tsjit.spec(4, Float32), 3)
    called = [c for c in calls(compiled.llir) if "approx" in c]
    assert [c.split(".")[2] for c in called] == ["lg2", "ex2", "lg2", "ex2"]
    assert instructions(compiled.llir, "store")[2].startswith("store float 0x3ff0000000000000")  # x ** 0 == 1


@tsjit.kernel
def augmented_assignment(out, counts, n):
    tx = tsjit.thread_idx().x
    out[tx] += 1.0
    out[tx] *= 2
    out.ptr[1] -= 3.0
    counts[tx] //= n
    counts[tx] <<= 1


def test_augmented_assignment_on_elements_loads_and_stores_once():
    compiled = build(augmented_assignment, tsjit.spec(32, Float32), tsjit.spec(32, Int32), 3)
    assert len(instructions(compiled.llir, "load")) == 5 and len(instructions(compiled.llir, "store")) == 5
    for opcode in ("fadd", "fmul", "fsub", "sdiv", "shl"):
        assert instructions(compiled.llir, opcode), opcode


@tsjit.kernel
def max_of_a_tuple(x, out):
    values = (x[0], x[1], x[2])
    out[0] = max(values)
    out[1] = min([x[3], x[4]])


def test_min_and_max_of_a_sequence_of_values():
    compiled = build(max_of_a_tuple, tsjit.spec(8, Float32), tsjit.spec(2, Float32))
    assert calls(compiled.llir) == ["llvm.maxnum.f32", "llvm.maxnum.f32", "llvm.minnum.f32"]
