"""Transaction bytes of TMA rings: what one arming (``mbarrier.arrive.expect_tx``) announces and what the
copies of one stage deliver (check P2, the lowering's ``ArmTx``, the interleaving model's copies).

``num_bytes`` is the bytes one stage's copies deliver to one armed full barrier.  Three ways to say how
they are split between the arming warps:

* one arming warp (or ``TaskWarpLeader``): it arms ``num_bytes``;
* ``num_bytes_per_warp_per_cta``: every producer warp's copies bring that much from each CTA whose copies
  land on the barrier (:func:`tx_cta_factor`); each warp arms its share;
* per producer work (several producer tasks filling one stage with different boxes, CUTLASS TS
  tutorial 04's split A/B loads): the resource's ``tma_bytes_per_stage()`` returns
  ``{producer work label: bytes one call delivers into one CTA's stage}``; each acquire then arms exactly
  the bytes of the works between it and its commit (:func:`arm_bytes`), times the CTAs whose copies land
  on the barrier.  ``num_bytes`` is the sum over one stage's works.
"""
from __future__ import annotations

from tsjit.ts.enums import ScheduleStage
from tsjit.ts.protocol import (SideKind, SignalingThreads, Who, cluster_size, copies_to_pair_leader, pair_size,
                               producer_arm_who, row)

__all__ = ["tx_cta_factor", "stage_copy_bytes", "work_bytes", "bracket_works", "arm_bytes", "arming_units"]


def tx_cta_factor(config) -> int:
    """CTAs whose bytes one armed barrier receives (check P2): with a ``CtaLeader``-only waiting
    consumer (``consumer_wait_signaling_threads`` when set) the leader's barrier gets V (TmaUmma) or
    the cluster's (otherwise) CTAs' bytes; a TmaUmma ring over 2-CTA pairs always routes both CTAs'
    completions to the pair leader (:func:`~tsjit.ts.protocol.copies_to_pair_leader`): V; else 1."""
    if copies_to_pair_leader(config):
        return pair_size(config)
    wait = config.consumer_wait_signaling_threads
    if wait is None:
        wait = config.consumer_signaling_threads
    if not wait & SignalingThreads.CtaLeader:
        return 1
    # an UMMA consumer (TmaUmma) waits per pair: its leader gets the pair's bytes
    return pair_size(config) if row(config).consumer is SideKind.Umma else cluster_size(config)


def stage_copy_bytes(config, warps: int) -> tuple[int, int]:
    """``(total bytes, units)`` the asynchronous copies of one stage deliver to one CTA's full
    barrier when ``warps`` producer warps issue them: with ``num_bytes_per_warp_per_cta`` each
    warp's copy brings that much from each CTA whose copies land on the barrier (on the Hopper
    rows :func:`tx_cta_factor` of them; ``units = warps``); otherwise the bytes the arming actions
    announced, as one unit."""
    per_warp = config.num_bytes_per_warp_per_cta
    if per_warp is not None:
        # the CTAs whose copies land on one armed barrier (every CTA's on a leader-only consumer's, both
        # CTAs' on a pair leader's, else this CTA's own copies or the ones multicast into it)
        ctas = tx_cta_factor(config)
        return per_warp * ctas * warps, warps
    return config.num_bytes * producer_arm_who(config).arrivals(warps), 1


def work_bytes(resource) -> dict | None:
    """``{producer work label: bytes one call brings into one CTA's stage}`` when the resource's
    ``tma_bytes_per_stage()`` returns such a mapping (see the module docstring), else None."""
    method = getattr(resource, "tma_bytes_per_stage", None)
    value = method() if callable(method) else None
    if isinstance(value, dict) and all(isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool)
                                       for k, v in value.items()):
        return value
    return None


def bracket_works(task, resource, acquire) -> list:
    """The producer work steps of ``task`` on ``resource`` between the acquire step ``acquire`` and its
    commit (in schedule order, the same section)."""
    steps = task.schedule.steps
    index = next((i for i, s in enumerate(steps) if s is acquire), None)
    if index is None:
        return []
    out = []
    for step in steps[index + 1:]:
        if step.resource is not resource or step.section is not acquire.section:
            continue
        if step.stage is ScheduleStage.ProducerCommit or step.stage is ScheduleStage.ProducerAcquire:
            break
        if step.stage is ScheduleStage.ProducerWork and not step.is_aux:
            out.append(step)
    return out


def arming_units(config, task, warps: int) -> int:
    """Arming actions one acquire of ``task`` makes (``warps`` warps signal a stage): one per warp, or one
    (``TaskWarpLeader``, CLC)."""
    return producer_arm_who(config).arrivals(warps) if producer_arm_who(config) is Who.ElectedPerWarp else 1


def arm_bytes(config, resource, task, acquire, warps: int) -> int | None:
    """Bytes each arming action of the acquire step ``acquire`` of ``task`` announces with per-work bytes
    (:func:`work_bytes`): its bracket's works' bytes times the CTAs whose copies land on the barrier,
    split evenly between its arming warps; None without per-work bytes (every arming announces
    ``num_bytes``), or when a work's label is missing or the bytes do not split (check P2 says so)."""
    table = work_bytes(resource)
    if table is None or acquire is None or acquire.stage is not ScheduleStage.ProducerAcquire:
        return None
    works = bracket_works(task, resource, acquire)
    if not works or any(w.label not in table for w in works):
        return None
    total = sum(table[w.label] for w in works) * tx_cta_factor(config)
    units = arming_units(config, task, warps)
    return total // units if total % units == 0 else None
