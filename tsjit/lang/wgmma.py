"""Hopper warpgroup MMA (``wgmma``): shared-memory matrix descriptors, ``mma_async`` and its
fence / commit / wait.  Public as ``tsjit.wgmma``.

A *warpgroup* is four consecutive warps (128 threads, the first warp's index a multiple of 4).
``wgmma.mma_async`` computes ``D = A @ B + D`` (or ``D = A @ B`` when ``scale_d`` is 0) for a
``64 x N`` tile ``D`` held in registers (a :class:`~tsjit.lang.fragment.Fragment` of ``N/2``
Float32 per thread), ``A`` (64 x K) in shared memory or registers and ``B`` (K x N) in shared
memory.  Shared-memory operands are passed as 64-bit *matrix descriptors*.  The MMA runs
asynchronously: a kernel issues

    tsjit.wgmma.fence()                       # order earlier register accesses (required)
    acc = tsjit.wgmma.mma_async(acc, a_desc, b_desc, n=256, a_dtype=tsjit.BFloat16)
    ...                                       # more MMAs into the same accumulators
    tsjit.wgmma.commit_group()                # close a wgmma-group
    tsjit.wgmma.wait_group(0)                 # wait until at most 0 groups are pending
    acc = tsjit.wgmma.fence_operand(acc)      # keep reads of acc below the wait

and may read ``acc`` (or overwrite the shared-memory operands) only after the wait.  All 128
threads of the warpgroup must execute these instructions convergently (``.sync.aligned``).
Without :func:`fence_operand` LLVM may schedule a conversion or store of an accumulator above
the ``wait_group`` (it sees no data dependence), and ptxas then serializes every wgmma of the
kernel (warning C7514).

Matrix descriptor (:mod:`tsjit.lang.wgmma_descriptors`; PTX ISA §9.7.15.5.1.2.2 "Matrix Descriptor Format"), 64 bits:

====== ===================================================================================
bits   field
====== ===================================================================================
13-0   start address: ``(shared-window address & 0x3FFFF) >> 4``
29-16  leading dimension byte offset (LBO) >> 4
45-32  stride dimension byte offset (SBO) >> 4
51-49  matrix base offset (0 when the tile starts on a swizzle-pattern boundary)
63-62  swizzle mode: 0 none, 1 = 128B, 2 = 64B, 3 = 32B
====== ===================================================================================

LBO / SBO (§9.7.15.5.1.2.1.1-2, per 16-byte "normalized" element; *S* is the swizzle span in
bytes, the width of one row of the pattern):

* **K-major** (the K dimension contiguous; ``imm-trans = 0``), swizzled: LBO is "not used,
  assumed to be 1" (encoded 1); SBO = offset between consecutive 8-row groups = ``8 * S``
  when rows are ``S`` bytes apart (1024 for 128B).  A tile row holds exactly ``S`` bytes of K
  (64 BFloat16 for 128B: one TMA box row with ``swizzle="128B"``).
* **MN-major** (M or N contiguous; ``imm-trans = 1``, BFloat16/Float16 only), swizzled: LBO =
  offset between consecutive ``S``-byte column blocks of M/N; SBO = offset between 8-row
  groups of K = ``8 * S``.
* No swizzle: the tile is made of 8 x 16-byte core matrices; LBO and SBO must be given.

K-step advance inside a tile (K-major 128B verified on the H200, ``wgmma_sw128.md`` §4): each
MMA consumes 32 bytes of K per row, so descriptor ``k`` is the base descriptor plus ``32 * k``
bytes (+2 in the encoded start address) for K-major swizzled layouts; for MN-major layouts it
is ``(K / 8) * SBO`` bytes per step.  :meth:`MatrixDescriptor.k_step` computes it.

Targets: ``sm_90a`` only (``wgmma`` does not exist on sm_100a; LLVM has no ``mma_async``
intrinsic, so it is emitted as inline PTX).  Source: PTX ISA 8.x §9.7.15 "Asynchronous
Warpgroup Level Matrix Multiply-Accumulate Instructions" (§9.7.15.5.2 ``wgmma.mma_async``,
§9.7.15.6 ``wgmma.fence`` / ``commit_group`` / ``wait_group``).
"""
from __future__ import annotations

