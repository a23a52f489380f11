"""Asynchronous copies: TMA (``cp.async.bulk.tensor``), bulk copies, ``cp.async``, and their groups.

* TMA loads (PTX ISA §9.7.9.25.5 ``cp.async.bulk.tensor``) build the box's shared-memory image with
  :func:`tsjit.interpret.tma.load_box` (swizzle, OOB fill, element strides) at issue, write it into
  the destination CTA(s) (every CTA of ``cta_mask`` for multicast, same offset) and complete its
  transaction bytes on the mbarrier at the same offset there.  For the race checker the write is an
  asynchronous-proxy write made with the issuing thread's clock, released into the mbarrier.
* TMA stores / reduces read shared memory at issue (:func:`tsjit.interpret.tma.prepare_store`; an
  asynchronous-proxy read: a generic write without ``fence.proxy.async`` before it is reported) and
  become visible in global memory when their bulk group completes (``cp.async.bulk.wait_group``) or
  the thread exits.
* Bulk copies (``cp.async.bulk`` global <-> shared) behave the same, without a tensor map.
* ``cp.async`` (PTX ISA §9.7.9.25.3) copies when its group completes (``cp.async.wait_group`` /
  ``wait_all``) or at ``cp.async.mbarrier.arrive.noinc``, which then arrives on the mbarrier.  Until
  then its destination words are in ``SharedWindow.copies``: a load of them by any thread is an
  InterpretError naming the cp.async's line and the load's (a ``syncthreads()`` does not retire
  another thread's copies; the issuing thread's ``cp.async.wait_group`` does), with or without
  ``TSJIT_INTERPRET_CHECK``.
"""
from __future__ import annotations

import numpy as np

from tsjit.errors import InterpretError
from tsjit.interpret import memory as M
from tsjit.interpret import tma
from tsjit.interpret.memory_ops import resolve
from tsjit.interpret.pdl import check_access, check_allocation
from tsjit.interpret.races import retire, snapshot
from tsjit.interpret.registry import constant_arg, handles, handles_prefix
from tsjit.interpret.sync import mbarrier_at
from tsjit.runtime.tensormap import DESCRIPTOR_BYTES, interpreter_layout

_BULK = "llvm.nvvm.cp.async.bulk."


def _layout(th, address: int, where: str):
    views, off, _kind, _owner = resolve(th, 0, address, DESCRIPTOR_BYTES, "TMA descriptor read", where)
    found = interpreter_layout(bytes(views["B"][off:off + 16]))
    if found is None:
        raise InterpretError(f"TMA at {where}: the tensor-map operand does not point at a TensorMap made under "
                             f"TSJIT_INTERPRET=1 (pass the tsjit.TensorMap argument itself)")
    return found[0]


def _signed(x: int) -> int:
    return (x ^ 0x80000000) - 0x80000000


def _destinations(th, dst: int, space: int, mask: int | None):
    """[(cta, offset)] a load writes: every CTA of ``mask`` (multicast) or the one ``dst`` names."""
    ctas = th.cta.cluster.ctas
    offset = dst & M.OFFSET_MASK
    if mask is not None:
        chosen = [cta for cta in ctas if mask >> cta.rank & 1]
        if not chosen:
            raise InterpretError(f"TMA multicast with an empty cta_mask ({th.describe()})")
        return [(cta, offset) for cta in chosen]
    if space == 7:
        rank = (dst >> M.CLUSTER_SHIFT) - 1
        if not 0 <= rank < len(ctas):
            raise InterpretError(f"TMA destination 0x{dst:x} names CTA rank {rank} outside the cluster")
        return [(ctas[rank], offset)]
    return [(th.cta, offset)]


def tensor_layout(th, address: int, where: str):
    """The layout of the interpreter-mode TensorMap whose descriptor is at ``address`` (InterpretError if none)."""
    return _layout(th, address, where)


