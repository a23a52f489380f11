"""Bracketing and DMA ordering (checks B1, B2, D1).

All three walk each task's *executed* step sequence (:func:`executed_steps`: Head, the
Loop body for up to three simulated trips with FirstIter/LastIter guards applied, Tail,
and two tiles for persistent tasks), so an open in the loop and a close in the tail, or a
wait under ``first_iter`` with an unguarded release, are judged as they run.

B1  On a pipelined resource, each side's work must sit in a bracket: consumer works
    between a ``wait`` and a ``release``, producer works between an ``acquire`` and a
    ``commit``.  Auxiliary works and ``try_*`` probes are exempt.  A second open before
    the close needs the split cursor (``advance_on_wait`` / ``advance_on_acquire``).
    Split roles: a task may only open (wait without release) when another task closes
    that side, and only close when another task opens it; a split consumer's release must
    follow a wait on a resource downstream of the ring (the waiting task signals it after
    its reads), or nothing orders the release after the reads.  A task with works but no open
    and no close of that side is allowed only when it opens (waits on or acquires) a
    resource transitively downstream of this one earlier (that open proves the data is
    ready: split consumer/producer).
B2  Every ``try_wait`` / ``try_acquire`` must be followed by its blocking ``wait`` /
    ``acquire`` before any other operation of that side of the resource.
D1  DMA ordering: for an edge ``{B: [A]}`` whose ``B`` has a hardware-async producer
    (TmaAsync, TmaUmma, UmmaAsync, UmmaUmma, ClcFetchAsync), a task that consumes ``A``
    and produces ``B`` must issue a ``B`` producer work after each previous ``A.release``
    and before the next one (the copy or MMA reading ``A`` is issued before ``A`` is
    handed back).  ``TaskManager(dma_consumer_release_labels={(A, B): {"label", ...}})``
    restricts which ``B`` producer-work labels count; a label ``B`` does not have is an
    error.  A task with no ``B`` producer work at all gets a warning.
"""
from __future__ import annotations

from tsjit.ts.enums import ScheduleStage
from tsjit.ts.simulate import expand_schedule, simulated_trip_count
from tsjit.ts.verify.findings import Finding, error, step_message, warning
from tsjit.ts.verify.pipelines import contains, downstream_closure, is_pipelined, \
    pipeline_config
from tsjit.ts.work import work_methods

__all__ = ["executed_steps", "check_bracketing", "check_try_ops", "check_dma_ordering"]

_SIDES = {
    "consumer": dict(open=ScheduleStage.ConsumerWait, close=ScheduleStage.ConsumerRelease,
                     work=ScheduleStage.ConsumerWork, probe=ScheduleStage.ConsumerTryWait,
                     open_name="wait", close_name="release", split_flag="advance_on_wait"),
    "producer": dict(open=ScheduleStage.ProducerAcquire, close=ScheduleStage.ProducerCommit,
                     work=ScheduleStage.ProducerWork, probe=ScheduleStage.ProducerTryAcquire,
                     open_name="acquire", close_name="commit", split_flag="advance_on_acquire"),
}


def executed_steps(task, max_iterations: int = 3, dynamic_trip_count: int = 2) -> list:
    """The task's executed sequence (see the module docstring), as SimulatedSteps; run-time domains
    take ``dynamic_trip_count`` iterations (the TaskManager option of that name)."""
    schedule = task.schedule
    trips = simulated_trip_count(schedule, max(max_iterations, dynamic_trip_count), dynamic_trip_count)
    tiles = 2 if schedule.work_tile_loop is not None else 1
    return expand_schedule(schedule, trips, tiles=tiles)


def _where(entry) -> str:
    return f" (iteration {entry.iteration})" if entry.iteration is not None else ""


def _someone_else(manager, task, resource, stage) -> bool:
    return any(t is not task and any(s.resource is resource and s.stage is stage
                                     for s in t.schedule.steps) for t in manager.tasks)


def _proxy_open(manager, task, resource, entries, before_index) -> bool:
    downstream = downstream_closure(manager, resource)
    for entry in entries[:before_index]:
        if entry.step.stage in (ScheduleStage.ConsumerWait, ScheduleStage.ProducerAcquire) \
                and contains(downstream, entry.step.resource):
            return True
    return False


def check_bracketing(manager) -> list[Finding]:
    """B1: works inside their open/close brackets (see the module docstring)."""
    out: list[Finding] = []
    for task in manager.tasks:
        entries = executed_steps(task, dynamic_trip_count=manager.options.dynamic_trip_count)
        resources = [r for r in task.resources if is_pipelined(r)]
        for resource in resources:
            config = pipeline_config(resource)
            for side, rule in _SIDES.items():
                out += _bracket_side(manager, task, resource, config, side, rule, entries)
    return out


