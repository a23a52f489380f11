"""PDL wait ordering (check PDL1).

PDL1  For every graph edge ``{dep: [pdl_wait]}`` whose upstream is a
      :class:`~tsjit.ts.pdl.PdlWaitBarrier`, each task that produces ``dep`` (or reads it,
      when ``dep`` has no pipeline and so may hold the previous grid's output) must call
      ``pdl_wait.wait_griddep()`` before its first work on ``dep`` (program order: before
      the work tile loop, Head, Loop, Tail).  Auxiliary works are exempt.  Disabled by
      ``TaskManager(assume_pdl_wait_completed=True)``.
"""
from __future__ import annotations

from tsjit.ts.verify.findings import Finding, error, step_message
from tsjit.ts.verify.pipelines import is_pipelined

__all__ = ["check_pdl_wait_order", "WAIT_LABEL"]

WAIT_LABEL = "wait_griddep"


def check_pdl_wait_order(manager) -> list[Finding]:
    """PDL1 (see the module docstring)."""
    if manager.options.assume_pdl_wait_completed:
        return []
    out: list[Finding] = []
    for dep, ups in manager.resource_dependency_graph.items():
        for barrier in ups:
            if barrier is dep or not getattr(barrier, "is_pdl_wait", False):
                continue
            for task in manager.tasks:
                out += _task_order(task, dep, barrier)
    return out


def _task_order(task, dep, barrier) -> list[Finding]:
    steps = task.schedule.steps
    uses = [s for s in steps if s.resource is dep and s.is_work and not s.is_aux
            and (s.stage.is_producer or not is_pipelined(dep))]
    if not uses:
        return []
    first = uses[0]
    waits = [s for s in steps if s.resource is barrier and s.label == WAIT_LABEL]
    role = "produces" if first.stage.is_producer else "reads"
    if not waits:
        return [error("PDL1", step_message(
            task, first, f"{role} {dep.name!r}, which depends on the previous grid (edge "
            f"{{{dep.name}: [{barrier.name}]}}), but never calls {barrier.name}.wait_griddep()",
            f"Add {barrier.name} to src_resources of task {task.name!r} and call "
            f"{barrier.name}.wait_griddep() before its first work on {dep.name} (e.g. at the "
            f"top of the schedule), or pass assume_pdl_wait_completed=True if the kernel "
            f"waits outside the schedules."))]
    if waits[0].id > first.id:
        return [error("PDL1", step_message(
            task, first, f"{role} {dep.name!r} before waiting for the previous grid: the first "
            f"{barrier.name}.wait_griddep() is schedule step #{waits[0].id}, after this step "
            f"(edge {{{dep.name}: [{barrier.name}]}})",
            f"Place {barrier.name}.wait_griddep() before step #{first.id}."))]
    return []
