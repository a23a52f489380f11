"""``wgmma.mma_async`` with the hardware's asynchronous semantics: ``fence``, ``commit_group``, ``wait_group``.

``wgmma.mma_async`` is a warpgroup collective (PTX ISA §9.7.15.5): the 128 threads rendezvous, each
giving its accumulator registers (and A fragment when A comes from registers); the matrix
descriptors must agree across the warpgroup.  The MMA is **asynchronous** (PTX ISA §9.7.15.7
``wgmma.commit_group`` / ``wgmma.wait_group``): it reads its shared-memory operands and writes its
accumulators at some point before the ``wgmma.wait_group`` that retires its group returns, and
"accessing the accumulator registers ... without first performing a wgmma.wait_group that waits on
a wgmma-group including that wgmma.mma_async instruction is undefined behavior" (ibid.).  The model:

* **Issue** validates the operands and queues the MMA in its warpgroup's queue, in the group that the
  next ``commit_group`` closes.  Its accumulator outputs are **in-flight registers**: fresh NaN
  objects (one per thread and register), known by identity.  A copy (``extractvalue``, a phi,
  ``fence_operand``) keeps the identity; an instruction that computes with one, or stores it, raises
  an InterpretError naming its line and the MMA's (:func:`reader_checks`; a read between the MMA and
  any ``wait_group`` is already a CompilationError of :mod:`tsjit.lang.wgmma`).  A later MMA that takes them as its accumulator input (the chained accumulation of a
  K loop, which the hardware allows without a wait) reads the earlier MMA's result.
* **Execution** is as late as the hardware could make it: ``wait_group N`` parks the thread while a
  group older than the newest ``N`` is still queued; the queued groups run only when every thread of
  the cluster is parked (:attr:`Machine.at_quiescence`, before any try_wait time-out).  So shared
  memory is read after everything that could run before the wait ran: a stage released to the
  producer before its MMA retired, or overwritten by the warpgroup itself, gives the numbers the GPU
  could give (the new bytes).  The decode and arithmetic are :func:`tsjit.interpret.wgmma.mma`.
* **Retiring**: when a thread's ``wait_group`` returns, the in-flight registers of executed MMAs in
  its frame are replaced by the results (the slots live after the wait that can hold them, by identity:
  :func:`register_slots`).

For the race checker (``TSJIT_INTERPRET_CHECK=race``) the operand reads are asynchronous-proxy
reads recorded at issue and in flight until the MMA executes; a generic write to them before needs
``fence.proxy.async`` and an overwrite while in flight names both lines (the existing report).
"""
from __future__ import annotations

import itertools
from itertools import chain, compress, repeat
from functools import partial
from operator import is_not, itemgetter

import numpy as np
from llvmlite import ir

from tsjit.errors import InterpretError
from tsjit.interpret import wgmma as wgmma_math
from tsjit.interpret.liveness import Liveness
from tsjit.interpret.races import retire
from tsjit.interpret.registry import blocking, constant_arg, handles, handles_asm
from tsjit.interpret.sync import Waitable, join_warpgroup

__all__ = ["WarpgroupQueue", "register_slots", "reader_checks"]

_NOT_NONE = partial(is_not, None)

_NV = "llvm.nvvm."


class _Mma:
    """One queued ``wgmma.mma_async`` of a warpgroup."""

    __slots__ = ("run", "acc", "sources", "result", "records", "group", "issuer", "where", "rows", "index", "flat")

    def __init__(self, run, acc, sources, records, group, issuer, where):
        self.run = run            # run(acc) -> (128, n/2) float32, reads shared memory now
        self.acc = acc            # (128, n/2) float64 input accumulators (NaN where in flight)
        self.sources = sources    # [(flat indices, source _Mma, source flat indices)]
        self.result = None
        self.records = records
        self.group = group
        self.issuer = issuer
        self.where = where
        self.rows = None          # per warpgroup thread: the tuple of its in-flight output registers
        self.index = None         # id of an in-flight register -> its flat index in rows (built when needed)
        self.flat = None          # result as a flat list (built when needed)