def deliver(th, image_chunks, nbytes, destinations, bar_offset, where, clock, barrier_cta=None):
    """Write one copy's image (``image_chunks``: a :class:`tsjit.interpret.tma.SmemImage`, or None when the
    bytes ``[offset, offset + nbytes)`` are already written) into each ``(cta, offset)`` of ``destinations``,
    record it as an asynchronous-proxy write made with ``clock`` (the issuing thread's), and complete
    ``nbytes`` transaction bytes on the mbarrier at ``bar_offset`` of each destination CTA (of ``barrier_cta``
    when given: the pair leader of a ``.cta_group::2`` load, :mod:`tsjit.interpret.tma_pair`).

    Raises:
        InterpretError: no mbarrier is initialized there.
    """
    for cta, offset in destinations:
        window = cta.window
        if image_chunks is not None:
            image_chunks.write_into(window.data)
            start, end = image_chunks.byte_range()
        else:
            start, end = offset, offset + nbytes
        if window.tracker is not None:
            window.tracker.write(th, start, end - start, where, proxy="async",
                                 clock=clock.get(th.uid, 0) if clock else None)
        signalled = cta if barrier_cta is None else barrier_cta
        barrier = signalled.mbarriers.get(bar_offset)
        if barrier is None:
            raise InterpretError(f"TMA at {where}: no mbarrier is initialized at "
                                 f"{th.machine.program.describe_shared(bar_offset)} of CTA rank {signalled.rank} to "
                                 f"signal (initialize it first)")
        barrier.complete_tx(nbytes, clock)


@handles_prefix(_BULK + "tensor.g2s.")
def _tma_load(tr, instr, d, args):
    name = instr.callee.name
    rank = int(name[-2])
    cta_form = ".g2s.cta." in name
    dst, bar, tmap = args[0], args[1], args[2]
    coords = args[3:3 + rank]
    dst_space = instr.args[0].type.addrspace
    use_mask = False if cta_form else bool(constant_arg(tr, instr, 3 + rank + 2))
    mask_slot = None if cta_form else args[3 + rank]
    where = tr.where(instr)

    def tma_load(f):
        th = f[0]
        layout = _layout(th, f[tmap], where)
        check_allocation(th, th.machine.gmem.find(layout.global_address), "TMA load", where)
        box = tuple(_signed(f[c]) for c in coords)
        destinations = _destinations(th, f[dst], dst_space, f[mask_slot] if use_mask else None)
        clock = snapshot(th) if th.machine.checks else None
        for cta, offset in destinations:
            image = tma.load_box(layout, box, th.machine.gmem, offset)
            deliver(th, image, image.tx_bytes, [(cta, offset)], f[bar] & M.OFFSET_MASK, where, clock)
    return tma_load


class _BulkStore:
    """One TMA / bulk store: ``write()`` makes its global writes visible (at its group's completion);
    ``records`` are its in-flight shared-memory reads for the race checker (retired by ``.read`` waits)."""

    def __init__(self, write, records=()):
        self.write = write
        self.records = list(records)


def _bulk_state(th) -> dict:
    """``{"open": stores not yet committed, "groups": committed groups, oldest first}``."""
    if not th.bulk:
        th.bulk = {"open": [], "groups": []}
    return th.bulk


def complete_bulk_groups(th, keep: int, read_only: bool = False, including_open: bool = False) -> None:
    """Complete every committed bulk group of ``th`` but the ``keep`` newest (with ``including_open``,
    also the stores not committed yet): their sources are read (in-flight reads retired) and, unless
    ``read_only``, their global writes become visible."""
    state = _bulk_state(th)
    finished = state["groups"][:max(0, len(state["groups"]) - keep)]
    rest = state["groups"][len(finished):]
    if including_open:
        finished, rest = state["groups"] + [state["open"]], []
        state["open"] = []
    for group in finished:
        for store in group:
            retire(th, store.records)
            store.records = []
            if not read_only:
                store.write()
    if not read_only:
        state["groups"] = rest


