"""Typed device values and the operators that build IR from them.

A :class:`Value` pairs an llvmlite value with a :class:`~tsjit.lang.dtypes.DType`.
Python operators on values emit LLVM instructions into the active
:class:`~tsjit.backend.emit.KernelModule`, so both the frontend (which compiles
kernel source) and trace-time Python (schedules, resource constructors) build IR
with ordinary expressions such as ``bx * WARPS * 32 + tx``.

Operator semantics (documented here once; promotion in :mod:`tsjit.lang.dtypes`):

* ``+ - *`` wrap around for integers (two's complement), IEEE for floats.
* ``/`` is true division: integers are converted to ``Float32`` first (``Float64``
  if the other operand is ``Float64``).
* ``//`` and ``%`` on integers round toward zero and take the dividend's sign (C
  semantics, as in Triton and CUDA C++), not Python's floor semantics; on floats
  ``//`` is ``floor(a / b)``.  Integer division never has undefined behaviour (LLVM's
  ``sdiv``/``udiv`` by zero, and ``INT_MIN // -1``, are UB that lets LLVM delete code): a
  compile-time divisor of 0 is a :class:`CompilationError`; a run-time divisor of 0 gives an
  unspecified value, as PTX ``div``/``rem`` do (PTX ISA "Integer Arithmetic Instructions: div":
  "division by zero yields an unspecified, machine-specific value"); today the dividend for
  ``//`` and 0 for ``%``.  ``INT_MIN // -1`` wraps to ``INT_MIN`` (``% -1`` is 0).
* ``>>`` is arithmetic for signed and logical for unsigned integers.  A compile-time shift
  amount outside ``0 .. bits-1`` is a :class:`CompilationError`; a run-time amount is
  clamped as PTX ``shl``/``shr`` do (PTX ISA: "shift amounts greater than the register width
  N are clamped to N"): ``<<`` and logical ``>>`` give 0, arithmetic ``>>`` gives the sign.
  (LLVM's ``shl``/``ashr``/``lshr`` by the width or more would be poison.)
* A compile-time number converted to a float dtype rounds to nearest even, and a value
  beyond the dtype's range becomes ``±inf`` (``tsjit.Float16(70000.0)`` is ``inf``), exactly
  what the same conversion gives at run time (PTX ``cvt.rn``) and what numpy gives.
* ``& | ^ ~`` on ``Boolean`` are logical; comparisons return ``Boolean``.
* Using a value where Python needs a ``bool`` (``if`` in trace-time Python, ``and``
  outside kernel code) raises :class:`CompilationError`: device values are only known
  at run time.
"""
from __future__ import annotations

import operator

import numpy as np
from llvmlite import ir

from tsjit.backend import emit
from tsjit.errors import CompilationError
from tsjit.lang import dtypes as dt
from tsjit.lang.dtypes import DType


