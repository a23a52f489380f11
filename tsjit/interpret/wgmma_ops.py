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
  objects (one per thread and register), known by identity.  Any computation on them gives NaN
  (the poison of an early read); a copy (``extractvalue``, a phi, ``fence_operand``) keeps the
  identity.  A later MMA that takes them as its accumulator input (the chained accumulation of a
  K loop, which the hardware allows without a wait) reads the earlier MMA's result.
* **Execution** is as late as the hardware could make it: ``wait_group N`` parks the thread while a
  group older than the newest ``N`` is still queued; the queued groups run only when every thread of
  the cluster is parked (:attr:`Machine.at_quiescence`, before any try_wait time-out).  So shared
  memory is read after everything that could run before the wait ran: a stage released to the
  producer before its MMA retired, or overwritten by the warpgroup itself, gives the numbers the GPU
  could give (the new bytes).  The decode and arithmetic are :func:`tsjit.interpret.wgmma.mma`.
* **Retiring**: when a thread's ``wait_group`` returns, the in-flight registers of executed MMAs in
  its frame are replaced by the results (the slots that can hold them, by identity: :func:`register_slots`).

For the race checker (``TSJIT_INTERPRET_CHECK=race``) the operand reads are asynchronous-proxy
reads recorded at issue and in flight until the MMA executes; a generic write to them before needs
``fence.proxy.async`` and an overwrite while in flight names both lines (the existing report).
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir

from tsjit.errors import InterpretError
from tsjit.interpret import wgmma as wgmma_math
from tsjit.interpret.races import retire
from tsjit.interpret.registry import blocking, constant_arg, handles, handles_asm
from tsjit.interpret.sync import Waitable, join_warpgroup

__all__ = ["WarpgroupQueue", "register_slots"]

_NV = "llvm.nvvm."


class _Mma:
    """One queued ``wgmma.mma_async`` of a warpgroup."""

    __slots__ = ("run", "acc", "sources", "result", "records", "group", "issuer", "where", "rows")

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


def register_slots(translator) -> tuple:
    """(Float32 slots, aggregate slots): the frame slots of ``translator``'s function that can hold an
    in-flight accumulator register (cached): the results of ``wgmma.mma_async`` and whatever copies them unchanged (``extractvalue``,
    ``insertvalue``, phi, select, the empty asm of ``fence_operand``), found by a fixpoint over the function."""
    found = translator.__dict__.get("register_slots")
    if found is not None:
        return found
    copies = (ir.ExtractValue, ir.InsertValue, ir.PhiInstr, ir.SelectInstr)
    instructions = [instr for bb in translator.program.function.blocks for instr in bb.instructions]

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
    scalars = sorted(translator.slots[id(i)] for i in instructions
                     if id(i) in carrying and id(i) in translator.slots and isinstance(i.type, ir.FloatType))
    aggregates = sorted(translator.slots[id(i)] for i in instructions
                        if id(i) in carrying and id(i) in translator.slots and not isinstance(i.type, ir.FloatType))
    found = translator.register_slots = (tuple(scalars), tuple(aggregates))
    return found


def _resolve(th, state: _ThreadState) -> None:
    """Replace, in ``th``'s frame, the in-flight registers of executed MMAs by their values."""
    executed = [op for op in state.held if op.result is not None]
    if not executed:
        return
    state.held = [op for op in state.held if op.result is None]
    t = th.linear % 128
    values = {}
    structs = {}
    for op in executed:
        row = op.rows[t]
        done = op.result[t].tolist()
        structs[id(row)] = tuple(done)
        values.update(zip(map(id, row), done))
    f = th.regs
    get = values.get
    keys = values.keys()
    scalars, aggregates = register_slots(th.machine.translated.translator)
    for i, w in [(i, get(id(f[i]))) for i in scalars]:
        if w is not None:
            f[i] = w
    for i in aggregates:
        v = f[i]
        if type(v) is tuple:
            whole = structs.get(id(v))
            if whole is not None:
                f[i] = whole
            elif not keys.isdisjoint(map(id, v)):
                f[i] = tuple(get(id(x), x) for x in v)


def _sources(rows, states, count: int):
    """(acc float64 (128, count), sources) of an MMA's accumulator input: concrete values, and for the
    in-flight registers of queued MMAs (the chained accumulation) where to take them from at execution."""
    acc = np.array(rows, dtype=np.float64)
    if not np.isnan(acc).any():
        return acc, []
    last = [state.held[-1] if state.held else None for state in states]
    if last[0] is not None and all(op is last[0] for op in last) and \
            all(row == op_row for row, op_row in zip(rows, last[0].rows)):
        source = last[0]                        # the usual case: the previous MMA's outputs, as they are
        if source.result is not None:
            return source.result.astype(np.float64), []
        return acc, [(None, source, None)]
    by_source = {}
    for t, (row, state) in enumerate(zip(rows, states)):
        if not any(x != x for x in row):
            continue
        known = {}
        for op in state.held:
            for r, x in enumerate(op.rows[t]):
                known[id(x)] = (op, t * count + r)
        for r, x in enumerate(row):
            hit = known.get(id(x)) if x != x else None
            if hit is not None:
                entry = by_source.setdefault(id(hit[0]), (hit[0], [], []))
                entry[1].append(t * count + r)
                entry[2].append(hit[1])
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
        op.rows = [tuple(row) for row in np.full((len(threads), count), np.nan).tolist()]
        queue.queued.append(op)
        for state in states:
            state.held.append(op)
        return dict(zip(threads, op.rows))


    @blocking
    def wgmma(f):
        th = f[0]
        value = (tuple(f[s] for s in a_slots), f[b_slot], f[scale_slot], tuple(f[s] for s in acc_slots))
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
        _resolve(th, state)
    return wait
