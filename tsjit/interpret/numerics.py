"""Exact scalar semantics of the device language on numpy arrays, for the CPU interpreter.

Every function is vectorized (numpy arrays in, numpy arrays out; Python scalars work too) and
follows what the compiled code does on the GPU, so an interpreted kernel computes the same bits:

* **Floating-point rounding** (:func:`round_array`, :func:`encode`, :func:`decode`;
  per scalar :func:`round_scalar`, :func:`to_bits`, :func:`from_bits`): IEEE-754
  round-to-nearest-even into Float16, BFloat16, Float32 and the OCP FP8 formats E4M3 / E5M2,
  from float64 inputs without double rounding.  PTX ISA §9.7.9.21 ``cvt`` (``.rn``): a value
  beyond the range becomes ``±inf`` (Float16/BFloat16/Float32/E5M2), or with ``.satfinite``
  the largest finite value of its sign; E4M3 has no infinity (an overflow without saturation is
  NaN).  The FP8 conversions exist in PTX only as ``cvt.rn.satfinite.{e4m3x2,e5m2x2}.f32``, so
  :func:`encode` saturates them by default.  A NaN input gives the format's canonical NaN
  (``0x7FFF`` for Float16/BFloat16, ``0x7F`` for FP8, ``0x7FFFFFFF`` for Float32).
* **Float -> integer** (:func:`float_to_int`, :func:`float_to_int_array`): rounds toward zero and saturates to the integer
  range, NaN giving 0 (PTX ``cvt.rzi`` saturates by default; tsjit lowers it through
  ``llvm.fpto[su]i.sat``).
* **Integer arithmetic** (:func:`wrap_int`, :func:`shift`, :func:`int_divide`): two's-complement
  wraparound, PTX's clamped shift amounts (``shl``/``shr``: "shift amounts greater than the
  register width N are clamped to N"), and C division (toward zero) with tsjit's defined results
  for a zero divisor (``x // 0 == x``, ``x % 0 == 0``) and ``INT_MIN // -1 == INT_MIN``, as
  documented in :mod:`tsjit.lang.values`.

Storage of the 16- and 8-bit floats is their bit patterns (``uint16`` / ``uint8``), as on the
host side of tsjit (:mod:`tsjit.runtime.arrays`); Float16 bits are numpy ``float16`` bits.
"""
from __future__ import annotations

import math
import struct
from dataclasses import dataclass

import numpy as np

from tsjit.errors import InterpretError
from tsjit.lang import dtypes as dt
from tsjit.lang.dtypes import DType


@dataclass(frozen=True)
class FloatFormat:
    """A binary floating-point format: ``mantissa`` explicit fraction bits, ``min_exponent`` the
    exponent of the smallest normal number, ``max_finite`` the largest finite value,
    ``has_inf`` whether the format has infinities, ``nan_bits`` its canonical NaN pattern,
    ``storage`` the numpy type of its bits."""

    name: str
    mantissa: int
    min_exponent: int
    max_finite: float
    has_inf: bool
    nan_bits: int
    storage: type


FORMATS = {
    "Float16": FloatFormat("Float16", 10, -14, 65504.0, True, 0x7FFF, np.uint16),
    "BFloat16": FloatFormat("BFloat16", 7, -126, float.fromhex("0x1.fep127"), True, 0x7FFF, np.uint16),
    "Float32": FloatFormat("Float32", 23, -126, float(np.finfo(np.float32).max), True, 0x7FFFFFFF, np.uint32),
    "Float8E4M3": FloatFormat("Float8E4M3", 3, -6, 448.0, False, 0x7F, np.uint8),
    "Float8E5M2": FloatFormat("Float8E5M2", 2, -14, 57344.0, True, 0x7F, np.uint8),
}
FP8 = ("Float8E4M3", "Float8E5M2")
#: LLVM's type names (and ``e4m3`` / ``e5m2`` for the 8-bit floats carried in ``i8``) -> tsjit names
LLVM_NAMES = {"half": "Float16", "bfloat": "BFloat16", "float": "Float32", "double": "Float64",
              "e4m3": "Float8E4M3", "e5m2": "Float8E5M2"}


def format_name(dtype) -> str:
    """The tsjit name of a float type given as a :class:`DType`, a tsjit name or an LLVM name."""
    name = getattr(dtype, "name", dtype)
    return LLVM_NAMES.get(name, name)


