"""The exhaustive interleaving checker (check X).

The structural checks look at each schedule and each pipeline on its own; this one runs
the whole program.  Every task is expanded and compiled into the exact sequence of
mbarrier operations the lowering emits (:mod:`~tsjit.ts.verify.exhaustive_expand`,
:mod:`~tsjit.ts.verify.exhaustive_model`), then every interleaving of those sequences is
explored breadth first (:mod:`~tsjit.ts.verify.exhaustive_search`), looking for

* deadlocks -- some task can never pass a wait (a missing commit or release, a count
  mismatch, producer and consumer of one ring in one task, ...);
* races -- two tasks access the same ring stage, or shared-memory bytes that alias, and
  no barrier orders the accesses (work outside its bracket, a release before the read,
  a wait the ring passes spuriously two phases late, an alias group used concurrently);
* arrival and TMA byte count mismatches -- a phase that completes while threads (bytes)
  of one operation are still arriving;
* PDL launches that can fire before any ``wait_griddep``;
* persistent tasks that never advance their work tile.

API::

    result = check_all_interleavings(tasks, graph, smem_allocator=alloc, max_states=100_000)
    result.verdict          # "SAFE", "UNSAFE" or "INCOMPLETE" (state cap reached)
    result.reports          # Report(kind, message, tasks, resources, path) per finding
    print(result.format())  # the printout TaskManager shows with verbose=True

``TaskManager(..., exhaustive_deadlock_race_check=True, max_states=...)`` runs it as the
last check (:func:`check_interleavings`); each report becomes an error of check ``X``, and
hitting ``max_states`` warns that the proof is incomplete.  The state count grows with
the number of tasks and the ring depth times the iterations in flight; partial-order
reduction (see :mod:`~tsjit.ts.verify.exhaustive_search`) keeps pipelines of a producer
and several consumers near linear in the trip count.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

from tsjit.ts.options import DEFAULTS
from tsjit.ts.verify.exhaustive_expand import program_variants, trip_counts
from tsjit.ts.verify.exhaustive_model import compile_program
from tsjit.ts.verify.exhaustive_regions import RegionTable
from tsjit.ts.verify.exhaustive_report import Report, build_reports
from tsjit.ts.verify.exhaustive_search import search
from tsjit.ts.verify.findings import Finding, error, warning
from tsjit.ts.verbose import report

__all__ = ["ExhaustiveResult", "VariantStats", "check_all_interleavings",
           "check_interleavings", "Report"]

_KIND_TITLES = (("deadlock", "deadlocks"), ("race", "races"), ("pdl", "PDL violations"),
                ("arrivals", "arrival-count mismatches"), ("bytes", "TMA byte mismatches"),
                ("stuck", "stuck work tile loops"))


@dataclass
class VariantStats:
    """Search statistics of one program variant."""

    name: str
    states: int
    complete: int
    deadlock_states: int
    capped: bool
    milliseconds: float
    processes: list = field(default_factory=list)
    stopped_early: bool = False


@dataclass
class ExhaustiveResult:
    """Outcome of :func:`check_all_interleavings`."""

    reports: list
    variants: list
    max_states: int
    milliseconds: float
    notes: list = field(default_factory=list)
    alias_pairs: list = field(default_factory=list)

    @property
    def states(self) -> int:
        return sum(v.states for v in self.variants)

    @property
    def capped(self) -> bool:
        return any(v.capped for v in self.variants)

    def count(self, kind: str) -> int:
        return sum(1 for r in self.reports if r.kind == kind)

    @property
    def deadlocks(self) -> int:
        return self.count("deadlock") + self.count("stuck")

    @property
    def races(self) -> int:
        return self.count("race") + self.count("arrivals") + self.count("bytes")

    @property
    def pdl_violations(self) -> int:
        return self.count("pdl")

    @property
    def verdict(self) -> str:
        if self.reports:
            return "UNSAFE"
        return "INCOMPLETE" if self.capped else "SAFE"

    def summary(self) -> str:
        counts = ", ".join(f"{title} {self.count(kind)}" for kind, title in _KIND_TITLES
                           if kind in ("deadlock", "race", "pdl") or self.count(kind))
        verdict = self.verdict
        if verdict == "INCOMPLETE":
            verdict += (f" (state cap max_states={self.max_states} reached: NOT proven safe; "
                        f"raise max_states)")
        return (f"[exhaustive] states explored {self.states} ({len(self.variants)} "
                f"variant(s), {self.milliseconds:.0f} ms); {counts} -> {verdict}")

    def format(self) -> str:
        """The checker's printout."""
        lines = ["[exhaustive] deadlock / race / PDL check over all interleavings"]
        for variant in self.variants:
            procs = ", ".join(variant.processes)
            lines.append(f"  variant {variant.name!r}: {procs}; {variant.states} states, "
                         f"{variant.complete} complete, {variant.milliseconds:.0f} ms"
                         + ("  [state cap reached]" if variant.capped else "")
                         + ("  [stopped one level after the first finding]"
                            if variant.stopped_early else ""))
        for note in self.notes:
            lines.append(f"  note: {note}")
        for a, b, text in self.alias_pairs:
            lines.append(f"  aliased: {a} <-> {b} ({text})")
        for report in self.reports:
            first, *rest = report.message.split("\n")
            lines.append(f"  {report.kind.upper()}: {first}")
            lines += [f"  {line}" for line in rest]
        lines.append(self.summary())
        return "\n".join(lines)


