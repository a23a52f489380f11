"""Thread hierarchy, synchronization, warp-level primitives, atomics and printing.

Every function validates its operands and raises :class:`CompilationError` before
emitting anything the target cannot select (an LLVM selection failure aborts the
process).  PTX references are to the PTX ISA 8.6 manual.
"""
from __future__ import annotations

import re
import string
from collections import namedtuple

from llvmlite import ir

from tsjit.backend import emit
from tsjit.errors import CompilationError
from tsjit.lang import bounded_wait
from tsjit.lang import dtypes as dt
from tsjit.lang.memory import Pointer, Tensor, convert_for_store
from tsjit.lang.values import Value, as_value, cast_to, constant, immediate, integer_operand

class Dim3(namedtuple("Dim3", "x y z")):
    """A (x, y, z) triple of Int32 values; unpacks as ``x, y, z = tsjit.thread_idx()``.

    Raises:
        AttributeError: another field name (``.w``), naming the valid ones.
    """

    __slots__ = ()

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        exc = AttributeError(f"'Dim3' object has no attribute {name!r}")
        exc.hint = ("tsjit.thread_idx(), block_idx(), block_dim() and grid_dim() have the fields "
                    ".x, .y and .z only")          # the frontend appends it to its error
        raise exc

    def _arithmetic(self, *other):
        """Arithmetic or an ordering on the whole triple (a tuple would concatenate or compare element-wise)."""
        raise CompilationError("tsjit.thread_idx(), block_idx(), block_dim() and grid_dim() return an (x, y, z) "
                               "triple, not a number; compute with one component, e.g. tsjit.thread_idx().x")

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _arithmetic
    __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = __truediv__ = __rtruediv__ = _arithmetic
    __lt__ = __le__ = __gt__ = __ge__ = _arithmetic

FULL_MASK = 0xFFFFFFFF


def _sreg(name: str) -> Value:
    return Value(emit.current().intrinsic(f"llvm.nvvm.read.ptx.sreg.{name}", []), dt.Int32)


def _dim3(prefix: str) -> Dim3:
    return Dim3(*(_sreg(f"{prefix}.{axis}") for axis in "xyz"))


def thread_idx() -> Dim3:
    """Thread index within the CTA (PTX ``%tid``), each component Int32."""
    return _dim3("tid")


def block_idx() -> Dim3:
    """CTA index within the grid (PTX ``%ctaid``)."""
    return _dim3("ctaid")


def block_dim() -> Dim3:
    """Threads per CTA in each dimension (PTX ``%ntid``)."""
    return _dim3("ntid")


def grid_dim() -> Dim3:
    """CTAs per grid in each dimension (PTX ``%nctaid``)."""
    return _dim3("nctaid")


def lane_idx() -> Value:
    """Lane of the calling thread within its warp, 0..31 (PTX ``%laneid``)."""
    return _sreg("laneid")


def warp_idx() -> Value:
    """Warp index within the CTA: linear thread index // 32, made warp-uniform with
    ``shfl.sync`` so it lives in a uniform register (as CUTLASS's ``canonical_warp_idx_sync``)."""
    tid = thread_idx()
    ntid = block_dim()
    linear = tid.x + tid.y * ntid.x + tid.z * ntid.x * ntid.y
    return shuffle(linear >> 5, 0)


def cluster_ctarank() -> Value:
    """Rank of this CTA in its cluster (PTX ``%cluster_ctarank``; sm_90)."""
    return _sreg("cluster.ctarank")


def cluster_size() -> Value:
    """CTAs in this cluster (PTX ``%cluster_nctarank``; sm_90)."""
    return _sreg("cluster.nctarank")


def clock64() -> Value:
    """The SM's 64-bit cycle counter (PTX ``%clock64``), Uint64."""
    v = emit.current().intrinsic("llvm.nvvm.read.ptx.sreg.clock64", [])
    return Value(v, dt.Uint64)


# -- barriers ----------------------------------------------------------------------------------
def syncthreads() -> None:
    """CTA-wide barrier (``bar.sync 0``); every thread of the CTA must reach it."""
    emit.current().intrinsic("llvm.nvvm.barrier.cta.sync.aligned.all", [ir.Constant(emit.I32, 0)])


def _barrier_operands(barrier_id, num_threads):
    if isinstance(barrier_id, int) and not 0 <= barrier_id < 16:
        raise CompilationError(f"named barrier id must be in 0..15, got {barrier_id}")
    if isinstance(num_threads, int) and (num_threads <= 0 or num_threads % 32):
        raise CompilationError(f"named barrier thread count must be a positive multiple of 32, got {num_threads}")
    return (integer_operand(barrier_id, dt.Int32, "named barrier id"),
            integer_operand(num_threads, dt.Int32, "named barrier thread count"))


