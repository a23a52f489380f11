"""Loads, stores, atomics and ``alloca`` of the interpreter, for every address space.

Each access resolves its address to (typed views, byte offset) of one buffer: a global
:class:`~tsjit.interpret.memory.Allocation` (the last one hit is cached per instruction), the CTA's
shared window, another CTA's window (shared::cluster, DSMEM), or the thread's local memory.  An
address outside every buffer, or misaligned for its type, is an :class:`~tsjit.errors.InterpretError`
naming the array, the element index and the source line.  Shared accesses also go to the CTA's
:class:`~tsjit.interpret.races.SharedTracker` when race or uninitialized-read checks are on.
Atomics are read-modify-write steps: a thread is never interrupted inside one instruction.

An atomic load (``ld.acquire``, ``load atomic``: how polling loops read a flag, e.g. the debug build's
software named barrier) that reads the same value at the same instruction as the thread's previous
read there parks the thread on the word (:class:`WordWatch`) until an atomic writes it, or until every
thread is parked (the scheduler then lets it read once more, then reports the deadlock).  So a spin loop
lets the other threads run and a loop that can never end is a deadlock, not a hang.
"""
from __future__ import annotations

from llvmlite import ir

from tsjit.errors import InterpretError
from tsjit.interpret import memory as M
from tsjit.interpret import scalars as S
from tsjit.interpret.pdl import check_access as check_pdl_access
from tsjit.interpret.registry import blocking
from tsjit.interpret.sync import Waitable

__all__ = ["translate", "resolve", "scalar_codec", "WordWatch"]

_FORMATS = {1: "B", 2: "H", 4: "I", 8: "Q"}


