"""Handlers of the tcgen05 intrinsics (Blackwell, sm_100a / sm_100f) over :mod:`tsjit.interpret.tcgen05`.

* ``tcgen05.alloc`` / ``dealloc`` / ``relinquish_alloc_permit`` (PTX ISA 9.1 §9.7.16.7.1) are warp
  collectives: the warp rendezvous, one allocation is made in the CTA's :class:`TensorMemory` and its
  address written to the shared-memory slot.  A request that does not fit is an error (on the GPU
  the warp would wait for another CTA on the SM to free columns; the interpreter runs one CTA of a
  cluster per SM and has no such CTA).  ``cta_group::2`` forms: one warp of each CTA of the pair
  (cluster ranks 2p, 2p + 1) executes them; the pair waits for both warps and allocates the same
  columns in both CTAs' TMEM (a pair's MMA writes both at one address).
* ``tcgen05.mma.cta_group::2`` (M = 256) is issued by one thread of the pair's even CTA and reads
  both CTAs' shared memory (:func:`tsjit.interpret.tcgen05.mma_pair`); its commit (``.multicast``
  to the pair's barriers, or one barrier, local or the peer's shared::cluster address) as below.
* ``tcgen05.mma.shared`` / ``.tensor`` (§9.7.16.10.9) are asynchronous: the issuing thread validates
  them and queues them in its CTA (the operands' shared-memory reads are in flight for the race
  checker).  ``tcgen05.commit`` (§9.7.16.12.1: the mbarrier tracks the completion of the tcgen05
  operations the thread issued before) schedules their execution and then its arrival(s) for the next
  quiescence (every thread parked: :attr:`Machine.at_quiescence`), as late as the hardware may
  complete them.  So shared memory is read after everything that could run before the arrival ran
  (an operand stage released or overwritten early gives new bytes), a ``tcgen05.ld`` of cells an MMA
  in flight writes reads :data:`tsjit.interpret.tcgen05.POISON` (NaN), and a ``dealloc`` of them is
  an error.
* ``tcgen05.mma.ws`` (M = 128) and the block-scaled ``tcgen05.mma ... .block_scale`` (inline PTX) are
  queued the same way (:mod:`tsjit.interpret.tcgen05_scaled` reads the scale matrices at execution).
* ``tcgen05.cp`` (§9.7.16.9.2, inline PTX) is queued like an MMA and performed at its commit, in issue
  order with the thread's MMAs (a copy then an MMA reading its cells under one commit sees the copy).
* ``tcgen05.ld`` / ``tcgen05.st`` (every shape, ``.xN``) are warp collectives (§9.7.16.8.3-4); ``wait::ld`` /
  ``wait::st`` and the tcgen05 fences order nothing more in this model.
* Every CTA's TMEM must be freed before it exits: :func:`finish_cta`, for the core to call when a
  CTA's last thread finishes.
"""
from __future__ import annotations

import re

from tsjit.errors import InterpretError
from tsjit.interpret import memory as M
from tsjit.interpret import tcgen05, tcgen05_scaled
from tsjit.interpret.races import join, retire, snapshot
from tsjit.interpret.wgmma import byte_ranges
from tsjit.interpret.registry import blocking, constant_arg, handles, handles_asm, handles_prefix
from tsjit.interpret.sync import Waitable, join_warp, mbarrier_at

_TC = "llvm.nvvm.tcgen05."
FULL_MASK = 0xFFFFFFFF
KIND_NAMES = {0: "f16", 1: "tf32", 2: "f8f6f4", 3: "i8"}


def tensor_memory(cta) -> tcgen05.TensorMemory:
    """The CTA's tensor memory (made at first use)."""
    tmem = getattr(cta, "tmem", None)
    if tmem is None:
        tmem = cta.tmem = tcgen05.TensorMemory()
    return tmem


