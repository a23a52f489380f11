"""How the exhaustive checker models the CTAs of a cluster: by symmetry, or every CTA.

A cluster runs the same kernel on ``C`` CTAs, each with its own shared memory and barriers.  An
arrival lands on CTAs the protocol table names (:class:`~tsjit.ts.protocol.Ctas`).

*Symmetric reduction* (the default).  When every CTA runs every task and each arrival routing
treats all CTAs alike -- ``Local``, ``AllInCluster``, ``MulticastPeers`` -- every CTA's barrier
receives the same arrivals at the same points of the same processes: the CTAs are
interchangeable, so one CTA's processes and barriers stand for all, with each arrival multiplied
by the CTAs whose arrivals land on one barrier (:meth:`~tsjit.ts.protocol.Ctas.factor`).

*Every CTA* (:func:`cluster_plan` says when).  The reduction is unsound as soon as CTAs differ:

* a task with ``run_only_on_cta_id=k`` runs on CTA ``k`` only;
* an action executed by the CTA leader only (:attr:`~tsjit.ts.protocol.Who.CtaLeader`), or gated to the
  cluster's leader CTA (:attr:`~tsjit.ts.protocol.Gate.Leader`, ``SignalingThreads.CtaLeader``): the other
  CTAs skip it, and their cursors advance all the same (check SG2 keeps works of such a side on CTA 0);
  or gated to the leader of each 2-CTA pair (:attr:`~tsjit.ts.protocol.Gate.PairLeader`): the peer's copy
  of the task skips it and does no work there;
* an arrival routed to one CTA (``PairLeader``, ``ClusterLeader``), or a ``tcgen05.commit``
  multicast to a 2-CTA pair (``pair_size > 1``): the leader's barrier receives what the
  others' do not.

Then each CTA gets its own copy of every process that runs there and of every barrier and
shared-memory region, and each arrival goes to the barriers of the CTAs :func:`targets` lists.

CTA ranks follow ``cta_layout_vmnk = (V, M, N, K)`` with V fastest:
``rank = v + V * (m + M * (n + N * k))``.  The pair leader of rank ``c`` is ``c - c % V``; the
CTA leader (``CtaLeader``) is a pair leader (rank 0 for CLC rings).  TMA copies complete on the
issuing CTA's full barrier (a multicast copy's bytes are counted where they are issued, which
equals what each CTA receives when every CTA issues its share).
"""
from __future__ import annotations

from dataclasses import dataclass

from tsjit.ts import protocol
from tsjit.ts.protocol import CommitUmma, Ctas, Gate, SideKind, Who

__all__ = ["ClusterPlan", "cluster_plan", "targets", "acts_on", "copy_landing"]


@dataclass(frozen=True)
class ClusterPlan:
    """``ctas``: the CTAs modelled one by one (``(None,)`` under the symmetric reduction);
    ``reason``: why every CTA is modelled ("" for the reduction)."""

    ctas: tuple
    reason: str = ""

    @property
    def explicit(self) -> bool:
        return self.ctas != (None,)


def _layout(config) -> tuple:
    layout = getattr(config, "cta_layout_vmnk", None)
    if isinstance(layout, tuple) and len(layout) == 4 and all(isinstance(x, int) for x in layout):
        return layout
    return (1, 1, 1, 1)


