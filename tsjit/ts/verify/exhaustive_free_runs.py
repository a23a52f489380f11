"""Free runs: how far the processes outside a candidate persistent set of the exhaustive search
(:mod:`tsjit.ts.verify.exhaustive_search`) can get without any help from the set.

The free run of an outside process is its ops up to the first wait that cannot pass on the
arrivals the other outside processes (and copies in flight) could still deliver, counted per
barrier, with the TMA bytes they could still land against the bytes armed.  It is an upper bound
of every run of the outside alone (computed to a fixpoint: a pass is taken only on arrivals
already counted), so a transition of the set independent of every footprint in it commutes with
any sequence of outside moves.

A wait passes once its barrier's parity differs from the awaited one (``mbarrier.try_wait.parity``),
i.e. after ``k`` further phase completions with ``k`` of the right parity.  Phases only accumulate,
so ``k`` is at least what the process's previous wait on that barrier needed, and the outside
completes at most ``1 + (arrivals - pending) // count`` phases of a barrier (a phase completes once
its pending arrivals reach zero, the first one also needing its armed bytes landed): a free run
passes a ring's next wait only when the outside can complete that many phases, not on any
completion at all.
"""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Bounds", "free_runs", "stable_guard", "stable_arrivals"]


@dataclass
class Bounds:
    """What the processes and copies outside a candidate set may deliver, per barrier id, over every run of
    theirs: ``arrivals`` -- count arrivals at most; ``landing`` -- transaction bytes landed at most (TMA
    copies, ``complete_tx``); ``armed`` -- transaction bytes armed (``expect_tx``) by the counted arrivals
    that carry a count (each one also delivers arrivals, so once all ``arrivals`` are in, so are these)."""

    arrivals: dict
    landing: dict
    armed: dict


def free_runs(m, state, outside_procs, outside_copies) -> tuple[dict, dict, "Bounds"]:
    """How far each process outside a candidate persistent set gets without the set's help
    (see the module docstring), from ``state`` of model ``m``
    (:class:`~tsjit.ts.verify.exhaustive_footprints.Model`).  Returns ``(footprints, own, bounds)``:
    ``{("p", process) or ("c", copy): packed footprint of its free run}``, ``{("p", process): the same less
    the accesses of the copies it issues}`` (what the process's own copies meet) and the :class:`Bounds` of
    what the outside may deliver per barrier."""
    P = m.P
    bar0 = 2 * P
    avail_n: dict = {}
    landing: dict = {}       # barrier -> transaction bytes the outside's copies may still land
    arming: set = set()      # barriers the outside may still arm (expect_tx)
    armed: dict = {}         # barrier -> bytes armed by the outside's counted arrivals
    fps: dict = {}
    for cid in outside_copies:
        copy = m.copies[cid]
        landing[copy.barrier] = landing.get(copy.barrier, 0) + copy.nbytes
        avail_n[copy.barrier] = avail_n.get(copy.barrier, 0) + copy.arrivals
        fps[("c", cid)] = m.copy_fps[cid]
    pos = {i: state[i] for i in outside_procs}
    probes = {i: state[P + i] for i in outside_procs}
    run = {i: 0 for i in outside_procs}
    run_own = {i: 0 for i in outside_procs}
    passed: dict = {}        # (process, barrier) -> phases of the barrier its last passed wait needed

    def phases(b: int) -> int:
        """How many phases of ``b`` the outside may complete from ``state`` (an upper bound)."""
        base = bar0 + 3 * b
        pending, avail = state[base + 1], avail_n.get(b, 0)
        if avail < pending:
            return 0
        tx = state[base + 2]          # armed bytes not landed yet (negative: landed before armed)
        if not (tx == 0 or b in arming or 0 < tx <= landing.get(b, 0)):
            return 0
        return 1 + (avail - pending) // max(m.counts[b], 1)

    def may_pass(i: int, b: int, parity: int, wait: bool) -> bool:
        # the wait passes once the parity differs, i.e. after k phases of b with k of the right
        # parity; phases only accumulate, so k is at least what the process's previous wait on b
        # needed (a free run cannot pass two waits of one phase pair on a single completion)
        k = passed.get((i, b), 0)
        if state[bar0 + 3 * b] ^ (k & 1) == parity:
            k += 1
        if k and k > phases(b):
            return False
        if wait:
            passed[(i, b)] = k
        return True

    progress = True
    while progress:
        progress = False
        for i in outside_procs:
            ops = m.ops[i]
            j = pos[i]
            while j < len(ops):
                op = ops[j]
                g = op.guard
                if g >= 0:
                    probed = op.probe_key >= 0 and probes[i] >> op.probe_key & 1
                    if not probed and not may_pass(i, g, op.parity, True):
                        break
                    if op.probe_key >= 0:
                        probes[i] &= ~(1 << op.probe_key)
                if op.probe_barrier >= 0 and may_pass(i, op.probe_barrier, op.parity, False):
                    probes[i] |= 1 << op.probe_key     # the probe may succeed
                for b, n, tx in op.arrivals:
                    avail_n[b] = avail_n.get(b, 0) + n
                    if tx > 0:
                        arming.add(b)
                        if n:
                            armed[b] = armed.get(b, 0) + tx
                    elif tx < 0:
                        landing[b] = landing.get(b, 0) - tx
                for copy in op.spawns:
                    landing[copy.barrier] = landing.get(copy.barrier, 0) + copy.nbytes
                    avail_n[copy.barrier] = avail_n.get(copy.barrier, 0) + copy.arrivals
                run[i] |= m.fp_run[i][j]
                run_own[i] |= m.fp_own[i][j]
                j += 1
                progress = True
            pos[i] = j
    for i in outside_procs:
        fps[("p", i)] = run[i]
    return fps, {("p", i): run_own[i] for i in outside_procs}, Bounds(avail_n, landing, armed)