def named_barrier_sync(barrier_id, num_threads) -> None:
    """Wait at named barrier ``barrier_id`` (0..15) until ``num_threads`` threads (multiple of 32)
    have arrived (PTX ``bar.sync id, count``)."""
    bid, cnt = _barrier_operands(barrier_id, num_threads)
    if bounded_wait.enabled():  # TSJIT_DEBUG=1: a software barrier whose wait is bounded
        return bounded_wait.named_barrier(bid, cnt, wait=True)
    emit.current().intrinsic("llvm.nvvm.barrier.cta.sync.aligned.count", [bid.ir, cnt.ir])


def named_barrier_arrive(barrier_id, num_threads) -> None:
    """Arrive at named barrier ``barrier_id`` without waiting (PTX ``bar.arrive id, count``)."""
    bid, cnt = _barrier_operands(barrier_id, num_threads)
    if bounded_wait.enabled():
        return bounded_wait.named_barrier(bid, cnt, wait=False)
    emit.current().intrinsic("llvm.nvvm.barrier.cta.arrive.aligned.count", [bid.ir, cnt.ir])


def lane_mask_operand(mask, builtin: str) -> ir.Value:
    """The 32-bit lane mask operand of warp-synchronous ``builtin``: a compile-time int in
    ``0 .. 2**32-1`` or a run-time 32-bit integer (PTX ``membermask``, a ``.b32``).

    Raises:
        CompilationError: a compile-time mask outside 32 bits, or another type.
    """
    if isinstance(mask, Value):
        if not mask.dtype.is_int or mask.dtype.bits != 32:
            raise CompilationError(f"tsjit.{builtin}: the lane mask must be a 32-bit integer, got {mask.dtype.name}")
        return mask.ir
    return ir.Constant(emit.I32, immediate(mask, f"tsjit.{builtin}: the lane mask", 0, FULL_MASK))


def syncwarp(mask: int = FULL_MASK) -> None:
    """Warp-level barrier over the lanes in ``mask`` (PTX ``bar.warp.sync``); ``mask`` is 32 bits."""
    emit.current().intrinsic("llvm.nvvm.bar.warp.sync", [lane_mask_operand(mask, "syncwarp")])


def threadfence(order: str = "sc") -> None:
    """Device-scope memory fence: ``order="sc"`` PTX ``fence.sc.gpu`` (sequentially consistent), ``"acq_rel"``
    ``fence.acq_rel.gpu`` (a release and acquire fence, lighter: enough to publish data before a relaxed atomic
    flag and to read it after observing the flag; PTX ISA 8.0 §9.7.13.4 "membar / fence", §8.7 "release and
    acquire patterns").

    Raises:
        CompilationError: ``order`` is not ``"sc"`` or ``"acq_rel"``.
    """
    orders = {"sc": "seq_cst", "acq_rel": "acq_rel"}
    if order not in orders:
        raise CompilationError(f"tsjit.threadfence: order must be 'sc' or 'acq_rel'; got {order!r}")
    emit.current().builder.fence(orders[order], "device")  # NVPTX's "device" sync scope is PTX .gpu


# -- warp shuffles and votes -------------------------------------------------------------------
_SHUFFLE_CLAMP = {"idx": 0x1F, "up": 0x0, "down": 0x1F, "bfly": 0x1F}


def _shuffle(kind: str, value, operand, width: int, mask: int) -> Value:
    if isinstance(width, bool) or width not in (1, 2, 4, 8, 16, 32):
        raise CompilationError(f"shuffle width must be a power of two <= 32, got {width}")
    v = as_value(value)
    original = v.dtype
    if original.bits == 64:
        lo = _shuffle(kind, cast_to(v if original.is_int else _bitcast(v, dt.Int64), dt.Int32), operand, width, mask)
        hi_src = (v if original.is_int else _bitcast(v, dt.Int64)) >> 32
        hi = _shuffle(kind, cast_to(hi_src, dt.Int32), operand, width, mask)
        joined = (cast_to(hi, dt.Int64) << 32) | (cast_to(cast_to(lo, dt.Uint32), dt.Int64))
        return joined if original.is_int and original.is_signed else (
            cast_to(joined, original) if original.is_int else _bitcast(joined, original))
    if original.is_float and original.bits == 32:
        work, suffix = v, "f32"
    else:
        work, suffix = cast_to(v, dt.Int32) if original.bits < 32 or original.is_bool else v, "i32"
        if original.is_float:  # 16-bit floats travel as their bits
            work = cast_to(_bitcast(v, dt.Int16), dt.Int32)
    c = ((32 - width) << 8) | _SHUFFLE_CLAMP[kind]
    op = integer_operand(operand, dt.Int32, "a shuffle's lane / offset operand")
    res = emit.current().intrinsic(
        f"llvm.nvvm.shfl.sync.{kind}.{suffix}",
        [lane_mask_operand(mask, "shuffle"), work.ir, op.ir, ir.Constant(emit.I32, c)])
    out = Value(res, work.dtype)
    if original.is_float and original.bits == 16:
        return _bitcast(cast_to(out, dt.Int16), original)
    return cast_to(out, original) if out.dtype is not original else out


