"""The kernel ABI (:mod:`tsjit.abi`): host packing, device parameters and the PTX entry agree.

Every argument kind lists its kernel parameters once (``spec.parameters()``); the runtime packs
them (``TensorSpec.pack``, ``ScalarSpec.pack``, ``plan_layout``, ``LaunchPlan``) and the
frontend declares them (``parameter_types``).  These tests check the two sides field by field
(count, order, widths), then compile a kernel with one argument of every kind and check that
the launch's ``kernelParams`` point at exactly what the PTX ``.entry`` declares, value by value.
CPU only: arrays wrap made-up device addresses (no memory is touched), the descriptor is a stand-in.
"""
from __future__ import annotations

import ctypes
import re
import struct

import pytest
from llvmlite import ir

import tsjit
from tsjit import abi
from tsjit.backend import emit
from tsjit.frontend.specs import KIND_TYPES, parameter_types
from tsjit.lang import dtypes as dt
from tsjit.runtime.arrays import DeviceArray
from tsjit.runtime.launch import LaunchPlan, argument_signature, plan_layout, split_dynamic

SCALAR_DTYPES = [dt.Boolean, dt.Int8, dt.Int16, dt.Int32, dt.Int64, dt.Uint8, dt.Uint16, dt.Uint32, dt.Uint64,
                 dt.Float16, dt.BFloat16, dt.Float32, dt.Float64, dt.Float8E4M3, dt.Float8E5M2]


def _every_spec():
    specs = []
    for rank in (1, 2, 3):
        for index64 in (False, True):
            for pattern in range(2 ** rank):
                units = tuple(bool(pattern >> k & 1) for k in range(rank))
                specs.append(abi.TensorSpec(dt.Float32, rank, True, units, True, index64))
    specs += [abi.ScalarSpec(d) for d in SCALAR_DTYPES]
    specs += [abi.ConstSpec(7), abi.tensormap_spec(dt.BFloat16, (64, 64), swizzle="128B")]
    return specs