def stable_guard(m, state, i: int, bounds: Bounds) -> int:
    """The guard bit of process ``i``'s next op (model ``m``) when that wait passes and no run of the
    outside (``bounds``) can complete the guarded barrier's phase: its parity then stays, so the wait
    commutes with every arrival the outside makes there (a phase completes only once its pending arrivals
    reach zero); else 0."""
    op = m.ops[i][state[i]]
    g = op.guard
    if g < 0 or not m.enabled(state, i):
        return 0
    return 1 << g if bounds.arrivals.get(g, 0) < state[2 * m.P + 3 * g + 1] else 0


def stable_arrivals(m, state, i: int, bounds: Bounds) -> int:
    """The arrival-kind bits to drop from the query of process ``i``'s next op (enabled, model ``m``): on
    each barrier ``b`` it arrives on (``n >= 1`` arrivals, ``tx >= 0`` bytes armed), its arrivals commute
    with every arrival and byte landing the outside (``bounds``) can still make on ``b`` when, with ``p``
    the pending arrivals and ``x`` the armed bytes not landed yet,

    * ``n + N <= p`` (``N``: the outside's count arrivals): no arrival ever exceeds what its phase still
      waits for, and pending reaches zero at most once, at the last count arrival -- so only that one can
      complete the phase, and two count arrivals in either order end in the same state;
    * and ``n + N < p`` (pending never reaches zero: no phase completes, no landing overshoots, every
      change adds up), or ``x + tx + A >= L`` (``A``: the bytes the outside's count arrivals arm, ``L``:
      the bytes it may land): when this op's arrival is the last, every outside arrival came before it, so
      the armed bytes not landed are at least what any one outside landing still brings, and neither the
      arrival nor a landing next to it completes the phase or overshoots, in either order.

    The op's waits and the outside's waits on ``b`` stay dependent (the wait bits are kept)."""
    op = m.ops[i][state[i]]
    per_barrier: dict = {}
    for b, n, tx in op.arrivals:
        total = per_barrier.setdefault(b, [0, 0, []])
        total[0] += n
        total[1] += tx
        total[2].append((n, tx))
    out = 0
    for b, (n, tx, kinds) in per_barrier.items():
        base = 2 * m.P + 3 * b
        pending, armed = state[base + 1], state[base + 2]
        outside = bounds.arrivals.get(b, 0)
        if n < 1 or tx < 0 or any(k[1] < 0 for k in kinds) or n + outside > pending:
            continue
        if n + outside == pending and armed + tx + bounds.armed.get(b, 0) < bounds.landing.get(b, 0):
            continue
        for kind in kinds:
            out |= m.kind_others.get((b, kind), 0)
    return out
