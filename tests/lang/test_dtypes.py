"""Every dtype as an array element and as a scalar argument, literals, casts and the
promotion rules of :mod:`tsjit.lang.dtypes` / :mod:`tsjit.lang.values`."""
import re

import numpy as np
import pytest

import tsjit
from tsjit import (BFloat16, Boolean, Float16, Float32, Float64, Int8, Int16, Int32, Int64, Uint8, Uint16,
                   Uint32, Uint64)
from tsjit.lang import dtypes as dt

from frontend.compiling import build, instructions, kernel_ir, ptx_ops, signature

REGISTER_TYPE = {Int8: "i8", Int16: "i16", Int32: "i32", Int64: "i64", Uint8: "i8", Uint16: "i16", Uint32: "i32",
                 Uint64: "i64", Float16: "half", BFloat16: "bfloat", Float32: "float", Float64: "double",
                 Boolean: "i1"}
MEMORY_TYPE = {**REGISTER_TYPE, Boolean: "i8"}
ALL = dt.ALL_DTYPES


def dtype_id(dtype):
    return dtype.name


# Compile-time probe: kernels call it on an expression to record the dtype it has.
SEEN_DTYPES = []


def probe(value):
    SEEN_DTYPES.append(value.dtype)
    return value


# -- array elements ----------------------------------------------------------------------------
@tsjit.kernel
def copy_elements(x, out):
    i = tsjit.thread_idx().x
    out[i] = x[i]


@pytest.mark.parametrize("dtype", ALL, ids=dtype_id)
def test_array_elements_load_and_store_at_their_width(dtype):
    compiled = build(copy_elements, tsjit.spec(8, dtype), tsjit.spec(8, dtype))
    memory_type = MEMORY_TYPE[dtype]
    (load,) = instructions(compiled.llir, "load")
    (store,) = instructions(compiled.llir, "store")
    assert load.startswith(f"%") and f"load {memory_type}, ptr addrspace(1)" in load
    assert store.startswith(f"store {memory_type} ")
    bits = 8 if dtype.is_bool else dtype.bits
    assert ptx_ops(compiled.ptx, "ld.global") == [f"ld.global.b{bits}"]
    assert ptx_ops(compiled.ptx, "st.global") == [f"st.global.b{bits}"]


def test_boolean_elements_are_bytes_tested_against_zero():
    compiled = build(copy_elements, tsjit.spec(8, Boolean), tsjit.spec(8, Boolean))
    body = kernel_ir(compiled.llir)
    assert re.search(r"icmp ne i8 %\S+, 0", body)
    assert re.search(r"zext i1 %\S+ to i8", body)


# -- scalar arguments --------------------------------------------------------------------------
SCALAR_ARGUMENTS = {Int8: np.int8(-3), Int16: np.int16(-3), Int32: -3, Int64: np.int64(-3), Uint8: np.uint8(3),
                    Uint16: np.uint16(3), Uint32: np.uint32(3), Uint64: np.uint64(3), Float16: np.float16(1.5),
                    Float32: 1.5, Float64: np.float64(1.5), Boolean: True}


@tsjit.kernel
def store_scalar(out, s):
    out[0] = s


@pytest.mark.parametrize("dtype", [d for d in ALL if d is not BFloat16], ids=dtype_id)
def test_scalar_argument_is_a_parameter_of_its_type(dtype):
    compiled = build(store_scalar, tsjit.spec(1, dtype), SCALAR_ARGUMENTS[dtype])
    assert f'{REGISTER_TYPE[dtype]} %"s"' in signature(compiled.llir)
    (store,) = instructions(compiled.llir, "store")
    if dtype.is_bool:
        assert re.search(r'zext i1 %"s" to i8', kernel_ir(compiled.llir))
    else:
        assert store.startswith(f'store {REGISTER_TYPE[dtype]} %"s"')


@tsjit.kernel
def store_bfloat16_scalar(out, s: tsjit.BFloat16):
    out[0] = s * 2


def test_annotated_bfloat16_scalar_argument():
    compiled = build(store_bfloat16_scalar, tsjit.spec(1, BFloat16), 1.0)
    assert 'bfloat %"s"' in signature(compiled.llir)
    (multiply,) = instructions(compiled.llir, "fmul")
    assert multiply.endswith("0xR4000")  # the literal 2 became a bfloat constant
    assert re.search(r"\b(add|mul|fma)\.rn\.bf16\b", compiled.ptx)  # native bf16 arithmetic on sm_90a


