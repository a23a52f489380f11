"""Argument specializations on the device side: kernel parameters and device objects.

The specs themselves and the parameter layout of each are the kernel ABI
(:mod:`tsjit.abi`): ``spec.parameters()`` lists the parameters as
:class:`~tsjit.abi.ParamField` records.  This module maps each field's device kind to its
LLVM type (:func:`parameter_types`) and builds the device-side object of an argument from
its LLVM parameters (:func:`build_argument`); it decides no layout of its own.
"""
from __future__ import annotations

from llvmlite import ir

from tsjit.abi import ConstSpec, ScalarSpec, TensorMapSpec, TensorSpec
from tsjit.backend import emit
from tsjit.lang.memory import Pointer, Tensor
from tsjit.lang.tma import TensorMapHandle
from tsjit.lang.values import Value

#: The LLVM type of each device kind of :data:`tsjit.abi.KIND_BYTES`.
KIND_TYPES = {
    "ptr": emit.pointer_type(emit.GLOBAL), "tensormap": ir.PointerType(ir.ArrayType(emit.I8, 128)),
    "i1": emit.I1, "i8": emit.I8, "i16": emit.I16, "i32": emit.I32, "i64": emit.I64,
    "f16": ir.HalfType(), "bf16": emit.BFLOAT, "f32": ir.FloatType(), "f64": ir.DoubleType(),
}


def parameter_types(spec) -> list:
    """LLVM parameter types that ``spec`` expands to, one per ``spec.parameters()`` field."""
    return [KIND_TYPES[field.kind] for field in spec.parameters()]


def build_argument(spec, params: list, name: str):
    """The device-side object for ``spec`` from its LLVM parameters (see :func:`parameter_types`):
    a :class:`~tsjit.lang.memory.Tensor`, a :class:`~tsjit.lang.values.Value`, the constant
    itself, or a :class:`~tsjit.lang.tma.TensorMapHandle`."""
    fields = spec.parameters()
    for field, param in zip(fields, params):
        param.name = name + field.suffix
    if isinstance(spec, TensorSpec):
        ptr_param = params[0]
        ptr_param.add_attribute("noundef")
        align = 16 if spec.aligned16 else spec.dtype.itemsize
        ptr = Pointer(ptr_param, spec.dtype, emit.GLOBAL, align)
        shape = tuple(Value(params[1 + k], fields[1 + k].dtype) for k in range(spec.rank))
        strides, pos = [], 1 + spec.rank
        for unit in spec.unit_strides:
            if unit:
                strides.append(1)
            else:
                strides.append(Value(params[pos], fields[pos].dtype))
                pos += 1
        row_align = align if (spec.rank == 1 or spec.rows_aligned16) else spec.dtype.itemsize
        return Tensor(ptr, shape, tuple(strides), spec.index_dtype, row_alignment=row_align)
    if isinstance(spec, ScalarSpec):
        return Value(params[0], spec.dtype)
    if isinstance(spec, ConstSpec):
        return spec.value
    if isinstance(spec, TensorMapSpec):
        return TensorMapHandle(params[0], spec)
    raise RuntimeError(f"internal error, please report: unknown argument spec {spec!r}")