def finish_cta(cta) -> None:
    """At the exit of ``cta``'s last thread: its TMEM must be free (PTX ISA 9.1 §9.7.16.7.1).

    Raises:
        InterpretError: naming the allocations never freed.
    """
    tmem = getattr(cta, "tmem", None)
    if tmem is not None:
        tmem.check_freed()


def _collective(kind: str, value_of, compute, where: str):
    """A warp-collective op: every lane gives ``value_of(f)``; ``compute(rv)`` runs once."""
    @blocking
    def op(f):
        th = f[0]
        rv = join_warp(th, FULL_MASK, kind, value_of(f), compute, where)
        while rv.results is None:
            yield rv
        return rv.results.get(th)
    return op


def _warp_once(kind: str, value_of, action, where: str):
    """A warp-collective op with no result: every lane gives ``value_of(f)``; ``action(first thread,
    its value)`` runs once when the warp has arrived."""
    def compute(rv):
        threads = sorted(rv.inputs, key=lambda t: t.lane)
        action(threads[0], rv.inputs[threads[0]])
        return {t: None for t in threads}
    return _collective(kind, value_of, compute, where)


class _PairOp(Waitable):
    """One ``cta_group::2`` collective of a CTA pair: one warp of each CTA gives its value; the action
    runs when both have (``done``)."""

    __slots__ = ("kind", "ranks", "values", "done", "where")

    def __init__(self, kind, ranks, where):
        super().__init__()
        self.kind = kind
        self.ranks = ranks
        self.values = {}
        self.done = False
        self.where = where

    def describe(self) -> str:
        waiting = [r for r in self.ranks if r not in self.values]
        return (f"{self.kind} (cta_group::2) of the CTA pair {self.ranks} at {self.where}: waiting for a warp of "
                f"CTA rank {waiting[0] if waiting else '?'} to execute it too")


def _pair_ctas(th, what: str, where: str):
    """(even CTA, odd CTA) of ``th``'s CTA pair (cluster ranks 2 p, 2 p + 1)."""
    ctas = th.cta.cluster.ctas
    base = th.cta.rank & ~1
    if base + 1 >= len(ctas):
        raise InterpretError(f"{what} (cta_group::2) at {where}: CTA rank {th.cta.rank} has no peer CTA (the cluster "
                             f"has {len(ctas)} CTA(s)); launch with cluster dimensions that pair the CTAs, or use "
                             f"cta_group=1")
    return ctas[base], ctas[base + 1]


def _collective_op(kind: str, group: int, value_of, action, where: str):
    """The op of a warp collective (``group`` 1) or of a CTA pair's collective (``group`` 2: one warp of
    each CTA; the pair waits for both).  ``action(threads, values)`` runs once, with the first thread and
    value of each participating warp (even CTA first)."""
    if group == 1:
        return _warp_once(kind, value_of, lambda th, value: action([th], [value]), where)

    def compute(rv):
        threads = sorted(rv.inputs, key=lambda t: t.lane)
        first = threads[0]
        pair = _pair_ctas(first, kind, where)
        counters = first.cta.__dict__.setdefault("pair_calls", {})
        n = counters[kind] = counters.get(kind, 0) + 1
        pending = pair[0].__dict__.setdefault("pair_ops", {})
        op = pending.get((kind, n))
        if op is None:
            op = pending[(kind, n)] = _PairOp(kind, (pair[0].rank, pair[1].rank), where)
        op.values[first.cta.rank] = (first, rv.inputs[first])
        if len(op.values) == 2:
            del pending[(kind, n)]
            ordered = [op.values[r] for r in op.ranks]
            action([t for t, _ in ordered], [v for _, v in ordered])
            op.done = True
            first.machine.notify(op)
        return {t: op for t in threads}

    @blocking
    def pair_op(f):
        th = f[0]
        rv = join_warp(th, FULL_MASK, kind, value_of(f), compute, where)
        while rv.results is None:
            yield rv
        op = rv.results[th]
        while not op.done:
            yield op
    return pair_op