class Value:
    """A run-time scalar in device code.

    Attributes:
        ir: the llvmlite value (``i1`` for Boolean, ``iN``, ``half``, ``bfloat``, ``float``, ``double``).
        dtype: its :class:`DType`.
    """

    __slots__ = ("ir", "dtype")

    def __init__(self, ir_value, dtype: DType):
        self.ir = ir_value
        self.dtype = dtype

    def __repr__(self) -> str:
        return f"Value({self.dtype.name})"

    def __bool__(self):
        raise CompilationError(
            f"a device {self.dtype.name} value is only known at run time and cannot be used as a "
            "Python bool here; use it in a kernel `if`/`while`, or make it compile-time with "
            "tsjit.Constexpr / tsjit.const_expr")

    def __index__(self):
        raise CompilationError(
            f"a device {self.dtype.name} value cannot be used as a compile-time index; index "
            "fragments and tuples with compile-time integers (tsjit.range_constexpr)")

    def __iter__(self):
        raise CompilationError(f"a device {self.dtype.name} value is not iterable")

    def __hash__(self):
        # A set or dict would compare run-time values by object identity (two loads of the same
        # element are two objects): refuse instead of deduplicating or looking up wrongly.
        raise CompilationError(
            f"a device {self.dtype.name} value cannot be a set element or a dict key: its value is only "
            f"known at run time; use a tuple, and `==` / `in (a, b)` for comparisons")

    def __format__(self, spec):
        raise CompilationError(
            f"a device {self.dtype.name} value has no text at compile time; print it with "
            f"tsjit.device_print(\"x = {{}}\", x) (an f-string works only as device_print's format)")

    def to(self, dtype: DType) -> "Value":
        """This value converted to ``dtype`` (same as ``dtype(value)``)."""
        return cast_to(self, dtype)

    # arithmetic -----------------------------------------------------------------------------
    def __add__(self, other): return binary("+", self, other)
    def __radd__(self, other): return binary("+", other, self)
    def __sub__(self, other): return binary("-", self, other)
    def __rsub__(self, other): return binary("-", other, self)
    def __mul__(self, other): return binary("*", self, other)
    def __rmul__(self, other): return binary("*", other, self)
    def __truediv__(self, other): return binary("/", self, other)
    def __rtruediv__(self, other): return binary("/", other, self)
    def __floordiv__(self, other): return binary("//", self, other)
    def __rfloordiv__(self, other): return binary("//", other, self)
    def __mod__(self, other): return binary("%", self, other)
    def __rmod__(self, other): return binary("%", other, self)
    def __lshift__(self, other): return binary("<<", self, other)
    def __rlshift__(self, other): return binary("<<", other, self)
    def __rshift__(self, other): return binary(">>", self, other)
    def __rrshift__(self, other): return binary(">>", other, self)
    def __and__(self, other): return binary("&", self, other)
    def __rand__(self, other): return binary("&", other, self)
    def __or__(self, other): return binary("|", self, other)
    def __ror__(self, other): return binary("|", other, self)
    def __xor__(self, other): return binary("^", self, other)
    def __rxor__(self, other): return binary("^", other, self)
    def __pow__(self, other): return power(self, other)
    def __rpow__(self, other): return power(other, self)
    def __lt__(self, other): return compare("<", self, other)
    def __le__(self, other): return compare("<=", self, other)
    def __gt__(self, other): return compare(">", self, other)
    def __ge__(self, other): return compare(">=", self, other)
    def __eq__(self, other): return compare("==", self, other)  # type: ignore[override]
    def __ne__(self, other): return compare("!=", self, other)  # type: ignore[override]

    def __neg__(self):
        b = _builder()
        if self.dtype.is_float:
            return Value(b.fneg(self.ir), self.dtype)
        if self.dtype.is_bool:
            self = cast_to(self, dt.Int32)
        return Value(b.neg(self.ir), self.dtype)

    def __pos__(self):
        return self

    def __invert__(self):
        if self.dtype.is_float:
            raise CompilationError(f"`~` needs an integer or Boolean operand, got {self.dtype.name}")
        return Value(_builder().not_(self.ir), self.dtype)

    def __abs__(self):
        return absolute(self)


#: PTX ``ex2.approx.f32`` / ``lg2.approx.f32`` (PTX ISA 8.x §9.7.3: max error 2 ulp on the full range).
EXP2_APPROX = "llvm.nvvm.ex2.approx.f"
EXP2_APPROX_FTZ = "llvm.nvvm.ex2.approx.ftz.f"
LOG2_APPROX = "llvm.nvvm.lg2.approx.f"


def intrinsic_suffix(dtype: DType) -> str:
    """The LLVM intrinsic type suffix of ``dtype`` (``"f32"``, ``"i64"``, ...)."""
    return {16: "f16", 32: "f32", 64: "f64"}[dtype.bits] if dtype.is_float else f"i{dtype.bits}"


def float_operand(x, name: str) -> tuple[Value, DType]:
    """``x`` as a Float32/Float64 value for ``tsjit.math.<name>``, and its original dtype.

    A Python number becomes a Float32 constant; Float16/BFloat16 are widened to Float32.

    Raises:
        CompilationError: ``x`` is an integer or Boolean value.
    """
    if not isinstance(x, Value):
        x = constant(float(x), dt.Float32)
    if not x.dtype.is_float:
        raise CompilationError(f"tsjit.math.{name} needs a floating-point operand, got {x.dtype.name}; "
                               f"convert it first, e.g. tsjit.Float32(x)")
    original = x.dtype
    if original.bits == 16:
        x = cast_to(x, dt.Float32)
    return x, original