def _bitcast(v: Value, dtype) -> Value:
    return Value(emit.current().builder.bitcast(v.ir, emit.llvm_type(dtype)), dtype)


def shuffle(value, src_lane, *, width: int = 32, mask: int = FULL_MASK) -> Value:
    """Read ``value`` from lane ``src_lane`` (PTX ``shfl.sync.idx``); any 8..64-bit dtype."""
    return _shuffle("idx", value, src_lane, width, mask)


def shuffle_down(value, delta, *, width: int = 32, mask: int = FULL_MASK) -> Value:
    """Read ``value`` from lane ``lane + delta`` (``shfl.sync.down``); out-of-range lanes keep their own."""
    return _shuffle("down", value, delta, width, mask)


def shuffle_up(value, delta, *, width: int = 32, mask: int = FULL_MASK) -> Value:
    """Read ``value`` from lane ``lane - delta`` (``shfl.sync.up``)."""
    return _shuffle("up", value, delta, width, mask)


def shuffle_xor(value, lane_mask, *, width: int = 32, mask: int = FULL_MASK) -> Value:
    """Read ``value`` from lane ``lane ^ lane_mask`` (``shfl.sync.bfly``), the butterfly of reductions."""
    return _shuffle("bfly", value, lane_mask, width, mask)


def _vote(kind: str, predicate, mask: int):
    p = cast_to(as_value(predicate), dt.Boolean)
    return emit.current().intrinsic(f"llvm.nvvm.vote.{kind}.sync", [lane_mask_operand(mask, f"vote_{kind}"), p.ir])


def vote_all(predicate, *, mask: int = FULL_MASK) -> Value:
    """True when ``predicate`` holds on every lane in ``mask`` (``vote.sync.all``)."""
    return Value(_vote("all", predicate, mask), dt.Boolean)


def vote_any(predicate, *, mask: int = FULL_MASK) -> Value:
    """True when ``predicate`` holds on some lane in ``mask`` (``vote.sync.any``)."""
    return Value(_vote("any", predicate, mask), dt.Boolean)


def vote_ballot(predicate, *, mask: int = FULL_MASK) -> Value:
    """Bit ``i`` set when ``predicate`` holds on lane ``i`` (``vote.sync.ballot.b32``), Uint32."""
    return Value(_vote("ballot", predicate, mask), dt.Uint32)


# -- atomics -----------------------------------------------------------------------------------
def _atomic_target(ptr, name: str) -> Pointer:
    if not isinstance(ptr, Pointer):
        got = f"a {ptr.dtype.name} value (an element, already loaded)" if isinstance(ptr, Value) else \
            "the array itself (a Tensor)" if isinstance(ptr, Tensor) else type(ptr).__name__
        raise CompilationError(f"tsjit.{name} needs a pointer: {name}(ptr, value) with ptr = "
                               f"tsjit.address_of(t, i) (or t.ptr + i); got {got}")
    if ptr.address_space not in (1, 3):
        raise CompilationError(f"tsjit.{name} works on global or shared memory")
    return ptr


def atomic_add(ptr: Pointer, value) -> Value:
    """Atomically add ``value`` at ``ptr`` (relaxed, GPU scope); returns the old value.

    Int32/Uint32/Int64/Uint64/Float32/Float64 (PTX ``atom.add``)."""
    p = _atomic_target(ptr, "atomic_add")
    if p.dtype.bits < 32 or p.dtype.is_bool:
        raise CompilationError(f"atomic_add supports 32- and 64-bit types, not {p.dtype.name}")
    v = convert_for_store(value, p.dtype)
    op = "fadd" if p.dtype.is_float else "add"
    return Value(emit.current().builder.atomic_rmw(op, p.ir, v.ir, "monotonic"), p.dtype)


