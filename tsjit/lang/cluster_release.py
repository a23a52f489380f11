"""A consumer's release of a pipeline stage onto cluster CTAs' mbarriers, at CTA scope (sm_90).

:func:`mbarrier_release_cluster`: one ``fence.release.cta``, then ``mapa`` +
``mbarrier.arrive.relaxed.cluster.shared::cluster`` per target CTA -- together a release at CTA scope, what
CUTLASS's ``ClusterBarrier::arrive(cta_id)`` issues (``mbarrier.arrive.shared::cluster``, whose default
semantics are ``.release.cta``).  A release only orders this CTA's reads of the stage (retired wgmma, thread
loads) before the producer's next writes into it (TMA copies issued after the producer's wait on the
barrier): CTA scope suffices.

The cluster-scope release of :func:`tsjit.lang.sync.mbarrier_arrive_cluster` (``.release.cluster``, which a
producer publishing data needs) makes ptxas put ``MEMBAR.ALL.CTA; MEMBAR.ALL.GPU; ERRBAR; CGAERRBAR`` before
each arrive (SASS of the tutorial GEMM at cluster_m = 2, CUDA 13); in the MMA warps' K loop that stalled the
next MMAs on every stage (BENCHMARKS.md, issue 15, helper i15c).  Sources: PTX ISA 8.6 §9.7.13.15.11
(``mbarrier.arrive``: ``.relaxed`` / ``.release``, ``.cta`` / ``.cluster``), §9.7.13.4 (``fence``).
"""
from __future__ import annotations

from tsjit.backend import emit
from tsjit.lang import dtypes as dt
from tsjit.lang.sync import map_shared_rank
from tsjit.lang.values import constant

__all__ = ["mbarrier_release_cluster"]


def mbarrier_release_cluster(bar, cta_ranks) -> None:
    """Arrive once on the mbarrier at ``bar``'s offset in each cluster CTA of ``cta_ranks`` (ints or run-time
    Int32 values; this CTA's own rank may be among them), released at CTA scope: ``fence.release.cta``
    (SASS ``MEMBAR.ALL.CTA``), then a relaxed remote arrive per CTA."""
    km = emit.current()
    km.builder.fence("release", "block")     # PTX fence.release.cta (LLVM's "block" sync scope)
    for rank in cta_ranks:
        remote = map_shared_rank(bar, rank)
        km.intrinsic("llvm.nvvm.mbarrier.arrive.relaxed.scope.cluster.space.cluster",
                     [remote.ir, constant(1, dt.Int32).ir])
