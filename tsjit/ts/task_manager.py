"""``TaskManager``: collect tasks and resources, print, verify, then lower.

``TaskManager(tasks, resource_dependency_graph, ...)`` normalises its inputs, then
``print_and_verify()`` (called by the constructor):

1. walks all tasks in lock step with pipeline credits
   (:class:`~tsjit.ts.verify.credits.PipelineSimulator`) and, with ``verbose``, prints
   the schedule table and the register report (:mod:`tsjit.ts.printout`); a walk that
   cannot finish is a deadlock, and a walk that ends with unbalanced credits is an
   error too (check C0);
2. runs :data:`CHECKS` in order.  A failing check raises one ``VerificationError`` with
   all its findings (``err.check`` is the rule id); with ``skip_validation=True`` every
   error is issued as a ``VerificationWarning`` instead and verification goes on.
   Warning findings (H1, D1 warnings, opaque layouts) always warn and, with ``verbose``,
   print;
3. with ``verbose``, prints the ``[smem-layout]`` report of the shared-memory allocator.

Before that, the constructor derives pipeline metadata and the shared-memory layout:

* split consumers: a resource waited on by a task that does not release it, and
  released by another task, gets ``advance_on_wait=True`` (its ``pipeline_config`` is
  replaced by a copy with the flag; the wait must advance the waiting task's cursor);
* ``smem_allocator``: without one, the manager creates an
  :class:`~tsjit.ts.memory.SmemAllocator` and adds every resource
  (``get_smem_requirements()`` plus pipeline barriers); with one, it adds the barriers
  of pipelined resources the allocator does not have yet.  Then it computes the layout
  (unless already computed).  ``manager.smem_allocator.barrier_offset(resource)`` and
  ``.total_bytes`` are what the lowering places and sizes the dynamic block with.

``setup_resources_and_tasks()`` and ``run()`` are called from inside a ``@tsjit.kernel``
and delegate to ``tsjit.ts.lowering.setup(manager)`` / ``run(manager)``.

The graph ``{downstream: [upstream, ...]}`` declares "consume upstream before producing
downstream"; resources hash by identity, so they key it directly.

Input rule G0 (raised at construction): at least one task, unique task names, a
non-empty graph.
"""
from __future__ import annotations

import functools
import inspect
import os
import sys
import warnings
from typing import Any, Callable

from tsjit.errors import UsageStateError, UsageTypeError, VerificationError, warn
import dataclasses

from tsjit.ts.diagnostics import VerificationWarning, user_location
from tsjit.ts.enums import ScheduleStage
from tsjit.ts.memory import SMEM_CAPACITY_BYTES, SmemAllocator, layout_tmem_requirements, shared_arrays_of
from tsjit.ts.options import TaskManagerOptions
from tsjit.ts.render import render
from tsjit.ts.printout import format_register_report, format_schedule_table
from tsjit.ts.memory_resource import MemoryResource
from tsjit.ts.task import Task
from tsjit.ts.verbose import report
from tsjit.ts.verify import registers
from tsjit.ts.verify.findings import Finding
from tsjit.ts.verify.pipelines import is_pipelined, pipeline_config

__all__ = ["TaskManager", "CHECKS", "default_checks"]

_CHECKS: tuple | None = None


