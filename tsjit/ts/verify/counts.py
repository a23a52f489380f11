"""Barrier arrival counts and TMA transaction bytes (inventory §2.3 rows P1, P2).

P1  Each barrier's arrival count (``producer_group.size`` for the full barriers,
    ``consumer_group.size`` for the empty barriers) must equal the arrivals the tasks
    make per stage.  Who arrives, per side kind:

    ============================  =====================================================
    thread side (AsyncThread      every thread of each signalling warp (``W x 32``) or
    producer; AsyncAsync /        one lane per warp (``W``); AsyncLoad producers only
    TmaAsync consumer)            ``W x 32`` (``cp.async.mbarrier.arrive.noinc``)
    TMA producer (TmaAsync,       one elected lane per producer warp arms full[i] with
    TmaUmma)                      ``arrive.expect_tx``: ``W``; with ``TaskWarpLeader``
                                  only the first warp of each task: ``#tasks``
    TmaAsync consumer             all-thread mode ``W x 32`` (local barrier only), or
                                  ``W x lanes`` where lanes = CTAs a release reaches
                                  (1 single CTA; M, N or M+N-1 for multicast (1,0),
                                  (0,1), (1,1) of ``cta_layout_vmnk`` (V, M, N, K))
    tcgen05 commit sides          1 (TmaUmma consumer: cluster/V with CtaLeader, else
                                  cluster size)
    CLC                           producer 1; consumers ``W x 32 x cluster``
    UMMA-paired thread sides      ``x V`` (UmmaAsync consumer, AsyncUmma producer)
    ============================  =====================================================

    ``W`` is summed over the tasks doing the side's barrier operation (commit for thread
    producers, acquire for TMA producers, release for consumers) that cover one stage:
    a whole task, or one warp of a warp-lane interleaved task.  The message gives the
    given and expected values, the formula and the tasks.
P2  A TMA producer's ``num_bytes`` must match what its copies deliver.  When the resource
    reports ``tma_bytes_per_stage()`` (by default the ``box_bytes`` of its only TensorMap
    field), ``num_bytes`` must equal it divided by the arming warps per stage.  Otherwise,
    when ``num_bytes_per_warp_per_cta`` is given, ``num_bytes`` must equal it x (V for
    TmaUmma, cluster size otherwise, when the consumer is ``CtaLeader``-only) x (the
    task's warps under ``TaskWarpLeader``); that field is required for a multi-warp
    ``TaskWarpLeader`` task and for a leader-only consumer in a cluster.
"""
from __future__ import annotations

from tsjit.ts.pipeline import PipelineOp, PipelineType, SignalingThreads
from tsjit.ts.verify.findings import Finding, error, warning
from tsjit.ts.verify.pipelines import cluster_size, pipeline_config, role_tasks, task_lanes

__all__ = ["check_arrival_counts", "check_tma_bytes", "signalling_units"]


def signalling_units(manager, resource, role: str, per_warp: int = 1,
                     per_task: bool = False) -> tuple[list[int], list]:
    """Arrivals per stage for ``role`` (``per_warp`` each, or one per task) and the tasks."""
    config = resource.pipeline_config
    tasks = role_tasks(manager, resource, role)
    per_stage = [0] * config.num_stages
    for task in tasks:
        lanes = task_lanes(task, resource, role)
        unit = 1 if per_task else lanes.warps_per_lane * per_warp
        for stage in range(config.num_stages):
            if stage % lanes.stride in lanes.lanes:
                per_stage[stage] += unit
    return per_stage, tasks


def _tasks_text(tasks) -> str:
    return "; ".join(t.describe() for t in tasks)


def _mcast_lanes(config) -> tuple[int, str]:
    layout = config.cta_layout_vmnk
    mode = tuple(config.mcast_mode_mn) if config.mcast_mode_mn is not None else None
    if not isinstance(layout, tuple) or cluster_size(config) == 1 or mode is None:
        return 1, "1 lane (single CTA, no multicast)"
    _, m, n, _ = layout
    lanes = {(1, 0): m, (0, 1): n, (1, 1): m + n - 1}[mode]
    return lanes, f"{lanes} lanes (multicast {mode} over cluster M={m}, N={n})"


def _side_message(resource, config, side, given, options, tasks, fix) -> str:
    group = f"{side}_group"
    expected = " or ".join(f"{value} ({formula})" for value, formula in options)
    return (f"resource {resource.name!r} ({config.pipeline_type.value}) {side} side: "
            f"{group}.size is {given}, but the {'full' if side == 'producer' else 'empty'} "
            f"barrier receives {expected} arrivals per stage from {_tasks_text(tasks)} "
            f"(signalling {getattr(config, side + '_signaling_threads').name or 'All'}).\n"
            f"  {fix}")