def _asymmetry(tasks, ring_config, pipeline_ops) -> str:
    for task in tasks:
        rings = [s.resource for s in task.schedule.steps if ring_config(s.resource) is not None]
        if task.run_only_on_cta_id is not None and any(
                protocol.cluster_size(ring_config(r)) > 1 for r in rings):
            return f"task {task.name!r} runs only on CTA {task.run_only_on_cta_id}"
        for step in task.schedule.steps:
            config = ring_config(step.resource)
            if config is None or step.stage not in pipeline_ops or protocol.cluster_size(config) == 1:
                continue
            for action in protocol.actions(config, step.stage, task.num_warps):
                who, ctas = getattr(action, "who", None), getattr(action, "ctas", Ctas.Local)
                if getattr(action, "gate", None) is Gate.Leader:
                    why = f"{type(action).__name__} on {Gate.Leader.value}"
                elif getattr(action, "gate", None) is Gate.PairLeader:
                    why = f"executed by {Gate.PairLeader.value}"
                elif who is Who.CtaLeader:
                    why = f"executed by {who.value}"
                elif ctas in (Ctas.PairLeader, Ctas.ClusterLeader):
                    why = f"arrives on {ctas.value}"
                elif isinstance(action, CommitUmma) and protocol.pair_size(config) > 1:
                    why = "a tcgen05.commit multicast to the CTAs of a pair"
                else:
                    continue
                return f"{step.resource.name!r} {step.stage.name}: {why}"
    return ""


def cluster_plan(tasks, ring_config, pipeline_ops) -> ClusterPlan:
    """Symmetric reduction or every CTA for ``tasks`` (see the module docstring)."""
    sizes = [protocol.cluster_size(ring_config(r)) for t in tasks for r in t.resources
             if ring_config(r) is not None]
    size = max(sizes, default=1)
    if size == 1:
        return ClusterPlan((None,))
    reason = _asymmetry(tasks, ring_config, pipeline_ops)
    return ClusterPlan(tuple(range(size)), reason) if reason else ClusterPlan((None,))


def _leader(config, cta: int) -> int:
    if protocol.row(config).producer is SideKind.Clc:
        return 0
    v = _layout(config)[0]
    return cta - cta % v


def acts_on(action, config, cta) -> bool:
    """Whether the process on ``cta`` (None: the symmetric reduction) executes ``action``."""
    if cta is None:
        return True
    if getattr(action, "gate", None) is Gate.Leader:      # a CtaLeader side of a Hopper ring
        return cta == 0
    if getattr(action, "gate", None) is Gate.PairLeader:  # a CtaLeader UMMA side of a 2-CTA pair
        return cta % _layout(config)[0] == 0
    if getattr(action, "who", None) is not Who.CtaLeader:
        return True
    return _leader(config, cta) == cta


def copy_landing(config, cta: int) -> int:
    """The CTA whose full barrier the TMA copies a process on ``cta`` issues complete on, when they are
    leader-routed: the pair leader (TmaUmma over 2-CTA pairs), else the cluster's leader."""
    if protocol.copies_to_pair_leader(config):
        return _leader(config, cta)
    return 0


def targets(action, config, cta: int) -> tuple:
    """The CTAs whose copy of the barrier ``action`` (executed on ``cta``) arrives on."""
    size = protocol.cluster_size(config)
    if size == 1:
        return (cta,)
    ctas = getattr(action, "ctas", Ctas.Local)
    v, m_extent, n_extent, _ = _layout(config)
    if isinstance(action, CommitUmma) and ctas is Ctas.Local:
        base = cta - cta % v             # a pair's commit is multicast to both CTAs of the pair
        return tuple(range(base, base + v))
    if ctas is Ctas.Local:
        return (cta,)
    if ctas is Ctas.AllInCluster:
        return tuple(range(size))
    if ctas is Ctas.PairLeader:
        return (cta - cta % v,)
    if ctas is Ctas.ClusterLeader:
        return (0,)
    # MulticastPeers: the CTAs of this CTA's multicast row (same n) and / or column (same m)
    mode = tuple(config.mcast_mode_mn) if config.mcast_mode_mn is not None else (0, 0)
    m, n = (cta // v) % m_extent, (cta // (v * m_extent)) % n_extent
    out = []
    for rank in range(size):
        rm, rn = (rank // v) % m_extent, (rank // (v * m_extent)) % n_extent
        if rank % v == cta % v and ((mode[0] and rn == n) or (mode[1] and rm == m)):
            out.append(rank)
    return tuple(out) or (cta,)
