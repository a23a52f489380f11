"""Structural checks that need no pipeline (checks R0, G1, G4, N1, H1).

W0  tasks run on disjoint warp ranges (two tasks may share warps only when both set
    different ``run_only_on_cta_id``); resource names are unique.
R0  resource roles: a scheduled resource is declared by the task; a src-only resource
    is used with consumer stages only, a dst-only resource with producer stages only.
G1  every resource of the ``resource_dependency_graph`` is used by some task.
G2  every edge ``{down: [up]}`` ("consume up before producing down") is backed by a
    task with ``up`` in src and ``down`` in dst; with a barrier resource at either end a
    task mentioning both (any role) suffices; a self-edge ``{r: [r]}`` needs some task
    consuming ``r`` and some task producing it.
G3  every resource a task declares appears in the graph.
G4  every resource a task declares is used by its schedule.
N1  every work step's label resolves to a work method of its resource (did-you-mean on
    typos; an unlabelled step needs a single method of that stage; WorkQueue steps must
    be labelled).
H1  warning: one task produces the same resource in Head and in Loop (both see
    ``loop_offset`` = loop start, so the Head write probably duplicates a tile address).
"""
from __future__ import annotations

from tsjit.ts.enums import ScheduleStageType
from tsjit.ts.verify.findings import Finding, error, step_message, warning
from tsjit.ts.work import WorkLabelError, resolve_work

__all__ = ["check_warp_ranges", "check_resource_roles", "check_graph_resources_used",
           "check_graph_edges_backed", "check_task_resources_in_graph",
           "check_declared_resources_scheduled", "check_labels", "check_head_loop_overlap"]


def _contains(items, item) -> bool:
    return any(i is item for i in items)


def check_warp_ranges(manager) -> list[Finding]:
    """W0: disjoint warp ranges and unique resource names."""
    out = []
    tasks = manager.tasks
    for i, a in enumerate(tasks):
        for b in tasks[i + 1:]:
            overlap = a.warp_start < b.warp_end and b.warp_start < a.warp_end
            separate_ctas = (a.run_only_on_cta_id is not None and b.run_only_on_cta_id is not None
                             and a.run_only_on_cta_id != b.run_only_on_cta_id)
            if overlap and not separate_ctas:
                out.append(error("W0", (
                    f"{a.describe()} and {b.describe()} share warps "
                    f"[{max(a.warp_start, b.warp_start)}, {min(a.warp_end, b.warp_end)}); each "
                    f"warp runs one task.\n  Move {b.name!r} to warp_idx={a.warp_end} (or give "
                    f"both tasks different run_only_on_cta_id).")))
    seen: dict[str, object] = {}
    for resource in manager.resources:
        other = seen.setdefault(resource.name, resource)
        if other is not resource:
            out.append(error("W0", (
                f"two different resources are named {resource.name!r} ({type(other).__name__} "
                f"and {type(resource).__name__}); names identify resources in messages and "
                f"generated code.\n  Give each resource a unique name=.")))
    return out


def check_resource_roles(manager) -> list[Finding]:
    """R0: declared resources and consumer/producer roles per step."""
    out = []
    for task in manager.tasks:
        for step in task.schedule.steps:
            res = step.resource
            in_src = _contains(task.src_resources, res)
            in_dst = _contains(task.dst_resources, res)
            role = "consumes" if step.stage.is_consumer else "produces"
            wanted = "src_resources" if step.stage.is_consumer else "dst_resources"
            if not in_src and not in_dst:
                out.append(error("R0", step_message(
                    task, step, f"{role} {res.name!r}, which the task does not declare",
                    f"Add {res.name} to {wanted} of task {task.name!r}.")))
            elif step.stage.is_producer and not in_dst:
                out.append(error("R0", step_message(
                    task, step, f"produces {res.name!r} but lists it only in src_resources",
                    _counterpart_hint(task, step) or
                    f"Add {res.name} to dst_resources of task {task.name!r}, or move this "
                    f"step to the task that produces {res.name}.")))
            elif step.stage.is_consumer and not in_src:
                out.append(error("R0", step_message(
                    task, step, f"consumes {res.name!r} but lists it only in dst_resources",
                    _counterpart_hint(task, step) or
                    f"Add {res.name} to src_resources of task {task.name!r}, or move this "
                    f"step to the task that consumes {res.name}.")))
    return out


