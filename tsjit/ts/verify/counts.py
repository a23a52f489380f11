"""Barrier arrival counts and TMA transaction bytes (checks P1, P2).

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
    ``TaskWarpLeader`` task, for a leader-only consumer in a cluster and for several producer
    tasks filling one stage (split A/B loads: each task arms and brings its own bytes, into its
    own part of the stage).  With per-work bytes (``tma_bytes_per_stage()`` returns
    ``{producer work label: bytes}``, :mod:`tsjit.ts.tx_bytes`) each acquire arms exactly its
    bracket's bytes: every work must be listed, ``num_bytes`` must be the stage's sum (x the CTAs
    of a leader-only consumer), and ``num_bytes_per_warp_per_cta``, if given, every warp's share.
    With none of these (a resource of several TensorMap fields that does not override
    ``tma_bytes_per_stage()``), P2 cannot know the bytes: it checks nothing and leaves a note in the
    ``verbose=True`` report.
"""
from __future__ import annotations

from tsjit.ts.protocol import SideKind, Signal, Who, signals, warps_per_stage
from tsjit.ts.enums import ScheduleStage
from tsjit.ts.tx_bytes import arming_units, bracket_works, tx_cta_factor, work_bytes
from tsjit.ts.verify.findings import Finding, at_config, error, note, warning
from tsjit.ts.verify.pipelines import co_filling_tasks, pipeline_config, role_tasks, task_lanes

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
        out += at_config(_side_counts(manager, resource, config, "producer"), config)
        out += at_config(_side_counts(manager, resource, config, "consumer"), config)
    return out


def _per_stage(manager, resource, config, signal: Signal) -> tuple[list[int], list]:
    """Arrivals per stage one :class:`~tsjit.ts.protocol.Signal` option delivers, and its tasks."""
    if signal.who is None:
        _, tasks = signalling_units(manager, resource, signal.role)
        return [signal.count] * config.num_stages, tasks
    if signal.who is Who.ElectedInFirstWarp or signal.who is Who.CtaLeader:
        per_stage, tasks = signalling_units(manager, resource, signal.role, per_task=True)
    else:
        per_warp = signal.who.arrivals(1)
        per_stage, tasks = signalling_units(manager, resource, signal.role, per_warp)
    return [n * signal.factor for n in per_stage], tasks


def _side_counts(manager, resource, config, side: str) -> list[Finding]:
    options, tasks = [], []
    for signal in signals(config, side):
        per_stage, tasks = _per_stage(manager, resource, config, signal)
        options.append((per_stage, signal.formula))
    given = (config.producer_group if side == "producer" else config.consumer_group).size
    found = _check_side(resource, config, side, given, options, tasks)
    if found and side == "producer" and config.protocol.producer is SideKind.Tma:
        found = _arming_hint(manager, resource, config, given, found)
    return found


def _arming_hint(manager, resource, config, given, found) -> list[Finding]:
    """A TMA producer count that matches the *other* arming mode names the flag to change."""
    per_task, _ = signalling_units(manager, resource, "acquire", per_task=True)
    warps, _ = signalling_units(manager, resource, "acquire", 1)
    first = found[0].message.split("\n")[0]
    if signals(config, "producer")[0].who is Who.ElectedInFirstWarp:      # TaskWarpLeader
        if warps and warps[0] == given:
            return [error("P1", first + (
                f"\n  {given} matches one arming lane per producer warp: drop "
                f"TaskWarpLeader from producer_signaling_threads, or set "
                f"producer_group size {per_task[0]}."))]
    elif per_task and per_task[0] == given and given != (warps or [0])[0]:
        return [error("P1", first + (
            f"\n  {given} matches one arming warp per task: set producer_signaling_"
            f"threads=SignalingThreads.TaskWarpLeader (and num_bytes to the task's "
            f"aggregate bytes), or producer_group size {warps[0]}."))]
    return found


def _co_filling_error(resource, config, fillers) -> Finding:
    steps = [next(s for s in t.schedule.steps if s.resource is resource
                  and s.stage.is_producer and not s.stage.is_work) for t in fillers]
    listed = "\n".join(f"    {t.describe()}: {s.describe()}" for t, s in zip(fillers, steps))
    return error("P2", (
        f"resource {resource.name!r} ({config.pipeline_type.value}): {len(fillers)} producer tasks "
        f"acquire and fill the same stages, each arming the full barrier with its own expect_tx:\n"
        f"{listed}\n  but num_bytes_per_warp_per_cta is not set, so nothing says how many bytes "
        f"each task's copies bring, nor that they fill separate parts of the stage.\n  Pass "
        f"num_bytes_per_warp_per_cta= (the bytes one producer warp's copies deliver to one CTA; "
        f"num_bytes = it x CTAs, armed by each producer warp), or give each task its own ring."))