class WarpgroupQueue(Waitable):
    """The queued MMAs of one warpgroup of a CTA (oldest first); threads whose ``wait_group`` needs a
    queued group wait on it.  ``required``: the groups below it must execute at the next quiescence."""

    __slots__ = ("cta", "index", "queued", "required", "scheduled")

    def __init__(self, cta, index):
        super().__init__()
        self.cta = cta
        self.index = index
        self.queued = []
        self.required = 0
        self.scheduled = False

    def describe(self) -> str:
        return (f"wgmma.wait_group of warpgroup {self.index}: {len(self.queued)} MMA(s) in flight "
                f"(they execute when every thread is parked)")

    def pending_before(self, group: int) -> bool:
        return bool(self.queued) and self.queued[0].group < group

    def execute(self) -> None:
        """Run the queued MMAs of the groups below :attr:`required`, oldest first, and wake the waiters."""
        self.scheduled = False
        while self.queued and self.queued[0].group < self.required:
            op = self.queued.pop(0)
            acc = op.acc
            for flat, source, source_flat in op.sources:
                if flat is None:
                    acc[:] = source.result
                else:
                    acc.flat[flat] = source.result.flat[source_flat]
            try:
                op.result = op.run(acc)
            except InterpretError as error:
                raise InterpretError(f"{error}\n  at {op.where}, the wgmma.mma_async issued by "
                                     f"{op.issuer.describe()}") from None
            op.acc = op.sources = None
            retire(op.issuer, op.records)
        self.cta.machine.notify(self)


class _ThreadState:
    """A thread's ``commit_group`` count and the queued / executed MMAs whose in-flight registers it holds."""

    __slots__ = ("commits", "held")

    def __init__(self):
        self.commits = 0
        self.held = []


def _thread_state(th) -> _ThreadState:
    if not th.wgmma:
        th.wgmma = _ThreadState()
    return th.wgmma


def _queue(th) -> WarpgroupQueue:
    cta = th.cta
    queues = cta.__dict__.setdefault("wgmma_queues", {})
    index = th.linear // 128
    found = queues.get(index)
    if found is None:
        found = queues[index] = WarpgroupQueue(cta, index)
    return found


def register_slots(translator, instr=None) -> tuple:
    """(Float32 slots, aggregate slots, a getter of the Float32 slots' values): the frame slots of
    ``translator``'s function that can hold an in-flight accumulator register: the results of
    ``wgmma.mma_async`` and whatever copies them unchanged (``extractvalue``, ``insertvalue``, phi, select,
    the empty asm of ``fence_operand``), found by a fixpoint over the function; with ``instr``, only those
    live just after it (:class:`tsjit.interpret.liveness.Liveness`).  Cached on the translator."""
    cache = translator.__dict__.setdefault("register_slots", {})
    key = id(instr) if instr is not None else None
    found = cache.get(key)
    if found is not None:
        return found
    carrying, liveness = _carrying(translator)
    live = liveness.after(instr) if instr is not None else carrying
    slots = translator.slots
    values = [(slots[i], float_type) for i, float_type in carrying.items() if i in slots and i in live]
    scalars = sorted(slot for slot, float_type in values if float_type)
    aggregates = sorted(slot for slot, float_type in values if not float_type)
    fetch = _getter(scalars) if scalars else (lambda f: ())
    found = cache[key] = (tuple(scalars), tuple(aggregates), fetch)
    return found