def _group_of(name: str) -> int:
    return 2 if name.endswith("cg2") else 1


@handles(_TC + "alloc.shared.cg1", _TC + "alloc.cg1", _TC + "alloc.shared.cg2", _TC + "alloc.cg2")
def _alloc(tr, instr, d, args):
    slot, count = args
    where = tr.where(instr)

    def allocate(threads, values):
        columns = values[0][1]
        if any(v[1] != columns for v in values):
            raise InterpretError(f"tcgen05.alloc.cta_group::2 at {where}: the CTAs of the pair ask for different "
                                 f"column counts ({[v[1] for v in values]}); give both the same")
        tmems = [tensor_memory(th.cta) for th in threads]
        base = tmems[0].alloc(columns, tmems[1:])
        if base is None:
            raise InterpretError(f"tcgen05.alloc of {columns} columns at {where}: only "
                                 f"{tcgen05.TMEM_COLUMNS - sum(tmems[0].allocations.values())} TMEM columns are free "
                                 f"in CTA rank {threads[0].cta.rank} and no other CTA can free them; dealloc first "
                                 f"or ask for fewer")
        for th, (offset, _) in zip(threads, values):
            window = th.cta.window
            window.check(offset, 4, "the tcgen05.alloc address slot", where)
            window.data[offset:offset + 4] = memoryview(base.to_bytes(4, "little"))
            if window.tracker is not None:
                window.tracker.write(th, offset, 4, where, proxy="async")

    return _collective_op("tcgen05.alloc", _group_of(instr.callee.name),
                          lambda f: (f[slot] & M.OFFSET_MASK, f[count]), allocate, where)


@handles(_TC + "dealloc.cg1", _TC + "dealloc.cg2")
def _dealloc(tr, instr, d, args):
    address, count = args

    def free(threads, values):
        for th, value in zip(threads, values):
            tensor_memory(th.cta).dealloc(*value)
    return _collective_op("tcgen05.dealloc", _group_of(instr.callee.name),
                          lambda f: (f[address] & 0xFFFFFFFF, f[count]), free, tr.where(instr))


@handles(_TC + "relinq.alloc.permit.cg1", _TC + "relinq.alloc.permit.cg2")
def _relinquish(tr, instr, d, args):
    def relinquish(f):
        tensor_memory(f[0].cta).relinquish()
    return relinquish


class _Async:
    """One asynchronous tcgen05 operation (``mma``, ``cp``) queued in its CTA until a commit executes it."""

    __slots__ = ("run", "issuer", "where", "records", "lanes", "columns", "done", "targets")

    def __init__(self, run, issuer, where, records, lanes, columns, targets):
        self.run = run              # run() performs it (reads shared memory / TMEM now)
        self.issuer = issuer
        self.where = where
        self.records = records      # in-flight asynchronous-proxy reads (race checker)
        self.lanes = lanes          # (first, end) of the TMEM lanes it writes
        self.columns = columns      # (first, end) of the TMEM columns it writes
        self.done = False
        self.targets = targets      # the TensorMemory objects it writes (reads of them see poison until done)
        for tmem in targets:
            tmem.in_flight.append(self)

    def execute(self) -> None:
        if self.done:
            return
        self.done = True
        for tmem in self.targets:
            tmem.in_flight.remove(self)
        try:
            self.run()
        except InterpretError as error:
            raise InterpretError(f"{error}\n  at {self.where}, issued by {self.issuer.describe()}") from None
        retire(self.issuer, self.records)


def queue_of(cta) -> list:
    """The CTA's queued asynchronous tcgen05 operations (oldest first; executed ones are dropped)."""
    queue = getattr(cta, "umma_queue", None)
    if queue is None:
        queue = cta.umma_queue = []
    return queue


def enqueue(th, op: _Async) -> None:
    """Queue ``op`` in ``th``'s CTA; a later ``tcgen05.commit`` of ``th`` executes it."""
    queue_of(th.cta).append(op)