def default_checks() -> tuple[tuple[str, Callable], ...]:
    """``(rule id, check(manager) -> list[Finding])`` in execution order (the module's ``CHECKS``).

    The check modules (:mod:`tsjit.ts.verify`) load with the first TaskManager, not with ``import
    tsjit.ts``: a program's module imports in a process whose TS kernels all come from the disk
    cache without them (a third of the TS model's import time).
    """
    global _CHECKS
    if _CHECKS is None:
        from tsjit.ts.verify import (bracketing, capacity, counts, interleave, leader_tasks,  # lazily: see above
                                     lifetimes, pdl, queues, routing, structure)
        from tsjit.ts.verify import exhaustive  # lazily: as the checks above
        _CHECKS = (
        ("W0", structure.check_warp_ranges),
        ("W1", registers.check_warpgroup_registers),
        ("W2", registers.check_register_budget),
        ("R0", structure.check_resource_roles),
        ("G1", structure.check_graph_resources_used),
        ("G2", structure.check_graph_edges_backed),
        ("PDL1", pdl.check_pdl_wait_order),
        ("G3", structure.check_task_resources_in_graph),
        ("G4", structure.check_declared_resources_scheduled),
        ("N1", structure.check_labels),
        ("B1", bracketing.check_bracketing),
        ("B2", bracketing.check_try_ops),
        ("Q1", queues.check_work_queues),
        ("D1", bracketing.check_dma_ordering),
        ("SG1", interleave.check_split_signaling),
        ("SG2", leader_tasks.check_leader_side_tasks),
        ("P1", counts.check_arrival_counts),
        ("P2", counts.check_tma_bytes),
        ("P6", interleave.check_interleave),
        ("L1", interleave.check_cta_layouts),
        ("H1", structure.check_head_loop_overlap),
        ("M1", capacity.check_smem_capacity),
        ("M2", capacity.check_tmem_capacity),
        ("R1", routing.check_route_writers),
        ("R2", routing.check_route_destinations),
        ("R3", routing.check_routes_complete),
        ("R4", routing.check_routes_most_recent),
        ("R5", lifetimes.check_stage_token_lifetimes),
        ("PP", interleave.check_ping_pong),
        ("X", exhaustive.check_interleavings),
        )
    return _CHECKS


def default_simulator() -> type:
    """The lock-step walker with pipeline credits (check C0), :class:`~tsjit.ts.verify.credits.PipelineSimulator`."""
    from tsjit.ts.verify.credits import PipelineSimulator  # lazily: as default_checks
    return PipelineSimulator


def __getattr__(name: str):
    """``CHECKS``: :func:`default_checks`, built on first use."""
    if name == "CHECKS":
        return default_checks()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _normalise_graph(graph: Any) -> dict:
    if not isinstance(graph, dict):
        raise UsageTypeError(f"resource_dependency_graph must be a dict {{downstream: [upstream, "
                             f"...]}}, got {type(graph).__name__}")
    out: dict = {}
    for down, ups in graph.items():
        if not isinstance(down, MemoryResource):
            raise UsageTypeError(f"resource_dependency_graph key {down!r} is not a MemoryResource")
        if isinstance(ups, MemoryResource):
            raise UsageTypeError(f"resource_dependency_graph[{down.name}] must be a list; write "
                                 f"{{{down.name}: [{ups.name}]}}")
        ups = tuple(ups)
        for up in ups:
            if not isinstance(up, MemoryResource):
                raise UsageTypeError(f"resource_dependency_graph[{down.name}] contains {up!r}, not a "
                                     f"MemoryResource")
        out[down] = ups
    return out