def _bracket_side(manager, task, resource, config, side, rule, entries) -> list[Finding]:
    mine = [(i, e) for i, e in enumerate(entries) if e.step.resource is resource
            and e.step.stage in (rule["open"], rule["close"], rule["work"])]
    if not mine:
        return []
    name = resource.name
    opens = any(e.step.stage is rule["open"] for _, e in mine)
    closes = any(e.step.stage is rule["close"] for _, e in mine)
    split_cursor = bool(getattr(config, rule["split_flag"], False))
    other_opens = _someone_else(manager, task, resource, rule["open"])
    other_closes = _someone_else(manager, task, resource, rule["close"])
    found: dict[tuple, Finding] = {}

    def report(entry, kind, what, fix):
        key = (entry.step.id, kind)
        if key not in found:
            found[key] = error("B1", step_message(task, entry.step, what + _where(entry), fix))

    open_call, close_call = f"{name}.{rule['open_name']}()", f"{name}.{rule['close_name']}()"
    if not opens and not closes:
        first_index, first = mine[0]
        if not _proxy_open(manager, task, resource, entries, first_index):
            report(first, "bracket", f"works on {side} side of {name!r} without any "
                   f"{rule['open_name']}/{rule['close_name']} in this task",
                   f"Put the work between {open_call} and {close_call}, or open (wait on / "
                   f"acquire) a resource downstream of {name} before it (split "
                   f"{side}).")
        return list(found.values())
    depth = 0
    last_open = None
    for index, entry in mine:
        stage = entry.step.stage
        if stage is rule["open"]:
            if depth > 0 and not split_cursor:
                report(entry, "double-open", f"calls {open_call} again before "
                       f"{close_call} closes the previous one (opened at schedule step "
                       f"#{last_open.step.id})",
                       f"Call {close_call} first, or set {rule['split_flag']}=True in the "
                       f"pipeline config to keep several stages open.")
            depth += 1
            last_open = entry
        elif stage is rule["work"]:
            if depth == 0 and not (not opens and other_opens
                                   and _proxy_open(manager, task, resource, entries, index)):
                article = "an" if rule["open_name"][0] in "aeiou" else "a"
                report(entry, "work-outside", f"works on {name!r} outside {article} "
                       f"{rule['open_name']}/{rule['close_name']} bracket (no open "
                       f"{rule['open_name']} before it)",
                       f"Call {open_call} before this work and {close_call} after it.")
        else:
            if depth == 0:
                if not (not opens and other_opens):
                    report(entry, "close-without-open", f"calls {close_call} without a "
                           f"preceding {open_call}",
                           f"Add {open_call} before it, or move the {rule['close_name']} "
                           f"to the task that calls {rule['open_name']}.")
                elif side == "consumer" and not _proxy_open(manager, task, resource, entries, index):
                    report(entry, "unordered-close", *_unordered_release(manager, task, resource))
            else:
                depth -= 1
    if depth > 0 and not (not closes and other_closes):
        report(last_open, "missing-close", f"opens {name!r} with {open_call} but never "
               f"calls {close_call} after it", f"Add {close_call} after the work on {name}.")
    return list(found.values())


def _unordered_release(manager, task, resource) -> tuple[str, str]:
    """What and fix of a split consumer's release that nothing orders after the other task's wait."""
    name = resource.name
    waiters = [t for t in manager.tasks if t is not task and any(
        s.resource is resource and s.stage is ScheduleStage.ConsumerWait for s in t.schedule.steps)]
    waiter = waiters[0].name if waiters else "the waiting task"
    downstream = [r.name for r in downstream_closure(manager, resource)
                  if is_pipelined(r) and any(contains(t.dst_resources, r) for t in waiters)]
    signal = downstream[0] if downstream else "done"
    graph = "" if downstream else f" (a ring downstream of {name}: graph {{done: [{name}]}})"
    what = (f"releases {name!r} without waiting on it or on a resource downstream of it; the wait is in "
            f"task {waiter!r}, and nothing orders this release after that task's reads of the stage "
            f"(the stage may be refilled while it reads, or released before it is filled)")
    fix = (f"Split consumer: let {waiter!r} signal {signal}{graph} after its reads ({signal}.acquire(); "
           f"{signal}.commit()), and call {signal}.wait() in {task.name!r} before {name}.release() (then "
           f"{signal}.release()); or release {name} in {waiter!r} itself.")
    return what, fix


