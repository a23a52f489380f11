"""Argument specializations: what the compiler knows about each kernel argument.

A specialization is hashable and is part of the cache key.  The runtime computes it
from the actual arguments (:mod:`tsjit.runtime.specialize`); the frontend turns it into
kernel parameters and device-side objects (:func:`build_parameters`).

* :class:`TensorSpec` — an array: dtype, rank, whether the base address is 16-byte
  aligned, which strides equal 1 (those become compile-time ``1`` and are not passed),
  whether every outer stride is a multiple of 16 bytes (so every row start is aligned),
  and whether indices need 64 bits (2**31 elements or more).  Parameters: the base
  pointer, then ``rank`` extents, then the non-unit strides, each Int32 (Int64 when
  ``index64``).
* :class:`ScalarSpec` — a run-time scalar of a dtype; one parameter.
* :class:`ConstSpec` — a compile-time value (``Constexpr``); no parameter.
* :class:`TensorMapSpec` — a TMA descriptor passed by value as a 128-byte grid constant.
"""
from __future__ import annotations

from dataclasses import dataclass

from llvmlite import ir

from tsjit.backend import emit
from tsjit.errors import UsageTypeError
from tsjit.lang import dtypes as dt
from tsjit.lang.dtypes import DType
from tsjit.lang.memory import Pointer, Tensor
from tsjit.lang.tma import TensorMapHandle
from tsjit.lang.values import Value


@dataclass(frozen=True)
class TensorSpec:
    dtype: DType
    rank: int
    aligned16: bool
    unit_strides: tuple
    rows_aligned16: bool
    index64: bool = False

    def key(self) -> tuple:
        return ("T", self.dtype.name, self.rank, self.aligned16, self.unit_strides, self.rows_aligned16,
                self.index64)

    def describe(self) -> str:
        return f"{self.dtype.name} array of rank {self.rank}"


@dataclass(frozen=True)
class ScalarSpec:
    dtype: DType

    def key(self) -> tuple:
        return ("S", self.dtype.name)

    def describe(self) -> str:
        return f"{self.dtype.name} scalar"


@dataclass(frozen=True)
class ConstSpec:
    value: object

    def key(self) -> tuple:
        return ("C", constant_key(self.value))

    def describe(self) -> str:
        return f"compile-time {self.value!r}"


@dataclass(frozen=True)
class TensorMapSpec:
    dtype: DType
    box_shape: tuple
    rank: int
    swizzle: str
    element_strides: tuple | None = None   # outermost first; None when all 1

    def key(self) -> tuple:
        base = ("M", self.dtype.name, self.box_shape, self.rank, self.swizzle)
        return base if self.element_strides is None else base + (self.element_strides,)

    def describe(self) -> str:
        return f"TensorMap of {self.dtype.name}, box {self.box_shape}"


def tensormap_spec(dtype: DType, box_shape, *, rank: int | None = None, swizzle: str = "none",
                   element_strides=None) -> TensorMapSpec:
    """A stand-in for a :class:`tsjit.TensorMap` argument when compiling without a GPU
    (``tsjit.compile(kernel, tsjit.tensormap_spec(tsjit.Float32, (64, 64)), ...)``)."""
    box = tuple(int(b) for b in box_shape)
    steps = None if element_strides is None or set(element_strides) == {1} else tuple(int(e) for e in element_strides)
    return TensorMapSpec(dtype, box, rank or len(box), swizzle, steps)


def constant_key(value) -> str:
    """A stable string for a compile-time value in cache keys (dtypes by name, tuples recursively).

    Raises:
        TypeError: the value has no stable representation (e.g. an arbitrary object).
    """
    if isinstance(value, DType):
        return f"dtype:{value.name}"
    if isinstance(value, (bool, int, float, str, type(None))):
        return f"{type(value).__name__}:{value!r}"
    if isinstance(value, (tuple, list)):
        return f"{type(value).__name__}(" + ",".join(constant_key(v) for v in value) + ")"
    if hasattr(value, "__tsjit_key__"):
        return value.__tsjit_key__()
    if isinstance(value, type) or callable(value):
        mod = getattr(value, "__module__", "?")
        return f"obj:{mod}.{getattr(value, '__qualname__', repr(value))}"
    raise UsageTypeError(f"a {type(value).__name__} object cannot be a compile-time kernel argument; pass an int, "
                         f"float, bool, str, dtype, tuple of those, or a function/class")


def parameter_types(spec) -> list:
    """LLVM parameter types that ``spec`` expands to."""
    if isinstance(spec, TensorSpec):
        idx = emit.I64 if spec.index64 else emit.I32
        n_strides = sum(1 for unit in spec.unit_strides if not unit)
        return [emit.pointer_type(emit.GLOBAL)] + [idx] * (spec.rank + n_strides)
    if isinstance(spec, ScalarSpec):
        return [emit.llvm_type(spec.dtype)]
    if isinstance(spec, TensorMapSpec):
        return [ir.PointerType(ir.ArrayType(emit.I8, 128))]
    return []


def build_argument(spec, params: list, name: str):
    """The device-side object for ``spec`` from its LLVM parameters (see :func:`parameter_types`)."""
    if isinstance(spec, TensorSpec):
        idx_dtype = dt.Int64 if spec.index64 else dt.Int32
        ptr_param = params[0]
        ptr_param.name = name
        ptr_param.add_attribute("noundef")
        align = 16 if spec.aligned16 else spec.dtype.itemsize
        ptr = Pointer(ptr_param, spec.dtype, emit.GLOBAL, align)
        shape = []
        for k in range(spec.rank):
            p = params[1 + k]
            p.name = f"{name}.shape{k}"
            shape.append(Value(p, idx_dtype))
        strides, pos = [], 1 + spec.rank
        for k, unit in enumerate(spec.unit_strides):
            if unit:
                strides.append(1)
            else:
                p = params[pos]
                p.name = f"{name}.stride{k}"
                strides.append(Value(p, idx_dtype))
                pos += 1
        row_align = align if (spec.rank == 1 or spec.rows_aligned16) else spec.dtype.itemsize
        return Tensor(ptr, tuple(shape), tuple(strides), idx_dtype, row_alignment=row_align)
    if isinstance(spec, ScalarSpec):
        params[0].name = name
        return Value(params[0], spec.dtype)
    if isinstance(spec, ConstSpec):
        return spec.value
    if isinstance(spec, TensorMapSpec):
        params[0].name = name
        return TensorMapHandle(params[0], spec)
    raise RuntimeError(f"internal error, please report: unknown argument spec {spec!r}")