@handles_prefix(_BULK + "tensor.s2g.")
@handles_prefix(_BULK + "tensor.reduce.")
def _tma_store(tr, instr, d, args):
    name = instr.callee.name
    rank = int(name[-2])
    reduce = None if ".s2g." in name else name.split(".")[6]
    src, tmap = args[0], args[1]
    coords = args[2:2 + rank]
    where = tr.where(instr)

    def tma_store(f):
        th = f[0]
        layout = _layout(th, f[tmap], where)
        check_allocation(th, th.machine.gmem.find(layout.global_address), "TMA store", where)
        box = tuple(_signed(f[c]) for c in coords)
        window = th.cta.window
        pending = tma.prepare_store(layout, box, th.machine.gmem, window.data, f[src] & M.OFFSET_MASK, reduce)
        records = []
        if window.tracker is not None:
            start, end = pending.source
            records.append(window.tracker.read(th, start, end - start, where, proxy="async", pending=True))
        _bulk_state(th)["open"].append(_BulkStore(pending.write, records))
    return tma_store


@handles_prefix(_BULK + "tensor.prefetch.")
@handles(_BULK + "prefetch.L2", "llvm.nvvm.prefetch.tensormap.p0")
def _prefetch(tr, instr, d, args):
    return None


@handles(_BULK + "commit.group")
def _bulk_commit(tr, instr, d, args):
    def commit(f):
        state = _bulk_state(f[0])
        state["groups"].append(state["open"])
        state["open"] = []
    return commit


@handles(_BULK + "wait.group", _BULK + "wait.group.read")
def _bulk_wait(tr, instr, d, args):
    keep = constant_arg(tr, instr, 0)
    read_only = instr.callee.name.endswith(".read")

    def wait(f):
        complete_bulk_groups(f[0], keep, read_only)
    return wait


def finish_thread(th) -> None:
    """At a thread's exit its outstanding bulk stores and cp.async copies complete."""
    if th.bulk:
        complete_bulk_groups(th, 0, including_open=True)
    if th.cp_async:
        _complete_cp_async(th, 0, including_open=True)


@handles(_BULK + "global.to.shared.cluster", _BULK + "global.to.shared.cta", _BULK + "shared.cta.to.cluster")
def _bulk_to_shared(tr, instr, d, args):
    name = instr.callee.name
    dst, bar, src, n = args[0], args[1], args[2], args[3]
    src_space = instr.args[2].type.addrspace
    dst_space = instr.args[0].type.addrspace
    use_mask = name.endswith("global.to.shared.cluster") and bool(constant_arg(tr, instr, 6))
    mask_slot = args[4] if use_mask else None
    where = tr.where(instr)

    def bulk_copy(f):
        th = f[0]
        nbytes = f[n]
        if nbytes % 16:
            raise InterpretError(f"cp.async.bulk at {where}: the size {nbytes} is not a multiple of 16 bytes")
        views, off, _k, _o = resolve(th, src_space, f[src], nbytes, "bulk copy read", where)
        data = np.frombuffer(views["B"], np.uint8)[off:off + nbytes].copy()
        clock = snapshot(th) if th.machine.checks else None
        for cta, offset in _destinations(th, f[dst], dst_space, f[mask_slot] if use_mask else None):
            cta.window.check(offset, nbytes, "bulk copy write", where)
            cta.window.data[offset:offset + nbytes] = data
            deliver(th, None, nbytes, [(cta, offset)], f[bar] & M.OFFSET_MASK, where, clock)
    return bulk_copy