class TaskManager:
    """All tasks of one kernel, their resources and checks (see the module docstring).

    Args:
        tasks: the Tasks, in the order their warp branches are emitted.
        resource_dependency_graph: ``{downstream: [upstream, ...]}``.
        options: a :class:`~tsjit.ts.options.TaskManagerOptions` (default: all defaults).
        **keywords: any field of TaskManagerOptions (``skip_validation``, ``verbose``,
            ``max_states``, ``smem_allocator``, ...), overriding ``options``; the result is
            ``manager.options``.

    Raises:
        UsageTypeError / UsageValueError: an argument or option of the wrong type or value.
        VerificationError: a check failed (unless ``skip_validation``).
    """

    #: the checks run by print_and_verify, in order; ``None``: :func:`default_checks` (a subclass may
    #: set its own tuple).
    checks: tuple[tuple[str, Callable], ...] | None = None
    #: the lock-step walker with pipeline credits (check C0); ``None``: :func:`default_simulator`.
    simulator_class: type | None = None

    def __init__(self, tasks, resource_dependency_graph, *, options: TaskManagerOptions | None = None,
                 **keywords):
        if isinstance(tasks, Task):
            raise UsageTypeError("tasks must be a list of Task; wrap the single task: tasks=[task]")
        try:
            self.tasks: tuple[Task, ...] = tuple(tasks)
        except TypeError:
            raise UsageTypeError(f"tasks must be a list of Task, got {type(tasks).__name__}") from None
        for i, task in enumerate(self.tasks):
            if not isinstance(task, Task):
                raise UsageTypeError(f"tasks[{i}] is a {type(task).__name__}, not a Task")
        self.resource_dependency_graph = _normalise_graph(resource_dependency_graph)
        self.options: TaskManagerOptions = TaskManagerOptions.from_keywords(options, **keywords)
        self.findings: list[Finding] = []
        self.notes: list[str] = []
        self.simulation = None
        self._setup_done = False
        self._lowered = None   # the LoweringResult of setup_resources_and_tasks(), for run()
        self._check_inputs()
        self._derive_pipeline_metadata()
        self.smem_allocator: SmemAllocator | None = None
        self._layout_smem(self.options.smem_allocator)
        self.tmem_allocator = layout_tmem_requirements(self.resources, self.options.tmem_allocator,
                                                       self.options.tmem_capacity_columns)
        self.print_and_verify()
        self._ran = False
        # Built while a kernel compiles: warn at its end if run() never came.  emit is looked up,
        # not imported: the model imports without llvmlite, and without emit nothing compiles.
        emit = sys.modules.get("tsjit.backend.emit")
        if emit is not None and emit.active():
            where = user_location()   # a plain-Python helper that builds it, else the kernel statement
            if where is None or os.path.abspath(where.filename).startswith(_TSJIT_DIR):
                where = emit.current().statement_location()
            emit.current().on_complete(functools.partial(_warn_if_never_ran, self, where))

    @property
    def skip_validation(self) -> bool:
        """``options.skip_validation``: verification errors are warnings."""
        return self.options.skip_validation

    @property
    def verbose(self) -> bool:
        """``options.verbose``: print the tables and reports."""
        return self.options.verbose

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

    @property
    def smem_capacity_bytes(self) -> int:
        """The M1 limit: the ``smem_capacity_bytes`` option, else the allocator's capacity."""
        given = self.options.smem_capacity_bytes
        if given is not None:
            return given
        return self.smem_allocator.capacity_bytes if self.smem_allocator is not None \
            else SMEM_CAPACITY_BYTES

    # -- metadata ----------------------------------------------------------------------
    def _derive_pipeline_metadata(self) -> None:
        """Split consumers get ``advance_on_wait`` (see the module docstring)."""
        for resource in self.resources:
            config = pipeline_config(resource)
            if config is None or config.advance_on_wait:
                continue
            waiters = [t for t in self.tasks if self._does(t, resource, ScheduleStage.ConsumerWait)]
            releasers = [t for t in self.tasks
                         if self._does(t, resource, ScheduleStage.ConsumerRelease)]
            if any(all(r is not w for r in releasers) for w in waiters) and releasers:
                resource.pipeline_config = dataclasses.replace(config, advance_on_wait=True)
                self.notes.append(f"[split-consumer] NOTE: {resource.name!r} is waited on and "
                                  f"released in different tasks; advance_on_wait enabled.")

    @staticmethod
    def _does(task: Task, resource, stage) -> bool:
        return any(s.resource is resource and s.stage is stage for s in task.schedule.steps)

    def _layout_smem(self, allocator: Any) -> None:
        """Build or complete the shared-memory allocator and compute its layout."""
        if allocator is None:
            capacity = self.options.smem_capacity_bytes or SMEM_CAPACITY_BYTES
            allocator = SmemAllocator(capacity)
            for resource in self.resources:
                allocator.add_resource(resource)
        elif not isinstance(allocator, SmemAllocator):
            raise UsageTypeError(f"smem_allocator must be a tsjit.ts.SmemAllocator, got "
                                 f"{type(allocator).__name__}")
        self.smem_allocator = allocator
        pipelined = [r for r in self.resources if is_pipelined(r)]
        if not allocator.is_laid_out:
            for resource in pipelined:
                allocator.add_barriers(resource)
            allocator.compute_layout()
            return
        missing = [r for r in pipelined if not allocator.has_barriers(r)]
        if missing:
            groups = {g.name: g for g in (getattr(r, "pipeline_group", None) for r in missing) if g is not None}
            hint = "".join(f" and allocator.add_pipeline_group({name}) for pipeline group {name!r}" for name in groups)
            self._fail("M1", [f"the SmemAllocator was laid out before the barriers of "
                              f"{', '.join(repr(m.name) for m in missing)} were added, so they have no "
                              f"place in shared memory.\n  Call allocator.add_resource(r) (or "
                              f"add_barriers(r)) for every pipelined resource{hint} before "
                              f"compute_layout(), or let the TaskManager compute the layout."])

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
        # one finding: its text; several: the first after the [check] prefix, each later one on a "- "
        # bullet with its lines indented under it (an element that starts indented continues the previous)
        findings = sum(1 for m in messages if not m[:1].isspace())
        text = "\n".join(m if k == 0 or findings < 2 or m[:1].isspace() else "- " + m.replace("\n", "\n  ")
                         for k, m in enumerate(messages))
        if self.skip_validation:
            warn(f"[{check}] {text}", VerificationWarning)
            return
        raise VerificationError(text, check=check)

    #: programs verified in this process (the demo reports it)
    verified_count = 0

    #: checks whose errors point at the cause of a simulated deadlock (a missing commit, release...)
    _CAUSE_CHECKS = ("B1", "B2", "Q1")

    def _structural_cause(self):
        """(check id, error messages) of the first structural check that fails, or None."""
        for check, function in (default_checks() if self.checks is None else self.checks):
            if check not in self._CAUSE_CHECKS:
                continue
            errors = [f.message for f in function(self) if not f.is_warning]
            if errors:
                return check, errors
        return None

    def print_and_verify(self) -> None:
        """Print the schedule table and register report, then run every check in order."""
        TaskManager.verified_count += 1
        if not self.tasks:
            return
        simulator = (self.simulator_class or default_simulator())(
            self, self.options.max_simulated_iterations, self.options.dynamic_trip_count)
        self.simulation = simulator.run()
        self.simulator = simulator
        if self.verbose:
            report(self.schedule_table())
            report(self.register_report())
            for note in self.notes:
                report(note)
        describe = getattr(simulator, "blocked_message", None)
        if self.simulation.blocked:
            lines = [describe(t, e) if describe else
                     f"{t.describe()}: {e.step.resource.name} {e.step.stage.name} "
                     f"{e.step.call_index} (schedule step #{e.step.id}) is blocked!"
                     for t, e in self.simulation.blocked]
            cause = self._structural_cause()
            blocked_count = len(lines)
            shallow = getattr(simulator, "too_shallow", lambda blocked: [])(self.simulation.blocked)
            lines += [f"  Cause: {reason}" for reason in shallow]
            if cause is not None:
                # Where the deadlock shows up is often not where the mistake is: name the likely cause.
                check, messages = cause
                lines.append(f"  Likely cause, found by check {check}: " + messages[0].replace("\n", "\n  "))
            # a structural finding or a ring shallower than what one task holds is a mistake whatever
            # the trip counts; otherwise the simulated counts may be what deadlocks
            note = "" if cause is not None or shallow else (
                f"  Note: run-time domains are simulated with {self.options.dynamic_trip_count} iterations "
                f"and static ones with at most {self.options.max_simulated_iterations}; the deadlock may be a "
                f"false positive there.")
            lines.append(f"  All {blocked_count} remaining task(s) are blocked: deadlock in the "
                         f"lock-step walk of Head + Loop x N + Tail.{note}\n  Reorder the blocked operations "
                         f"(a task must not wait for a commit that depends on its own later steps), add "
                         f"stages, or add the missing commit/release.")
            self._fail("C0", lines)
        elif hasattr(simulator, "imbalances"):
            unbalanced = simulator.imbalances()
            if unbalanced:
                self._fail("C0", unbalanced + [
                    "  Every commit needs a wait and every acquire a release (per stage, "
                    "summed over the tasks); add the missing operation or remove the extra "
                    "one."])
        for check, function in (default_checks() if self.checks is None else self.checks):
            found = function(self)
            self.findings += found
            for finding in found:
                if finding.is_warning:
                    if self.verbose:
                        report(finding.message)
                    if finding.is_note:
                        continue
                    warn(f"[{finding.check}] {finding.message}", VerificationWarning)
            errors = [f.message for f in found if not f.is_warning]
            if errors:
                self._fail(check, errors)
        if self.verbose and self.smem_allocator is not None:
            report(self.smem_allocator.usage_report(shared_arrays_of(self.resources)))
        if self.verbose and self.tmem_allocator is not None:   # the reference's TMEM line (columns / capacity)
            report(self.tmem_allocator.usage_report())

    # -- printouts -------------------------------------------------------------------------
    def schedule_table(self) -> str:
        """The schedule table as a string."""
        if self.simulation is None:
            self.simulation = (self.simulator_class or default_simulator())(
                self, self.options.max_simulated_iterations,
                self.options.dynamic_trip_count).run()
        return format_schedule_table(self.tasks, self.simulation.rows, self.simulation.blocked)

    def register_report(self) -> str:
        """The register lines as a string."""
        return format_register_report(self.tasks, self.total_warps)

    def render(self, path, engine: str = "auto") -> str:
        """Write the dependency graph and schedule table as an SVG (``tsjit.ts.render``)."""
        return render(self, path, engine)

    # -- lowering ------------------------------------------------------------------------
    def setup_resources_and_tasks(self) -> Any:
        """Emit resource storage and barrier init (``tsjit.ts.lowering.setup``); call once."""
        if self._setup_done:
            raise UsageStateError("TaskManager.setup_resources_and_tasks() was already called; "
                                  "call it once per kernel, before run().")
        from tsjit.ts import lowering  # lazily: the lowering needs llvmlite; the model imports without it
        self._lowered = lowering.setup(self)
        self._setup_done = True
        return None

    def run(self) -> Any:
        """Emit every task's warp branch (``tsjit.ts.lowering.run``)."""
        if not self._setup_done:
            raise UsageStateError("TaskManager.run() before setup_resources_and_tasks(): call "
                                  "manager.setup_resources_and_tasks() first (it initialises the "
                                  "barriers, fences the init and synchronises the CTA itself), then "
                                  "manager.run().")
        if self._ran:   # a second emission restarts every stage and phase at 0 while the barriers go on: a hang
            raise UsageStateError("TaskManager.run() was already called; call it once per kernel (each task's "
                                  "domain_loop repeats its steps: give it more iterations, or build one program "
                                  "whose tasks do all the work).")
        from tsjit.ts import lowering  # lazily: as in setup_resources_and_tasks
        self._ran = True
        return lowering.run(self, self._lowered)

    def __repr__(self) -> str:
        return f"<TaskManager {', '.join(t.label for t in self.tasks)}>"