import weakref

from llvmlite import ir

from tsjit.backend import emit
from tsjit.errors import CompilationError
from tsjit.lang import dtypes as dt
from tsjit.lang.dtypes import DType
from tsjit.lang.fragment import Fragment, accumulator_coords
from tsjit.lang import warpgroup
from tsjit.lang.values import Value, cast_to
# the descriptors are public as tsjit.wgmma's (__all__)
from tsjit.lang.wgmma_descriptors import SWIZZLE_MODES, MatrixDescriptor, advance_descriptor  # noqa: F401
from tsjit.lang.wgmma_descriptors import descriptor_constant_bits, make_descriptor  # noqa: F401

WGMMA_TARGETS = ("sm_90a",)

#: PTX operand type per dtype (Float32 operands are read as TF32).
OPERAND_TYPES = {"BFloat16": "bf16", "Float16": "f16", "Float32": "tf32", "Float8E4M3": "e4m3",
                 "Float8E5M2": "e5m2"}
_TYPE_NAMES = {"bf16", "f16", "tf32", "e4m3", "e5m2"}
#: K of one MMA per PTX operand type: 32 bytes of K per row for every type.
MMA_K = {"bf16": 16, "f16": 16, "tf32": 8, "e4m3": 32, "e5m2": 32}
LEGAL_N = tuple(range(8, 257, 8))
_TRANSPOSABLE = ("bf16", "f16")


def _require_wgmma_target(what: str) -> None:
    warpgroup.require_whole_warpgroups(f"tsjit.wgmma.{what}")
    target = emit.current().target
    if target.name not in WGMMA_TARGETS:
        raise CompilationError(
            f"tsjit.wgmma.{what} needs sm_90a (Hopper wgmma; PTX ISA §9.7.15); this kernel is being compiled "
            f"for {target.name}, which has no wgmma (on sm_100a use tcgen05)")


# -- mma_async ---------------------------------------------------------------------------------
def _operand_type(dtype, what: str) -> str:
    if isinstance(dtype, DType) and dtype.name in OPERAND_TYPES:
        return OPERAND_TYPES[dtype.name]
    if isinstance(dtype, str) and dtype in _TYPE_NAMES:
        return dtype
    raise CompilationError(
        f"tsjit.wgmma.mma_async: {what} must be tsjit.BFloat16, Float16, Float32 (read as TF32), Float8E4M3 or "
        f"Float8E5M2, got {dtype!r}")


def _compile_time_flag(value, what: str, allowed) -> int:
    if isinstance(value, Value):
        raise CompilationError(f"tsjit.wgmma.mma_async: {what} must be a compile-time value in {allowed}")
    value = int(value) if isinstance(value, bool) else value
    if value not in allowed:
        raise CompilationError(f"tsjit.wgmma.mma_async: {what} must be one of {allowed}, got {value!r}")
    return value


def _descriptor_operand(desc, what: str):
    if isinstance(desc, Fragment) or not isinstance(desc, Value) or not desc.dtype.is_int or desc.dtype.bits != 64:
        raise CompilationError(f"tsjit.wgmma.mma_async: {what} must be a 64-bit matrix descriptor "
                               f"(tsjit.wgmma.make_descriptor), got {desc!r}")
    return desc