def _atomic_integer_extreme(ptr, value, kind: str) -> Value:
    name = f"atomic_{kind}"
    p = _atomic_target(ptr, name)
    if not p.dtype.is_int or p.dtype.bits < 32:
        raise CompilationError(f"{name} supports 32- and 64-bit integers, not {p.dtype.name}")
    v = convert_for_store(value, p.dtype)
    op = kind if p.dtype.is_signed else "u" + kind
    return Value(emit.current().builder.atomic_rmw(op, p.ir, v.ir, "monotonic"), p.dtype)


def atomic_max(ptr: Pointer, value) -> Value:
    """Atomic maximum at ``ptr`` for 32/64-bit integers (PTX ``atom.max``); returns the old value."""
    return _atomic_integer_extreme(ptr, value, "max")


def atomic_min(ptr: Pointer, value) -> Value:
    """Atomic minimum at ``ptr`` for 32/64-bit integers (PTX ``atom.min``); returns the old value."""
    return _atomic_integer_extreme(ptr, value, "min")


def atomic_cas(ptr: Pointer, compare, value) -> Value:
    """Atomic compare-and-swap on a 32/64-bit integer (PTX ``atom.cas``); returns the old value."""
    p = _atomic_target(ptr, "atomic_cas")
    if not p.dtype.is_int or p.dtype.bits < 32:
        raise CompilationError(f"atomic_cas supports 32- and 64-bit integers, not {p.dtype.name}")
    c = convert_for_store(compare, p.dtype)
    v = convert_for_store(value, p.dtype)
    b = emit.current().builder
    pair = b.cmpxchg(p.ir, c.ir, v.ir, "monotonic", "monotonic")
    return Value(b.extract_value(pair, 0), p.dtype)


def address_of(tensor, *index) -> Pointer:
    """Pointer to ``tensor[index]``: ``address_of(out, i)``, ``address_of(buf, s, e)`` (for atomics,
    ``cp_async``, vector accesses).  The array and its indices are separate arguments.

    Raises:
        CompilationError: ``tensor`` is an element (``address_of(out[i])`` loaded it) or not an array.
    """
    if isinstance(tensor, Value):
        raise CompilationError(f"tsjit.address_of takes the array and its indices: address_of(out, i); it got "
                               f"a {tensor.dtype.name} value (an element, already loaded by out[i])")
    if not isinstance(tensor, Tensor):
        raise CompilationError(f"tsjit.address_of takes an array and its indices: address_of(out, i); "
                               f"got {type(tensor).__name__}")
    return tensor.element_pointer(index if len(index) != 1 else index[0])


# -- printing ----------------------------------------------------------------------------------
class DeviceField:
    """One run-time field of a :class:`DeviceText`: a device value and its Python format spec."""

    __slots__ = ("value", "spec")

    def __init__(self, value, spec: str = ""):
        self.value = value
        self.spec = spec


class DeviceText:
    """Text with run-time fields: what an f-string with device values (``f"x = {x[i]:.3f}"``)
    evaluates to in kernel code.  Only :func:`device_print` can use it (it prints at run time);
    turning it into a Python ``str`` at compile time raises :class:`CompilationError`.

    Attributes:
        pieces: the literal text (``str``) and :class:`DeviceField` items, in order.
    """

    def __init__(self, pieces: tuple):
        self.pieces = tuple(pieces)

    def __str__(self):
        raise CompilationError("an f-string with run-time values is text only at run time: pass it to "
                               "tsjit.device_print (or write tsjit.device_print(\"x = {}\", x))")

    def __format__(self, spec):
        return self.__str__()

    def __add__(self, other):
        return self.__str__()

    __radd__ = __mul__ = __rmul__ = __mod__ = __add__
    __repr__ = object.__repr__


_SPEC = re.compile(r"^(?P<align>[<>])?(?P<sign>[-+ ])?(?P<alt>#)?(?P<zero>0)?(?P<width>\d+)?"
                   r"(?:\.(?P<precision>\d+))?(?P<type>[dxXoeEfFgG])?$")


