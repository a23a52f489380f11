"""Lowering of mbarrier pipelines, part 1: where the barriers live and their initialisation.

:class:`PipelineStorage` says where one pipelined resource's barriers are in the kernel's single
dynamic shared-memory block (full[0..S) then empty[0..S), 8 bytes each; a pipeline-group member's
are arrays of its group's) and with which arrival counts they are initialised (the protocol
table's :class:`~tsjit.ts.protocol.Ring` counts).  :func:`place_allocator` reserves the
TaskManager's SMEM-allocator layout, :func:`allocate` places every ring's barriers (and declares
the cluster shape of the launch), :func:`initialize` has one thread initialise them all
(PTX ISA §9.7.13.15.10 ``mbarrier.init``), then ``fence.mbarrier_init`` and a CTA (or cluster)
barrier.  The operations on the barriers are :mod:`tsjit.ts.lower_pipeline`'s.
"""
from __future__ import annotations

from tsjit.errors import CompilationError
from tsjit.lang import builtins as B
from tsjit.lang import dtypes as dt
from tsjit.lang import sync
from tsjit.lang.memory import shared_pointer
from tsjit.lang.tcgen05 import TCGEN05_TARGETS
from tsjit.lang.values import compare
from tsjit.ts import protocol
from tsjit.ts.group import group_of
from tsjit.ts.group_protocol import barrier_owners
from tsjit.ts.protocol import BarrierKind
from tsjit.ts.verify.counts import signalling_units

__all__ = ["PipelineStorage", "place_allocator", "allocate", "initialize", "side_signal_warps"]


class PipelineStorage:
    """Where one resource's barriers live and how many arrivals each side makes.

    Under a cluster of C CTAs (``cta_layout_vmnk``), a TmaAsync ring is shared cluster-wide: the
    producers multicast parts of a stage into every CTA, so a stage may only be refilled once the
    consumers of *all* C CTAs released it: every consumer arrival goes to the empty barrier of each
    CTA of the cluster (remote arrives), and the empty barriers expect C x ``consumer_group.size``.
    """

    def __init__(self, resource, offset: int, empty_offset: int | None = None, signalling: tuple | None = None):
        cfg = resource.pipeline_config
        # warps of all tasks that signal one stage, and those tasks' names, per side (P1's count: several
        # consumer tasks may release one ring, and each one's arrivals count toward consumer_group.size)
        self.signal_warps, self.signal_tasks = signalling or ({}, {})
        self.resource = resource
        self.config = cfg
        self.ring = protocol.ring(cfg, resource)
        self.stages = self.ring.stages
        self.offset = offset
        # a pipeline-group member: its full and empty barriers are separate arrays of the group's
        self.empty_offset = offset + 8 * self.stages if empty_offset is None else empty_offset
        self.group = group_of(resource)
        self.cluster = self.ring.cluster

    def barrier(self, kind: BarrierKind, index) -> object:
        """full[index] or empty[index]."""
        return self.full(index) if kind is BarrierKind.Full else self.empty(index)

    def full(self, index) -> object:
        return shared_pointer(self.offset, dt.Int64, 8).offset(index)

    def empty(self, index) -> object:
        return shared_pointer(self.empty_offset, dt.Int64, 8).offset(index)

    def arrays(self) -> list:
        """``(offset, stages, count)`` of each barrier array this storage initialises: its full and
        empty barriers; none for a group member (:func:`initialize` initialises the group's once)."""
        if self.group is not None:
            return []
        return [(self.offset, self.stages, self.ring.full_count),
                (self.empty_offset, self.stages, self.ring.empty_count)]


def place_allocator(ctx, manager):
    """Reserve the TaskManager's SMEM-allocator layout (data allocations and ring barriers) as one region
    of the kernel's dynamic shared-memory block; returns its byte offset (None without an allocator).
    Every :class:`~tsjit.ts.memory.SmemAllocation` then knows its device address (``block_base``)."""
    allocator = getattr(manager, "smem_allocator", None)
    if allocator is None or not allocator.is_laid_out or allocator.total_bytes == 0:
        return None
    base = ctx.reserve_shared(allocator.total_bytes, max(1024, allocator.max_alignment))
    for alloc in allocator.allocations:
        alloc.block_base = base
    return base