@pytest.mark.parametrize("value, expected", [(7, "i32"), (2**40, "i64"), (2**63, "i64"), (0.25, "float"),
                                             (False, "i1")])
def test_python_scalar_arguments_get_their_literal_dtype(value, expected):
    compiled = build(store_scalar, tsjit.spec(1, Float64), value)
    assert f'{expected} %"s"' in signature(compiled.llir)


# -- literals ----------------------------------------------------------------------------------
@tsjit.kernel
def literals(f32, i32, flags, u64):
    f32[0] = 1.5
    f32[1] = 3
    i32[0] = 0x7FFFFFFF
    i32[1] = -1
    i32[2] = (3 + 4) * 2
    flags[0] = True
    u64[0] = 2**64 - 1


@pytest.fixture(scope="module")
def literal_ir():
    return build(literals, tsjit.spec(2, Float32), tsjit.spec(3, Int32), tsjit.spec(1, Boolean),
                 tsjit.spec(1, Uint64)).llir


def test_float_literals_store_as_float_constants(literal_ir):
    stores = instructions(literal_ir, "store")
    assert stores[0].startswith("store float 0x3ff8000000000000")
    assert stores[1].startswith("store float 0x4008000000000000")  # the int 3 into Float32 memory


def test_int_literals_store_as_typed_constants(literal_ir):
    stores = instructions(literal_ir, "store")
    assert stores[2].startswith("store i32 2147483647")
    assert stores[3].startswith("store i32 4294967295")  # -1 as an unsigned bit pattern
    assert stores[4].startswith("store i32 14")  # folded at compile time
    assert not instructions(literal_ir, "mul") and not instructions(literal_ir, "add")


def test_bool_and_wide_unsigned_literals(literal_ir):
    stores = instructions(literal_ir, "store")
    assert re.search(r'zext i1 1 to i8', kernel_ir(literal_ir))
    assert stores[6].startswith("store i64 18446744073709551615")


@tsjit.kernel
def add_literal(x, out, LITERAL: tsjit.Constexpr):
    out[0] = probe(x[0] + LITERAL)


@pytest.mark.parametrize("dtype, literal, expected", [
    (Int16, 1, Int16), (Uint8, 1, Uint8), (Int64, 1, Int64), (Int8, True, Int8), (Float16, 1, Float16),
    (BFloat16, 0.5, BFloat16), (Float64, 0.5, Float64), (Int32, 0.5, Float32), (Int64, 0.5, Float32),
    (Boolean, 1, Int32),
], ids=lambda v: getattr(v, "name", repr(v)))
def test_python_literal_takes_the_values_dtype(dtype, literal, expected):
    SEEN_DTYPES.clear()
    build(add_literal, tsjit.spec(1, dtype), tsjit.spec(1, expected), literal)
    assert SEEN_DTYPES == [expected]


# -- casts -------------------------------------------------------------------------------------
@tsjit.kernel
def convert(x, out, T: tsjit.Constexpr):
    out[0] = T(x[0])
    out[1] = x[1].to(T)


@pytest.mark.parametrize("source, target, instruction", [
    (Int32, Float32, "sitofp i32"), (Uint32, Float32, "uitofp i32"), (Float32, Int32, "@\"llvm.fptosi.sat.i32.f32\"(float"),
    (Float32, Uint8, "@\"llvm.fptoui.sat.i8.f32\"(float"), (Int8, Int32, "sext i8"), (Uint8, Int32, "zext i8"),
    (Int64, Int16, "trunc i64"), (Float32, Float64, "fpext float"), (Float64, Float16, "fptrunc double"),
    (Float16, Float32, "fpext half"), (BFloat16, Float32, "fpext bfloat"), (Int32, Boolean, "icmp ne i32"),
    (Float32, Boolean, "fcmp une float"), (Boolean, Float32, "uitofp i1"), (Boolean, Int64, "zext i1"),
], ids=lambda v: getattr(v, "name", v))
def test_dtype_call_converts(source, target, instruction):
    compiled = build(convert, tsjit.spec(2, source), tsjit.spec(2, target), target)
    body = kernel_ir(compiled.llir)
    assert body.count(instruction) == 2, body