def _resolve_operand(desc, explicit_dtype, explicit_trans, what: str):
    """(PTX type, transpose flag) of a shared-memory operand from its descriptor and the arguments."""
    meta = desc if isinstance(desc, MatrixDescriptor) else None
    if explicit_dtype is None:
        if meta is None:
            raise CompilationError(f"tsjit.wgmma.mma_async: give {what}_dtype= (the {what.upper()} descriptor "
                                   f"carries no element type after a run-time join)")
        explicit_dtype = meta.element_dtype
    ptx_type = _operand_type(explicit_dtype, f"{what}_dtype")
    if meta is not None and OPERAND_TYPES.get(meta.element_dtype.name) != ptx_type:
        raise CompilationError(
            f"tsjit.wgmma.mma_async: {what}_dtype is {ptx_type} but the {what.upper()} descriptor was made from a "
            f"{meta.element_dtype.name} tile")
    major_trans = None if meta is None else int(meta.major == "MN")
    if explicit_trans is None:
        trans = major_trans or 0
    else:
        trans = _compile_time_flag(explicit_trans, f"trans_{what}", (0, 1))
        if major_trans is not None and trans != major_trans:
            raise CompilationError(
                f"tsjit.wgmma.mma_async: trans_{what}={trans} but the {what.upper()} descriptor is {meta.major}-major "
                f"(trans_{what} must be {major_trans})")
    return ptx_type, trans


def _scale_d_operand(scale_d) -> ir.Value:
    if isinstance(scale_d, Value):
        if scale_d.dtype.is_float:
            raise CompilationError("tsjit.wgmma.mma_async: scale_d must be a Boolean or integer, not a float")
        if scale_d.dtype.bits == 32:
            return scale_d.ir
        return cast_to(cast_to(scale_d, dt.Boolean), dt.Int32).ir       # non-zero accumulates
    if isinstance(scale_d, bool):
        scale_d = int(scale_d)
    if scale_d not in (0, 1):
        raise CompilationError(f"tsjit.wgmma.mma_async: scale_d must be 0, 1 or a run-time Boolean, got {scale_d!r}")
    return ir.Constant(emit.I32, scale_d)