def _carrying(translator):
    """({id: is Float32} of the values that can hold an in-flight register, their Liveness), cached."""
    found = translator.__dict__.get("wgmma_carrying")
    if found is not None:
        return found
    copies = (ir.ExtractValue, ir.InsertValue, ir.PhiInstr, ir.SelectInstr)
    function = translator.program.function
    instructions = [instr for bb in function.blocks for instr in bb.instructions]

    def asm(instr):
        return instr.callee.asm if isinstance(instr, ir.CallInstr) and isinstance(instr.callee, ir.InlineAsm) else None
    carrying = {id(instr) for instr in instructions if "wgmma.mma_async" in (asm(instr) or "")}
    changed = True
    while changed:
        changed = False
        for instr in instructions:
            if id(instr) in carrying or not (isinstance(instr, copies) or asm(instr) == ""):
                continue
            operands = [v for v, _ in instr.incomings] if isinstance(instr, ir.PhiInstr) else \
                instr.args if isinstance(instr, ir.CallInstr) else instr.operands
            if any(id(v) in carrying for v in operands):
                carrying.add(id(instr))
                changed = True
    kinds = {id(i): isinstance(i.type, ir.FloatType) for i in instructions if id(i) in carrying}
    found = translator.wgmma_carrying = (kinds, Liveness(function, kinds))
    return found


def reader_checks(translator):
    """The instruction wrapper of :attr:`Translator.wrap_instruction` for a function with wgmma: every
    instruction that may compute with an accumulator register (not a copy of it, not a wgmma) first checks
    that the registers it reads are not in flight; None without wgmma (nothing to check)."""
    if not any(isinstance(i, ir.CallInstr) and "wgmma.mma_async" in getattr(i.callee, "asm", "")
               for bb in translator.program.function.blocks for i in bb.instructions):
        return None
    kinds, _ = _carrying(translator)

    def wrap(instr, op):
        if id(instr) in kinds:
            return op                   # a copy of accumulator registers (or the wgmma itself)
        operands = [v for v, _ in instr.incomings] if isinstance(instr, ir.PhiInstr) else \
            instr.args if isinstance(instr, ir.CallInstr) else instr.operands
        slots = tuple(translator.slot(v) for v in operands if id(v) in kinds)
        if not slots:
            return op
        where = translator.where(instr)
        if getattr(op, "blocking", False):
            def checked_blocking(f):
                _check_ready(f, slots, where)
                return (yield from op(f))
            checked_blocking.blocking = True
            return checked_blocking

        def checked(f):
            _check_ready(f, slots, where)
            return op(f)
        return checked
    return wrap


def _check_ready(f, slots, where: str) -> None:
    """Raise when one of ``slots`` holds a register of an MMA of this thread not yet retired (NaN by identity)."""
    for slot in slots:
        value = f[slot]
        if value == value:              # (a number: only the in-flight NaN objects need the lookup)
            continue
        th = f[0]
        for op in (th.wgmma.held if th.wgmma else ()):
            if op.rows is not None and id(value) in _index(op):
                raise InterpretError(
                    f"{where}: {th.describe()} computes with an accumulator register of the wgmma.mma_async at "
                    f"{op.where} before a wgmma.wait_group retired its group (PTX ISA §9.7.15.7 wgmma.wait_group: "
                    f"accessing the accumulators before that wait is undefined; the MMA may still be writing "
                    f"them).\n  Call tsjit.wgmma.commit_group() and tsjit.wgmma.wait_group(N) before this read, "
                    f"N smaller than the groups committed since that MMA (0 retires all), then "
                    f"`acc = tsjit.wgmma.fence_operand(acc)`.")


