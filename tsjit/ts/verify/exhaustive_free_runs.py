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

__all__ = ["free_runs"]


def free_runs(m, state, outside_procs, outside_copies) -> tuple[dict, dict]:
    """How far each process outside a candidate persistent set gets without the set's help
    (see the module docstring), from ``state`` of model ``m``
    (:class:`~tsjit.ts.verify.exhaustive_search.Model`).  Returns ``(footprints, arrivals)``:
    ``{("p", process) or ("c", copy): packed footprint of its free run}`` and
    ``{barrier: count arrivals the outside may deliver there}``, an upper bound."""
    P = m.P
    bar0 = 2 * P
    avail_n: dict = {}
    landing: dict = {}       # barrier -> transaction bytes the outside's copies may still land
    arming: set = set()      # barriers the outside may still arm (expect_tx)
    fps: dict = {}
    for cid in outside_copies:
        copy = m.copies[cid]
        landing[copy.barrier] = landing.get(copy.barrier, 0) + copy.nbytes
        avail_n[copy.barrier] = avail_n.get(copy.barrier, 0) + copy.arrivals
        fps[("c", cid)] = m.copy_fps[cid]
    pos = {i: state[i] for i in outside_procs}
    probes = {i: state[P + i] for i in outside_procs}
    run = {i: 0 for i in outside_procs}
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
                    elif tx < 0:
                        landing[b] = landing.get(b, 0) - tx
                for copy in op.spawns:
                    landing[copy.barrier] = landing.get(copy.barrier, 0) + copy.nbytes
                    avail_n[copy.barrier] = avail_n.get(copy.barrier, 0) + copy.arrivals
                run[i] |= m.fp_run[i][j]
                j += 1
                progress = True
            pos[i] = j
    for i in outside_procs:
        fps[("p", i)] = run[i]
    return fps, avail_n