def check_try_ops(manager) -> list[Finding]:
    """B2: each try_wait/try_acquire is followed by its blocking op."""
    out: list[Finding] = []
    for task in manager.tasks:
        entries = executed_steps(task)
        reported: set = set()
        for index, entry in enumerate(entries):
            step = entry.step
            side = next((s for s, r in _SIDES.items() if step.stage is r["probe"]), None)
            if side is None or step.id in reported:
                continue
            rule = _SIDES[side]
            following = [e for e in entries[index + 1:] if e.step.resource is step.resource
                         and e.step.stage.role is step.stage.role and not e.step.is_aux]
            if following and following[0].step.stage is rule["open"]:
                continue
            reported.add(step.id)
            probe = "try_wait" if side == "consumer" else "try_acquire"
            found = (f"is followed by {following[0].step.describe()}" if following
                     else "is never followed by anything of that side")
            out.append(error("B2", step_message(
                task, step, f"{step.resource.name}.{probe}() {found}{_where(entry)}, not by "
                f"{step.resource.name}.{rule['open_name']}()",
                f"Call {step.resource.name}.{rule['open_name']}() right after the "
                f"{probe}() (the probe only lets the blocking op skip its wait), or drop "
                f"the {probe}().")))
    return out


def _label_filter(manager, up, down) -> set | None:
    table = manager.options.dma_consumer_release_labels or {}
    for key, labels in table.items():
        if isinstance(key, tuple) and len(key) == 2:
            a, b = key
            if (a is up or a == up.name) and (b is down or b == down.name):
                return {labels} if isinstance(labels, str) else set(labels)
    return None


def check_dma_ordering(manager) -> list[Finding]:
    """D1: a downstream hardware-async producer work between releases of the upstream."""
    out: list[Finding] = []
    for down, ups in manager.resource_dependency_graph.items():
        config = pipeline_config(down)
        if config is None or not config.protocol.producer_hardware_async:
            continue
        for up in ups:
            if up is down or not is_pipelined(up):
                continue
            labels = _label_filter(manager, up, down)
            if labels is not None:
                producer_labels = {l for l, spec in work_methods(down).items()
                                   if spec.stage is ScheduleStage.ProducerWork}
                unknown = sorted(labels - producer_labels)
                if unknown:
                    out.append(error("D1", (
                        f"dma_consumer_release_labels[({up.name}, {down.name})] names "
                        f"{', '.join(repr(u) for u in unknown)}, which are not producer works "
                        f"of {down.name!r} (it has "
                        f"{', '.join(repr(p) for p in sorted(producer_labels)) or 'none'}).\n"
                        f"  Use the labels of the {down.name} producer works that read "
                        f"{up.name}.")))
                    continue
            for task in manager.tasks:
                if contains(task.src_resources, up) and contains(task.dst_resources, down):
                    out += _dma_task(task, up, down, config, labels)
    return out


def _dma_task(task, up, down, config, labels) -> list[Finding]:
    def counts(step):
        return (step.resource is down and step.stage is ScheduleStage.ProducerWork
                and (labels is None or step.label in labels))

    if not any(counts(s) for s in task.schedule.steps):
        if not any(s.resource is up and s.stage is ScheduleStage.ConsumerRelease
                   for s in task.schedule.steps):
            return []
        return [warning("D1", (
            f"[dma-ordering] WARNING: {task.describe()} releases {up.name!r} and produces "
            f"{down.name!r} ({config.pipeline_type.value}, hardware-async), but has no "
            f"{down.name} producer work{' with a label in ' + str(sorted(labels)) if labels else ''}"
            f"; nothing orders the release after the copy/MMA that reads {up.name}."))]
    out = []
    seen = False
    reported: set = set()
    for entry in executed_steps(task):
        step = entry.step
        if counts(step):
            seen = True
        elif step.resource is up and step.stage is ScheduleStage.ConsumerRelease:
            if not seen and step.id not in reported:
                reported.add(step.id)
                out.append(error("D1", step_message(
                    task, step, f"releases {up.name!r}{_where(entry)} before issuing a "
                    f"{down.name!r} producer work since the previous release; {down.name} is "
                    f"{config.pipeline_type.value} (hardware-async), so the release may hand "
                    f"{up.name} back while the copy/MMA reading it has not been issued "
                    f"(edge {{{down.name}: [{up.name}]}})",
                    f"Move {up.name}.release() after the {down.name} producer work that reads "
                    f"{up.name}.")))
            seen = False
    return out
