"""Folding a probe (``try_acquire`` / ``try_wait``) into the blocking wait it guards.

The exhaustive model compiles a probe into an op of its own that tests a barrier phase and sets
a flag the following wait reads (:mod:`tsjit.ts.verify.exhaustive_model`).  Exploring both
outcomes of every probe multiplies the states (an 8-task, 8-stage chain with probes went from
533 states to the 100 000 cap); :func:`fold_probes` removes the probes whose outcome cannot
matter, so the chain proves in the states of its probe-free twin.
"""
from __future__ import annotations

__all__ = ["fold_probes"]


def fold_probes(proc) -> None:
    """Fold each try_acquire / try_wait into the blocking operation it guards.

    A probe only decides whether that blocking wait runs; nothing else reads its result (a
    schedule has no control flow on it).  Probing is invisible to every other process, and when
    it succeeds the phase it saw stays complete until this process itself touches the ring
    again, so a skipped wait and an executed one pass at the same states.  The probe op can
    therefore be dropped -- exploring its outcomes only multiplies the states -- as long as the
    process makes no other operation on the same ring before the blocking one (then the barrier
    could move on, and the skipped wait would matter: the probe is kept).  The accesses and
    copies that begin at the probe begin at the op before it instead (the probe never blocks).
    """
    ops = proc.ops
    out: list = []
    for index, op in enumerate(ops):
        if op.probe_barrier >= 0:
            blocking = next((j for j in range(index + 1, len(ops))
                             if ops[j].resource is op.resource), None)
            target = ops[blocking] if blocking is not None else None
            if target is not None and target.guard == op.probe_barrier \
                    and target.probe_key == op.probe_key and target.parity == op.parity:
                target.probe_key = -1
                if out:
                    out[-1].segment += op.segment
                    out[-1].spawns += op.spawns
                else:
                    proc.initial_segment += op.segment
                    proc.initial_spawns += op.spawns
                continue
        out.append(op)
    proc.ops[:] = out
