"""Mutation testing of the checks on the tutorial programs of :mod:`verify_schedules`.

A mutant deletes one synchronisation step (a pipeline operation, a try probe, a work queue
epilogue step) or moves it to another position of the same entry list (a move by one is
a swap with its neighbour).  Every mutant is
handed to a full :class:`~tsjit.ts.TaskManager` (structural checks, then the exhaustive
checker): *rejected* means a ``VerificationError``.  An accepted mutant must be harmless
on the GPU; :data:`HARMLESS` lists the kinds of mutation that are, with the reason.
"""
from __future__ import annotations

import copy
import time
import warnings
from dataclasses import dataclass

from tsjit.errors import ScheduleError, VerificationError
from tsjit.ts import TaskManager
from tsjit.ts.verify.exhaustive import check_all_interleavings
from verify_schedules import TUTORIALS

__all__ = ["SYNC_OPS", "HARMLESS", "Mutant", "mutants", "run_mutants", "mutation_table"]

SYNC_OPS = {"acquire", "try_acquire", "commit", "wait", "try_wait", "release",
            "get_and_advance_work_tile", "wait_griddep", "launch_griddep"}

#: accepted mutants that cannot hang or race on the GPU: (predicate, reason).
HARMLESS = [
    (lambda m: m.kind == "delete" and m.op in ("try_acquire", "try_wait"),
     "a try_acquire / try_wait only lets the blocking acquire / wait skip its poll; without "
     "it the blocking operation waits by itself"),
    (lambda m: m.kind in ("swap", "move") and m.op == "commit" and m.tma and m.other_is_work,
     "a TMA producer's commit arrives on nothing (the copies' complete_tx fills the stage) "
     "and the work uses the stage index its acquire recorded, so moving the commit across a "
     "TMA load changes no barrier traffic"),
    (lambda m: m.op in ("try_acquire", "try_wait") and m.kind == "move"
     and m.position == m.length - 1,
     "a probe moved to the end of the loop body runs after the commit / release advanced the "
     "cursor, so it tests exactly the barrier and parity the next iteration's acquire / wait "
     "blocks on (nothing else can complete that phase first); the last iteration's probe "
     "dangles, which B2 reports, but costs only a poll"),
    (lambda m: m.static_queue and (m.op in ("wait", "release") or m.kind != "delete"),
     "a static persistent WorkQueue has no pipeline: its wait / release emit no code, so "
     "deleting them or moving get_and_advance_work_tile across them changes nothing (Q1 "
     "still insists on the canonical epilogue)"),
]


@dataclass
class Mutant:
    program: str
    label: str
    kind: str             # "delete", "swap" (with a neighbour) or "move" (further)
    op: str
    tma: bool
    other_is_work: bool
    specs: list
    static_queue: bool = False
    position: int = -1            # where a moved step ends up
    length: int = 0               # entries in its list
    verdict: str = ""
    check: str = ""
    exhaustive: str = ""          # the exhaustive checker alone: SAFE / UNSAFE / INCOMPLETE
    milliseconds: float = 0.0

    @property
    def harmless_reason(self) -> str | None:
        return next((reason for pred, reason in HARMLESS if pred(self)), None)


def _kind(program, resource_attr: str) -> tuple[bool, bool]:
    """(TMA-produced ring, static work queue) for the resource of an entry."""
    resource = program.make_resources().get(resource_attr)
    config = getattr(resource, "pipeline_config", None)
    tma = getattr(getattr(config, "pipeline_type", None), "value", "") == "TmaAsync"
    return tma, bool(getattr(resource, "is_work_queue", False)) and config is None


def mutants(name: str, program) -> list:
    """Every delete / swap mutant of ``program`` (duplicates removed)."""
    out, seen = [], set()
    for t, spec in enumerate(program.specs):
        for section, entries in spec.entries.items():
            for k, entry in enumerate(entries):
                if entry[1] not in SYNC_OPS:
                    continue
                tma, static_queue = _kind(program, entry[0])
                variants = [("delete", f"delete {entry[0]}.{entry[1]}",
                             entries[:k] + entries[k + 1:], False, -1)]
                for j in range(len(entries)):
                    if j == k:
                        continue
                    moved = entries[:k] + entries[k + 1:]
                    moved.insert(j, entry)
                    passed = entries[min(j, k):max(j, k) + 1]
                    passed = [e for e in passed if e is not entry]
                    kind = "swap" if abs(j - k) == 1 else "move"
                    what = (f"swap {entry[0]}.{entry[1]} <-> {passed[0][0]}.{passed[0][1]}"
                            if kind == "swap" else
                            f"move {entry[0]}.{entry[1]} to position {j}")
                    variants.append((kind, what, moved,
                                     all(e[1] not in SYNC_OPS for e in passed), j))
                for kind, label, mutated, other_is_work, position in variants:
                    key = (t, section, tuple(mutated))
                    if key in seen:
                        continue
                    seen.add(key)
                    specs = [copy.copy(s) for s in program.specs]
                    specs[t].entries = dict(spec.entries)
                    specs[t].entries[section] = mutated
                    out.append(Mutant(name, f"{spec.name}.{section}[{k}] {label}", kind,
                                      entry[1], tma, other_is_work, specs, static_queue,
                                      position, len(entries)))
    return out


def run_mutants(name: str, program) -> list:
    """Run every mutant through a TaskManager; fills verdict / check / milliseconds."""
    found = mutants(name, program)
    for mutant in found:
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                tasks, graph, options = program.build(mutant.specs)
                TaskManager(tasks, graph, verbose=False, **options)
                mutant.verdict = "accepted"
            except (VerificationError, ScheduleError) as err:
                mutant.verdict = "rejected"
                mutant.check = getattr(err, "check", None) or getattr(err, "rule", "") or "S"
            if mutant.verdict:
                tasks, graph, options = program.build(mutant.specs)
                mutant.exhaustive = check_all_interleavings(
                    tasks, graph, smem_allocator=options.get("smem_allocator")).verdict
        mutant.milliseconds = (time.perf_counter() - start) * 1000
    return found


def mutation_table() -> tuple[list, list]:
    """``(rows, mutants)``: per program ``(name, mutants, rejected, rejected by the
    exhaustive checker alone, accepted and harmless, ms)``, and every mutant."""
    rows, everything = [], []
    for name, make in TUTORIALS.items():
        start = time.perf_counter()
        results = run_mutants(name, make())
        everything += results
        rows.append((name, len(results),
                     sum(1 for m in results if m.verdict == "rejected"),
                     sum(1 for m in results if m.exhaustive == "UNSAFE"),
                     sum(1 for m in results if m.verdict == "accepted" and m.harmless_reason),
                     (time.perf_counter() - start) * 1000))
    return rows, everything