def test_float16_to_bfloat16_goes_through_float32():
    compiled = build(convert, tsjit.spec(2, Float16), tsjit.spec(2, BFloat16), BFloat16)
    body = kernel_ir(compiled.llir)
    assert body.count("fpext half") == 2 and body.count("fptrunc float") == 2
    assert "cvt.rn.bf16.f32" in compiled.ptx


def test_same_width_integer_cast_is_free():
    compiled = build(convert, tsjit.spec(2, Int32), tsjit.spec(2, Uint32), Uint32)
    for opcode in ("sext", "zext", "trunc", "bitcast", "sitofp"):
        assert not instructions(compiled.llir, opcode)


@tsjit.kernel
def typed_constants(out16, out64, outb):
    out16[0] = tsjit.Float16(2.5)
    out64[0] = tsjit.Int64(2**40) + tsjit.Int64(1)
    outb[0] = tsjit.Boolean(3)


def test_dtype_call_on_a_literal_makes_a_typed_constant():
    compiled = build(typed_constants, tsjit.spec(1, Float16), tsjit.spec(1, Int64), tsjit.spec(1, Boolean))
    stores = instructions(compiled.llir, "store")
    assert stores[0].startswith("store half 0x4004000000000000")  # 2.5
    assert re.search(r"add i64 1099511627776, 1", kernel_ir(compiled.llir))
    assert "icmp" not in kernel_ir(compiled.llir)  # Boolean(3) folded to true
    assert re.search(r'zext i1 1 to i8', kernel_ir(compiled.llir))


# -- promotion ---------------------------------------------------------------------------------
PROMOTIONS = [
    (Int8, Int32, Int32), (Int32, Uint32, Uint32), (Int16, Uint8, Int16), (Int64, Uint32, Int64),
    (Uint64, Int64, Uint64), (Float16, BFloat16, Float32), (Float16, Float32, Float32),
    (Float32, Float64, Float64), (Int64, Float16, Float16), (Boolean, Int8, Int8), (Uint16, Boolean, Uint16),
]


@pytest.mark.parametrize("a, b, expected", PROMOTIONS, ids=lambda v: v.name)
def test_promote_table(a, b, expected):
    assert dt.promote(a, b) is expected
    assert dt.promote(b, a) is expected


@tsjit.kernel
def add_two(x, y, out):
    out[0] = probe(x[0] + y[0])


@pytest.mark.parametrize("a, b, expected", PROMOTIONS, ids=lambda v: v.name)
def test_binary_operator_promotes_both_operands(a, b, expected):
    SEEN_DTYPES.clear()
    compiled = build(add_two, tsjit.spec(1, a), tsjit.spec(1, b), tsjit.spec(1, expected))
    assert SEEN_DTYPES == [expected]
    opcode = "fadd" if expected.is_float else "add"
    (add,) = instructions(compiled.llir, opcode)
    assert f"{opcode} {REGISTER_TYPE[expected]} " in add


def test_boolean_plus_boolean_counts_in_int32():
    SEEN_DTYPES.clear()
    compiled = build(add_two, tsjit.spec(1, Boolean), tsjit.spec(1, Boolean), tsjit.spec(1, Int32))
    assert SEEN_DTYPES == [Int32]
    assert instructions(compiled.llir, "add")[0].startswith("%") and "add i32" in instructions(compiled.llir,
                                                                                              "add")[0]


# -- the store rules (newcomer 7, item 16): a float narrows into a float, never into an integer ---
@tsjit.kernel
def store_float32_into(x, out):
    i = tsjit.thread_idx().x
    out[i] = x[i] * 3.0          # a Float32 value stored into `out`'s element type


def test_float32_into_float16_memory_rounds_to_nearest_like_numpy():
    rng = np.random.default_rng()
    x = (rng.standard_normal(64) * 1000).astype(np.float32)
    x[:2] = (30000.0, -30000.0)                      # 90000 is beyond Float16: +-inf, as numpy gives
    out = np.full(64, np.nan, np.float16)
    store_float32_into.interpret[(1,), (64,)](x, out)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(out, (x * np.float32(3.0)).astype(np.float16))


def test_float32_into_int32_memory_is_refused_and_states_the_rule():
    with pytest.raises(tsjit.CompilationError, match=r"storing a Float32 into Int32 memory would truncate it toward "
                                                     r"zero; convert explicitly with tsjit\.Int32\(value\).*"
                                                     r"Float32 into Float16, rounds to nearest implicitly"):
        build(store_float32_into, tsjit.spec(64, Float32), tsjit.spec(64, Int32))
