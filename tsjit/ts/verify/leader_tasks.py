"""Works on a leader-only side run on the leader only (check SG2).

SG2 In a cluster, ``SignalingThreads.CtaLeader`` makes one side of a Hopper ring leader-only
    (:func:`tsjit.ts.protocol.leader_only`): its wait (``consumer_wait_signaling_threads`` when set,
    else ``consumer_signaling_threads``) or its acquire (``producer_signaling_threads``) runs on the
    cluster's CTA 0 alone, and every CTA's cursor still advances.  A task that has works of that
    side on the ring (consumer works after the wait, producer works after the acquire) must then run
    on CTA 0 only (``Task(run_only_on_cta_id=0)``) -- so must a task that opens that side and works
    on a resource referencing the ring (a store reading the waited stage): on any other CTA its works
    would read a stage no wait guarded (the data lands on the leader) or write one no acquire freed,
    tracking a cursor of a ring that CTA never synchronises with; the interleaving checker sees no
    barrier there either.
    A task without works on that side (a releaser, an arming-only producer) may run everywhere.
"""
from __future__ import annotations

from tsjit.ts import protocol
from tsjit.ts.enums import ScheduleStage
from tsjit.ts.verify.exhaustive_model import referenced_rings
from tsjit.ts.verify.findings import Finding, error, step_message
from tsjit.ts.verify.pipelines import pipeline_config

__all__ = ["check_leader_side_tasks"]


def _leader_sides(config) -> dict:
    """``{works are producer works: the flag that makes that side leader-only}`` for ``config``."""
    out = {}
    if protocol.leader_only(config, "producer"):
        out[True] = "producer_signaling_threads"
    if protocol.leader_only(config, "wait"):
        out[False] = ("consumer_wait_signaling_threads" if config.consumer_wait_signaling_threads is not None
                      else "consumer_signaling_threads")
    return out


def _leader_side_work(task, resource, sides: dict) -> tuple:
    """``(work step, its side is the producer's)`` of the first work of ``task`` on a leader-only side of
    ``resource``: a work of that side on it, or, after the side's gated open (wait / acquire) in this task,
    a work on a resource whose fields reference it (``TileOut.smem``: the store reads the waited stage);
    ``(None, None)`` without one."""
    opens = {True: ScheduleStage.ProducerAcquire, False: ScheduleStage.ConsumerWait}
    opened = [producer for producer in sides
              if any(s.resource is resource and s.stage is opens[producer] for s in task.schedule.steps)]
    for step in task.schedule.steps:
        if not step.stage.is_work or step.is_aux:
            continue
        if step.resource is resource and step.stage.is_producer in sides:
            return step, step.stage.is_producer
        if opened and step.resource is not resource and \
                any(r is resource for r in referenced_rings(step.resource)):
            return step, opened[0]
    return None, None


def check_leader_side_tasks(manager) -> list[Finding]:
    """SG2: tasks working on a leader-only side run only on CTA 0 (see the module docstring)."""
    out: list[Finding] = []
    for resource in manager.resources:
        config = pipeline_config(resource)
        if config is None:
            continue
        sides = _leader_sides(config)
        if not sides:
            continue
        for task in manager.tasks:
            if task.run_only_on_cta_id == 0:
                continue
            work, producer = _leader_side_work(task, resource, sides)
            if work is None:
                continue
            opening = "acquire" if producer else "wait"
            where = ("on every CTA" if task.run_only_on_cta_id is None
                     else f"on CTA {task.run_only_on_cta_id}")
            out.append(error("SG2", step_message(
                task, work,
                f"works on the {'producer' if producer else 'consumer'} side of {resource.name!r} {where}, but "
                f"{resource.name}.{opening}() runs on the cluster's leader CTA (rank 0) only ({sides[producer]}="
                f"CtaLeader in a cluster of {protocol.cluster_size(config)} CTAs): elsewhere the work would "
                f"{'write a stage no acquire freed' if producer else 'read a stage no wait guarded'}",
                f"Run {task.name!r} on the leader only (Task(..., run_only_on_cta_id=0)), or set "
                f"{sides[producer]}=SignalingThreads.All so every CTA {opening}s its own stage.")))
    return out
