"""``TaskManager``: collect tasks and resources, print, verify, then lower (inventory §1.1, §1.9).

``TaskManager(tasks, resource_dependency_graph, ...)`` normalises its inputs, then
``print_and_verify()`` (called by the constructor):

1. walks all tasks in lock step (:mod:`tsjit.ts.simulate`) and, with ``verbose``, prints
   the schedule table and the register report (:mod:`tsjit.ts.printout`); a walk that
   cannot finish is a deadlock (check C0);
2. runs :data:`CHECKS` in order.  A failing check raises one ``VerificationError`` with
   all its findings (``err.check`` is the rule id); with ``skip_validation=True`` every
   error is issued as a ``VerificationWarning`` instead and verification goes on.
   Warning findings (H1) always warn and, with ``verbose``, print.

``setup_resources_and_tasks()`` and ``run()`` are called from inside a ``@tsjit.kernel``
and delegate to ``tsjit.ts.lowering.setup(manager)`` / ``run(manager)``.

The graph ``{downstream: [upstream, ...]}`` declares "consume upstream before producing
downstream"; resources hash by identity, so they key it directly.

Input rule G0 (raised at construction): at least one task, unique task names, a
non-empty graph.
"""
from __future__ import annotations

import warnings
from typing import Any, Callable

from tsjit.errors import VerificationError
from tsjit.ts.diagnostics import VerificationWarning
from tsjit.ts.printout import format_register_report, format_schedule_table
from tsjit.ts.resources import MemoryResource
from tsjit.ts.simulate import ScheduleSimulator
from tsjit.ts.task import Task
from tsjit.ts.verify import registers, routing, structure
from tsjit.ts.verify.findings import Finding

__all__ = ["TaskManager", "CHECKS"]

#: ``(rule id, check(manager) -> list[Finding])`` in execution order (inventory §2.3).
CHECKS: tuple[tuple[str, Callable], ...] = (
    ("W0", structure.check_warp_ranges),
    ("W1", registers.check_warpgroup_registers),
    ("W2", registers.check_register_budget),
    ("R0", structure.check_resource_roles),
    ("G1", structure.check_graph_resources_used),
    ("G2", structure.check_graph_edges_backed),
    ("G3", structure.check_task_resources_in_graph),
    ("G4", structure.check_declared_resources_scheduled),
    ("H1", structure.check_head_loop_overlap),
    ("N1", structure.check_labels),
    ("R1", routing.check_route_writers),
    ("R2", routing.check_route_destinations),
    ("R3", routing.check_routes_complete),
    ("R4", routing.check_routes_most_recent),
)


def _normalise_graph(graph: Any) -> dict:
    if not isinstance(graph, dict):
        raise TypeError(f"resource_dependency_graph must be a dict {{downstream: [upstream, "
                        f"...]}}, got {type(graph).__name__}")
    out: dict = {}
    for down, ups in graph.items():
        if not isinstance(down, MemoryResource):
            raise TypeError(f"resource_dependency_graph key {down!r} is not a MemoryResource")
        if isinstance(ups, MemoryResource):
            raise TypeError(f"resource_dependency_graph[{down.name}] must be a list; write "
                            f"{{{down.name}: [{ups.name}]}}")
        ups = tuple(ups)
        for up in ups:
            if not isinstance(up, MemoryResource):
                raise TypeError(f"resource_dependency_graph[{down.name}] contains {up!r}, not a "
                                f"MemoryResource")
        out[down] = ups
    return out