def _issuing_ctas(th, group: int, what: str, where: str):
    """The CTAs an asynchronous tcgen05 operation of ``th`` works on: its own, or (``cta_group::2``) its
    pair, which only the pair's even CTA may issue for.

    Raises:
        InterpretError: no peer CTA, or issued in the odd CTA of the pair.
    """
    if group == 1:
        return (th.cta,)
    ctas = _pair_ctas(th, what, where)
    if th.cta is not ctas[0]:
        raise InterpretError(f"{what}.cta_group::2: issued in CTA rank {th.cta.rank}; the even CTA of the pair "
                             f"issues a pair's operation (cluster rank {ctas[0].rank})")
    return ctas


def _in_flight_reads(th, ctas, ranges, where: str) -> list:
    """The race checker's pending asynchronous-proxy reads of ``ranges`` in each CTA of ``ctas``."""
    records = []
    for cta in ctas:
        if cta.window.tracker is not None:
            records += [cta.window.tracker.read(th, start, end - start, where, proxy="async", pending=True)
                        for start, end in ranges]
    return records


def _queue_mma(th, ctas, ranges, d_address: int, shape, where: str, run) -> None:
    """Queue an MMA of ``th`` over ``ctas`` that reads ``ranges`` of shared memory and writes the
    ``shape`` (M, N) D tile at ``d_address`` in each CTA's TMEM; ``run()`` performs it at its commit."""
    records = _in_flight_reads(th, ctas, ranges, where)
    tmems = [tensor_memory(cta) for cta in ctas]
    lane, column = tcgen05.split_address(d_address)
    enqueue(th, _Async(run, th, where, records, (lane, lane + shape[0]), (column, column + shape[1]), tmems))


@handles(_TC + "mma.shared", _TC + "mma.tensor")
def _mma(tr, instr, d, args):
    d_slot, a_slot, b_slot, idesc_slot, enable_slot = args[:5]
    kind = KIND_NAMES.get(constant_arg(tr, instr, 5))
    group = constant_arg(tr, instr, 6)
    a_in_tmem = instr.callee.name.endswith(".tensor")
    where = tr.where(instr)

    def mma(f):
        th = f[0]
        idesc, a, b, d_address, accumulate = f[idesc_slot], f[a_slot], f[b_slot], f[d_slot] & 0xFFFFFFFF, \
            bool(f[enable_slot])
        try:
            ctas = _issuing_ctas(th, group, "tcgen05.mma", where)
            ranges = tcgen05.operand_ranges(idesc, a, b, kind=kind, a_in_tmem=a_in_tmem, cta_group=group)
            m, n = tcgen05.mma_shape(idesc, kind, group)
        except InterpretError as error:
            raise InterpretError(f"{error}\n  at {where}, {th.describe()}") from None
        tmems = [tensor_memory(cta) for cta in ctas]
        smems = [cta.window.data for cta in ctas]

        def run():
            tcgen05.mma_pair(tmems, smems, idesc, a, b, d_address, accumulate, kind=kind, a_in_tmem=a_in_tmem)
        _queue_mma(th, ctas, ranges, d_address, (m, n), where, run)
    return mma


_WS = re.compile(r"tcgen05\.mma\.ws\.cta_group::1\.kind::(\w+) \[\$0\], (\[\$1\]|\$1), \$2, \$3, p;")