def _format(dtype) -> FloatFormat:
    name = format_name(dtype)
    if name not in FORMATS:
        raise InterpretError(f"no rounding rule for {name!r}: a floating-point format is one of {list(FORMATS)}")
    return FORMATS[name]


def round_array(values, dtype, *, satfinite: bool | None = None) -> np.ndarray:
    """``values`` rounded to nearest even into ``dtype``'s format, as float64 (NaN and ``±inf``
    kept).  Overflow gives ``±inf``, or ``±max_finite`` with ``satfinite``; for E4M3 without
    ``satfinite`` it gives NaN (the format has no infinity).  Subnormals are kept (no flush).

    Args:
        values: numbers (any float or int array; float64 precision is used).
        dtype: Float16, BFloat16, Float32, Float64 (unchanged), Float8E4M3 or Float8E5M2, as a
            DType, a tsjit name or an LLVM name (``half``, ``bfloat``, ``float``, ``double``,
            ``e4m3``, ``e5m2``).
        satfinite: default True for the FP8 formats (PTX has only ``cvt.rn.satfinite`` for them),
            False otherwise.

    Source: IEEE-754 roundTiesToEven; PTX ISA §9.7.9.21 ``cvt`` (``.rn``, ``.satfinite``).
    """
    with np.errstate(invalid="ignore"):                 # a signaling-NaN input is not an error here
        x = np.asarray(values, dtype=np.float64)
    if format_name(dtype) == "Float64":
        return x
    fmt = _format(dtype)
    if satfinite is None:
        satfinite = fmt.name in FP8
    finite = np.isfinite(x)
    safe = np.where(finite, x, 0.0)
    _, exponent = np.frexp(safe)                      # safe = m * 2**exponent, 0.5 <= |m| < 1
    exponent = np.maximum(exponent - 1, fmt.min_exponent)
    quantum = np.ldexp(1.0, exponent - fmt.mantissa)
    rounded = np.rint(safe / quantum) * quantum       # exact: quantum is a power of two
    over = np.abs(rounded) > fmt.max_finite
    if satfinite:
        limit = np.copysign(fmt.max_finite, x)
        rounded = np.where(over, limit, rounded)
        result = np.where(np.isinf(x), limit, np.where(finite, rounded, np.nan))
    else:
        overflow = np.copysign(np.inf, x) if fmt.has_inf else np.nan
        rounded = np.where(over, overflow, rounded)
        result = np.where(finite, rounded, x if fmt.has_inf else np.nan)
    return result


def _fp8_table(name: str) -> np.ndarray:
    """The float64 value of each of the 256 codes of an FP8 format (NaN codes are NaN)."""
    fmt = FORMATS[name]
    codes = np.arange(256)
    exponent_bits = 7 - fmt.mantissa
    bias = 2 ** (exponent_bits - 1) - 1
    sign = np.where(codes & 0x80, -1.0, 1.0)
    e = (codes >> fmt.mantissa) & ((1 << exponent_bits) - 1)
    m = codes & ((1 << fmt.mantissa) - 1)
    normal = np.ldexp(1.0 + m / (1 << fmt.mantissa), e - bias)
    subnormal = np.ldexp(m / (1 << fmt.mantissa), 1 - bias)
    value = sign * np.where(e == 0, subnormal, normal)
    top = e == (1 << exponent_bits) - 1
    if fmt.has_inf:                                   # E5M2: IEEE-like specials
        value = np.where(top & (m == 0), sign * np.inf, value)
        value = np.where(top & (m != 0), np.nan, value)
    else:                                             # E4M3: only S.1111.111 is NaN
        value = np.where(top & (m == (1 << fmt.mantissa) - 1), np.nan, value)
    return value


FP8_VALUES = {name: _fp8_table(name) for name in FP8}


def decode(bits, dtype: DType) -> np.ndarray:
    """The values of stored bit patterns of ``dtype`` (Float16/BFloat16/Float32/FP8), as float32
    (FP8 and 16-bit floats convert exactly) — or float64 for Float64.

    Args:
        bits: the storage array (``uint16`` for BFloat16 and Float16 bits, ``uint8`` for FP8;
            a ``float16``/``float32`` array is taken as values).
    """
    name = format_name(dtype)
    array = np.asarray(bits)
    if name == "Float64":
        return array.view(np.float64) if array.dtype != np.float64 else array
    if name == "Float32":
        return array if array.dtype == np.float32 else array.astype(np.uint32).view(np.float32)
    if name == "Float16":
        return (array if array.dtype == np.float16 else array.astype(np.uint16).view(np.float16)).astype(np.float32)
    if name == "BFloat16":
        return (array.astype(np.uint32) << np.uint32(16)).view(np.float32)
    if name in FP8:
        return FP8_VALUES[name][array.astype(np.uint8)].astype(np.float32)
    raise InterpretError(f"decode: {name!r} is not a floating-point storage type")