def _check_side(resource, config, side, given, per_stage_options, tasks) -> list[Finding]:
    """``per_stage_options``: [(per-stage list, formula)] -- any may match."""
    if not tasks:
        return []
    for per_stage, formula in per_stage_options:
        if len(set(per_stage)) > 1:
            return [error("P1", (
                f"resource {resource.name!r} ({config.pipeline_type.value}) {side} side: "
                f"stages receive different arrival counts {per_stage} ({formula}) from "
                f"{_tasks_text(tasks)}; one {side}_group size cannot fit all stages.\n  Give "
                f"every interleave lane the same number of warps (domain-lane and per-warp "
                f"lanes may not mix)."))]
    options = [(p[0], f) for p, f in per_stage_options]
    if any(value == given for value, _ in options):
        return []
    best = options[0][0]
    fix = (f"Set {side}_group=CooperativeGroup(Agent.Thread, {best})"
           + (f" (or {options[1][0]})" if len(options) > 1 else "") + ".")
    return [error("P1", _side_message(resource, config, side, given, options, tasks, fix))]


def check_arrival_counts(manager) -> list[Finding]:
    """P1: arrival counts of both barrier sides (see the module docstring)."""
    out: list[Finding] = []
    for resource in manager.resources:
        config = pipeline_config(resource)
        if config is None:
            continue
        layout = config.cta_layout_vmnk
        if layout is not None and not (isinstance(layout, tuple) and len(layout) == 4
                                       and all(isinstance(x, int) for x in layout)):
            out.append(warning("P1", (
                f"[pipeline-thread-check] WARNING: resource {resource.name!r} has an opaque "
                f"cta_layout_vmnk ({type(layout).__name__}); its arrival counts are not "
                f"checked. Pass a (V, M, N, K) tuple to check them.")))
            continue
        out += _producer_counts(manager, resource, config)
        out += _consumer_counts(manager, resource, config)
    return out


def _producer_counts(manager, resource, config) -> list[Finding]:
    kind = config.pipeline_type.producer_kind
    given = config.producer_group.size
    v = config.cta_layout_vmnk[0] if isinstance(config.cta_layout_vmnk, tuple) else 1
    if kind == "async":
        threads, tasks = signalling_units(manager, resource, "commit", 32)
        warps, _ = signalling_units(manager, resource, "commit", 1)
        scale = v if config.pipeline_type is PipelineType.AsyncUmma else 1
        threads, warps = [t * scale for t in threads], [w * scale for w in warps]
        suffix = f" x V={v}" if scale > 1 else ""
        options = [(threads, f"every thread: warps x 32{suffix}")]
        if config.producer_op is not PipelineOp.AsyncLoad:
            options.append((warps, f"one lane per warp: warps x 1{suffix}"))
        return _check_side(resource, config, "producer", given, options, tasks)
    if kind == "tma":
        leader = bool(config.producer_signaling_threads & SignalingThreads.TaskWarpLeader)
        per_task, tasks = signalling_units(manager, resource, "acquire", per_task=True)
        warps, _ = signalling_units(manager, resource, "acquire", 1)
        if leader:
            found = _check_side(resource, config, "producer", given,
                                [(per_task, "TaskWarpLeader: 1 arming warp per task")], tasks)
            if found and warps and warps[0] == given:
                found = [error("P1", found[0].message.split("\n")[0] + (
                    f"\n  {given} matches one arming lane per producer warp: drop "
                    f"TaskWarpLeader from producer_signaling_threads, or set "
                    f"producer_group size {per_task[0]}."))]
            return found
        found = _check_side(resource, config, "producer", given,
                            [(warps, "one elected lane per producer warp arms expect_tx")], tasks)
        if found and per_task and per_task[0] == given and given != (warps or [0])[0]:
            found = [error("P1", found[0].message.split("\n")[0] + (
                f"\n  {given} matches one arming warp per task: set producer_signaling_"
                f"threads=SignalingThreads.TaskWarpLeader (and num_bytes to the task's "
                f"aggregate bytes), or producer_group size {warps[0]}."))]
        return found
    if kind == "umma":
        _, tasks = signalling_units(manager, resource, "commit")
        return _check_side(resource, config, "producer", given,
                           [([1] * config.num_stages, "one tcgen05.commit")], tasks)
    _, tasks = signalling_units(manager, resource, "acquire")   # clc
    return _check_side(resource, config, "producer", given,
                       [([1] * config.num_stages, "one CLC query (CTA 0)")], tasks)