@handles(_BULK + "shared.cta.to.global")
def _bulk_to_global(tr, instr, d, args):
    dst, src, n = args[0], args[1], args[2]
    where = tr.where(instr)

    def bulk_store(f):
        th = f[0]
        nbytes = f[n]
        window = th.cta.window
        offset = f[src] & M.OFFSET_MASK
        window.check(offset, nbytes, "bulk copy read", where)
        records = []
        if window.tracker is not None:
            records.append(window.tracker.read(th, offset, nbytes, where, proxy="async", pending=True))
        data = window.data[offset:offset + nbytes].copy()
        alloc = th.machine.gmem.check(f[dst], nbytes, f"bulk copy write at {where}")
        start = f[dst] - alloc.base
        if alloc.pdl_guard is not None:
            check_access(th, alloc, start, nbytes, "bulk copy write", where)

        def write(alloc=alloc, start=start, data=data):
            alloc.data[start:start + len(data)] = data
        _bulk_state(th)["open"].append(_BulkStore(write, records))
    return bulk_store


# -- cp.async (non-bulk) -------------------------------------------------------------------------------
@handles_prefix("llvm.nvvm.cp.async.ca.shared.global.")
@handles_prefix("llvm.nvvm.cp.async.cg.shared.global.")
def _cp_async(tr, instr, d, args):
    nbytes = int(instr.callee.name.rsplit(".", 1)[1])
    dst, src = args
    where = tr.where(instr)

    def cp_async(f):
        th = f[0]
        if f[src] % nbytes:
            raise InterpretError(
                f"cp.async at {where}: the global source address 0x{f[src]:x} is not {nbytes}-byte aligned "
                f"({f[src] % nbytes} mod {nbytes}; PTX ISA cp.async: both addresses must be aligned to the copy "
                f"size, the GPU faults with 'misaligned address'): check the index, and any "
                f"tsjit.assume_aligned promise on the source pointer")
        views, off, _k, alloc = resolve(th, 1, f[src], nbytes, "cp.async read", where)
        window = th.cta.window
        offset = f[dst] & M.OFFSET_MASK
        window.check(offset, nbytes, "cp.async write", where)
        if offset % nbytes:
            raise InterpretError(f"cp.async at {where}: shared address {offset} is not {nbytes}-byte aligned")

        record = (th, where)
        words = range(offset, offset + nbytes, 4)
        for word in words:
            window.copies[word] = record

        def copy(views=views, off=off, offset=offset, th=th):
            for word in words:
                if window.copies.get(word) is record:
                    del window.copies[word]
            if window.tracker is not None:
                window.tracker.write(th, offset, nbytes, where)
            window.data[offset:offset + nbytes] = np.frombuffer(views["B"], np.uint8)[off:off + nbytes]
        _cp_state(th)["open"].append(copy)
    return cp_async


def _cp_state(th) -> dict:
    """``{"open": copies not yet committed, "groups": committed groups, oldest first}``."""
    if not th.cp_async:
        th.cp_async = {"open": [], "groups": []}
    return th.cp_async


@handles("llvm.nvvm.cp.async.commit.group")
def _cp_commit(tr, instr, d, args):
    def commit(f):
        state = _cp_state(f[0])
        state["groups"].append(state["open"])
        state["open"] = []
    return commit


def _complete_cp_async(th, keep: int, including_open: bool = False) -> None:
    state = _cp_state(th)
    groups = state["groups"]
    done, state["groups"] = groups[:max(0, len(groups) - keep)], groups[max(0, len(groups) - keep):]
    if including_open:
        done.append(state["open"])
        state["open"] = []
    for group in done:
        for copy in group:
            copy()


@handles("llvm.nvvm.cp.async.wait.group", "llvm.nvvm.cp.async.wait.all")
def _cp_wait(tr, instr, d, args):
    keep = 0 if instr.callee.name.endswith("wait.all") else constant_arg(tr, instr, 0)

    def wait(f):
        _complete_cp_async(f[0], keep)
    return wait


@handles("llvm.nvvm.cp.async.mbarrier.arrive.noinc.shared")
def _cp_arrive(tr, instr, d, args):
    bar, = args
    where = tr.where(instr)

    def arrive(f):
        th = f[0]
        _complete_cp_async(th, 0, including_open=True)
        mbarrier_at(th, 3, f[bar], where).arrive(th, 1, where)
    return arrive