@handles_asm(r"tcgen05\.mma\.ws\.")
def _mma_ws(tr, instr, d, args, match):
    """``tcgen05.mma.ws.cta_group::1.kind::K [d], a, b_desc, idesc, p`` (PTX ISA 9.1 §9.7.16.10.9.3; inline PTX
    from :func:`tsjit.lang.tcgen05.mma_ws`), issued by one thread and queued like ``tcgen05.mma``: M = 128
    is modelled (Layout D; :func:`tsjit.interpret.tcgen05.mma_pair`), M = 32 / 64 raise."""
    where = tr.where(instr)
    form = _WS.search(instr.callee.asm)
    if form is None:
        raise InterpretError(f"the interpreter does not model `{instr.callee.asm}` at {where}: it models "
                             f"tcgen05.mma.ws.cta_group::1.kind::K [d], a, b, idesc, p (tsjit.tcgen05.mma_ws)")
    kind, a_in_tmem = form.group(1), form.group(2).startswith("[")
    d_slot, a_slot, b_slot, idesc_slot, enable_slot = args[:5]

    def mma_ws(f):
        th = f[0]
        idesc, a, b, d_address, accumulate = f[idesc_slot], f[a_slot], f[b_slot], f[d_slot] & 0xFFFFFFFF, \
            bool(f[enable_slot])
        if a_in_tmem:
            a &= 0xFFFFFFFF
        try:
            ranges = tcgen05.operand_ranges(idesc, a, b, kind=kind, a_in_tmem=a_in_tmem, ws=True)
            shape = tcgen05.mma_shape(idesc, kind, ws=True)
        except InterpretError as error:
            raise InterpretError(f"{error}\n  at {where}, {th.describe()}") from None
        tmem, smem = tensor_memory(th.cta), th.cta.window.data

        def run():
            tcgen05.mma_pair([tmem], [smem], idesc, a, b, d_address, accumulate, kind=kind, a_in_tmem=a_in_tmem,
                             ws=True)
        _queue_mma(th, (th.cta,), ranges, d_address, shape, where, run)
    return mma_ws


_SCALED = re.compile(r"tcgen05\.mma\.cta_group::([12])\.kind::(\w+)\.block_scale\.([\w:]+) \[\$0\], \$1, \$2, "
                     r"\$3, \[\$4\], \[\$5\], p;")


@handles_asm(r"tcgen05\.mma\.cta_group::[12]\.kind::\w+\.block_scale")
def _mma_block_scaled(tr, instr, d, args, match):
    """``tcgen05.mma.cta_group::1.kind::{mxf8f6f4|mxf4nvf4}.block_scale.<vector> [d], a_desc, b_desc, idesc,
    [scale_a], [scale_b], p`` (PTX ISA 9.1 §9.7.16.10.9.1, block scaling §9.7.16.10.7; inline PTX from
    :func:`tsjit.lang.tcgen05.mma_block_scaled`), issued by one thread and queued like ``tcgen05.mma``: at
    its commit, in issue order with the thread's ``tcgen05.cp``, it reads the scale matrices from TMEM
    (:func:`tsjit.interpret.tcgen05_scaled.mma`).  ``cta_group::2`` is not modelled."""
    where = tr.where(instr)
    form = _SCALED.search(instr.callee.asm)
    if form is None or form.group(1) != "1":
        raise InterpretError(f"the interpreter does not model `{instr.callee.asm}` at {where}: it models "
                             f"tcgen05.mma.cta_group::1.kind::{{mxf8f6f4|mxf4nvf4}}.block_scale.<vector> with A and B "
                             f"in shared memory (tsjit.tcgen05.mma_block_scaled with cta_group=1)")
    kind, qualifier = form.group(2), form.group(3)
    d_slot, a_slot, b_slot, idesc_slot, sfa_slot, sfb_slot, enable_slot = args[:7]

    def mma(f):
        th = f[0]
        idesc, a, b, accumulate = f[idesc_slot], f[a_slot], f[b_slot], bool(f[enable_slot])
        d_address, sfa, sfb = (f[slot] & 0xFFFFFFFF for slot in (d_slot, sfa_slot, sfb_slot))
        try:
            ranges = tcgen05_scaled.operand_ranges(idesc, a, b, kind, qualifier)
            inst = tcgen05_scaled.instruction(idesc, kind, qualifier)
        except InterpretError as error:
            raise InterpretError(f"{error}\n  at {where}, {th.describe()}") from None
        tmem, smem = tensor_memory(th.cta), th.cta.window.data

        def run():
            tcgen05_scaled.mma(tmem, smem, idesc, a, b, d_address, sfa, sfb, accumulate, kind=kind,
                               qualifier=qualifier)
        _queue_mma(th, (th.cta,), ranges, d_address, (inst.m, inst.n), where, run)
    return mma