def _resolve(th, state: _ThreadState, instr) -> None:
    """Replace, in ``th``'s frame, the in-flight registers of executed MMAs by their values (in the slots
    live after ``instr``, the ``wait_group``)."""
    held = state.held
    for op in held:
        if op.result is not None:
            break
    else:
        return
    executed = [op for op in held if op.result is not None]
    state.held = [op for op in held if op.result is None]
    t = th.linear % 128
    f = th.regs
    scalars, aggregates, fetch = register_slots(th.machine.translated.translator, instr)
    ids = list(map(id, fetch(f)))
    for op in executed:
        # the loops run in C (map / compress) over the live slots; a hit is a flat index into the results
        index, values = _index(op), _flat_result(op)
        count = len(op.rows[t])
        hits = list(map(index.get, ids))
        for i, k in zip(compress(scalars, map(is_not, hits, repeat(None))), filter(_NOT_NONE, hits)):
            if k // count == t:     # (another thread's in-flight register stays NaN: reading it is undefined)
                f[i] = values[k]
        row = op.rows[t]
        for i in aggregates:
            v = f[i]
            if type(v) is tuple:
                if v is row:
                    f[i] = tuple(values[t * count:(t + 1) * count])
                elif any(map(index.__contains__, map(id, v))):
                    f[i] = tuple(values[k] if k is not None and k // count == t else x
                                 for x, k in zip(v, map(index.get, map(id, v))))


def _index(op: _Mma) -> dict:
    """id of each in-flight output register of ``op`` -> its flat index (thread * count + register)."""
    if op.index is None:
        op.index = dict(zip(map(id, chain.from_iterable(op.rows)), itertools.count()))
    return op.index


def _flat_result(op: _Mma) -> list:
    """``op``'s executed results as a flat list of floats (thread-major), made once."""
    if op.flat is None:
        op.flat = op.result.ravel().tolist()
    return op.flat


def _getter(slots):
    """``f -> tuple(f[s] for s in slots)``, in C."""
    if len(slots) == 1:
        (slot,) = slots
        return lambda f: (f[slot],)
    return itemgetter(*slots)


def _sources(rows, states, count: int):
    """(acc float64 (128, count), sources) of an MMA's accumulator input: concrete values, and for the
    in-flight registers of queued MMAs (the chained accumulation) where to take them from at execution."""
    acc = np.array(rows, dtype=np.float64)
    in_flight = np.isnan(acc)
    if not in_flight.any():
        return acc, []
    held, seen, previous = [], set(), None      # the MMAs whose outputs the warpgroup holds, newest first
    for state in states:
        if state.held == previous:              # (usually every thread holds the same ones)
            continue
        previous = state.held
        for op in reversed(previous):
            if id(op) not in seen:
                seen.add(id(op))
                held.append(op)
    for source in held:                         # the usual case: one MMA's outputs, as they are
        if all(row == op_row for row, op_row in zip(rows, source.rows)):
            if source.result is not None:
                return source.result.astype(np.float64), []
            return acc, [(None, source, None)]
    by_source = {}
    for flat in np.flatnonzero(in_flight).tolist():
        t, r = divmod(flat, count)
        key = id(rows[t][r])
        for source in held:
            hit = _index(source).get(key)
            if hit is not None:
                if hit // count == t:           # (another thread's in-flight register stays NaN: undefined)
                    entry = by_source.setdefault(id(source), (source, [], []))
                    entry[1].append(flat)
                    entry[2].append(hit)
                break
    sources = []
    for source, flat, source_flat in by_source.values():
        if source.result is not None:
            acc.flat[flat] = source.result.flat[source_flat]
        else:
            sources.append((np.array(flat), source, np.array(source_flat)))
    return acc, sources


@handles_asm(r"wgmma\.mma_async\.sync\.aligned\.m(\d+)n(\d+)k(\d+)\.(\w+)\.(\w+)\.(\w+) \{[^}]*\}, (\{[^}]*\}|\$\d+), "
             r"\$\d+, p, ([-\d, ]+);")