def float_unary(x, name: str, f32: str, f64: str | None = None) -> Value:
    """Apply the one-operand float intrinsic ``f32`` (``f64`` for Float64 operands) to ``x``.

    Float16/BFloat16 operands are computed in Float32 and converted back.

    Raises:
        CompilationError: ``x`` is not a float, or it is Float64 and ``f64`` is None (no accurate
            PTX instruction; the message names ``tsjit.math.<name>``).
    """
    v, original = float_operand(x, name)
    if v.dtype is dt.Float64:
        if f64 is None:
            raise CompilationError(f"tsjit.math.{name} is not available for Float64 (no accurate PTX "
                                   f"instruction); convert to Float32 if its precision is enough")
        return Value(emit.current().intrinsic(f64, [v.ir]), dt.Float64)
    return cast_to(Value(emit.current().intrinsic(f32, [v.ir]), dt.Float32), original)


def absolute(x: Value) -> Value:
    """``abs(x)`` of a device value (integers wrap for the most negative value, as in C)."""
    if x.dtype.is_float:
        return float_unary(x, "abs", "llvm.fabs.f32", "llvm.fabs.f64")
    if not x.dtype.is_signed:
        return x
    poison_on_min = ir.Constant(ir.IntType(1), 0)
    return Value(emit.current().intrinsic(f"llvm.abs.{intrinsic_suffix(x.dtype)}", [x.ir, poison_on_min]), x.dtype)


def _builder() -> ir.IRBuilder:
    return emit.current().builder


def is_value(x) -> bool:
    return isinstance(x, Value)


def is_constant(x) -> bool:
    """True for Python compile-time scalars (bool, int, float, numpy scalars)."""
    return isinstance(x, (bool, int, float, np.generic)) and not isinstance(x, Value)


def literal_dtype(x) -> DType:
    """The dtype a Python literal gets when it must be materialized on its own.

    ``bool`` -> Boolean; ``int`` -> Int32 (Int64 if it does not fit, Uint64 above 2**63-1);
    ``float`` -> Float32; numpy scalars keep their dtype.
    """
    if isinstance(x, np.generic):
        found = dt.from_numpy(x.dtype)
        if found is None:
            raise CompilationError(f"numpy scalar of dtype {x.dtype} has no device type")
        return found
    if isinstance(x, bool):
        return dt.Boolean
    if isinstance(x, int):
        if -2**31 <= x < 2**31:
            return dt.Int32
        if -2**63 <= x < 2**63:
            return dt.Int64
        if 0 <= x < 2**64:
            return dt.Uint64
        raise CompilationError(f"integer literal {x} does not fit in 64 bits")
    if isinstance(x, float):
        return dt.Float32
    raise CompilationError(f"{type(x).__name__} object is not a device scalar")


def _check_fits(x: int, dtype: DType) -> None:
    if dtype.is_int:
        lo, hi = (-(2 ** (dtype.bits - 1)), 2 ** (dtype.bits - 1)) if dtype.is_signed else (0, 2 ** dtype.bits)
        if not lo <= x < hi:
            raise CompilationError(
                f"integer {x} does not fit in {dtype.name} (range {lo}..{hi - 1}); cast the other "
                f"operand to a wider type first, e.g. tsjit.Int64(v)")


def constant(x, dtype: DType | None = None) -> Value:
    """A constant :class:`Value` of ``x`` (a Python/numpy scalar) with ``dtype`` (default: :func:`literal_dtype`)."""
    if isinstance(x, Value):
        return cast_to(x, dtype) if dtype is not None else x
    if dtype is None:
        dtype = literal_dtype(x)
    if isinstance(x, np.generic):
        x = x.item()
    ty = emit.llvm_type(dtype)
    if dtype.is_float:
        return Value(ir.Constant(ty, round_to_float(x, dtype)), dtype)
    if dtype.is_bool:
        return Value(ir.Constant(ty, 1 if x else 0), dtype)
    if isinstance(x, float):
        if not x.is_integer():
            raise CompilationError(f"float {x} cannot be used as an {dtype.name}; convert it explicitly")
        x = int(x)
    x = int(x)
    _check_fits(x, dtype)
    return Value(ir.Constant(ty, x & ((1 << dtype.bits) - 1)), dtype)