_TSJIT_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def _warn_if_never_ran(manager: TaskManager, location) -> None:
    """The VerificationWarning, at ``location`` (the construction), of a manager built during a
    compile whose run() never came: the kernel then emits none of its tasks.  A warning, not an
    error: building a manager only to print/verify/render it inside a kernel is legitimate."""
    if manager._ran:
        return
    setup = "" if manager._setup_done else ("manager.setup_resources_and_tasks() (it fences the barrier init and "
                                            "syncs the CTA), then ")
    message = (f"{manager!r} was built in this kernel but manager.run() was never called, so the kernel emits "
               f"none of its tasks (an empty kernel). Call {setup}manager.run() after building it; if it is built "
               f"only to print or verify the program, ignore this VerificationWarning")
    if location is None:
        warnings.warn(message, VerificationWarning, stacklevel=2)
    else:
        warnings.warn_explicit(message, VerificationWarning, location.filename, location.line)


# help(TaskManager) and IDEs show every option with its default, taken from TaskManagerOptions.
TaskManager.__init__.__signature__ = inspect.signature(TaskManager.__init__).replace(
    parameters=[p for p in inspect.signature(TaskManager.__init__).parameters.values()
                if p.kind is not inspect.Parameter.VAR_KEYWORD] + TaskManagerOptions.keyword_parameters())