def encode(values, dtype: DType, *, satfinite: bool | None = None) -> np.ndarray:
    """``values`` rounded to nearest even into ``dtype``, as its storage bits (``uint16`` for
    Float16/BFloat16, ``uint8`` for FP8, ``uint32`` for Float32).

    ``satfinite`` defaults to True for the FP8 formats (PTX has only ``cvt.rn.satfinite`` for
    them) and False otherwise.  NaN becomes the canonical NaN of the format (module docstring).
    """
    fmt = _format(dtype)
    rounded = round_array(values, dtype, satfinite=satfinite)
    nan = np.isnan(rounded)
    if fmt.name in FP8:
        table = FP8_VALUES[fmt.name]
        positive = table[:0x80]
        order = np.arange(0x80)[~np.isnan(positive)]
        magnitude = np.where(nan, 0.0, np.abs(rounded))
        index = np.searchsorted(positive[order], magnitude)
        code = order[np.minimum(index, len(order) - 1)].astype(np.uint8)
        code = code | np.where(np.signbit(rounded), 0x80, 0).astype(np.uint8)
        return np.where(nan, np.uint8(fmt.nan_bits), code).astype(np.uint8)
    with np.errstate(over="ignore", invalid="ignore"):
        single = rounded.astype(np.float32)          # exact: rounded already fits (or is inf)
    if fmt.name == "Float32":
        bits = single.view(np.uint32)
    elif fmt.name == "Float16":
        with np.errstate(over="ignore", invalid="ignore"):
            bits = rounded.astype(np.float16).view(np.uint16)
    else:
        bits = (single.view(np.uint32) >> np.uint32(16)).astype(np.uint16)
    return np.where(nan, fmt.storage(fmt.nan_bits), bits).astype(fmt.storage)


def to_float32(values) -> np.ndarray:
    """``values`` rounded to Float32 (round to nearest even; overflow to ``±inf``), as float32."""
    with np.errstate(over="ignore", invalid="ignore"):
        return np.asarray(values, dtype=np.float64).astype(np.float32)


# ------------------------------------------------------------------ integers

def _int_info(dtype: DType):
    if not dtype.is_int:
        raise InterpretError(f"{dtype.name} is not an integer type")
    return dtype.bits, dtype.is_signed


def wrap_int(values, dtype: DType):
    """``values`` (Python ints or integer arrays of any width) reduced modulo ``2**bits`` into
    ``dtype``'s range (two's complement for signed types): what ``+ - *`` and int->int
    conversions do.  Returns a numpy array of ``dtype.numpy`` (a numpy scalar for a scalar)."""
    bits, signed = _int_info(dtype)
    target = np.dtype(dtype.numpy_name)
    if isinstance(values, (int, np.integer)) and not isinstance(values, bool):
        raw = int(values) & ((1 << bits) - 1)
        if signed and raw >> (bits - 1):
            raw -= 1 << bits
        return target.type(raw)
    array = np.asarray(values)
    if array.dtype == object:
        return np.array([wrap_int(int(v), dtype) for v in array.ravel()], target).reshape(array.shape)
    return array.astype(np.uint64 if array.dtype.kind == "u" else np.int64).astype(target)


def float_to_int_array(values, dtype: DType) -> np.ndarray:
    """``values`` converted to integer ``dtype``: rounded toward zero, saturated to the range, NaN
    giving 0 (PTX ISA §9.7.9.21 ``cvt.rzi``; LLVM ``fptosi.sat``/``fptoui.sat``)."""
    bits, signed = _int_info(dtype)
    low, high = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    with np.errstate(invalid="ignore"):
        x = np.trunc(np.asarray(values, dtype=np.float64))
    x = np.where(np.isnan(x), 0.0, x)
    target = np.dtype(dtype.numpy_name)
    result = np.where(x <= low, 0, np.where(x >= high, 0, x))      # in-range part, exactly
    result = result.astype(np.int64 if signed or bits < 64 else np.uint64).astype(target)
    result = np.where(x <= low, target.type(low), result)
    return np.where(x >= high, target.type(high), result).astype(target)