def scalar_codec(t):
    """(view format, size, decode(raw) -> value, encode(value) -> raw) for scalar type ``t``; decode /
    encode are None when the view holds the value itself."""
    kind = S.kind_of(t)
    if kind == "int":
        size = max(1, (t.width + 7) // 8)
        return _FORMATS[size], size, None, None
    if kind == "ptr":
        return "Q", 8, None, None
    if kind == "float":
        return "f", 4, None, None
    if kind == "double":
        return "d", 8, None, None
    if kind in ("half", "bfloat"):
        return "H", 2, (lambda raw: S.bits_float(raw, kind)), (lambda v: S.float_bits(v, kind))
    return None


def resolve(th, space: int, address: int, nbytes: int, what: str, where: str):
    """(views, offset, buffer kind, owner) for ``nbytes`` at ``address`` in LLVM address ``space``.

    Raises:
        InterpretError: out of bounds (names the array / shared window and ``where``).
    """
    if space == 0:
        top = address & (0xFF << 56)
        if top == M.GENERIC_SHARED:
            address &= (1 << 32) - 1
            space = 7
        elif top == M.GENERIC_LOCAL:
            local = th.local
            offset = address - local.base
            if not 0 <= offset <= len(local.data) - nbytes:
                raise InterpretError(f"out-of-bounds local-memory {what} at {where}")
            return local.views, offset, "local", local
        else:
            space = 1
    if space == 3:
        window = th.cta.window
        if address + nbytes > window.nbytes:
            window.check(address, nbytes, what, where)
        return window.views, address, "shared", window
    if space == 7:
        rank = (address >> M.CLUSTER_SHIFT) - 1
        ctas = th.cta.cluster.ctas
        if not 0 <= rank < len(ctas):
            raise InterpretError(f"shared::cluster {what} at {where}: address 0x{address:x} names CTA rank {rank}, "
                                 f"but the cluster has {len(ctas)} CTAs (use mapa with a rank below that)")
        window = ctas[rank].window
        offset = address & M.OFFSET_MASK
        if offset + nbytes > window.nbytes:
            window.check(offset, nbytes, what, where)
        return window.views, offset, "shared", window
    alloc = th.machine.gmem.find(address)
    if alloc is None or address + nbytes > alloc.base + alloc.nbytes:
        raise InterpretError(th.machine.gmem.out_of_bounds(address, nbytes, f"global {what}") + f" ({where})")
    if alloc.pdl_guard is not None:
        check_pdl_access(th, alloc, address - alloc.base, nbytes, what, where)
    return alloc.views, address - alloc.base, "global", alloc


def _unretired_read(th, window, offset, size, where) -> None:
    """Raise when ``[offset, offset + size)`` of ``window`` is the destination of a cp.async in flight."""
    found = window.unretired(offset, size)
    if found is None:
        return
    issuer, line = found
    raise InterpretError(   # the read's line last: the excerpt shows the last line a message names
        f"read of shared memory a cp.async has not delivered: the cp.async at {line} ({issuer.describe()}) was "
        f"not retired when its destination ({th.machine.program.describe_shared(offset)} of CTA "
        f"{issuer.cta.ctaid}) was read by {th.describe()} at {where}; the issuing thread must call "
        f"tsjit.cp_async_wait_group(0) (or tsjit.cp_async_wait_all()) after tsjit.cp_async_commit_group(), "
        f"before the syncthreads() that publishes the data: a syncthreads() does not wait for cp.async copies "
        f"(PTX ISA cp.async.wait_group)")


def _misaligned(what, address, size, where):
    return InterpretError(f"misaligned {what}: {size}-byte access at address 0x{address:x} (not a multiple of "
                          f"{size}) at {where}; the GPU faults with 'misaligned address'")


def translate(tr, instr):
    """The closure for a load, store, atomicrmw, cmpxchg or alloca ``instr``."""
    if isinstance(instr, ir.AllocaInstr):
        return _alloca(tr, instr)
    if isinstance(instr, ir.LoadInstr):
        return _promised(tr, instr, instr.operands[0], instr.type, "load", _load(tr, instr))
    if isinstance(instr, ir.StoreInstr):
        return _promised(tr, instr, instr.operands[1], instr.operands[0].type, "store", _store(tr, instr))
    if isinstance(instr, ir.AtomicRMW):
        return _atomic(tr, instr)
    if isinstance(instr, ir.LoadAtomicInstr):
        return _load_atomic(tr, instr)
    if isinstance(instr, ir.StoreAtomicInstr):
        return _store_atomic(tr, instr)
    return _cmpxchg(tr, instr)


def _promised(tr, instr, ptr, typ, what, op):
    """``op``, checking first the alignment the access is compiled for (its IR ``align``, from
    :class:`tsjit.lang.memory.Pointer`'s alignment: a ``tsjit.assume_aligned`` promise or what the array's
    base and the index arithmetic prove) when that exceeds the access's own width."""
    align = getattr(instr, "align", None) or 0
    size = S.type_size(typ)
    if align <= size:
        return op
    p = tr.slot(ptr)
    where = tr.where(instr)

    def promised(f):
        a = f[p]
        if a % align:
            raise InterpretError(
                f"broken alignment promise: the {size}-byte {what} at {where} is compiled for a {align}-byte "
                f"aligned address (a tsjit.assume_aligned promise, or the alignment of the array's base and the "
                f"index arithmetic), but the address 0x{a:x} is {a % align} mod {align}; the compiler may widen "
                f"accesses on that promise (the GPU faults with 'misaligned address'): fix the promise or the index")
        op(f)
    return promised


class WordWatch(Waitable):
    """Threads polling one memory word with atomic loads that keep reading ``value`` (woken by an atomic
    write of the word, or once when every thread is parked: ``timeout_allowed``)."""

    __slots__ = ("what", "value")
    timeout_allowed = True

    def __init__(self, what: str):
        super().__init__()
        self.what = what
        self.value = None

    def describe(self) -> str:
        return f"{self.what}: a polling loop whose atomic load keeps reading {self.value} (nothing writes it)"


def _wake_watchers(th, owner, off) -> None:
    """An atomic wrote the word at ``off`` of ``owner``: threads polling it re-read."""
    watch = th.machine.watches.get((id(owner), off))
    if watch is not None and watch.waiters:
        th.machine.notify(watch)


def _load_atomic(tr, instr):
    ptr = instr.operands[0]
    p, d = tr.slot(ptr), tr.slot(instr)
    space = ptr.type.addrspace
    where = tr.where(instr)
    parts, size = _access_parts(instr.type)
    if len(parts) != 1:
        raise InterpretError(f"the interpreter cannot execute the atomic load of a {instr.type} at {where}")
    (_, (fmt, size, decode, _enc)), = parts
    site = object()

    @blocking
    def load_atomic(f):
        th = f[0]
        a = f[p]
        views, off, kind, owner = resolve(th, space, a, size, "atomic load", where)
        if off % size:
            raise _misaligned("atomic load", a, size, where)
        if kind == "shared" and owner.tracker is not None:
            owner.tracker.atomic(th, off, size, where)
        raw = views[fmt][off // size]
        spins = th.spins
        if spins is None:
            spins = th.spins = {}
        seen = (id(owner), off, raw)
        if spins.get(site) == seen:             # polling without a change: let the writers run
            key = (id(owner), off)
            watch = th.machine.watches.get(key)
            if watch is None:
                what = f"{kind} word at byte {off} of " + (f"CTA rank {owner.rank}'s shared memory" if kind == "shared"
                                                          else getattr(owner, "name", kind))
                watch = th.machine.watches[key] = WordWatch(what)
            watch.value = raw
            th.wait_line = where
            yield watch
            th.timed_out = False
            raw = views[fmt][off // size]
            seen = (id(owner), off, raw)
        spins[site] = seen
        f[d] = decode(raw) if decode is not None else raw
    return load_atomic


def _store_atomic(tr, instr):
    value, ptr = instr.operands
    v, p = tr.slot(value), tr.slot(ptr)
    space = ptr.type.addrspace
    where = tr.where(instr)
    fmt, size, _dec, encode = scalar_codec(value.type)

    def store_atomic(f):
        th = f[0]
        a = f[p]
        views, off, kind, owner = resolve(th, space, a, size, "atomic store", where)
        if off % size:
            raise _misaligned("atomic store", a, size, where)
        if kind == "shared" and owner.tracker is not None:
            owner.tracker.atomic(th, off, size, where)
        x = f[v]
        views[fmt][off // size] = encode(x) if encode is not None else x
        _wake_watchers(th, owner, off)
    return store_atomic


def _alloca(tr, instr):
    d = tr.slot(instr)
    size = S.type_size(instr.allocated_type)
    align = max(instr.align or 1, S.type_align(instr.allocated_type))

    def alloca(f):
        f[d] = f[0].local.allocate(size, align)
    return alloca


def _access_parts(t):
    """[(offset, codec)] of the scalars of a (vector / aggregate) type, and its size."""
    kind = S.kind_of(t)
    if kind == "vector":
        codec = scalar_codec(t.element)
        return [(i * codec[1], codec) for i in range(t.count)], S.type_size(t)
    codec = scalar_codec(t)
    if codec is None:
        raise InterpretError(f"internal error, please report: the interpreter cannot load/store type {t}")
    return [(0, codec)], codec[1]


def _load(tr, instr):
    ptr = instr.operands[0]
    p, d = tr.slot(ptr), tr.slot(instr)
    space = ptr.type.addrspace
    where = tr.where(instr)
    t = instr.type
    if S.kind_of(t) == "int" and t.width > 64:   # i128 (a CLC response): little-endian bytes
        nbytes = t.width // 8

        def load_wide(f):
            views, off, kind, owner = resolve(f[0], space, f[p], nbytes, "load", where)
            if kind == "shared" and owner.tracker is not None:
                owner.tracker.read(f[0], off, nbytes, where)
            f[d] = int.from_bytes(views["B"][off:off + nbytes], "little")
        return load_wide
    parts, size = _access_parts(t)
    tracker_on = tr.checks
    if len(parts) == 1:
        (_, (fmt, size, decode, _enc)), = parts
        shift = size.bit_length() - 1
        if space == 1 and decode is None and not tracker_on:
            cache = [None]

            def load_global(f):
                a = f[p]
                alloc = cache[0]
                if alloc is None or not 0 <= a - alloc.base <= alloc.nbytes - size:
                    views, _, _, alloc = resolve(f[0], 1, a, size, "load", where)
                    cache[0] = alloc
                off = a - alloc.base
                if off & (size - 1):
                    raise _misaligned("load", a, size, where)
                f[d] = alloc.views[fmt][off >> shift]
            return load_global
        if space == 3 and decode is None and not tracker_on:
            def load_shared(f):
                a = f[p]
                window = f[0].cta.window
                if a + size > window.nbytes:
                    window.check(a, size, "load", where)
                if a & (size - 1):
                    raise _misaligned("shared load", a, size, where)
                if window.copies:
                    _unretired_read(f[0], window, a, size, where)
                f[d] = window.views[fmt][a >> shift]
            return load_shared

        def load_any(f):
            th = f[0]
            a = f[p]
            views, off, kind, owner = resolve(th, space, a, size, "load", where)
            if off & (size - 1):
                raise _misaligned("load", a, size, where)
            if kind == "shared":
                if owner.copies:
                    _unretired_read(th, owner, off, size, where)
                if owner.tracker is not None:
                    owner.tracker.read(th, off, size, where)
            raw = views[fmt][off >> shift]
            f[d] = decode(raw) if decode is not None else raw
        return load_any

    def load_vector(f):
        th = f[0]
        a = f[p]
        views, off, kind, owner = resolve(th, space, a, size, "load", where)
        if a % size:   # a vector access moves its whole width at once (PTX ISA ld / st .v2 / .v4)
            raise _misaligned("vector load (check the index and any tsjit.assume_aligned promise)", a, size,
                              where)
        if kind == "shared":
            if owner.copies:
                _unretired_read(th, owner, off, size, where)
            if owner.tracker is not None:
                owner.tracker.read(th, off, size, where)
        values = []
        for part_offset, (fmt, psize, decode, _e) in parts:
            o = off + part_offset
            if o % psize:
                raise _misaligned("load", a + part_offset, psize, where)
            raw = views[fmt][o // psize]
            values.append(decode(raw) if decode is not None else raw)
        f[d] = tuple(values)
    return load_vector


def _store(tr, instr):
    value, ptr = instr.operands
    v, p = tr.slot(value), tr.slot(ptr)
    space = ptr.type.addrspace
    where = tr.where(instr)
    parts, size = _access_parts(value.type)
    tracker_on = tr.checks
    if len(parts) == 1:
        (_, (fmt, size, _dec, encode)), = parts
        shift = size.bit_length() - 1
        if space == 1 and encode is None and not tracker_on:
            cache = [None]

            def store_global(f):
                a = f[p]
                alloc = cache[0]
                if alloc is None or not 0 <= a - alloc.base <= alloc.nbytes - size:
                    views, _, _, alloc = resolve(f[0], 1, a, size, "store", where)
                    cache[0] = alloc
                off = a - alloc.base
                if off & (size - 1):
                    raise _misaligned("store", a, size, where)
                alloc.views[fmt][off >> shift] = f[v]
            return store_global

        def store_any(f):
            th = f[0]
            a = f[p]
            views, off, kind, owner = resolve(th, space, a, size, "store", where)
            if off & (size - 1):
                raise _misaligned("store", a, size, where)
            if kind == "shared" and owner.tracker is not None:
                owner.tracker.write(th, off, size, where)
            x = f[v]
            views[fmt][off >> shift] = encode(x) if encode is not None else x
        return store_any

    def store_vector(f):
        th = f[0]
        a = f[p]
        views, off, kind, owner = resolve(th, space, a, size, "store", where)
        if a % size:   # a vector access moves its whole width at once (PTX ISA ld / st .v2 / .v4)
            raise _misaligned("vector store (check the index and any tsjit.assume_aligned promise)", a, size,
                              where)
        if kind == "shared" and owner.tracker is not None:
            owner.tracker.write(th, off, size, where)
        for (part_offset, (fmt, psize, _dec, encode)), x in zip(parts, f[v]):
            o = off + part_offset
            if o % psize:
                raise _misaligned("store", a + part_offset, psize, where)
            views[fmt][o // psize] = encode(x) if encode is not None else x
    return store_vector


def _atomic_function(op: str, t):
    kind = S.kind_of(t)
    if kind in ("float", "double", "half", "bfloat"):
        rnd = (lambda x: S.round_float(x, kind))
        table = {"fadd": lambda old, x: rnd(float(old) + float(x)), "fsub": lambda old, x: rnd(float(old) - float(x)),
                 "fmax": lambda old, x: max(old, x), "fmin": lambda old, x: min(old, x), "xchg": lambda old, x: x}
        return table[op]
    mask = S.mask_of(t) if kind == "int" else (1 << 64) - 1
    width = t.width if kind == "int" else 64
    sign = 1 << (width - 1)
    table = {
        "add": lambda old, x: (old + x) & mask, "sub": lambda old, x: (old - x) & mask,
        "and": lambda old, x: old & x, "or": lambda old, x: old | x, "xor": lambda old, x: old ^ x,
        "xchg": lambda old, x: x, "umax": max, "umin": min,
        "max": lambda old, x: old if (old ^ sign) >= (x ^ sign) else x,
        "min": lambda old, x: old if (old ^ sign) <= (x ^ sign) else x,
        "uinc_wrap": lambda old, x: 0 if old >= x else old + 1,
        "udec_wrap": lambda old, x: x if old == 0 or old > x else old - 1,
    }
    return table[op]


def _atomic(tr, instr):
    ptr, value = instr.operands
    p, v, d = tr.slot(ptr), tr.slot(value), tr.slot(instr)
    space = ptr.type.addrspace
    where = tr.where(instr)
    fmt, size, decode, encode = scalar_codec(value.type)
    try:
        fn = _atomic_function(instr.operation, value.type)
    except KeyError:
        raise InterpretError(f"the interpreter does not know atomicrmw {instr.operation} ({where})") from None

    def atomic(f):
        th = f[0]
        a = f[p]
        views, off, kind, owner = resolve(th, space, a, size, "atomic", where)
        if off % size:
            raise _misaligned("atomic", a, size, where)
        if kind == "shared" and owner.tracker is not None:
            owner.tracker.atomic(th, off, size, where)
        view = views[fmt]
        raw = view[off // size]
        old = decode(raw) if decode is not None else raw
        new = fn(old, f[v])
        view[off // size] = encode(new) if encode is not None else new
        f[d] = old
        if th.machine.watches:
            _wake_watchers(th, owner, off)
    return atomic


def _cmpxchg(tr, instr):
    ptr, expected, new = instr.operands
    p, e, n, d = tr.slot(ptr), tr.slot(expected), tr.slot(new), tr.slot(instr)
    space = ptr.type.addrspace
    where = tr.where(instr)
    fmt, size, _dec, _enc = scalar_codec(new.type)

    def cmpxchg(f):
        th = f[0]
        a = f[p]
        views, off, kind, owner = resolve(th, space, a, size, "atomic compare-and-swap", where)
        if kind == "shared" and owner.tracker is not None:
            owner.tracker.atomic(th, off, size, where)
        view = views[fmt]
        old = view[off // size]
        ok = old == f[e]
        if ok:
            view[off // size] = f[n]
            if th.machine.watches:
                _wake_watchers(th, owner, off)
        f[d] = (old, 1 if ok else 0)
    return cmpxchg