def immediate(value, what: str, low: int, high: int) -> int:
    """``value`` checked to be a compile-time int in ``low .. high`` (an operand a builtin encodes
    in the instruction: a mask, a count, an id).  ``what`` names it in the message.

    Raises:
        CompilationError: a run-time value, a non-int (``bool`` included) or an int out of range;
            never silently truncated.
    """
    if isinstance(value, Value):
        raise CompilationError(f"{what} must be a compile-time integer, got a run-time {value.dtype.name}")
    if isinstance(value, np.integer):
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise CompilationError(f"{what} must be a compile-time integer, got {type(value).__name__} {value!r}")
    if not low <= value <= high:
        raise CompilationError(f"{what} is {value:#x}, outside {low:#x}..{high:#x}" if high > 0xFFFF else
                               f"{what} is {value}, outside {low}..{high}")
    return value


def require_integer(x, what: str) -> None:
    """Refuse a float (device value or Python / numpy number) or a non-number where an integer
    index, coordinate or count is needed; ``what`` names the operand in the message.

    A float is refused rather than truncated toward zero: ``t / n * bm`` is true division in
    tsjit, as in Python, and a coordinate built from it would silently point elsewhere.

    Raises:
        CompilationError: ``x`` is a float or not a number.
    """
    if isinstance(x, Value) and x.dtype.is_float or isinstance(x, (float, np.floating)):
        got = x.dtype.name if isinstance(x, Value) else f"{type(x).__name__} {x!r}"
        raise CompilationError(f"{what} must be an integer, got {got} (it would be truncated silently); "
                               f"use // for integer division, or convert explicitly: tsjit.Int32(x)")
    if not isinstance(x, Value) and not is_constant(x):
        raise CompilationError(f"{what} must be an integer, got {type(x).__name__} object")


def integer_operand(x, dtype: DType, what: str) -> Value:
    """``x`` (an integer or Boolean Value, or a Python / numpy integer) converted to integer
    ``dtype``, after :func:`require_integer` (``what`` names the operand)."""
    require_integer(x, what)
    return cast_to(as_value(x, dtype), dtype)


def round_to_float(x, dtype: DType) -> float:
    """The Python number ``x`` rounded to float dtype ``dtype`` (IEEE round-to-nearest-even).

    A value beyond the dtype's range becomes ``±inf``, as a run-time conversion (PTX ``cvt.rn``)
    and numpy give; NaN stays NaN.  BFloat16 rounds through Float32.
    """
    try:
        value = float(x)
    except OverflowError:  # an int beyond the double range
        value = float("inf") if x > 0 else float("-inf")
    if dtype.bits == 64:
        return value
    with np.errstate(over="ignore"):
        narrow = np.float16(value) if dtype.name == "Float16" else np.float32(value)
    return float(narrow)


def as_value(x, like: DType | None = None) -> Value:
    """``x`` as a Value; a Python literal takes dtype ``like`` when given (see module rules)."""
    if isinstance(x, Value):
        return x
    if not is_constant(x):
        raise CompilationError(
            f"expected a device scalar or a Python number, got {type(x).__name__} object")
    if like is not None:
        if isinstance(x, bool) and not like.is_bool:
            return constant(int(x), like)
        if isinstance(x, float) and not like.is_float:
            return constant(x, dt.Float32)
        if isinstance(x, int) and like.is_bool:
            return constant(x)
        return constant(x, like)
    return constant(x)


