"""Whole-program checks of a TaskManager.

Each check is a function ``check(manager) -> list[Finding]``; the manager runs them in
the order of :data:`tsjit.ts.task_manager.CHECKS`, raises the first failing check's
errors as one ``VerificationError`` (or, with ``skip_validation=True``, warns) and warns
for warning findings.

``findings``    the :class:`Finding` record and message helpers.
``structure``   W0 (disjoint warp ranges), R0 (resource roles), G1-G4 (dependency
                graph), N1 (label resolution), H1 (head/loop producer overlap warning).
``routing``     R1-R4 (task-local value routing).
``lifetimes``   R5 (a stage token is not used after its stage was released).
``registers``   W1/W2 (setmaxnreg warpgroup agreement and register budget) and the
                default-register formula.
``pipelines``   shared facts about pipelined resources: roles, strides, interleave lanes.
``credits``     C0: the credit simulation (``PipelineSimulator``) behind the schedule
                table, deadlock and balance reports.
``bracketing``  B1 (works inside wait/release, acquire/commit), B2 (try ops followed by
                the blocking op), D1 (DMA ordering).
``counts``      P1 (barrier arrival counts), P2 (TMA transaction bytes).
``interleave``  P6 (interleave lanes), L1 (cluster layouts), SG1 (split-consumer
                signalling), PP (ping-pong self-edges).
``leader_tasks`` SG2 (works on a ``CtaLeader``-only side run on CTA 0 only).
``queues``      Q1 (WorkQueue placement and the tile epilogue).
``pdl``         PDL1 (wait before dependent work).
``capacity``    M1/M2 (shared memory and TMEM capacity).
``exhaustive``  X: the interleaving checker (deadlocks, races, count mismatches, PDL
                order), with ``exhaustive_expand`` (schedule expansion),
                ``exhaustive_model`` (ops and barriers), ``exhaustive_cluster`` (symmetric
                reduction or every CTA of a cluster), ``exhaustive_probes`` (probe
                folding), ``async_reads`` (wgmma / TMA-store reads in flight),
                ``exhaustive_regions`` (aliasing, split-stage parts), ``exhaustive_search``
                (BFS with partial-order reduction) and ``exhaustive_report`` (messages).
"""
from tsjit.ts.verify.findings import Finding

__all__ = ["Finding"]