def _check_work_bytes(resource, config, tasks, fillers) -> list[Finding]:
    """P2 with per-work bytes (``tma_bytes_per_stage()`` returns ``{label: bytes}``): every bracket's works
    are listed, each acquire's bytes split over its arming warps, the stage's works sum to ``num_bytes``,
    and ``num_bytes_per_warp_per_cta``, when given, is every arming warp's share."""
    table, name = work_bytes(resource), resource.name
    ctas = tx_cta_factor(config)
    out, per_task, shares = [], {}, {}
    for task in tasks:
        for acquire in (s for s in task.schedule.steps if s.resource is resource
                        and s.stage is ScheduleStage.ProducerAcquire):
            works = bracket_works(task, resource, acquire)
            missing = sorted({w.label for w in works if w.label not in table})
            if missing:
                out.append(error("P2", (
                    f"resource {name!r}: {name}.tma_bytes_per_stage() gives the bytes of the producer works "
                    f"{sorted(table)}, but {task.describe()} fills the stage with "
                    f"{', '.join(repr(m) for m in missing)} after {acquire.describe()}.\n  Add "
                    f"{', '.join(repr(m) for m in missing)} to the mapping (bytes one call brings into one "
                    f"CTA's stage).")))
                continue
            total = sum(table[w.label] for w in works) * ctas
            units = arming_units(config, task, warps_per_stage(task.num_warps, config.interleave_strides[1]))
            if total % units:
                out.append(error("P2", (
                    f"resource {name!r}: {task.describe()}'s copies after {acquire.describe()} bring {total} B, "
                    f"which its {units} arming warps cannot split evenly.\n  Use one producer warp per task "
                    f"(or TaskWarpLeader), or boxes whose bytes divide by {units}.")))
                continue
            per_task.setdefault(task.name, total)
            shares[task.name] = total // units // ctas
    if out:
        return out
    filling = [t.name for t in (fillers or tasks) if t.name in per_task]
    stage_total = sum(per_task[t] for t in filling) if fillers else max(per_task.values(), default=0)
    if stage_total != config.num_bytes:
        parts = " + ".join(f"{per_task[t]} ({t!r})" for t in filling)
        out.append(error("P2", (
            f"resource {name!r} ({config.pipeline_type.value}): num_bytes is {config.num_bytes}, but one "
            f"stage's copies bring {parts} = {stage_total} B (per-work bytes of {name}.tma_bytes_per_stage()"
            f"{f' x CTAs {ctas}' if ctas > 1 else ''}); each task arms its own part.\n  Set "
            f"num_bytes={stage_total}.")))
    per_warp = config.num_bytes_per_warp_per_cta
    if per_warp is not None and any(share != per_warp for share in shares.values()):
        listed = ", ".join(f"{t!r} {share} B" for t, share in shares.items())
        out.append(error("P2", (
            f"resource {name!r}: num_bytes_per_warp_per_cta={per_warp}, but the arming warps' copies bring "
            f"{listed} per CTA (per-work bytes of {name}.tma_bytes_per_stage()).\n  Drop "
            f"num_bytes_per_warp_per_cta (each task arms its own bytes), or set it to the common share.")))
    return out


def check_tma_bytes(manager) -> list[Finding]:
    """P2: TMA transaction bytes per stage (see the module docstring)."""
    out: list[Finding] = []
    for resource in manager.resources:
        config = pipeline_config(resource)
        if config is None or config.protocol.producer is not SideKind.Tma:
            continue
        out += at_config(_tma_bytes(manager, resource, config), config)
    return out


def _unchecked_bytes(resource, config) -> Finding:
    """The P2 note (``verbose=True`` report only) for a resource whose stage bytes the checker cannot know: it has no
    ``tma_bytes_per_stage()`` answer (it has several TensorMap fields) and no
    ``num_bytes_per_warp_per_cta``.  Without one of them a wrong ``num_bytes`` is found only on the
    GPU (a hang when too large, a stage completed early when too small) or by the interpreter."""
    name = resource.name
    which = f"{len(resource.tensor_map_fields())} TensorMap fields"
    return note("P2", (
        f"note: resource {name!r} ({config.pipeline_type.value}): num_bytes={config.num_bytes} is not checked "
        f"against the TMA copies: {name} has {which}, so {name}.tma_bytes_per_stage() cannot say what one "
        f"stage's copies deliver.\n  Override tma_bytes_per_stage() to return the stage's bytes (e.g. the sum "
        f"of its boxes' box_bytes), or pass num_bytes_per_warp_per_cta= to the pipeline config."))


def _tma_bytes(manager, resource, config) -> list[Finding]:
    """P2 for one TMA-produced resource."""
    out: list[Finding] = []
    tasks = role_tasks(manager, resource, "acquire")
    if not tasks:
        return out
    fillers = co_filling_tasks(manager.tasks, resource)
    if work_bytes(resource) is not None:
        out += _check_work_bytes(resource, config, tasks, fillers)
        return out
    if len(fillers) > 1 and config.num_bytes_per_warp_per_cta is None:
        out.append(_co_filling_error(resource, config, fillers))
        return out
    leader = signals(config, "producer")[0].who is Who.ElectedInFirstWarp   # TaskWarpLeader
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
        return out
    cta_factor = tx_cta_factor(config)
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
        elif len(resource.tensor_map_fields()) > 1:
            out.append(_unchecked_bytes(resource, config))
        return out
    expected = per_warp * cta_factor * warp_factor
    if expected != given:
        out.append(error("P2", (
            f"resource {name!r} ({config.pipeline_type.value}): num_bytes is {given}, "
            f"expected num_bytes_per_warp_per_cta {per_warp} x CTAs {cta_factor} x "
            f"warps per arming {warp_factor} = {expected}.\n  Set num_bytes={expected}.")))
    return out