def mma_async(acc: Fragment, a, b, *, n: int | None = None, m: int = 64, k: int | None = None, a_dtype=None,
              b_dtype=None, acc_dtype: DType = dt.Float32, scale_d=1, scale_a: int = 1, scale_b: int = 1,
              trans_a=None, trans_b=None) -> Fragment:
    """Issue ``wgmma.mma_async.sync.aligned.m64n{N}k{K}.f32.{atype}.{btype}`` and return the new
    accumulator fragment (PTX ISA §9.7.15.5.2).

    ``D = A @ B + D`` (``D = A @ B`` where ``scale_d`` is 0) on the warpgroup's 64 x N tile.  The
    result must not be read until :func:`commit_group` + :func:`wait_group` say the MMA is done;
    call :func:`fence` before the first ``mma_async`` after touching ``acc`` (or its shared
    operands) in any other way.

    Args:
        acc: the Float32 accumulator :class:`Fragment`, ``N / 2`` elements per thread (layout in
            :mod:`tsjit.lang.fragment`); e.g. ``Fragment.zeros(128)`` for N = 256.
        a: A (64 x K): a matrix descriptor (:func:`make_descriptor`), or a :class:`Fragment` of
            four 32-bit registers per thread (packed BFloat16/Float16 pairs, TF32, or four FP8;
            PTX ISA §9.7.15.5.1.1, Figure 148) — then ``a_dtype`` is required.
        b: B (K x N): a matrix descriptor.
        n: N, a multiple of 8 in 8..256 (default ``2 * len(acc)``).
        m: must be 64.
        k: K of one MMA; default and only legal value: 16 for BFloat16/Float16, 8 for TF32,
            32 for FP8.
        a_dtype, b_dtype: ``tsjit.BFloat16`` / ``Float16`` (A and B equal), ``Float32`` (read as TF32;
            both), ``Float8E4M3`` / ``Float8E5M2`` (any mix); default from the descriptors.
        acc_dtype: ``tsjit.Float32`` (Float16 accumulators are not supported yet).
        scale_d: 1 (accumulate), 0 (overwrite), or a run-time Boolean/integer (non-zero accumulates).
        scale_a, scale_b: +1 or -1 (negate A / B).
        trans_a, trans_b: 0 (K-major) or 1 (M/N-major; BFloat16/Float16 shared-memory operands
            only); default from the descriptors' ``major``.

    Returns:
        A new Float32 :class:`Fragment` of ``N / 2`` elements.

    Raises:
        CompilationError: the target is not sm_90a, N / K / M illegal, a dtype combination the
            instruction lacks, ``len(acc) != N / 2``, a register A that is not four 32-bit values,
            a transpose on TF32/FP8 or on register A, or a descriptor that disagrees with the
            arguments.
    """
    _require_wgmma_target("mma_async")
    if m != 64:
        raise CompilationError(f"tsjit.wgmma.mma_async: M must be 64 (one warpgroup), got m={m!r}")
    if not isinstance(acc, Fragment):
        raise CompilationError(f"tsjit.wgmma.mma_async: acc must be a tsjit.Fragment of Float32 accumulators, "
                               f"got {type(acc).__name__}")
    if acc_dtype is not dt.Float32:
        raise CompilationError(f"tsjit.wgmma.mma_async: acc_dtype must be tsjit.Float32 (Float16 accumulators are "
                               f"not supported), got {acc_dtype!r}")
    if acc.dtype is not dt.Float32:
        raise CompilationError(f"tsjit.wgmma.mma_async: acc holds {acc.dtype.name}; Float32 accumulators are "
                               f"needed (tsjit.Fragment.zeros(N // 2))")
    if n is None:
        n = 2 * len(acc)
    if isinstance(n, bool) or n not in LEGAL_N:
        raise CompilationError(f"tsjit.wgmma.mma_async: N must be a multiple of 8 from 8 to 256, got n={n!r}")
    if len(acc) != n // 2:
        raise CompilationError(
            f"tsjit.wgmma.mma_async: an m64n{n} Float32 accumulator has {n // 2} registers per thread, but acc "
            f"has {len(acc)}")

    registers_a = isinstance(a, Fragment)
    if registers_a:
        if a_dtype is None:
            raise CompilationError("tsjit.wgmma.mma_async: give a_dtype= when A comes from registers")
        a_type = _operand_type(a_dtype, "a_dtype")
        if len(a) != 4 or a.dtype.bits != 32 or a.dtype.is_bool:
            raise CompilationError(
                f"tsjit.wgmma.mma_async: A from registers is four 32-bit registers per thread (packed "
                f"{a_type} elements), got {a!r}")
        if trans_a not in (None, 0, False):
            raise CompilationError("tsjit.wgmma.mma_async: A from registers cannot be transposed (trans_a=0)")
        ta = 0
    else:
        a = _descriptor_operand(a, "A")
        a_type, ta = _resolve_operand(a, a_dtype, trans_a, "a")
    b = _descriptor_operand(b, "B")
    if b_dtype is None and not isinstance(b, MatrixDescriptor):
        b_dtype = a_type                                        # B's type defaults to A's
    b_type, tb = _resolve_operand(b, b_dtype, trans_b, "b")
    fp8 = ("e4m3", "e5m2")
    if not (a_type == b_type or (a_type in fp8 and b_type in fp8)):
        raise CompilationError(f"tsjit.wgmma.mma_async: no wgmma multiplies {a_type} by {b_type}; A and B must "
                               f"both be bf16, both f16, both tf32, or both FP8 (e4m3/e5m2)")
    kk = MMA_K[a_type]
    if k is not None and k != kk:
        raise CompilationError(f"tsjit.wgmma.mma_async: K is {kk} for {a_type} operands, got k={k!r}")
    if a_type not in _TRANSPOSABLE and (ta or tb):
        raise CompilationError(f"tsjit.wgmma.mma_async: {a_type} operands must be K-major (trans_a=trans_b=0); "
                               f"only bf16/f16 operands can be transposed")
    sa = _compile_time_flag(scale_a, "scale_a", (1, -1))
    sb = _compile_time_flag(scale_b, "scale_b", (1, -1))
    scale = _scale_d_operand(scale_d)

    km = emit.current()
    b_ir = km.builder
    count = n // 2
    outputs = ", ".join(f"${i}" for i in range(count))
    args, constraints = [], []
    if registers_a:
        a_regs = []
        for v in a:
            a_regs.append(v.ir if v.dtype.is_int else b_ir.bitcast(v.ir, emit.I32))
        args += a_regs
        constraints += ["r"] * 4
        a_operand = "{" + ", ".join(f"${count + i}" for i in range(4)) + "}"
        next_index = count + 4
    else:
        args.append(a.ir)
        constraints.append("l")
        a_operand = f"${count}"
        next_index = count + 1
    args.append(b.ir)
    constraints.append("l")
    b_operand = f"${next_index}"
    args.append(scale)
    constraints.append("r")
    scale_operand = f"${next_index + 1}"
    immediates = f"{sa}, {sb}"
    if a_type in _TRANSPOSABLE:
        immediates += f", {tb}" if registers_a else f", {ta}, {tb}"
    shape = f"m64n{n}k{kk}"
    asm = (f"{{ .reg .pred p; setp.ne.b32 p, {scale_operand}, 0; "
           f"wgmma.mma_async.sync.aligned.{shape}.f32.{a_type}.{b_type} "
           f"{{{outputs}}}, {a_operand}, {b_operand}, p, {immediates}; }}")
    args += [v.ir for v in acc]
    constraint_text = ",".join(["=f"] * count + constraints + [str(i) for i in range(count)])
    result = km.inline_asm(_register_struct(ir.FloatType(), count), asm, constraint_text, args, side_effect=True)
    out = Fragment([Value(b_ir.extract_value(result, i), dt.Float32) for i in range(count)], dt.Float32)
    out.in_flight = InFlight(km, f"m64n{n}k{kk}")
    return out