#: a pipeline operation of one role -> the operation the other role calls at that point.
_COUNTERPARTS = {"acquire": "wait", "try_acquire": "try_wait", "commit": "release",
                 "wait": "acquire", "try_wait": "try_acquire", "release": "commit"}


def _counterpart_hint(task, step) -> str | None:
    """For a pipeline operation of the wrong role (``acquire()`` in a consumer task): the operation the
    task's own role calls there (the usual slip), then the other fixes; None for work steps."""
    operation = step.stage.op_name
    if operation not in _COUNTERPARTS:
        return None
    res = step.resource.name
    mine, theirs = ("consumer", "producer") if step.stage.is_producer else ("producer", "consumer")
    wanted = "dst_resources" if step.stage.is_producer else "src_resources"
    return (f"{operation}() is a {theirs} operation; a {mine} task of {res} calls {res}.{_COUNTERPARTS[operation]}() "
            f"here. If task {task.name!r} is meant to {theirs[:-2]}e {res}, add {res} to its {wanted}, or "
            f"move this step to the task that does.")


def _graph_resources(manager) -> list:
    seen: list = []
    for down, ups in manager.resource_dependency_graph.items():
        for r in (down, *ups):
            if not _contains(seen, r):
                seen.append(r)
    return seen


def check_graph_resources_used(manager) -> list[Finding]:
    """G1: every graph resource is declared by some task."""
    out = []
    graph = manager.resource_dependency_graph
    for res in _graph_resources(manager):
        if any(_contains(t.resources, res) for t in manager.tasks):
            continue
        sides = []
        if any(d is res for d in graph):
            sides.append(f"downstream of {', '.join(u.name for u in graph[res]) or 'nothing'}")
        ups = [d.name for d, us in graph.items() if _contains(us, res)]
        if ups:
            sides.append(f"upstream of {', '.join(ups)}")
        out.append(error("G1", (
            f"resource {res.name!r} is in resource_dependency_graph ({'; '.join(sides)}) but no "
            f"task lists it in src_resources or dst_resources.\n  Remove its edges, or add "
            f"{res.name} to the task that uses it.")))
    return out


def check_graph_edges_backed(manager) -> list[Finding]:
    """G2: every edge is implemented by a task (relaxed for barriers and self-edges)."""
    out = []
    tasks = manager.tasks
    for down, ups in manager.resource_dependency_graph.items():
        for up in ups:
            edge = f"{{{down.name}: [{up.name}]}}"
            if up is down:
                consumers = [t for t in tasks if _contains(t.src_resources, up)]
                producers = [t for t in tasks if _contains(t.dst_resources, up)]
                if consumers and producers:
                    continue
                missing = "consumes" if not consumers else "produces"
                out.append(error("G2", (
                    f"self-edge {edge} (ping-pong) needs a task that consumes {up.name!r} and "
                    f"a task that produces it; no task {missing} it.\n  Add {up.name} to the "
                    f"{'src' if not consumers else 'dst'}_resources of the task that "
                    f"{missing} it, or remove the edge.")))
                continue
            if up.is_barrier or down.is_barrier:
                if any(_contains(t.resources, up) and _contains(t.resources, down) for t in tasks):
                    continue
                out.append(error("G2", (
                    f"edge {edge} involves a barrier resource, so some task must list both "
                    f"{up.name!r} and {down.name!r} (any role); none does.\n  Add the barrier "
                    f"resource to the task that handles {down.name if up.is_barrier else up.name}"
                    f", or remove the edge.")))
                continue
            if any(_contains(t.src_resources, up) and _contains(t.dst_resources, down)
                   for t in tasks):
                continue
            touching = [f"{t.describe()} src_resources [{', '.join(r.name for r in t.src_resources)}], "
                        f"dst_resources [{', '.join(r.name for r in t.dst_resources)}]"
                        for t in tasks if _contains(t.resources, up) or _contains(t.resources, down)]
            reversed_edge = any(_contains(t.src_resources, down) and _contains(t.dst_resources, up) for t in tasks)
            hint = (f"\n  The graph maps downstream to upstream, and a task consumes {down.name!r} and produces "
                    f"{up.name!r}: the edge is probably reversed; write {{{up.name}: [{down.name}]}}."
                    if reversed_edge else "")
            out.append(error("G2", (
                f"edge {edge} says 'consume {up.name} before producing {down.name}', but no "
                f"task has {up.name!r} in src_resources and {down.name!r} in dst_resources "
                f"(tasks touching them: {'; '.join(touching) or 'none'}).{hint}\n  Put both in one "
                f"task (src_resources=[{up.name}], dst_resources=[{down.name}]) or remove the "
                f"edge.")))
    return out