@handles_asm(r"^tcgen05\.cp\.")
def _cp(tr, instr, d, args, match):
    """``tcgen05.cp.cta_group::G.<shape>[.<multicast>] [taddr], s_desc`` (PTX ISA 9.1 §9.7.16.9.2), issued
    by one thread: validated at issue (source inside shared memory, destination inside a TMEM
    allocation), queued like an MMA and performed at its commit (:func:`_arrive_later`), in issue
    order with the thread's MMAs.  With ``cta_group::2`` the even CTA of the pair issues it and each
    CTA of the pair copies from its own shared memory into its own TMEM at the same address and
    descriptor (the pair convention of ``tcgen05.mma``; not confirmed by the PTX ISA text available
    here)."""
    where = tr.where(instr)
    form = re.fullmatch(r"tcgen05\.cp\.cta_group::([12])\.(\w+?)(?:\.(warpx2::02_13|warpx2::01_23|warpx4))? "
                        r"\[\$0\], \$1;", instr.callee.asm)
    if form is None:
        raise InterpretError(f"the interpreter does not model `{instr.callee.asm}` at {where}: it models "
                             f"tcgen05.cp.cta_group::{{1,2}}.<shape>[.<multicast>] [taddr], s_desc without "
                             f"decompression (.b8x16.*), the forms tsjit.tcgen05.cp emits")
    group, shape, multicast = int(form.group(1)), form.group(2), form.group(3)
    named = f"tcgen05.cp.cta_group::{group}.{shape}" + (f".{multicast}" if multicast else "")
    address_slot, desc_slot = args[:2]

    def cp(f):
        th = f[0]
        address, desc = f[address_slot] & 0xFFFFFFFF, f[desc_slot]
        try:
            ctas = _issuing_ctas(th, group, "tcgen05.cp", where)
            addresses, described = tcgen05.cp_source(desc, shape, multicast)
            lanes, columns = tcgen05.cp_footprint(shape, multicast, address)
            for cta in ctas:
                cta.window.check(int(addresses.min()), int(addresses.max()) + 1 - int(addresses.min()),
                                 described, where)
                tensor_memory(cta).check(lanes[0], columns[0], lanes[1] - lanes[0], columns[1] - columns[0],
                                         f"{named} destination")
        except InterpretError as error:
            raise InterpretError(f"{error}\n  at {where}, {th.describe()}") from None
        records = _in_flight_reads(th, ctas, byte_ranges(addresses), where)
        tmems = [tensor_memory(cta) for cta in ctas]
        smems = [cta.window.data for cta in ctas]

        def run():
            for tmem, smem in zip(tmems, smems):
                tcgen05.cp(tmem, smem, desc, address, shape, multicast)
        enqueue(th, _Async(run, th, where, records, lanes, columns, tmems))
    return cp


def _arrive_later(th, targets, where: str) -> None:
    """``tcgen05.commit`` of ``th``: at the next quiescence, every operation ``th``'s CTA queued before it
    executes (reading shared memory then), then the arrivals on ``targets`` [(space, address)] fire,
    releasing ``th``'s clock as of the commit."""
    queue = queue_of(th.cta)
    ops = [op for op in queue if op.issuer is th and not op.done]
    barriers = [mbarrier_at(th, space, address, where) for space, address in targets]
    clock = snapshot(th) if th.machine.checks else None

    def complete():
        for op in ops:
            op.execute()
        queue[:] = [op for op in queue if not op.done]
        for barrier in barriers:
            if barrier.pending < 1:
                raise InterpretError(f"tcgen05.commit at {where}: its arrival on {barrier.name} finds no arrival "
                                     f"pending in phase {barrier.phase} (issued by {th.describe()}); more "
                                     f"arrivals than the barrier's count")
            if clock is not None:
                barrier.clock = join(barrier.clock, clock)
            barrier.arrive(None, 1, where)
    th.machine.at_quiescence.append(complete)