def _alias_pairs(allocator) -> list:
    if allocator is None or not hasattr(allocator, "alias_pairs"):
        return []
    try:
        pairs = allocator.alias_pairs()
    except Exception:  # no layout yet: nothing aliases
        return []
    out = []
    for a, b in pairs:
        ra, rb = getattr(a, "range", None), getattr(b, "range", None)
        text = f"{ra[0]}:{ra[1]} and {rb[0]}:{rb[1]}" if ra and rb else "overlapping"
        out.append((getattr(a, "name", str(a)), getattr(b, "name", str(b)), text))
    return out


def check_all_interleavings(tasks, resource_dependency_graph=None, *, smem_allocator=None,
                            max_states: int = DEFAULTS.max_states,
                            dynamic_trip_count: int = DEFAULTS.dynamic_trip_count,
                            assume_pdl_wait_completed: bool = DEFAULTS.assume_pdl_wait_completed,
                            reduce: bool = True) -> ExhaustiveResult:
    """Explore every interleaving of ``tasks`` (see the module docstring).

    Args:
        tasks: the Tasks of one kernel.
        resource_dependency_graph: ``{downstream: [upstream, ...]}`` (informational).
        smem_allocator: the SmemAllocator whose layout decides which buffers alias; None:
            nothing aliases.
        max_states: cap on the states explored over all variants; reaching it makes the
            verdict ``INCOMPLETE``.
        dynamic_trip_count: at least this many iterations for run-time domains.
        assume_pdl_wait_completed: skip the PDL launch-before-wait check.
        reduce: use partial-order reduction (False explores every interleaving; for
            measurements and tests of the reduction itself).
    """
    start = time.perf_counter()
    tasks = tuple(tasks)
    notes: list = []
    counts = trip_counts(tasks, dynamic_trip_count, notes)
    regions = RegionTable(smem_allocator)
    reports: list = []
    stats: list = []
    budget = max_states
    for variant in program_variants(tasks):
        t0 = time.perf_counter()
        program = compile_program(tasks, resource_dependency_graph, variant, counts, regions,
                                  notes, check_pdl=not assume_pdl_wait_completed)
        model, result = search(program, max(budget, 1), reduce)
        budget -= result.states
        for report in build_reports(model, result, f"variant {variant.name!r}"):
            if all(r.key != report.key for r in reports):
                reports.append(report)
        stats.append(VariantStats(variant.name, result.states, result.complete,
                                  result.deadlock_states, result.capped,
                                  (time.perf_counter() - t0) * 1000,
                                  [f"{p.name} {len(p.ops)} ops" for p in program.processes],
                                  result.stopped_early))
        if budget <= 0:
            break
    return ExhaustiveResult(reports, stats, max_states, (time.perf_counter() - start) * 1000,
                            notes, _alias_pairs(smem_allocator))


def check_interleavings(manager) -> list[Finding]:
    """Check X for :class:`~tsjit.ts.task_manager.TaskManager` (see the module docstring)."""
    options = manager.options
    if not options.exhaustive_deadlock_race_check:
        return []
    allocator = getattr(manager, "smem_allocator", None) or options.smem_allocator
    result = check_all_interleavings(
        manager.tasks, manager.resource_dependency_graph, smem_allocator=allocator,
        max_states=options.max_states, dynamic_trip_count=options.dynamic_trip_count,
        assume_pdl_wait_completed=options.assume_pdl_wait_completed)
    manager.exhaustive_result = result
    if manager.verbose:
        report(result.format())
    findings = [error("X", f"[{r.kind}] {r.message}") for r in result.reports]
    if result.capped and not result.reports:
        findings.append(warning("X", (
            f"exhaustive check incomplete: it stopped at max_states={result.max_states} "
            f"states, so the schedule is NOT proven free of deadlocks and races.\n  Raise "
            f"TaskManager(max_states=...) or shrink the checked program (fewer stages or "
            f"iterations).")))
    return findings