def shift(op: str, values, amounts, dtype: DType) -> np.ndarray:
    """``values << amounts`` (``op="<<"``) or ``>>`` (arithmetic for signed ``dtype``, logical for
    unsigned), with amounts read as unsigned and clamped to the width as PTX ``shl``/``shr`` do:
    a shift by ``bits`` or more gives 0, or the sign for an arithmetic right shift."""
    bits, signed = _int_info(dtype)
    if op not in ("<<", ">>"):
        raise InterpretError(f"shift: op must be '<<' or '>>', got {op!r}")
    unsigned = np.dtype(f"u{dtype.itemsize}")
    x = np.asarray(values, dtype=np.dtype(dtype.numpy_name))
    n = np.asarray(amounts).astype(np.int64).astype(unsigned).astype(np.uint64)   # the amount as unsigned
    too_far = n >= bits
    n_safe = np.where(too_far, 0, n).astype(unsigned)
    if op == "<<":
        result = (x.view(unsigned) << n_safe).view(x.dtype)
        return np.where(too_far, x.dtype.type(0), result)
    if signed:
        return x >> np.where(too_far, bits - 1, n).astype(x.dtype)
    result = x >> n_safe
    return np.where(too_far, x.dtype.type(0), result)


def int_divide(op: str, x, y, dtype: DType) -> np.ndarray:
    """C integer ``x // y`` (``op="//"``, toward zero) or ``x % y`` (sign of the dividend) in
    ``dtype``, with tsjit's defined results: a zero divisor gives ``x`` for ``//`` and 0 for ``%``
    (the divisor is replaced by 1), and ``INT_MIN // -1`` wraps to ``INT_MIN``."""
    bits, signed = _int_info(dtype)
    if op not in ("//", "%"):
        raise InterpretError(f"int_divide: op must be '//' or '%', got {op!r}")
    target = np.dtype(dtype.numpy_name)
    a = np.asarray(x, dtype=target)
    b = np.asarray(y, dtype=target)
    unsafe = b == 0
    if signed:
        unsafe = unsafe | ((a == target.type(-(1 << (bits - 1)))) & (b == target.type(-1)))
    divisor = np.where(unsafe, target.type(1), b)
    quotient = a // divisor                                   # floor; toward zero differs by one
    if signed:
        inexact = (a % divisor != 0) & ((a < 0) != (divisor < 0))
        quotient = quotient + inexact.astype(target)
    if op == "//":
        return quotient.astype(target)
    with np.errstate(over="ignore"):
        return (a - quotient * divisor).astype(target)


# ------------------------------------------------------------------ scalars (one register, < 1 us)

_HALF, _SINGLE = struct.Struct("<e"), struct.Struct("<f")
_FP8_CODES = {name: {float(v): code for code, v in enumerate(FP8_VALUES[name][:0x80]) if v == v} for name in FP8}
_FP8_LISTS = {name: [float(v) for v in FP8_VALUES[name]] for name in FP8}


def _round_generic(x: float, fmt: FloatFormat) -> float:
    """Round-to-nearest-even of a finite, non-zero ``x`` into ``fmt`` (overflow: ``±inf``)."""
    exponent = math.frexp(x)[1] - 1
    if exponent < fmt.min_exponent:
        exponent = fmt.min_exponent
    quantum = math.ldexp(1.0, exponent - fmt.mantissa)
    rounded = round(x / quantum) * quantum             # round() on floats is ties-to-even
    if rounded > fmt.max_finite or rounded < -fmt.max_finite:
        return math.copysign(math.inf, x)
    return math.copysign(rounded, x)


def _round_single(x: float) -> float:
    try:
        return _SINGLE.unpack(_SINGLE.pack(x))[0]       # C's double -> float: round to nearest even
    except OverflowError:
        return math.copysign(math.inf, x)


def _round_half(x: float) -> float:
    try:
        return _HALF.unpack(_HALF.pack(x))[0]           # CPython packs binary16 with ties-to-even
    except OverflowError:
        return math.copysign(math.inf, x)


def _round_bfloat(x: float) -> float:
    if x != x:
        return x
    return _SINGLE.unpack((_bfloat_bits(x) << 16).to_bytes(4, "little"))[0]