def check_task_resources_in_graph(manager) -> list[Finding]:
    """G3: every task resource appears in the graph (a PdlLaunchBarrier carries no data and is not
    expected there, as the reference says)."""
    in_graph = _graph_resources(manager)
    out = []
    for task in manager.tasks:
        for res in task.resources:
            if not _contains(in_graph, res) and not getattr(res, "is_pdl_launch", False):
                side = "src_resources" if _contains(task.src_resources, res) else "dst_resources"
                out.append(error("G3", (
                    f"{task.describe()} declares {res.name!r} in {side}, but "
                    f"resource_dependency_graph never mentions it, so its ordering is "
                    f"unchecked.\n  Add an edge, e.g. {{<downstream>: [{res.name}]}} or "
                    f"{{{res.name}: [<upstream>]}}.")))
    return out


def check_declared_resources_scheduled(manager) -> list[Finding]:
    """G4: every declared resource is used by the task's schedule."""
    out = []
    for task in manager.tasks:
        sched = task.schedule
        used = [s.resource for s in sched.steps]
        if sched.work_tile_loop is not None:
            used.append(sched.work_tile_loop.queue)
        for which, resources in (("src_resources", task.src_resources),
                                 ("dst_resources", task.dst_resources)):
            for res in resources:
                if not _contains(used, res):
                    out.append(error("G4", (
                        f"{task.describe()} declares {res.name!r} in {which}, but its schedule "
                        f"{sched.name!r} never uses it.\n  Remove {res.name} from {which}, or "
                        f"add its steps to the schedule.")))
    return out


def check_labels(manager) -> list[Finding]:
    """N1: work labels resolve to work methods."""
    out = []
    for task in manager.tasks:
        for step in task.schedule.steps:
            if not step.is_work:
                continue
            if step.resource.is_work_queue and step.label is None:
                out.append(error("N1", step_message(
                    task, step, f"has an unlabelled step on WorkQueue {step.resource.name!r}",
                    "Name the queue operation, e.g. get_and_advance_work_tile.")))
                continue
            try:
                _, spec = resolve_work(step.resource, step.stage, step.label)
            except WorkLabelError as exc:
                out.append(error("N1", step_message(task, step, "has a work step whose label "
                                                    "does not resolve", str(exc))))
                continue
            if step.spec is not None and step.spec.function is not spec.function:
                out.append(error("N1", step_message(
                    task, step, f"recorded work {step.label!r} no longer matches the method on "
                    f"{type(step.resource).__name__}", "Capture the schedule again.")))
    return out


def check_head_loop_overlap(manager) -> list[Finding]:
    """H1 (warning): the same resource produced in Head and Loop of one task."""
    out = []
    for task in manager.tasks:
        first: dict[int, dict] = {}
        for step in task.schedule.steps:
            if step.stage.is_work and step.stage.is_producer and not step.is_aux:
                first.setdefault(id(step.resource), {}).setdefault(step.section, step)
        for by_section in first.values():
            head = by_section.get(ScheduleStageType.Head)
            loop = by_section.get(ScheduleStageType.Loop)
            if head is None or loop is None:
                continue
            out.append(warning("H1", (
                f"[head-loop-overlap] WARNING: {task.describe()} produces "
                f"{head.resource.name!r} in Head (schedule step #{head.id} {head.display_call}) "
                f"and in Loop (step #{loop.id} {loop.display_call}); both see loop_offset = "
                f"loop start, so they may write the same tile.\n  Make the Head step auxiliary, "
                f"or move it into the loop under d.first_iter().")))
    return out