def _consumer_counts(manager, resource, config) -> list[Finding]:
    ptype = config.pipeline_type
    given = config.consumer_group.size
    cluster = cluster_size(config)
    v = config.cta_layout_vmnk[0] if isinstance(config.cta_layout_vmnk, tuple) else 1
    leader = bool(config.consumer_signaling_threads & SignalingThreads.CtaLeader)
    threads, tasks = signalling_units(manager, resource, "release", 32)
    warps, _ = signalling_units(manager, resource, "release", 1)
    if ptype.consumer_kind == "umma":
        count = (cluster // v if leader else cluster)
        formula = (f"one tcgen05.commit per CTA: cluster {cluster} / V {v} (CtaLeader)" if leader
                   else f"one tcgen05.commit per CTA of the cluster ({cluster})")
        if ptype is not PipelineType.TmaUmma:
            count, formula = 1, "one tcgen05.commit"
        return _check_side(resource, config, "consumer", given,
                           [([count] * config.num_stages, formula)], tasks)
    if ptype is PipelineType.ClcFetchAsync:
        return _check_side(resource, config, "consumer", given,
                           [([t * cluster for t in threads],
                             f"every thread of every CTA: warps x 32 x cluster {cluster}")],
                           tasks)
    if ptype is PipelineType.TmaAsync:
        lanes, lanes_text = _mcast_lanes(config)
        options = [([w * lanes for w in warps], f"warps x {lanes_text}")]
        if lanes == 1 or leader:
            options.insert(0, (threads, "all-thread mode: every consumer thread, warps x 32"))
        return _check_side(resource, config, "consumer", given, options, tasks)
    scale = v if ptype is PipelineType.UmmaAsync else 1
    suffix = f" x V={v}" if scale > 1 else ""
    return _check_side(resource, config, "consumer", given,
                       [([t * scale for t in threads], f"every thread: warps x 32{suffix}"),
                        ([w * scale for w in warps], f"one lane per warp: warps x 1{suffix}")],
                       tasks)


def check_tma_bytes(manager) -> list[Finding]:
    """P2: TMA transaction bytes per stage (see the module docstring)."""
    out: list[Finding] = []
    for resource in manager.resources:
        config = pipeline_config(resource)
        if config is None or config.pipeline_type.producer_kind != "tma":
            continue
        tasks = role_tasks(manager, resource, "acquire")
        if not tasks:
            continue
        leader = bool(config.producer_signaling_threads & SignalingThreads.TaskWarpLeader)
        per_stage, _ = signalling_units(manager, resource, "acquire", 1, per_task=leader)
        arms = per_stage[0]
        name, given = resource.name, config.num_bytes
        total = resource.tma_bytes_per_stage() if hasattr(resource, "tma_bytes_per_stage") \
            else None
        if isinstance(total, int) and not isinstance(total, bool) and arms > 0:
            expected = total // arms
            if total % arms or expected != given:
                out.append(error("P2", (
                    f"resource {name!r} ({config.pipeline_type.value}): num_bytes is {given}, "
                    f"but one stage's TMA copies deliver {total} B ({name}.tma_bytes_per_stage()"
                    f") and {arms} warp(s) arm the full barrier with num_bytes each ("
                    f"{_tasks_text(tasks)}): expected {total} / {arms} = "
                    f"{total / arms:g}.\n  Set num_bytes={expected if not total % arms else '?'}"
                    f" (or override tma_bytes_per_stage() if a stage loads several boxes); a "
                    f"short count completes the stage early, a long one hangs.")))
            continue
        cluster = cluster_size(config)
        v = config.cta_layout_vmnk[0] if isinstance(config.cta_layout_vmnk, tuple) else 1
        leader_consumer = bool(config.consumer_signaling_threads & SignalingThreads.CtaLeader)
        cta_factor = (v if config.pipeline_type is PipelineType.TmaUmma else cluster) \
            if leader_consumer else 1
        warp_factor = max(t.num_warps for t in tasks) if leader else 1
        per_warp = config.num_bytes_per_warp_per_cta
        if per_warp is None:
            if (leader and warp_factor > 1) or cta_factor > 1:
                why = ("TaskWarpLeader aggregates the bytes of several warps" if leader
                       and warp_factor > 1 else
                       f"the leader-only consumer gets the bytes of {cta_factor} CTAs")
                out.append(error("P2", (
                    f"resource {name!r} ({config.pipeline_type.value}): {why}, so "
                    f"num_bytes_per_warp_per_cta is required to check num_bytes={given}.\n"
                    f"  Pass num_bytes_per_warp_per_cta= (the bytes one producer warp's "
                    f"copies deliver to one CTA).")))
            continue
        expected = per_warp * cta_factor * warp_factor
        if expected != given:
            out.append(error("P2", (
                f"resource {name!r} ({config.pipeline_type.value}): num_bytes is {given}, "
                f"expected num_bytes_per_warp_per_cta {per_warp} x CTAs {cta_factor} x "
                f"warps per arming {warp_factor} = {expected}.\n  Set num_bytes={expected}.")))
    return out
