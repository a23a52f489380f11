"""Work-queue placement (check Q1) as real errors.

Q1  In a persistent kernel (some task has a WorkQueue in ``src_resources``):

* every task is persistent (a task outside the work tile loop would run once per CTA
  while the others run once per tile), and all use the same queue;
* ``init_work_tile`` (auxiliary) may only sit before the ``work_tile_loop``;
* every other queue operation sits inside the work tile loop, after the domain loop
  (Tail), and the tile body ends with exactly ``[try_wait,] wait,
  get_and_advance_work_tile, release`` -- nothing after it (a later step would see the
  next tile);
* static scheduling: no task produces the queue;
* CLC scheduling: exactly one scheduler task, whose ``dst_resources`` is only the queue;
  it is the only producer and its tile epilogue is ``[try_acquire,] acquire,
  fetch_work_tile, commit`` followed by the consumer sequence.
"""
from __future__ import annotations

from tsjit.ts.enums import ScheduleStage, ScheduleStageType
from tsjit.ts.verify.findings import Finding, error

__all__ = ["check_work_queues", "CONSUMER_TAIL", "PRODUCER_TAIL"]

S = ScheduleStage
CONSUMER_TAIL = ((S.ConsumerTryWait, None), (S.ConsumerWait, None),
                 (S.ConsumerWork, "get_and_advance_work_tile"), (S.ConsumerRelease, None))
PRODUCER_TAIL = ((S.ProducerTryAcquire, None), (S.ProducerAcquire, None),
                 (S.ProducerWork, "fetch_work_tile"), (S.ProducerCommit, None))
_INIT = "init_work_tile"


def _text(sequence) -> str:
    parts = []
    for stage, label in sequence:
        parts.append(label or stage.op_name or stage.name)
    return ", ".join(parts) or "nothing"


def _expected(with_producer: bool) -> str:
    consumer = "[try_wait,] wait, get_and_advance_work_tile, release"
    return ("[try_acquire,] acquire, fetch_work_tile, commit, " + consumer) if with_producer \
        else consumer


def _matches(found: list, expected: tuple) -> bool:
    """``found`` equals ``expected`` with its optional first element (the probe) or not."""
    full = [(s, l) for s, l in expected]
    return found == full or found == full[1:]


def check_work_queues(manager) -> list[Finding]:
    """Q1 (see the module docstring)."""
    persistent = [t for t in manager.tasks if t.is_persistent]
    if not persistent:
        return []
    out: list[Finding] = []
    others = [t for t in manager.tasks if not t.is_persistent]
    queue = persistent[0].work_queue
    if others:
        out.append(error("Q1", (
            f"{', '.join(t.describe() for t in persistent)} loop over work tiles of "
            f"{queue.name!r}, but {', '.join(t.describe() for t in others)} "
            f"{'is' if len(others) == 1 else 'are'} not persistent and would run once per CTA "
            f"instead of once per tile.\n  Make every task persistent (src_resources=[..., "
            f"{queue.name}] and a work_tile_loop ending with {_expected(False)}), or none.")))
    queues = []
    for task in persistent:
        if all(q is not task.work_queue for q in queues):
            queues.append(task.work_queue)
    if len(queues) > 1:
        out.append(error("Q1", (
            f"persistent tasks use {len(queues)} different WorkQueues "
            f"({', '.join(repr(q.name) for q in queues)}); one kernel has one tile queue.\n  Use "
            f"the same WorkQueue in every task.")))
        return out
    static = getattr(queue, "is_static", True)
    producers = [t for t in manager.tasks if any(
        s.resource is queue and s.stage.is_producer for s in t.schedule.steps)
        or any(r is queue for r in t.dst_resources)]
    if static and producers:
        out.append(error("Q1", (
            f"WorkQueue {queue.name!r} uses static persistent scheduling, which has no "
            f"producer, but {', '.join(t.describe() for t in producers)} produce"
            f"{'s' if len(producers) == 1 else ''} it.\n  Remove {queue.name} from "
            f"dst_resources and drop its acquire/fetch_work_tile/commit steps (only CLC "
            f"scheduling has a scheduler task).")))
    if not static:
        if len(producers) != 1:
            out.append(error("Q1", (
                f"WorkQueue {queue.name!r} uses CLC scheduling, which needs exactly one "
                f"scheduler task producing it; found {len(producers)}"
                f"{': ' + ', '.join(t.describe() for t in producers) if producers else ''}.\n"
                f"  Add one task with dst_resources=[{queue.name}] whose tile epilogue is "
                f"{_expected(True)}.")))
        for task in producers:
            extra = [r.name for r in task.dst_resources if r is not queue]
            if extra:
                out.append(error("Q1", (
                    f"{task.describe()} is the CLC scheduler task of {queue.name!r} but also "
                    f"produces {', '.join(repr(n) for n in extra)}.\n  The scheduler task's "
                    f"dst_resources must be only [{queue.name}].")))
    for task in persistent:
        out += _task_tail(task, queue, with_producer=any(t is task for t in producers)
                          and not static)
    return out


def _task_tail(task, queue, with_producer: bool) -> list[Finding]:
    out = []
    wtl = task.schedule.work_tile_loop
    expected = _expected(with_producer)
    for step in task.schedule.steps:
        if step.resource is not queue:
            continue
        if step.label == _INIT and step.work_loop_slot is None:
            out.append(error("Q1", (
                f"{task.describe()}: {step.describe()} is inside the work tile loop, so it "
                f"would re-seed the tile every iteration.\n  Call {queue.name}.init_work_tile() "
                f"before `with work_tile_loop({queue.name}...)`.")))
        elif step.label != _INIT and step.work_loop_slot is not None:
            out.append(error("Q1", (
                f"{task.describe()}: {step.describe()} is outside the work tile loop.\n  Move "
                f"it into the loop's tile epilogue ({expected}).")))
        elif step.label != _INIT and step.section is not ScheduleStageType.Tail:
            out.append(error("Q1", (
                f"{task.describe()}: {step.describe()} is in the {step.section} section; "
                f"queue operations belong after the domain loop (Tail), once per tile.\n  Move "
                f"it after `with domain_loop(...)`.")))
    if out or wtl is None:
        return out
    body = [s for s in task.schedule.steps if s.work_loop_slot is None]
    first = next((i for i, s in enumerate(body) if s.resource is queue), None)
    found = [(s.stage, s.label if s.stage.is_work else None) for s in body[first:]] \
        if first is not None else []
    tail = (PRODUCER_TAIL if with_producer else ()) + CONSUMER_TAIL
    ok = False
    if with_producer:
        for produce in (list(PRODUCER_TAIL), list(PRODUCER_TAIL[1:])):
            rest = found[len(produce):]
            if found[:len(produce)] == produce and _matches(rest, CONSUMER_TAIL):
                ok = True
    else:
        ok = _matches(found, CONSUMER_TAIL)
    if not ok:
        where = f" starting at schedule step #{body[first].id}" if first is not None else ""
        calls = "; ".join(f"{queue.name}.{label or stage.op_name}()" for stage, label in tail
                          if stage not in (S.ProducerTryAcquire, S.ConsumerTryWait))
        out.append(error("Q1", (
            f"{task.describe()}: the work tile loop of schedule {task.schedule.name!r} must end "
            f"with exactly {expected}; found {_text(found)}{where}.\n  End the tile body "
            f"with {calls} (nothing after it: a later step would see the next tile).")))
    return out
