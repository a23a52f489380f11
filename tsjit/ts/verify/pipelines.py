"""Shared facts about pipelined resources for the checks (credits, bracketing, counts, lanes).

Roles: ``acquire`` / ``commit`` (producer side), ``wait`` / ``release`` (consumer side);
:data:`ROLE_STAGES` maps each to its :class:`ScheduleStage`.  Each role has an interleave
stride (``PipelineConfig.interleave_strides``: acquire, commit, wait, release).

Lanes: with stride ``k > 1`` the
ring is shared by ``k`` lanes; lane ``j`` starts at stage ``j`` and advances by ``k``.  A
task covers

* every lane ``0..k-1``, one per warp, when ``num_warps == k`` ("warp lanes");
* lane ``start % k`` when its domain loop has a compile-time ``start`` and ``step == k``
  ("domain lane");
* otherwise it has no valid lane (check P6 reports it; the credit simulation then treats
  the task as covering all lanes).

The task's ``c``-th operation of a role touches ring positions ``lane + c * k`` for each of
its lanes; position ``p`` is stage ``p % S``, generation ``p // S``.
"""
from __future__ import annotations

from dataclasses import dataclass

from tsjit.ts.enums import ScheduleStage
from tsjit.ts.pipeline import PipelineConfig
from tsjit.ts.protocol import cluster_size

__all__ = ["ROLE_STAGES", "ROLE_INDEX", "Lanes", "pipeline_config", "is_pipelined",
           "num_stages", "role_stride", "task_lanes", "role_tasks", "co_filling_tasks", "contains",
           "downstream_closure", "cluster_size"]

ROLE_STAGES = {
    "acquire": ScheduleStage.ProducerAcquire,
    "commit": ScheduleStage.ProducerCommit,
    "wait": ScheduleStage.ConsumerWait,
    "release": ScheduleStage.ConsumerRelease,
}
ROLE_INDEX = {"acquire": 0, "commit": 1, "wait": 2, "release": 3}


def contains(items, item) -> bool:
    return any(i is item for i in items)


def pipeline_config(resource) -> PipelineConfig | None:
    """The resource's :class:`PipelineConfig`, or None (no pipeline or a stand-in object)."""
    config = getattr(resource, "pipeline_config", None)
    return config if isinstance(config, PipelineConfig) else None


def is_pipelined(resource) -> bool:
    """True when the resource has a pipeline with an int ``num_stages`` (real or stand-in)."""
    stages = getattr(getattr(resource, "pipeline_config", None), "num_stages", None)
    return isinstance(stages, int) and not isinstance(stages, bool) and stages >= 1


def num_stages(resource) -> int:
    return resource.pipeline_config.num_stages


def role_stride(resource, role: str) -> int:
    config = pipeline_config(resource)
    return config.interleave_strides[ROLE_INDEX[role]] if config is not None else 1


@dataclass(frozen=True)
class Lanes:
    """The lanes one task covers for one role of one resource.

    ``kind``: ``"single"`` (stride 1), ``"warp"``, ``"domain"`` or ``"invalid"``;
    ``warps_per_lane``: the warps that arrive for one stage (1 for warp lanes).
    """

    kind: str
    lanes: tuple
    stride: int
    warps_per_lane: int
    reason: str = ""


def task_lanes(task, resource, role: str) -> Lanes:
    stride = role_stride(resource, role)
    if stride == 1:
        return Lanes("single", (0,), 1, task.num_warps)
    if task.num_warps == stride:
        return Lanes("warp", tuple(range(stride)), stride, 1)
    loop = task.schedule.domain_loop
    start = getattr(loop, "start", None)
    step = getattr(loop, "step", None)
    if isinstance(start, int) and isinstance(step, int) and step == stride:
        return Lanes("domain", (start % stride,), stride, task.num_warps)
    if not isinstance(start, int):
        reason = "its domain loop start is a run-time value"
    elif not isinstance(step, int):
        reason = "its domain loop step is a run-time value"
    else:
        reason = f"its domain loop step is {step}, not {stride}"
    return Lanes("invalid", tuple(range(stride)), stride, task.num_warps,
                 f"{task.describe()} has {task.num_warps} warp(s) (not {stride}) and {reason}")


def role_tasks(manager, resource, role: str) -> list:
    """Tasks whose schedule performs ``role`` on ``resource``, in task order."""
    stage = ROLE_STAGES[role]
    return [t for t in manager.tasks
            if any(s.resource is resource and s.stage is stage for s in t.schedule.steps)]


def co_filling_tasks(tasks, resource) -> list:
    """Producer tasks of ``resource`` that acquire (and so fill) a stage another producer task
    acquires too: several tasks filling one stage, each with its own copies (split A/B loads);
    empty when at most one task fills each stage (one producer, or interleave lanes)."""
    stage = ROLE_STAGES["acquire"]
    acquiring = [t for t in tasks
                 if any(s.resource is resource and s.stage is stage for s in t.schedule.steps)]
    lanes = {id(t): set(task_lanes(t, resource, "acquire").lanes) for t in acquiring}
    return [t for t in acquiring
            if any(u is not t and lanes[id(t)] & lanes[id(u)] for u in acquiring)]


def downstream_closure(manager, resource) -> list:
    """Resources transitively downstream of ``resource`` in the dependency graph."""
    graph = manager.resource_dependency_graph
    found: list = []
    frontier = [resource]
    while frontier:
        current = frontier.pop()
        for down, ups in graph.items():
            if contains(ups, current) and down is not resource and not contains(found, down):
                found.append(down)
                frontier.append(down)
    return found