@handles(_TC + "commit.shared.cg1", _TC + "commit.cg1", _TC + "commit.mc.shared.cg1", _TC + "commit.mc.cg1",
         _TC + "commit.shared.cg2", _TC + "commit.cg2", _TC + "commit.mc.shared.cg2", _TC + "commit.mc.cg2")
def _commit(tr, instr, d, args):
    """One arrival on the barrier (or, ``.multicast::cluster``, on the barrier at the same offset in
    each CTA of the mask) once the tcgen05 operations this thread issued before have executed
    (:func:`_arrive_later`)."""
    bar = args[0]
    mask = args[1] if len(args) > 1 else None
    where = tr.where(instr)

    def commit(f):
        th = f[0]
        if mask is None:
            address = f[bar]   # a shared::cluster address (mapa) names the peer's barrier
            targets = [(7 if address & ~M.OFFSET_MASK and address >> M.CLUSTER_SHIFT <= 16 else 3, address)]
        else:
            offset = f[bar] & M.OFFSET_MASK
            targets = [(7, ((cta.rank + 1) << M.CLUSTER_SHIFT) | offset) for cta in th.cta.cluster.ctas
                       if f[mask] >> cta.rank & 1]
        _arrive_later(th, targets, where)
    return commit


def _shape_of(name: str, op: str):
    shape, repeat = name[len(_TC) + len(op) + 1:].split(".")[:2]
    return shape, int(repeat[1:])


def _tmem_transfer(tr, instr, op: str, value_of, apply):
    """The factory of a warp-collective ``tcgen05.<op>.<shape>.x<num>``: every lane gives
    ``value_of(f)``; ``apply(tmem, values by lane, shape, num, warp)`` runs once and returns each
    lane's result (or None)."""
    shape, num = _shape_of(instr.callee.name, op)
    where = tr.where(instr)
    modifier = constant_arg(tr, instr, len(instr.args) - 1)
    if modifier:
        raise InterpretError(f"tcgen05.{op} with .pack::16b / .unpack::16b at {where} is not modelled by the "
                             f"interpreter")

    def compute(rv):
        threads = sorted(rv.inputs, key=lambda t: t.lane)
        first = threads[0]
        results = apply(tensor_memory(first.cta), [rv.inputs[t] for t in threads], shape, num, first.linear // 32)
        return {t: None if results is None else results[i] for i, t in enumerate(threads)}

    return _collective(f"tcgen05.{op}.{shape}.x{num}", value_of, compute, where)


@handles_prefix(_TC + "ld.")
def _ld(tr, instr, d, args):
    address = args[0]

    def apply(tmem, addresses, shape, num, warp):
        values = tcgen05.ld(tmem, addresses[0], shape, num, warp)
        return [int(row[0]) if values.shape[1] == 1 else tuple(int(v) for v in row) for row in values]

    inner = _tmem_transfer(tr, instr, "ld", lambda f: f[address] & 0xFFFFFFFF, apply)

    @blocking
    def ld(f):
        f[d] = yield from inner(f)
    return ld


@handles_prefix(_TC + "st.")
def _st(tr, instr, d, args):
    address, value = args[0], args[1]

    def apply(tmem, inputs, shape, num, warp):
        rows = [list(v) if isinstance(v, tuple) else [v] for _, v in inputs]
        tcgen05.st(tmem, inputs[0][0], shape, rows, warp)
        return None

    return _tmem_transfer(tr, instr, "st", lambda f: (f[address] & 0xFFFFFFFF, f[value]), apply)


@handles(_TC + "wait.ld", _TC + "wait.st", _TC + "fence.before.thread.sync", _TC + "fence.after.thread.sync")
def _ordering(tr, instr, d, args):
    return None