def cast_to(x, dtype: DType) -> Value:
    """Convert ``x`` (Value or Python scalar) to ``dtype``.

    int->int truncates or extends by the source's signedness; float->int rounds toward
    zero and saturates, NaN giving 0 (PTX ``cvt.rzi``; ``llvm.fptosi.sat``, never LLVM poison);
    int->float rounds to nearest; ->Boolean is ``x != 0``.
    """
    if not isinstance(dtype, DType):
        raise CompilationError(f"cannot convert to {dtype!r}: not a tsjit dtype")
    if not isinstance(x, Value):
        if isinstance(x, float) and not dtype.is_float and not dtype.is_bool:
            x = int(x)
        if isinstance(x, bool) and not dtype.is_bool:
            x = int(x)
        return constant(x, dtype)
    src = x.dtype
    if src is dtype:
        return x
    b = _builder()
    to_ty = emit.llvm_type(dtype)
    if dtype.is_bool:
        if src.is_float:
            return Value(b.fcmp_unordered("!=", x.ir, ir.Constant(x.ir.type, 0.0)), dtype)
        return Value(b.icmp_unsigned("!=", x.ir, ir.Constant(x.ir.type, 0)), dtype)
    if src.is_bool:
        if dtype.is_float:
            return Value(b.uitofp(x.ir, to_ty), dtype)
        return Value(b.zext(x.ir, to_ty), dtype)
    if src.is_int and dtype.is_int:
        if dtype.bits == src.bits:
            return Value(x.ir, dtype)
        if dtype.bits < src.bits:
            return Value(b.trunc(x.ir, to_ty), dtype)
        return Value((b.sext if src.is_signed else b.zext)(x.ir, to_ty), dtype)
    if src.is_int and dtype.is_float:
        return Value((b.sitofp if src.is_signed else b.uitofp)(x.ir, to_ty), dtype)
    if src.is_float and dtype.is_int:
        # LLVM's fptosi/fptoui of NaN or an out-of-range value is poison; the saturating forms are
        # defined: the result clamps to the integer range and NaN gives 0 (what PTX cvt.rzi does).
        work = cast_to(x, dt.Float32) if src.bits < 32 else x
        name = f"llvm.fpto{'s' if dtype.is_signed else 'u'}i.sat.i{dtype.bits}.f{work.dtype.bits}"
        return Value(emit.current().intrinsic(name, [work.ir]), dtype)
    # float -> float
    if dtype.bits > src.bits or (dtype.bits == src.bits and dtype.name == "Float32"):
        return Value(b.fpext(x.ir, to_ty), dtype)
    if dtype.bits == src.bits:  # Float16 <-> BFloat16: go through Float32
        return cast_to(cast_to(x, dt.Float32), dtype)
    return Value(b.fptrunc(x.ir, to_ty), dtype)


def unify(a, b) -> tuple[Value, Value, DType]:
    if isinstance(a, Value) and isinstance(b, Value):
        dtype = dt.promote(a.dtype, b.dtype)
        if {a.dtype, b.dtype} == {dt.Float16, dt.BFloat16}:
            return _widen_mixed_half(a), _widen_mixed_half(b), dtype
        return cast_to(a, dtype), cast_to(b, dtype), dtype
    if isinstance(a, Value):
        bv = as_value(b, a.dtype)
        dtype = dt.promote(a.dtype, bv.dtype)
        return cast_to(a, dtype), cast_to(bv, dtype), dtype
    if isinstance(b, Value):
        av = as_value(a, b.dtype)
        dtype = dt.promote(av.dtype, b.dtype)
        return cast_to(av, dtype), cast_to(b, dtype), dtype
    raise CompilationError("internal: operator on two compile-time constants reached IR emission")


def _widen_mixed_half(x: Value) -> Value:
    """``x`` (Float16 or BFloat16, mixed with the other) as Float32.  The BFloat16 side is widened
    through its bits (exact: a bfloat16 is the upper half of a float32) rather than ``fpext``:
    LLVM's InstCombine narrows ``fptrunc(frem(fpext half, fpext bfloat))`` by building a
    half<->bfloat FPCast, which fails an LLVM assertion and aborts the process (found by the
    fuzz test, llvmlite 0.50 / LLVM 22)."""
    if x.dtype is not dt.BFloat16:
        return cast_to(x, dt.Float32)
    b = _builder()
    bits = b.zext(b.bitcast(x.ir, ir.IntType(16)), ir.IntType(32))
    return Value(b.bitcast(b.shl(bits, ir.Constant(ir.IntType(32), 16)), emit.llvm_type(dt.Float32)), dt.Float32)


