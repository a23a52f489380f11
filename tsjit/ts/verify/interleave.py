"""Interleave, cluster-layout, split-consumer and ping-pong rules (checks P6, L1, SG1, PP).

P6  ``interleave_stride > 1`` is allowed for AsyncAsync (all roles), AsyncUmma (producer
    roles), TmaAsync (all roles, single CTA only), TmaUmma (all roles) and UmmaAsync
    (consumer roles).  Every task doing an interleaved role must be a lane: exactly
    ``stride`` warps (warp lanes), or a domain lane (compile-time domain start, step ==
    stride) whose open and close strides are equal.  The lanes of a role must cover
    ``0..stride-1`` exactly once (a missing lane leaves stages untouched, a doubled lane
    makes two tasks collide on one barrier).  A task that drives both sides of the
    resource needs equal producer and consumer strides.
L1  All tuple ``cta_layout_vmnk`` of pipelined resources are equal.  ``None`` next to an
    explicit layout is allowed; with ``verbose`` a ``[cta-layout-check] NOTE`` is printed.
SG1 ``consumer_wait_signaling_threads`` is only meaningful when some task waits on the
    resource without releasing it (a split consumer).
PP  A ping-pong self-edge ``{r: [r]}`` needs ``r`` pipelined, a thread-based consumer side
    (not TmaUmma / AsyncUmma / UmmaUmma), a task producing it and a task consuming it.
"""
from __future__ import annotations

from tsjit.ts.enums import ScheduleStage
from tsjit.ts.verbose import report
from tsjit.ts.verify.findings import Finding, error
from tsjit.ts.verify.pipelines import (ROLE_INDEX, ROLE_STAGES, cluster_size, is_pipelined,
                                       pipeline_config, role_tasks, task_lanes)

__all__ = ["check_interleave", "check_cta_layouts", "check_split_signaling", "check_ping_pong"]

_PARTNER = {"acquire": "commit", "commit": "acquire", "wait": "release", "release": "wait"}


def check_interleave(manager) -> list[Finding]:
    """P6: interleaved rings (see the module docstring)."""
    out: list[Finding] = []
    for resource in manager.resources:
        config = pipeline_config(resource)
        if config is None or not config.has_interleaved_stride:
            continue
        name, ptype = resource.name, config.pipeline_type
        strides = config.interleave_strides
        allowed = config.protocol.interleave_roles
        bad_roles = [r for r, i in ROLE_INDEX.items() if strides[i] > 1 and r not in allowed]
        if bad_roles:
            out.append(error("P6", (
                f"resource {name!r} ({ptype.value}) interleaves "
                f"{', '.join(f'{r} (stride {strides[ROLE_INDEX[r]]})' for r in bad_roles)}, but "
                f"{ptype.value} allows interleave only for "
                f"{', '.join(allowed) or 'no role'}.\n  Use interleave_stride=1 for those roles.")))
            continue
        if config.protocol.interleave_single_cta and cluster_size(config) > 1:
            out.append(error("P6", (
                f"resource {name!r} ({ptype.value}) is interleaved (strides {strides}) in a cluster "
                f"of {cluster_size(config)} CTAs; {ptype.value} interleave is single-CTA only.\n  "
                f"Drop interleave_stride or the cluster layout.")))
            continue
        for role, index in ROLE_INDEX.items():
            stride = strides[index]
            if stride > 1:
                out += _role_lanes(manager, resource, role, stride, strides)
        producer_stride, consumer_stride = strides[0], strides[2]
        if producer_stride != consumer_stride:
            for task in manager.tasks:
                sides = {s.stage.role for s in task.schedule.steps
                         if s.resource is resource and s.stage in ROLE_STAGES.values()}
                if len(sides) == 2:
                    out.append(error("P6", (
                        f"{task.describe()} drives both sides of {name!r}, whose producer "
                        f"stride {producer_stride} and consumer stride {consumer_stride} "
                        f"differ; its lanes cannot match both.\n  Use equal strides or split "
                        f"the roles into separate tasks.")))
    return out


