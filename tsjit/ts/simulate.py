"""Expansion of schedules into step sequences and the lock-step walk (check C0).

:func:`expand_schedule` flattens one task's schedule into the sequence of steps it runs
for one work tile: Head, the Loop body repeated for a simulated trip count (FirstIter
steps only on trip 0, LastIter only on the last, ``every(p, s)`` on trips ``s, s+p, ...``;
``when_true``/``when_false`` blocks are assumed to run), then Tail.  Steps outside a
``work_tile_loop`` run once before/after the tiles.

Simulated trip count: a static domain's true count capped at ``max_iterations`` (None:
no cap); a dynamic domain (run-time bounds or ``get_domain``) uses ``dynamic_trip_count``.

:class:`ScheduleSimulator` walks all tasks in lock step, round robin: in each round every
task (each of its warps, when :meth:`~ScheduleSimulator.lanes` splits it) whose next step
is not :meth:`~ScheduleSimulator.blocked` runs it.  Nothing blocks
without pipelines; the pipeline credit simulation overrides ``blocked`` and ``on_step``.
A round in which no remaining task can move is a deadlock (reported by the TaskManager
as check C0).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from tsjit.ts.enums import BlockCondition, ScheduleStageType
from tsjit.ts.options import DEFAULTS
from tsjit.ts.schedule import Schedule, Step

__all__ = ["SimulatedStep", "expand_schedule", "simulated_trip_count", "ScheduleSimulator",
           "SimulationResult"]


@dataclass(frozen=True)
class SimulatedStep:
    """One executed step: the Step, its trip index (Loop only), tile, and phase tag.

    Phase tags: ``H`` head, ``F`` first-iteration, ``L`` last-iteration, ``E`` every(n),
    ``W`` when_true/when_false, ``T`` tail, ``""`` plain loop step.  ``lane``: the warp that
    runs it when the walk runs the task's warps as separate processes
    (:meth:`ScheduleSimulator.lanes`); None when all its warps run it together.
    """

    step: Step
    iteration: int | None
    tile: int
    phase: str
    lane: int | None = None


def simulated_trip_count(schedule: Schedule, max_iterations: int | None = DEFAULTS.max_simulated_iterations,
                         dynamic_trip_count: int = DEFAULTS.dynamic_trip_count) -> int:
    loop = schedule.domain_loop
    if loop is None:
        return 0
    count = loop.static_trip_count
    if count is None:
        return dynamic_trip_count
    return count if max_iterations is None else min(count, max_iterations)


def _phase(step: Step) -> str:
    if step.section is ScheduleStageType.Head:
        return "H"
    if step.section is ScheduleStageType.Tail:
        return "T"
    for guard in reversed(step.guards):
        tag = {BlockCondition.FirstIter: "F", BlockCondition.LastIter: "L",
               BlockCondition.Every: "E", BlockCondition.WhenTrue: "W",
               BlockCondition.WhenFalse: "W"}.get(guard.condition)
        if tag:
            return tag
    return ""


def _runs(step: Step, iteration: int, trip_count: int) -> bool:
    return all(g.holds(iteration, trip_count) is not False for g in step.guards)


def expand_schedule(schedule: Schedule, trip_count: int, tiles: int = 1) -> list[SimulatedStep]:
    """The steps one task executes, in order (see the module docstring)."""
    steps = schedule.steps
    pre = [s for s in steps if s.work_loop_slot == "pre"]
    post = [s for s in steps if s.work_loop_slot == "post"]
    inner = [s for s in steps if s.work_loop_slot is None]
    out = [SimulatedStep(s, None, 0, "H") for s in pre]
    for tile in range(tiles if schedule.work_tile_loop is not None else 1):
        out += [SimulatedStep(s, None, tile, _phase(s)) for s in inner
                if s.section is ScheduleStageType.Head]
        loop = [s for s in inner if s.section is ScheduleStageType.Loop]
        for i in range(trip_count):
            out += [SimulatedStep(s, i, tile, _phase(s)) for s in loop if _runs(s, i, trip_count)]
        out += [SimulatedStep(s, None, tile, _phase(s)) for s in inner
                if s.section is ScheduleStageType.Tail]
    out += [SimulatedStep(s, None, 0, "T") for s in post]
    return out


@dataclass
class SimulationResult:
    """Rows of the lock-step walk and, on deadlock, the blocked ``(task, step)`` pairs."""

    rows: list
    blocked: list


class ScheduleSimulator:
    """Lock-step round-robin walk over all tasks (hook points for the credit simulation)."""

    def __init__(self, manager, max_iterations: int | None = DEFAULTS.max_simulated_iterations,
                 dynamic_trip_count: int = DEFAULTS.dynamic_trip_count):
        self.manager = manager
        self.sequences = {
            id(task): expand_schedule(task.schedule, simulated_trip_count(
                task.schedule, max_iterations, dynamic_trip_count))
            for task in manager.tasks}

    def blocked(self, task, entry: SimulatedStep) -> bool:
        """Whether ``task`` cannot run ``entry`` now (never, without pipelines)."""
        return False

    def on_step(self, task, entry: SimulatedStep) -> None:
        """Called after ``task`` ran ``entry`` (pipelines update credits here)."""

    def lanes(self, task) -> int:
        """How many processes the walk runs ``task`` as: 1 (all its warps in lock step) here; a
        subclass returns ``task.num_warps`` to run each warp on its own (warp lanes)."""
        return 1

    def run(self) -> SimulationResult:
        """The walk.  A row holds, per task, the step its first warp lane to move ran; on a
        deadlock each task is blocked at its first remaining lane's step."""
        walkers = []            # (task, that lane's sequence)
        for task in self.manager.tasks:
            sequence, count = self.sequences[id(task)], self.lanes(task)
            walkers += [(task, sequence)] if count == 1 else \
                [(task, [replace(e, lane=lane) for e in sequence]) for lane in range(count)]
        cursor = [0] * len(walkers)
        rows: list[dict] = []
        while True:
            remaining = [i for i, (_, sequence) in enumerate(walkers) if cursor[i] < len(sequence)]
            if not remaining:
                return SimulationResult(rows, [])
            row: dict = {}
            for i in remaining:
                task, sequence = walkers[i]
                entry = sequence[cursor[i]]
                if self.blocked(task, entry):
                    continue
                self.on_step(task, entry)
                row.setdefault(id(task), entry)
                cursor[i] += 1
            if not row:
                stuck: dict = {}
                for i in remaining:
                    stuck.setdefault(id(walkers[i][0]), (walkers[i][0], walkers[i][1][cursor[i]]))
                return SimulationResult(rows, list(stuck.values()))
            rows.append(row)