def _bfloat_bits(x: float) -> int:
    """BFloat16 bits of a non-NaN ``x`` (round to nearest even; overflow to ``±inf``)."""
    try:
        packed = _SINGLE.pack(x)
        exact = _SINGLE.unpack(packed)[0] == x
    except OverflowError:
        exact = False
    if not exact:                                       # not a Float32: round once from the double
        if x in (math.inf, -math.inf):
            return 0x7F80 if x > 0 else 0xFF80
        packed = _SINGLE.pack(_round_generic(x, FORMATS["BFloat16"]))
    bits = int.from_bytes(packed, "little")
    return (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16


def _round_fp8(name: str):
    fmt = FORMATS[name]

    def round_fp8(x: float) -> float:
        if x != x:
            return x
        if x == 0.0:
            return x
        if x in (math.inf, -math.inf):
            return math.copysign(fmt.max_finite, x)
        value = _round_generic(x, fmt)
        return math.copysign(fmt.max_finite, x) if value in (math.inf, -math.inf) else value   # satfinite
    return round_fp8


_SCALAR_ROUND = {"Float32": _round_single, "Float16": _round_half, "BFloat16": _round_bfloat,
                 "Float64": float, "Float8E4M3": _round_fp8("Float8E4M3"), "Float8E5M2": _round_fp8("Float8E5M2")}
_SCALAR_ROUND.update({llvm: _SCALAR_ROUND[name] for llvm, name in LLVM_NAMES.items()})


def round_scalar(x: float, dtype: str) -> float:
    """One value rounded as :func:`round_array` does (``dtype`` an LLVM name, ``e4m3``/``e5m2``, or a
    tsjit name), as a Python float: ties to even, overflow to ``±inf`` (FP8: saturated), NaN kept."""
    return _SCALAR_ROUND[dtype](x)


def to_bits(x: float, dtype: str) -> int:
    """The storage bits of ``x`` rounded into ``dtype`` (as :func:`encode`, for one value; NaN gives
    the canonical NaN)."""
    name = LLVM_NAMES.get(dtype, dtype)
    if x != x:
        return FORMATS[name].nan_bits if name != "Float64" else 0x7FF8_0000_0000_0000
    if name == "BFloat16":
        return _bfloat_bits(x)
    if name == "Float32":
        return int.from_bytes(_SINGLE.pack(_round_single(x)), "little")
    if name == "Float16":
        return int.from_bytes(_HALF.pack(_round_half(x)), "little")
    if name == "Float64":
        return int.from_bytes(struct.pack("<d", x), "little")
    value = _SCALAR_ROUND[name](x)
    code = _FP8_CODES[name][abs(value)]
    return code | (0x80 if math.copysign(1.0, value) < 0 else 0)


def from_bits(bits: int, dtype: str) -> float:
    """The exact value of the storage bits ``bits`` of ``dtype`` (as :func:`decode`, for one value)."""
    name = LLVM_NAMES.get(dtype, dtype)
    if name == "Float32":
        return _SINGLE.unpack((bits & 0xFFFFFFFF).to_bytes(4, "little"))[0]
    if name == "BFloat16":
        return _SINGLE.unpack(((bits & 0xFFFF) << 16).to_bytes(4, "little"))[0]
    if name == "Float16":
        return _HALF.unpack((bits & 0xFFFF).to_bytes(2, "little"))[0]
    if name == "Float64":
        return struct.unpack("<d", (bits & ((1 << 64) - 1)).to_bytes(8, "little"))[0]
    return _FP8_LISTS[name][bits & 0xFF]


def float_to_int(x: float, bits: int, signed: bool) -> int:
    """``cvt.rzi`` of one value to a ``bits``-wide integer: toward zero, saturated, NaN -> 0.
    Returns the result as the core keeps registers: unsigned, masked to ``bits``."""
    if x != x:
        return 0
    low, high = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    if x <= low:
        value = low
    elif x >= high:
        value = high
    else:
        value = math.trunc(x)
    return value & ((1 << bits) - 1)


__all__ = ["FORMATS", "FP8_VALUES", "LLVM_NAMES", "format_name", "round_array", "encode", "decode", "to_float32",
           "wrap_int", "float_to_int_array", "shift", "int_divide", "round_scalar", "to_bits", "from_bits",
           "float_to_int"]