_INT_OPS = {"+": "add", "-": "sub", "*": "mul", "&": "and_", "|": "or_", "^": "xor"}
_FLOAT_OPS = {"+": "fadd", "-": "fsub", "*": "fmul", "/": "fdiv", "%": "frem"}


def binary(op: str, a, b) -> Value:
    """Apply arithmetic/bitwise operator ``op`` (``"+"``, ``"//"``, ``"<<"``, ...) to ``a`` and ``b``."""
    if not isinstance(a, Value) and not isinstance(b, Value):
        return _PY_BINOPS[op](a, b)
    x, y, dtype = unify(a, b)
    bld = _builder()
    if op == "/":
        if not dtype.is_float:
            fdt = dt.Float64 if dtype.bits == 64 else dt.Float32
            x, y, dtype = cast_to(x, fdt), cast_to(y, fdt), fdt
        return Value(bld.fdiv(x.ir, y.ir), dtype)
    if dtype.is_float:
        if op == "//":
            return float_unary(Value(bld.fdiv(x.ir, y.ir), dtype), "floor", "llvm.floor.f32", "llvm.floor.f64")
        if op not in _FLOAT_OPS:
            raise CompilationError(f"operator `{op}` is not defined for {dtype.name} operands")
        return Value(getattr(bld, _FLOAT_OPS[op])(x.ir, y.ir), dtype)
    if dtype.is_bool and op in ("+", "-", "*", "//", "%", "<<", ">>"):
        x, y, dtype = cast_to(x, dt.Int32), cast_to(y, dt.Int32), dt.Int32
    if op in ("<<", ">>"):
        return _shift(op, x, y, dtype)
    if op in _INT_OPS:
        return Value(getattr(bld, _INT_OPS[op])(x.ir, y.ir), dtype)
    if op in ("//", "%"):
        return _integer_division(op, x, y, dtype)
    raise CompilationError(f"unsupported operator `{op}`")


def _constant_int(v: Value, dtype: DType) -> int | None:
    """The integer a constant Value holds (signed per ``dtype``), or ``None`` for a run-time value."""
    if not isinstance(v.ir, ir.Constant) or not isinstance(v.ir.constant, int):
        return None
    raw = v.ir.constant & ((1 << dtype.bits) - 1)
    return raw - (1 << dtype.bits) if dtype.is_signed and raw >> (dtype.bits - 1) else raw


def _integer_division(op: str, x: Value, y: Value, dtype: DType) -> Value:
    """``x // y`` or ``x % y`` on integers (toward zero) without LLVM's undefined behaviour (module doc)."""
    bld = _builder()
    ty = x.ir.type
    divisor = _constant_int(y, dtype)
    what = "division" if op == "//" else "modulo"
    if divisor == 0:
        raise CompilationError(f"integer {what} by zero: the divisor is the constant 0 (the result would be "
                               f"undefined); divide by a non-zero value or guard the division with an `if`")
    if divisor == -1 and dtype.is_signed:  # INT_MIN // -1 overflows: wrap as PTX does
        return Value(bld.neg(x.ir), dtype) if op == "//" else constant(0, dtype)
    if divisor is None:
        one = ir.Constant(ty, 1)
        unsafe = bld.icmp_unsigned("==", y.ir, ir.Constant(ty, 0))
        if dtype.is_signed:
            overflow = bld.and_(bld.icmp_signed("==", x.ir, ir.Constant(ty, 1 << (dtype.bits - 1))),
                                bld.icmp_signed("==", y.ir, ir.Constant(ty, (1 << dtype.bits) - 1)))
            unsafe = bld.or_(unsafe, overflow)
        y = Value(bld.select(unsafe, one, y.ir), dtype)
    if op == "//":
        return Value((bld.sdiv if dtype.is_signed else bld.udiv)(x.ir, y.ir), dtype)
    return Value((bld.srem if dtype.is_signed else bld.urem)(x.ir, y.ir), dtype)