def _llvm_bytes(ty: ir.Type) -> int:
    if isinstance(ty, ir.PointerType):
        pointee = getattr(ty, "pointee", None)
        return pointee.count if isinstance(pointee, ir.ArrayType) else 8  # a by-value descriptor: its bytes
    if isinstance(ty, ir.IntType):
        return max(1, ty.width // 8)
    return {ir.HalfType: 2, ir.FloatType: 4, ir.DoubleType: 8}.get(type(ty), 2 if ty is emit.BFLOAT else None)


@pytest.mark.parametrize("spec", _every_spec(), ids=lambda s: s.describe() + repr(s.key()))
def test_host_packing_and_device_parameters_agree_field_by_field(spec):
    fields = spec.parameters()
    types = parameter_types(spec)
    assert len(types) == len(fields)
    # the warm launch (argument_signature) supplies one changing value per argument: the first field
    assert [f.dynamic for f in fields] == [True] + [False] * (len(fields) - 1) if fields else True
    for field, ty in zip(fields, types):
        assert _llvm_bytes(ty) == field.device_bytes, field
        if field.host_bytes is not None:
            assert field.host_bytes == field.device_bytes, field
    if isinstance(spec, abi.TensorSpec):
        n_strides = spec.unit_strides.count(False)
        assert len(fields) == 1 + spec.rank + n_strides
        assert [f.kind for f in fields] == ["ptr"] + ["i64" if spec.index64 else "i32"] * (spec.rank + n_strides)
        shape, strides = tuple(range(3, 3 + spec.rank)), tuple(1 if u else 100 + k for k, u in
                                                              enumerate(spec.unit_strides))
        packed = spec.pack(0x7000_0000_1000, shape, strides)
        assert [ctypes.sizeof(v) for v in packed] == [f.host_bytes for f in fields]
        assert [v.value for v in packed] == [0x7000_0000_1000, *shape, *(s for s in strides if s != 1)]
        (formats, values, dynamic), = plan_layout([spec], packed)
        assert formats == [f.host_format for f in fields] and dynamic == [True] + [False] * (len(fields) - 1)
    elif isinstance(spec, abi.ScalarSpec):
        assert KIND_TYPES[fields[0].kind] == emit.llvm_type(spec.dtype)  # the frontend's own dtype mapping
        if fields[0].host_format is not None:
            value = 1 if spec.dtype.is_bool else 5
            (packed,) = spec.pack(value, "x")
            assert ctypes.sizeof(packed) == fields[0].host_bytes and packed.value == value
    elif isinstance(spec, abi.ConstSpec):
        assert fields == () and plan_layout([spec], []) == []


@pytest.mark.parametrize("dtype", [dt.Float16, dt.BFloat16, dt.Float8E4M3])
def test_a_scalar_the_host_cannot_pass_is_a_launch_error_naming_it(dtype):
    with pytest.raises(tsjit.LaunchError, match=rf"'scale'.*{dtype.name}"):
        abi.ScalarSpec(dtype).pack(1.0, "scale")


@pytest.mark.parametrize("dtype, value", [(dt.Int8, 128), (dt.Uint32, -1), (dt.Int64, 2 ** 63)])
def test_an_integer_scalar_out_of_range_is_a_launch_error(dtype, value):
    with pytest.raises(tsjit.LaunchError, match=rf"'n'.*{value}.*{dtype.name}"):
        abi.ScalarSpec(dtype).pack(value, "n")


# -- the compiled kernel's PTX entry ----------------------------------------------------------
class _TensorMapStandIn:
    """What the launcher reads of a :class:`tsjit.TensorMap`: its spec, key, descriptor and address."""

    __tsjit_tensormap__ = True

    def __init__(self):
        self.bytes = (ctypes.c_ubyte * 128)(*range(128))

    def spec(self):
        return abi.tensormap_spec(dt.Float32, (32, 32))

    def key(self):
        return self.spec().key()

    def parameter(self):
        return self.bytes

    def address(self):
        return ctypes.addressof(self.bytes)


@tsjit.kernel
def every_kind(a, b, c, flag: tsjit.Boolean, i8: tsjit.Int8, i16: tsjit.Int16, n, big: tsjit.Int64,
               u8: tsjit.Uint8, u16: tsjit.Uint16, u32: tsjit.Uint32, u64: tsjit.Uint64, x: tsjit.Float32,
               y: tsjit.Float64, K: tsjit.Constexpr, tmap):
    if tsjit.thread_idx().x > 1 << 30:
        tsjit.device_print("never")


#: PTX ``.param`` type -> struct format of the value the kernel reads (PTX ISA §5.2.2).
_PTX_FORMATS = {".u64": "Q", ".b64": "Q", ".s64": "q", ".u32": "I", ".b32": "I", ".s32": "i", ".u16": "H",
                ".b16": "H", ".s16": "h", ".u8": "B", ".b8": "B", ".s8": "b", ".f32": "f", ".f64": "d"}


def _entry_parameters(ptx: str, name: str) -> list[tuple[str, int]]:
    """``(type, bytes)`` of each ``.param`` of the ``.entry name``, in order."""
    header = re.search(rf"\.entry\s+{name}\s*\((.*?)\)", ptx, re.S)
    assert header, f"no .entry {name} in the PTX"
    params = []
    for decl in header.group(1).split(","):
        # .param [.align N] .type [.ptr .global .align N] name[[count]]   (PTX ISA §5.1.6.1, §5.1.6.4)
        m = re.match(r"\s*\.param\s+(?:\.align\s+\d+\s+)?(\.\w+)(?:\s+\.ptr\s+\.\w+\s+\.align\s+\d+)?"
                     r"\s+\w+(?:\[(\d+)\])?\s*$", decl)
        assert m, decl
        ty, count = m.group(1), int(m.group(2) or 1)
        params.append((ty, count * struct.calcsize(_PTX_FORMATS[ty])))
    return params


def _check_kernel_params(pointers, declared, expected, descriptor):
    """Each ``kernelParams`` entry holds, read at the declared PTX width, the expected value."""
    assert len(pointers) == len(declared) == len(expected)
    for slot, (address, (ty, size), want) in enumerate(zip(pointers, declared, expected)):
        data = ctypes.string_at(address, size)
        if want is descriptor:
            assert (ty, size) == (".b8", 128) and data == bytes(descriptor.bytes)
            continue
        (got,) = struct.unpack(_PTX_FORMATS[ty], data)
        if ty[1] in "bu":  # PTX reads untyped / unsigned bits: compare them modulo the width
            want, got = int(want) % (1 << (8 * size)), int(got) % (1 << (8 * size))
        assert got == want, f"parameter {slot} ({ty}): the launch packs {got}, the kernel expects {want}"


def test_a_launch_packs_exactly_what_the_ptx_entry_declares_for_every_kind():
    a = DeviceArray((3, 5), dt.Float32, data_ptr=0x7f00_0000_0100)                  # ptr, 2 extents, 1 stride
    b = DeviceArray((2, 3, 4), dt.Float32, strides=(1, 8, 2), data_ptr=0x7f00_0000_0200)  # ptr, 3 extents, 2 strides
    c = DeviceArray((2 ** 31 + 5,), dt.Float32, data_ptr=0x7f00_0000_0300)          # index64: one i64 extent
    tmap = _TensorMapStandIn()
    scalars = [True, -5, -300, 7, -(2 ** 40), 200, 60000, 2 ** 32 - 3, 2 ** 64 - 9, 1.5, -2.25]
    values = [a, b, c, *scalars, 16, tmap]
    compiled = tsjit.compile(every_kind, *values, target="sm_90a")
    declared = _entry_parameters(compiled.ptx, compiled.name)
    expected = [a.data_ptr, 3, 5, 5, b.data_ptr, 2, 3, 4, 8, 2, c.data_ptr, 2 ** 31 + 5, *scalars, tmap]
    assert [size for _, size in declared[10:12]] == [8, 8]  # c's extent is 64-bit

    # the full path (Kernel._launch_slow): one ctypes value per parameter
    specs, packed = every_kind._specialize(values)
    _check_kernel_params([ctypes.addressof(v) for v in packed], declared, expected, tmap)
    assert [f.device_bytes for s in specs for f in s.parameters()] == [size for _, size in declared]

    # the warm path (Kernel.launch): the plan's fixed block, then this call's changing values
    sig, dyn = argument_signature(values, every_kind.kinds)
    assert sig is not None
    plan = LaunchPlan(compiled, specs, plan_layout(specs, packed))
    changing, descriptors = split_dynamic(dyn)
    struct.pack_into(plan.dyn_format, plan.buffer, 0, *changing)
    for slot, address in zip(plan.tensormap_slots, descriptors):
        plan.pointer_array[slot] = address
    assert plan.tensormap_slots == [len(declared) - 1]
    _check_kernel_params(list(plan.pointer_array), declared, expected, tmap)