#: KernelModule -> how many ``wgmma.wait_group`` the frontend has emitted into it so far
_WAITS_EMITTED: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


class InFlight:
    """The mark of a :class:`Fragment` returned by :func:`mma_async`: in flight until the kernel
    emits a :func:`wait_group` after it (in the order the frontend emits code, which is program
    order within a loop body or branch).  A fragment carried through a loop phi or a branch join is
    a new fragment without the mark (the interpreter still sees a read of an in-flight register)."""

    __slots__ = ("km", "waits", "location", "shape")

    def __init__(self, km, shape: str):
        self.km = km
        self.waits = _WAITS_EMITTED.get(km, 0)
        self.location = km.statement_location()
        self.shape = shape

    def check(self, what: str) -> None:
        """Raise CompilationError when no ``wait_group`` was emitted since the MMA (``what``: the
        access, "reads" or "overwrites")."""
        if emit.current() is not self.km or _WAITS_EMITTED.get(self.km, 0) != self.waits:
            return
        where = f" at {self.location}" if self.location is not None else ""
        raise CompilationError(
            f"this expression {what} accumulator registers of the wgmma.mma_async.{self.shape} issued{where} before a "
            f"tsjit.wgmma.wait_group retires it: the MMA runs asynchronously and may still be writing "
            f"those registers (PTX ISA §9.7.15.7 wgmma.wait_group: accessing them before the wait "
            f"is undefined).\n  Call tsjit.wgmma.commit_group() and tsjit.wgmma.wait_group(N) first "
            f"(N: the groups that may stay in flight; 0 retires all), then `acc = "
            f"tsjit.wgmma.fence_operand(acc)`, and read the accumulators after it.")


def _register_struct(element, count: int):
    """The struct type of an inline asm's ``count`` register outputs, as one named type
    (``%"tsjit.f32x128"``): every ``extractvalue`` of a literal ``{float, float, ...}`` spells out all its
    members, 640 lines of ~900 bytes in a Hopper GEMM's IR; the PTX is the same."""
    kind = "f32" if isinstance(element, ir.FloatType) else f"i{element.width}"
    name = f"tsjit.{kind}x{count}"
    struct = ir.global_context.get_identified_type(name)
    if struct.is_opaque:
        struct.set_body(*([element] * count))
    return struct