def _shift(op: str, x: Value, y: Value, dtype: DType) -> Value:
    """``x << y`` / ``x >> y`` with PTX's clamped shift amounts instead of LLVM poison (module doc)."""
    bld = _builder()
    ty = x.ir.type
    bits = dtype.bits
    amount = _constant_int(y, dtype)
    if amount is not None and not 0 <= amount < bits:
        raise CompilationError(f"shift amount {amount} is out of range for {dtype.name} (0..{bits - 1}); "
                               f"convert the shifted value to a wider type first, e.g. tsjit.Int64(x)")
    arithmetic = op == ">>" and dtype.is_signed
    if amount is None:
        too_far = bld.icmp_unsigned(">=", y.ir, ir.Constant(ty, bits))
        if arithmetic:  # shifting by bits-1 or more fills with the sign
            clamped = bld.select(too_far, ir.Constant(ty, bits - 1), y.ir)
            return Value(bld.ashr(x.ir, clamped), dtype)
        shifted = (bld.shl if op == "<<" else bld.lshr)(x.ir, y.ir)
        return Value(bld.select(too_far, ir.Constant(ty, 0), shifted), dtype)
    if op == "<<":
        return Value(bld.shl(x.ir, y.ir), dtype)
    return Value((bld.ashr if arithmetic else bld.lshr)(x.ir, y.ir), dtype)


_PY_BINOPS = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
              "//": operator.floordiv, "%": operator.mod, "<<": operator.lshift, ">>": operator.rshift,
              "&": operator.and_, "|": operator.or_, "^": operator.xor}
_PY_CMPS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
            "==": operator.eq, "!=": operator.ne}


def compare(op: str, a, b) -> Value:
    """Comparison ``a op b`` as a Boolean value (ordered for floats, except ``!=`` which is unordered)."""
    if not isinstance(a, Value) and not isinstance(b, Value):
        return _PY_CMPS[op](a, b)
    if not (isinstance(a, Value) or is_constant(a)) or not (isinstance(b, Value) or is_constant(b)):
        other = b if isinstance(a, Value) else a
        raise CompilationError(f"cannot compare a device value with a {type(other).__name__} object")
    x, y, dtype = unify(a, b)
    bld = _builder()
    if dtype.is_float:
        res = (bld.fcmp_unordered if op == "!=" else bld.fcmp_ordered)(op, x.ir, y.ir)
    elif dtype.is_signed:
        res = bld.icmp_signed(op, x.ir, y.ir)
    else:
        res = bld.icmp_unsigned(op, x.ir, y.ir)
    return Value(res, dt.Boolean)


def power(a, b) -> Value:
    """``a ** b``: a compile-time non-negative integer exponent becomes multiplications (square
    and multiply: about ``2 * log2(b)`` of them); otherwise both are converted to float and
    ``exp2(b * log2(a))`` is used."""
    if isinstance(b, int) and not isinstance(b, bool) and b >= 0:
        result = None
        base = a
        while b:
            if b & 1:
                result = base if result is None else result * base
            b >>= 1
            if b:
                base = base * base
        return result if result is not None else as_value(1, a.dtype if isinstance(a, Value) else None)
    x, y, dtype = unify(a, b)
    if not dtype.is_float:
        x, y = cast_to(x, dt.Float32), cast_to(y, dt.Float32)
    return float_unary(y * float_unary(x, "log2", LOG2_APPROX), "exp2", EXP2_APPROX)


def select(cond, if_true, if_false) -> Value:
    """``if_true`` where ``cond`` holds else ``if_false`` (both evaluated; LLVM ``select``)."""
    c = cast_to(cond, dt.Boolean) if isinstance(cond, Value) else cond
    if not isinstance(c, Value):
        return if_true if c else if_false
    x, y, dtype = unify(if_true, if_false) if (isinstance(if_true, Value) or isinstance(if_false, Value)) \
        else (constant(if_true), constant(if_false), None)
    if dtype is None:
        dtype = dt.promote(x.dtype, y.dtype)
        x, y = cast_to(x, dtype), cast_to(y, dtype)
    return Value(_builder().select(c.ir, x.ir, y.ir), dtype)


def logical_not(x) -> Value:
    """Boolean negation of ``x`` (``not x`` in kernel code)."""
    if not isinstance(x, Value):
        return not x
    return Value(_builder().not_(cast_to(x, dt.Boolean).ir), dt.Boolean)


dt.set_value_converter(cast_to)