def _printf_field(value, spec: str, b) -> tuple[str, object]:
    """The ``printf`` directive and the vararg of one field formatted with Python spec ``spec``."""
    v = as_value(value)
    match = _SPEC.match(spec)
    if match is None:
        raise CompilationError(f"device_print cannot format {spec!r}: supported specs are [<>][+- ][#][0][width]"
                               f"[.precision][d x X o e E f F g G] (printf's)")
    kind = match["type"] or ("f" if v.dtype.is_float else "d")
    if kind in "dxXo" and v.dtype.is_float:
        raise CompilationError(f"device_print: format {spec!r} needs an integer, got a {v.dtype.name}")
    flags = ("-" if match["align"] == "<" else "") + (match["sign"] if match["sign"] in ("+", " ") else "") \
        + (match["alt"] or "") + (match["zero"] or "")
    body = flags + (match["width"] or "") + (f".{match['precision']}" if match["precision"] else "")
    if kind in "eEfFgG":
        if not v.dtype.is_float:
            v = cast_to(v, dt.Float64)
        return "%" + body + kind, (b.fpext(v.ir, ir.DoubleType()) if v.dtype.bits < 64 else v.ir)
    if kind == "d" and not v.dtype.is_signed:
        kind = "u"
    if v.dtype.bits == 64:
        return "%" + body + "ll" + kind, v.ir
    return "%" + body + kind, cast_to(v, dt.Int32 if v.dtype.is_signed else dt.Uint32).ir


def _format_pieces(fmt, args) -> tuple:
    """``fmt`` (a str with ``{}`` / ``{:spec}`` placeholders, or a :class:`DeviceText`) and ``args``
    as literal text and :class:`DeviceField` pieces."""
    if isinstance(fmt, DeviceText):
        if args:
            raise CompilationError("device_print with an f-string takes no further arguments (the f-string's "
                                   "fields are the values)")
        return fmt.pieces
    if not isinstance(fmt, str):
        raise CompilationError("device_print needs a compile-time format string as first argument")
    pieces, fields = [], 0
    try:
        parsed = list(string.Formatter().parse(fmt))
    except ValueError as exc:
        raise CompilationError(f"device_print format {fmt!r} is malformed: {exc}") from None
    for literal, name, spec, conversion in parsed:
        pieces.append(literal)
        if name is None:
            continue
        if name != "" or conversion:
            raise CompilationError(f"device_print placeholders are `{{}}` or `{{:spec}}`, got `{{{name}"
                                   f"{'!' + conversion if conversion else ''}}}` in {fmt!r}")
        if fields < len(args):
            pieces.append(DeviceField(args[fields], spec or ""))
        fields += 1
    if fields != len(args):
        raise CompilationError(f"device_print format has {fields} '{{}}' placeholders but "
                               f"{len(args)} arguments were given")
    return tuple(pieces)


def device_print(fmt, *args) -> None:
    """``printf`` from device code (CUDA ``vprintf``).

    ``fmt`` is a compile-time string whose ``{}`` (or ``{:spec}``, e.g. ``{:.3f}``, ``{:08x}``)
    placeholders take ``args`` in order, or an f-string with device values
    (``tsjit.device_print(f"x[{i}] = {x[i]:.3f}")``).  Every thread that reaches the call prints;
    guard it with an ``if``.  Output appears when the host synchronizes.  Floats print with
    ``%f`` (promoted to double, as C varargs do).

    Raises:
        CompilationError: the placeholders and arguments do not match, or a spec printf lacks.
    """
    pieces = _format_pieces(fmt, args)
    km = emit.current()
    b = km.builder
    text, values = [], []
    for piece in pieces:
        if isinstance(piece, str) or isinstance(piece.value, str):  # compile-time text
            text.append((piece if isinstance(piece, str) else format(piece.value, piece.spec)).replace("%", "%%"))
            continue
        directive, operand = _printf_field(piece.value, piece.spec, b)
        text.append(directive)
        values.append(operand)
    gv = km.global_string(("".join(text) + "\n").encode() + b"\0")
    fmt_ptr = b.addrspacecast(gv, emit.pointer_type(0)) if gv.type.addrspace != 0 else gv
    vprintf = km.module.globals.get("vprintf")
    if vprintf is None:
        vprintf = ir.Function(km.module, ir.FunctionType(emit.I32, [emit.pointer_type(0), emit.pointer_type(0)]),
                              "vprintf")
    if values:
        struct_ty = ir.LiteralStructType([v.type for v in values])
        entry = km.function.entry_basic_block
        with b.goto_block(entry):
            b.position_at_start(entry)
            buf = b.alloca(struct_ty)
        buf.type = emit.pointer_type(0)  # opaque, so the GEPs below yield opaque pointers
        for i, v in enumerate(values):
            b.store(v, b.gep(buf, [ir.Constant(emit.I32, 0), ir.Constant(emit.I32, i)], source_etype=struct_ty))
        b.call(vprintf, [fmt_ptr, buf])
    else:
        b.call(vprintf, [fmt_ptr, ir.Constant(emit.pointer_type(0), None)])