class TaskManager:
    """All tasks of one kernel, their resources and checks (see the module docstring).

    Args:
        tasks: the Tasks, in the order their warp branches are emitted.
        resource_dependency_graph: ``{downstream: [upstream, ...]}``.
        skip_validation: demote every verification error to a ``VerificationWarning``.
        verbose: print the schedule table, register report and warnings.
        exhaustive_deadlock_race_check, max_states: options of the exhaustive
            interleaving checker (stored; the checker comes with the pipeline issue).
        max_simulated_iterations: cap of the simulated trip count of static domains
            (None: the full count); ``dynamic_trip_count``: trips simulated for run-time
            domains.
        Other keywords (``smem_allocator``, ``tmem_allocator``, ``tmem_ptr_i32``,
        ``smem_capacity_bytes``, ``tmem_capacity_columns``,
        ``dma_consumer_release_labels``, ``assume_pdl_wait_completed``) are stored in
        ``options`` for the lowering and later checks.
    """

    #: the checks run by print_and_verify, in order; later issues extend this tuple.
    checks: tuple[tuple[str, Callable], ...] = CHECKS
    #: the lock-step walker; the pipeline credit simulation subclasses it.
    simulator_class: type = ScheduleSimulator

    def __init__(self, tasks, resource_dependency_graph, *, skip_validation: bool = False,
                 verbose: bool = True, exhaustive_deadlock_race_check: bool = True,
                 max_states: int = 100_000, smem_allocator: Any = None,
                 tmem_allocator: Any = None, tmem_ptr_i32: Any = None,
                 smem_capacity_bytes: int = 232448, tmem_capacity_columns: int = 512,
                 dma_consumer_release_labels: Any = None,
                 assume_pdl_wait_completed: bool = False,
                 max_simulated_iterations: int | None = 4, dynamic_trip_count: int = 2):
        if isinstance(tasks, Task):
            raise TypeError("tasks must be a list of Task; wrap the single task: tasks=[task]")
        self.tasks: tuple[Task, ...] = tuple(tasks)
        for i, task in enumerate(self.tasks):
            if not isinstance(task, Task):
                raise TypeError(f"tasks[{i}] is a {type(task).__name__}, not a Task")
        self.resource_dependency_graph = _normalise_graph(resource_dependency_graph)
        self.skip_validation = bool(skip_validation)
        self.verbose = bool(verbose)
        self.options = dict(
            exhaustive_deadlock_race_check=exhaustive_deadlock_race_check,
            max_states=max_states, smem_allocator=smem_allocator,
            tmem_allocator=tmem_allocator, tmem_ptr_i32=tmem_ptr_i32,
            smem_capacity_bytes=smem_capacity_bytes,
            tmem_capacity_columns=tmem_capacity_columns,
            dma_consumer_release_labels=dma_consumer_release_labels,
            assume_pdl_wait_completed=assume_pdl_wait_completed,
            max_simulated_iterations=max_simulated_iterations,
            dynamic_trip_count=dynamic_trip_count)
        self.findings: list[Finding] = []
        self.simulation = None
        self._setup_done = False
        self._check_inputs()
        self.print_and_verify()

    # -- derived data ------------------------------------------------------------------
    @property
    def resources(self) -> tuple[MemoryResource, ...]:
        """Every resource of the graph and the tasks, in first-appearance order."""
        out: list = []
        candidates = [r for down, ups in self.resource_dependency_graph.items()
                      for r in (down, *ups)]
        candidates += [r for t in self.tasks for r in t.resources]
        for r in candidates:
            if all(o is not r for o in out):
                out.append(r)
        return tuple(out)

    @property
    def variables(self) -> tuple:
        """Every TaskLocalVariable some task writes, reads or tests."""
        out: list = []
        for task in self.tasks:
            out += [v for v in task.local_variables if all(o is not v for o in out)]
        return tuple(out)

    @property
    def total_warps(self) -> int:
        """Warps of the CTA: the largest task ``warp_end``."""
        return max(t.warp_end for t in self.tasks)

    @property
    def default_registers_per_thread(self) -> int:
        return registers.default_registers_per_thread(self.total_warps)

    def register_request(self, task: Task) -> tuple[str | None, int]:
        """``("inc" | "dec" | None, registers)``: the task's setmaxnreg, if any."""
        return registers.register_request(task, self.default_registers_per_thread)

    # -- verification ------------------------------------------------------------------
    def _check_inputs(self) -> None:
        if not self.tasks:
            self._fail("G0", ["TaskManager got no tasks; pass tasks=[Task(...), ...]."])
        if not self.resource_dependency_graph:
            self._fail("G0", ["resource_dependency_graph is empty; declare the ordering "
                              "between resources, e.g. {dst: [src]} for a task that consumes "
                              "src and produces dst."])
        seen: dict[str, Task] = {}
        for task in self.tasks:
            other = seen.setdefault(task.name, task)
            if other is not task:
                self._fail("G0", [f"two tasks are named {task.name!r} ({other.label} and "
                                  f"{task.label}); give each task a unique name."])

    def _fail(self, check: str, messages: list[str]) -> None:
        text = "\n".join(messages)
        if self.skip_validation:
            warnings.warn(f"[{check}] {text}", VerificationWarning, stacklevel=3)
            return
        raise VerificationError(text, check=check)

    def print_and_verify(self) -> None:
        """Print the schedule table and register report, then run every check in order."""
        if not self.tasks:
            return
        simulator = self.simulator_class(
            self, self.options["max_simulated_iterations"], self.options["dynamic_trip_count"])
        self.simulation = simulator.run()
        if self.verbose:
            print(self.schedule_table())
            print(self.register_report())
        if self.simulation.blocked:
            lines = [f"{t.describe()}: {e.step.resource.name} {e.step.stage.name} "
                     f"{e.step.call_index} (schedule step #{e.step.id}) is blocked!"
                     for t, e in self.simulation.blocked]
            lines.append("  Note: run-time domains are simulated with "
                         f"{self.options['dynamic_trip_count']} iterations; the deadlock may "
                         f"be a false positive there.")
            self._fail("C0", lines)
        for check, function in self.checks:
            found = function(self)
            self.findings += found
            for finding in found:
                if finding.is_warning:
                    if self.verbose:
                        print(finding.message)
                    warnings.warn(f"[{finding.check}] {finding.message}", VerificationWarning,
                                  stacklevel=3)
            errors = [f.message for f in found if not f.is_warning]
            if errors:
                self._fail(check, errors)

    # -- printouts -------------------------------------------------------------------------
    def schedule_table(self) -> str:
        """The schedule table (inventory §4 item 1) as a string."""
        if self.simulation is None:
            self.simulation = self.simulator_class(
                self, self.options["max_simulated_iterations"],
                self.options["dynamic_trip_count"]).run()
        return format_schedule_table(self.tasks, self.simulation.rows)

    def register_report(self) -> str:
        """The register lines (inventory §4 item 2) as a string."""
        return format_register_report(self.tasks, self.total_warps)

    # -- lowering ------------------------------------------------------------------------
    def setup_resources_and_tasks(self) -> Any:
        """Emit resource storage and barrier init (``tsjit.ts.lowering.setup``); call once."""
        if self._setup_done:
            raise RuntimeError("TaskManager.setup_resources_and_tasks() was already called; "
                               "call it once per kernel, before run().")
        from tsjit.ts import lowering
        result = lowering.setup(self)
        self._setup_done = True
        return result

    def run(self) -> Any:
        """Emit every task's warp branch (``tsjit.ts.lowering.run``)."""
        if not self._setup_done:
            raise RuntimeError("TaskManager.run() before setup_resources_and_tasks(): call "
                               "manager.setup_resources_and_tasks(), fence the mbarrier init "
                               "and synchronise the CTA, then manager.run().")
        from tsjit.ts import lowering
        return lowering.run(self)

    def __repr__(self) -> str:
        return f"<TaskManager {', '.join(t.label for t in self.tasks)}>"