def _role_lanes(manager, resource, role, stride, strides) -> list[Finding]:
    name = resource.name
    out = []
    covered: dict[int, list] = {lane: [] for lane in range(stride)}
    for task in role_tasks(manager, resource, role):
        lanes = task_lanes(task, resource, role)
        if lanes.kind == "invalid":
            out.append(error("P6", (
                f"{lanes.reason}, so it is not a lane of {name!r}'s {role} (stride {stride}).\n"
                f"  Give the task exactly {stride} warps (one lane per warp), or a domain loop "
                f"domain_loop(lane, end, {stride}) with a compile-time lane.")))
            continue
        partner = _PARTNER[role]
        if lanes.kind == "domain" and strides[ROLE_INDEX[partner]] != stride:
            out.append(error("P6", (
                f"{task.describe()} is domain lane {lanes.lanes[0]} of {name!r}, but its "
                f"{role} stride {stride} differs from its {partner} stride "
                f"{strides[ROLE_INDEX[partner]]}; a domain lane needs equal open/close "
                f"strides.\n  Use the same stride for {role} and {partner}.")))
        for lane in lanes.lanes:
            covered[lane].append(task)
    if out:
        return out
    missing = [lane for lane, tasks in covered.items() if not tasks]
    doubled = {lane: tasks for lane, tasks in covered.items() if len(tasks) > 1}
    if missing and any(covered.values()):
        stages = [s for s in range(resource.pipeline_config.num_stages) if s % stride in missing]
        out.append(error("P6", (
            f"resource {name!r}: {role} (stride {stride}) lane(s) {missing} are covered by no "
            f"task, so stages {stages} are never {role}d.\n  Add a task (or warp) for each lane "
            f"0..{stride - 1}.")))
    for lane, tasks in doubled.items():
        out.append(error("P6", (
            f"resource {name!r}: {role} lane {lane} (stride {stride}) is driven by "
            f"{' and '.join(t.describe() for t in tasks)}; they collide on the same barriers.\n"
            f"  Give each task its own lane.")))
    return out


def check_cta_layouts(manager) -> list[Finding]:
    """L1: equal tuple cta_layout_vmnk across pipelined resources."""
    layouts = []
    unset = []
    for resource in manager.resources:
        config = pipeline_config(resource)
        if config is None:
            continue
        layout = config.cta_layout_vmnk
        if layout is None:
            unset.append(resource)
        elif isinstance(layout, tuple):
            layouts.append((resource, tuple(layout)))
    out = []
    if layouts:
        first, reference = layouts[0]
        for resource, layout in layouts[1:]:
            if layout != reference:
                out.append(error("L1", (
                    f"resources {first.name!r} and {resource.name!r} disagree on "
                    f"cta_layout_vmnk: {reference} vs {layout}; one kernel has one cluster "
                    f"shape.\n  Use the same (V, M, N, K) for every pipeline.")))
        if unset and not out and manager.verbose:
            report(f"[cta-layout-check] NOTE: {', '.join(r.name for r in unset)} "
                  f"{'has' if len(unset) == 1 else 'have'} no cta_layout_vmnk while "
                  f"{first.name} uses {reference}; they are treated as single-CTA.")
    return out


def check_split_signaling(manager) -> list[Finding]:
    """SG1: consumer_wait_signaling_threads only on split consumers."""
    pointless = []
    for resource in manager.resources:
        config = pipeline_config(resource)
        if config is None or config.consumer_wait_signaling_threads is None:
            continue
        split = any(
            any(s.resource is resource and s.stage is ScheduleStage.ConsumerWait
                for s in t.schedule.steps)
            and not any(s.resource is resource and s.stage is ScheduleStage.ConsumerRelease
                        for s in t.schedule.steps)
            for t in manager.tasks)
        if not split:
            pointless.append(resource.name)
    if not pointless:
        return []
    return [error("SG1", (
        f"consumer_wait_signaling_threads is set on {', '.join(repr(n) for n in pointless)}, "
        f"but no task waits on {'it' if len(pointless) == 1 else 'them'} without releasing "
        f"(no split consumer), so the wait and release signalling cannot differ.\n  Remove "
        f"consumer_wait_signaling_threads, or split the wait and the release into different "
        f"tasks."))]


def check_ping_pong(manager) -> list[Finding]:
    """PP: ping-pong self-edges."""
    out = []
    for down, ups in manager.resource_dependency_graph.items():
        if not any(u is down for u in ups):
            continue
        name = down.name
        problems = []
        if not is_pipelined(down):
            problems.append("it has no pipeline_config (a self-edge needs barriers to hand "
                            "the buffer back and forth)")
        else:
            config = pipeline_config(down)
            if config is not None and not config.protocol.consumer_synchronous:
                problems.append(f"its consumer side is {config.pipeline_type.value} "
                                f"(tcgen05), which releases asynchronously; a ping-pong buffer "
                                f"needs a thread-based (synchronous) release")
        produces = [t for t in manager.tasks if any(
            s.resource is down and s.stage.is_producer for s in t.schedule.steps)]
        consumes = [t for t in manager.tasks if any(
            s.resource is down and s.stage.is_consumer for s in t.schedule.steps)]
        if not produces:
            problems.append("no task's schedule produces it")
        if not consumes:
            problems.append("no task's schedule consumes it")
        for problem in problems:
            out.append(error("PP", (
                f"ping-pong self-edge {{{name}: [{name}]}}: {problem}.\n  Fix the resource or "
                f"remove the self-edge.")))
    return out
