"""Handlers of the tcgen05 intrinsics (Blackwell, sm_100a / sm_100f) over :mod:`tsjit.interpret.tcgen05`.

* ``tcgen05.alloc`` / ``dealloc`` / ``relinquish_alloc_permit`` (PTX ISA 9.1 §9.7.16.7.1) are warp
  collectives: the warp rendezvous, one allocation is made in the CTA's :class:`TensorMemory` and its
  address written to the shared-memory slot.  A request that does not fit is an error (on the GPU
  the warp would wait for another CTA on the SM to free columns; the interpreter runs one CTA of a
  cluster per SM and has no such CTA).
* ``tcgen05.mma.shared`` / ``.tensor`` (§9.7.16.10.9) are asynchronous: the issuing thread validates
  them and queues them in its CTA (the operands' shared-memory reads are in flight for the race
  checker).  ``tcgen05.commit`` (§9.7.16.12.1: the mbarrier tracks the completion of the tcgen05
  operations the thread issued before) schedules their execution and then its arrival(s) for the next
  quiescence (every thread parked: :attr:`Machine.at_quiescence`), as late as the hardware may
  complete them.  So shared memory is read after everything that could run before the arrival ran
  (an operand stage released or overwritten early gives new bytes), a ``tcgen05.ld`` of cells an MMA
  in flight writes reads :data:`tsjit.interpret.tcgen05.POISON` (NaN), and a ``dealloc`` of them is
  an error.
* ``tcgen05.ld`` / ``tcgen05.st`` ``32x32b`` are warp collectives (§9.7.16.8.3-4); ``wait::ld`` /
  ``wait::st`` and the tcgen05 fences order nothing more in this model.
* Every CTA's TMEM must be freed before it exits: :func:`finish_cta`, for the core to call when a
  CTA's last thread finishes.
"""
from __future__ import annotations

from tsjit.errors import InterpretError
from tsjit.interpret import memory as M
from tsjit.interpret import tcgen05
from tsjit.interpret.races import join, retire, snapshot
from tsjit.interpret.registry import blocking, constant_arg, handles, handles_prefix
from tsjit.interpret.sync import join_warp, mbarrier_at

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


@handles(_TC + "alloc.shared.cg1", _TC + "alloc.cg1")
def _alloc(tr, instr, d, args):
    slot, count = args
    where = tr.where(instr)

    def allocate(th, value):
        offset, columns = value
        tmem = tensor_memory(th.cta)
        base = tmem.alloc(columns)
        if base is None:
            raise InterpretError(f"tcgen05.alloc of {columns} columns at {where}: only "
                                 f"{tcgen05.TMEM_COLUMNS - sum(tmem.allocations.values())} TMEM columns are free in "
                                 f"CTA rank {th.cta.rank} and no other CTA can free them; dealloc first or ask "
                                 f"for fewer")
        window = th.cta.window
        window.check(offset, 4, "the tcgen05.alloc address slot", where)
        window.data[offset:offset + 4] = memoryview(base.to_bytes(4, "little"))
        if window.tracker is not None:
            window.tracker.write(th, offset, 4, where, proxy="async")

    return _warp_once("tcgen05.alloc", lambda f: (f[slot] & M.OFFSET_MASK, f[count]), allocate, where)


@handles(_TC + "dealloc.cg1")
def _dealloc(tr, instr, d, args):
    address, count = args
    return _warp_once("tcgen05.dealloc", lambda f: (f[address] & 0xFFFFFFFF, f[count]),
                      lambda th, value: tensor_memory(th.cta).dealloc(*value), tr.where(instr))


@handles(_TC + "relinq.alloc.permit.cg1")
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


@handles(_TC + "mma.shared", _TC + "mma.tensor")
def _mma(tr, instr, d, args):
    d_slot, a_slot, b_slot, idesc_slot, enable_slot = args[:5]
    kind = KIND_NAMES.get(constant_arg(tr, instr, 5))
    group = constant_arg(tr, instr, 6)
    a_in_tmem = instr.callee.name.endswith(".tensor")
    where = tr.where(instr)

    def mma(f):
        th = f[0]
        window = th.cta.window
        tmem = tensor_memory(th.cta)
        idesc, a, b, d_address, accumulate = f[idesc_slot], f[a_slot], f[b_slot], f[d_slot] & 0xFFFFFFFF, \
            bool(f[enable_slot])
        try:
            ranges = tcgen05.operand_ranges(idesc, a, b, kind=kind, a_in_tmem=a_in_tmem, cta_group=group)
            m, n = tcgen05.mma_shape(idesc, kind, group)
        except InterpretError as error:
            raise InterpretError(f"{error}\n  at {where}, {th.describe()}") from None
        records = []
        if window.tracker is not None:
            records = [window.tracker.read(th, start, end - start, where, proxy="async", pending=True)
                       for start, end in ranges]
        lane, column = tcgen05.split_address(d_address)

        def run():
            tcgen05.mma(tmem, window.data, idesc, a, b, d_address, accumulate, kind=kind, a_in_tmem=a_in_tmem,
                        cta_group=group)
        enqueue(th, _Async(run, th, where, records, (lane, lane + m), (column, column + n), [tmem]))
    return mma


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


@handles(_TC + "commit.shared.cg1", _TC + "commit.cg1", _TC + "commit.mc.shared.cg1", _TC + "commit.mc.cg1")
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
            targets = [(3, f[bar])]
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
        return [int(row[0]) if num == 1 else tuple(int(v) for v in row) for row in values]

    inner = _tmem_transfer(tr, instr, "ld", lambda f: f[address] & 0xFFFFFFFF, apply)

    @blocking
    def ld(f):
        f[d] = yield from inner(f)
    return ld


@handles_prefix(_TC + "st.")
def _st(tr, instr, d, args):
    address, value = args[0], args[1]

    def apply(tmem, inputs, shape, num, warp):
        rows = [[v] if num == 1 else list(v) for _, v in inputs]
        tcgen05.st(tmem, inputs[0][0], shape, rows, warp)
        return None

    return _tmem_transfer(tr, instr, "st", lambda f: (f[address] & 0xFFFFFFFF, f[value]), apply)


@handles(_TC + "wait.ld", _TC + "wait.st", _TC + "fence.before.thread.sync", _TC + "fence.after.thread.sync")
def _ordering(tr, instr, d, args):
    return None