def _wgmma(tr, instr, d, args, match):
    m, n, k = (int(match.group(i)) for i in (1, 2, 3))
    d_type, a_type, b_type = match.group(4), match.group(5), match.group(6)
    registers_a = match.group(7).startswith("{")
    immediates = [int(x) for x in match.group(8).replace(" ", "").split(",") if x]
    scale_a, scale_b = immediates[0], immediates[1]
    if registers_a:
        trans_a, trans_b = 0, (immediates[2] if len(immediates) > 2 else 0)
    else:
        trans_a, trans_b = (immediates[2], immediates[3]) if len(immediates) > 3 else (0, 0)
    count = n // 2
    a_count = 4 if registers_a else 1
    a_slots = args[:a_count]
    b_slot = args[a_count]
    scale_slot = args[a_count + 1]
    acc_slots = args[a_count + 2:a_count + 2 + count]
    if len(acc_slots) != count:
        raise InterpretError(f"wgmma at {tr.where(instr)}: expected {count} accumulator registers, got "
                             f"{len(acc_slots)}")
    where = tr.where(instr)
    kind = f"wgmma.mma_async.m{m}n{n}k{k}"

    def compute(rv):
        threads = sorted(rv.inputs, key=lambda t: t.linear)
        first = threads[0]
        values = [rv.inputs[t] for t in threads]
        b_desc = values[0][1]
        scale_d = bool(values[0][2])
        a_desc = None if registers_a else values[0][0][0]
        for t, v in zip(threads, values):
            if v[1] != b_desc or (not registers_a and v[0][0] != a_desc) or bool(v[2]) != scale_d:
                raise InterpretError(f"{kind} at {where}: {t.describe()} gives different descriptors or scale-d than "
                                     f"thread {first.linear}; every thread of the warpgroup must give the same")
        a_regs = np.array([v[0] for v in values], dtype=np.uint32) if registers_a else None
        window = first.cta.window
        ranges = wgmma_math.operand_ranges(m, n, k, a_type, b_type, a_desc, b_desc, trans_a, trans_b)
        for start, end in ranges:   # operands outside shared memory: an error at issue
            window.check(start, end - start, f"{kind} operand", where)
        records = []
        if window.tracker is not None:
            records = [window.tracker.read(first, start, end - start, where, proxy="async", pending=True)
                       for start, end in ranges]
        states = [_thread_state(t) for t in threads]
        rows = [v[3] for v in values]
        if scale_d:
            acc, sources = _sources(rows, states, count)
        else:
            acc, sources = np.zeros((len(threads), count)), []
        smem = window.data

        def run(acc_in):
            return wgmma_math.mma(m, n, k, a_type, b_type, d_type, a_desc, a_regs, b_desc, smem,
                                  acc_in.astype(np.float32), scale_d, scale_a, scale_b, trans_a, trans_b)

        queue = _queue(first)
        op = _Mma(run, acc, sources, records, _thread_state(first).commits, first, where)
        op.rows = list(map(tuple, np.full((len(threads), count), np.nan).tolist()))   # fresh NaN objects
        queue.queued.append(op)
        for state in states:
            state.held.append(op)
        return dict(zip(threads, op.rows))


    get_a, get_acc = (_getter(slots) for slots in (a_slots, acc_slots))

    @blocking
    def wgmma(f):
        th = f[0]
        value = (get_a(f), f[b_slot], f[scale_slot], get_acc(f))
        rv = join_warpgroup(th, kind, value, compute, where)
        while rv.results is None:
            yield rv
        f[d] = rv.results[th]
    return wgmma


@handles(_NV + "wgmma.fence.sync.aligned")
def _wgmma_fence(tr, instr, d, args):
    return None


@handles(_NV + "wgmma.commit_group.sync.aligned")
def _wgmma_commit(tr, instr, d, args):
    def commit(f):
        _thread_state(f[0]).commits += 1
    return commit


@handles(_NV + "wgmma.wait_group.sync.aligned")
def _wgmma_wait(tr, instr, d, args):
    keep = constant_arg(tr, instr, 0)

    @blocking
    def wait(f):
        th = f[0]
        state = _thread_state(th)
        if not state.held:
            return
        queue = _queue(th)
        target = state.commits - keep
        while queue.pending_before(target):
            if target > queue.required:
                queue.required = target
            if not queue.scheduled:
                queue.scheduled = True
                th.machine.at_quiescence.append(queue.execute)
            yield queue
        _resolve(th, state, instr)
    return wait