def side_signal_warps(manager, resource) -> tuple[dict, dict]:
    """``({side: W}, {side: task names})`` for side "producer" / "consumer": the warps of every task
    that commits (releases) one stage of ``resource``, summed over the tasks as check P1 counts them
    (:func:`tsjit.ts.verify.counts.signalling_units`; the most any stage receives), and those tasks;
    a side no task signals is left out."""
    warps, names = {}, {}
    for side, role in (("producer", "commit"), ("consumer", "release")):
        per_stage, tasks = signalling_units(manager, resource, role)
        if tasks and max(per_stage) > 0:
            warps[side], names[side] = max(per_stage), tuple(t.name for t in tasks)
    return warps, names


def allocate(ctx, manager, base) -> dict:
    """Place each pipelined resource's barriers; returns {resource: PipelineStorage}.  Declares the
    cluster shape of the rings' ``cta_layout_vmnk`` as part of the launch contract.

    Barriers go where the allocator put them (``barrier_offset`` from the allocator region at ``base``);
    a resource the allocator does not know gets its own reservation.

    Raises:
        CompilationError: a pipeline type this target cannot lower; rings disagree on the cluster."""
    allocator = getattr(manager, "smem_allocator", None)
    storages = {}
    clusters = set()
    target = ctx.target_name
    for resource in manager.resources:
        cfg = getattr(resource, "pipeline_config", None)
        if cfg is None:
            continue
        if not cfg.protocol.lowered or (cfg.protocol.needs_sm100 and target not in TCGEN05_TARGETS):
            if target.startswith("sm_9"):
                raise CompilationError(
                    f"resource '{resource.name}': {cfg.pipeline_type.value} pipelines need tcgen05/CLC hardware "
                    f"(sm_100a); on {target} use AsyncAsync or TmaAsync")
            raise CompilationError(
                f"resource '{resource.name}': the {cfg.pipeline_type.value} pipeline (tcgen05/CLC) has no "
                f"{target} lowering in this tsjit build yet; the program verifies on the host "
                f"(TaskManager), and AsyncAsync / TmaAsync pipelines compile for {target}")
        group = group_of(resource)
        signalling = side_signal_warps(manager, resource)
        if group is not None:
            if base is None or not allocator.has_barriers(resource):
                raise CompilationError(
                    f"resource '{resource.name}' is a member of pipeline group '{group.name}', whose barriers have no "
                    f"place in shared memory: call smem_allocator.add_pipeline_group({group.name}) before "
                    f"compute_layout(), or let the TaskManager lay the allocator out")
            full, empty = allocator.barrier_offsets(resource)
            storages[resource] = PipelineStorage(resource, base + full, base + empty, signalling)
        else:
            if base is not None and allocator.has_barriers(resource):
                offset = base + allocator.barrier_offset(resource)
            else:
                offset = ctx.reserve_shared(cfg.barrier_bytes, 8)
            storages[resource] = PipelineStorage(resource, offset, signalling=signalling)
        clusters.add(tuple(cfg.cta_layout_vmnk) if cfg.cta_layout_vmnk else None)
    layouts = {c for c in clusters if c is not None}
    if len(layouts) > 1:
        raise CompilationError(f"pipelines disagree on cta_layout_vmnk {sorted(layouts)} (check L1)")
    if layouts:
        v, m, n, k = (tuple(next(iter(layouts))) + (1, 1, 1, 1))[:4]
        cluster = (v * m, n, k)
        if cluster != (1, 1, 1):
            ctx.require_launch(cluster=cluster)
    return storages


def initialize(ctx, storages: dict, clustered: bool = False) -> None:
    """One elected thread of warp 0 initializes every barrier; fence; CTA (or cluster) barrier."""
    if not storages:
        return

    arrays = [array for storage in storages.values() for array in storage.arrays()]
    groups = barrier_owners([st.group for st in storages.values() if st.group is not None])
    for group in groups:          # a pipeline group's arrays, each once (shared or per member)
        member = next(st for st in storages.values() if st.group is group)
        base = member.offset - 8 * group.num_stages * group.array(member.resource, BarrierKind.Full)[0]
        arrays += [(base + 8 * group.num_stages * k, a.stages, a.count) for k, a in enumerate(group.barrier_arrays())]

    def init_all():
        for offset, stages, count in arrays:
            for s in range(stages):
                sync.mbarrier_init(shared_pointer(offset, dt.Int64, 8).offset(s), count)
        sync.fence_mbarrier_init()
    ctx.if_then(compare("==", B.thread_idx().x, 0), init_all, "pipeline.init", "pipeline.ready")
    if clustered:
        sync.cluster_sync()
    else:
        B.syncthreads()
