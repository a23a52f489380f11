"""The deadlock report: every blocked thread group, what it waits for, where.

Threads are grouped by (CTA, what they wait on, the waiting line, task, step); consecutive warps with
the same wait are one group.  For each group the report names the CTA, the warps (and lanes when
not whole warps), the TS task (from the lowering's ``// <task> warp: [a, b)`` comments), the step
(``// <resource>_<operation>``), the loop iteration (how many times the thread reached that step
before), the barrier (a TS pipeline barrier is named ``resource.full[stage]`` /
``resource.empty[stage]`` from the lowering's storages; a pipeline-group member's ``group.member.empty[s]``,
the barriers its members share ``group.full[s]``), the phase parity waited for, the barrier's state, and
the source line of the wait.  Tasks of the blocked CTAs that already exited are listed with the
iterations they ran: a producer and a consumer whose domain loops differ in trip count deadlock there.
"""
from __future__ import annotations

import re

from tsjit.errors import InterpretError

__all__ = ["deadlock_error"]

_BARRIER_NAME = re.compile(r"mbarrier ([\w.]+)\.(full|empty)\[(\d+)\]")
_OPERATIONS = ("_try_acquire", "_try_wait", "_acquire", "_commit", "_wait", "_release")


def _resource(barrier_owner: str, step: str) -> str:
    """The resource as the user writes it: the barrier's owner, or for a barrier a pipeline group's members
    share (``fork``) the member whose operation waits (``fork.ring``, from the step ``ring_wait``)."""
    if "." in barrier_owner or not step:
        return barrier_owner
    member = next((step[:-len(op)] for op in _OPERATIONS if step.endswith(op)), None)
    if member is None or member == barrier_owner:
        return barrier_owner
    return f"{barrier_owner}.{member}"


def _exited_tasks(threads) -> list[tuple[str, int]]:
    """(line, iterations) per task of the blocked threads' CTAs whose threads all exited: the iterations it ran."""
    ctas = {id(th.cta): th.cta for th in threads}
    lines = []
    for cta in ctas.values():
        tasks: dict = {}
        for th in getattr(cta, "threads", ()):
            if th.task:
                tasks.setdefault(th.task, []).append(th)
        for task, members in tasks.items():
            if any(t.alive for t in members) or not any(t.steps_seen for t in members):
                continue
            seen = max((t.steps_seen for t in members), key=lambda d: max(d.values(), default=0))
            step, runs = max(seen.items(), key=lambda kv: kv[1])
            lines.append((f"  - CTA {cta.ctaid}: task '{task}' exited after {runs} iteration(s) (step {step} ran "
                          f"{runs}x)", runs))
    return lines


def _group_key(th):
    w = th.waiting
    return (th.cta.rank, th.cta.ctaid, id(w), th.wait_line, th.task, th.step, th.wait_phase)


def _lanes_text(threads) -> str:
    warps = sorted({t.linear // 32 for t in threads})
    whole = all(sum(1 for t in threads if t.linear // 32 == w) == len(threads[0].warp.threads) for w in warps)
    warp_text = f"warp {warps[0]}" if len(warps) == 1 else f"warps {warps[0]}-{warps[-1]}" \
        if warps == list(range(warps[0], warps[-1] + 1)) else "warps " + ", ".join(map(str, warps))
    if whole:
        return warp_text
    ids = sorted(t.linear for t in threads)
    return f"{warp_text} (threads {ids[0]}-{ids[-1]}, {len(ids)} threads)" if len(ids) > 1 else \
        f"{warp_text} (thread {ids[0]})"


def deadlock_error(machine, threads) -> InterpretError:
    """The :class:`InterpretError` for a cluster in which every live thread in ``threads`` is blocked."""
    groups: dict = {}
    for th in threads:
        groups.setdefault(_group_key(th), []).append(th)
    lines = [f"deadlock: all {len(threads)} live threads of kernel {machine.program.lowered.name!r} are blocked "
             f"(cluster {machine.clusters_done} of the grid; no thread can make progress). Blocked groups:"]
    for key, members in groups.items():
        th = members[0]
        w = th.waiting
        parts = [f"CTA {th.cta.ctaid}" + (f" (rank {th.cta.rank})" if len(th.cta.cluster.ctas) > 1 else ""),
                 _lanes_text(members)]
        if th.task:
            parts.append(f"task '{th.task}'")
        what = w.describe() if w is not None else "nothing"
        match = _BARRIER_NAME.search(what)
        if match:
            parts.append(f"resource '{_resource(match.group(1), th.step)}'")
            parts.append(f"stage {match.group(3)}")
        if th.step:
            iteration = th.steps_seen.get(th.step, 1) - 1
            parts.append(f"step {th.step}")
            parts.append(f"loop iteration {iteration}")
        if th.wait_phase is not None and "mbarrier" in what:
            parts.append(f"waits for the phase of parity {th.wait_phase & 1}")
        lines.append("  - " + ", ".join(parts))
        lines.append(f"      waiting on {what}")
        if th.wait_line:
            lines.append(f"      at {th.wait_line}")
    exited = _exited_tasks(threads)
    if exited:
        lines.append("  Tasks that already exited:")
        lines += [line for line, _ in exited]
        # a trip-count mismatch only when a task left its loop no later than the iteration a blocked one waits in
        waits_in = max((th.steps_seen.get(th.step, 1) - 1 for th in threads if th.step), default=-1)
        if any(runs <= waits_in for _, runs in exited):
            lines.append("  A task left its domain loop after fewer iterations than a blocked one waits for: compare "
                         "the producer's and the consumers' domain_loop(start, end, step) (their trip counts must "
                         "match).")
    lines.append("  Check that every wait has a matching arrive/commit (counts and transaction bytes), that the block "
                 "has every warp the program's tasks use, and that producers and consumers walk the stages in the "
                 "same order.")
    return InterpretError("\n".join(lines))