# -- fence / commit / wait ---------------------------------------------------------------------
def fence() -> None:
    """``wgmma.fence.sync.aligned``: order this warpgroup's earlier register and shared-memory
    accesses before the following ``mma_async`` (required before the first MMA and whenever the
    accumulators were touched by other instructions; PTX ISA §9.7.15.6.1)."""
    _require_wgmma_target("fence")
    emit.current().intrinsic("llvm.nvvm.wgmma.fence.sync.aligned", [])


def commit_group() -> None:
    """``wgmma.commit_group.sync.aligned``: close the pending ``mma_async`` operations into one
    wgmma-group (PTX ISA §9.7.15.6.2)."""
    _require_wgmma_target("commit_group")
    emit.current().intrinsic("llvm.nvvm.wgmma.commit_group.sync.aligned", [])


def wait_group(pending: int = 0) -> None:
    """``wgmma.wait_group.sync.aligned N``: wait until at most ``pending`` (compile-time 0..7)
    wgmma-groups of this thread are incomplete; their accumulators may then be read and their
    shared-memory operands overwritten (PTX ISA §9.7.15.6.3)."""
    _require_wgmma_target("wait_group")
    if isinstance(pending, bool) or not isinstance(pending, int) or not 0 <= pending <= 7:
        raise CompilationError(f"tsjit.wgmma.wait_group needs a compile-time count in 0..7, got {pending!r}")
    km = emit.current()
    km.intrinsic("llvm.nvvm.wgmma.wait_group.sync.aligned", [ir.Constant(emit.I64, pending)])
    _WAITS_EMITTED[km] = _WAITS_EMITTED.get(km, 0) + 1


def fence_operand(fragment: Fragment) -> Fragment:
    """``fragment`` passed through an empty inline asm that reads and rewrites every register
    (CUTLASS's ``warpgroup_fence_operand``).  It emits no instruction; it keeps the compiler from
    moving uses of the accumulators across :func:`wait_group` (LLVM sees no data dependence
    between the wait and the registers, and an early read makes ptxas serialize the wgmma
    pipeline: "wgmma.mma_async instructions are serialized due to non wgmma instructions reading
    accumulator registers").  Use it right after the ``wait_group`` that completes the MMAs:
    ``acc = tsjit.wgmma.fence_operand(acc)``.
    """
    if not isinstance(fragment, Fragment):
        raise CompilationError(f"tsjit.wgmma.fence_operand needs a Fragment, got {type(fragment).__name__}")
    km = emit.current()
    b = km.builder
    items = [v.ir for v in fragment]
    kinds = {v.type for v in items}
    if len(kinds) != 1 or not isinstance(next(iter(kinds)), (ir.FloatType, ir.IntType)) or \
            getattr(next(iter(kinds)), "width", 32) != 32:
        raise CompilationError(f"tsjit.wgmma.fence_operand works on 32-bit registers, got {fragment!r}")
    code = "f" if isinstance(items[0].type, ir.FloatType) else "r"
    count = len(items)
    constraints = ",".join([f"={code}"] * count + [str(i) for i in range(count)])
    result = km.inline_asm(_register_struct(items[0].type, count), "", constraints, items, side_effect=True)
    out = Fragment([Value(b.extract_value(result, i), fragment.dtype) for i in range(count)], fragment.dtype)
    in_flight = fragment.__dict__.get("in_flight")
    if in_flight is not None:
        out.in_flight = in_flight          # a fence before the wait keeps the registers in flight
    return out


__all__ = ["MatrixDescriptor", "make_descriptor", "advance_descriptor", "descriptor_constant_bits", "mma_async",
           "fence", "commit_group", "wait_group", "fence_operand", "accumulator_coords", "Fragment", "SWIZZLE_MODES", "LEGAL_N",
           "MMA_K", "OPERAND_TYPES"]
