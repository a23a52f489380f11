"""Four pipeline-group programs with one mistake each, and their corrected twins (tutorials 9 and 12).

Like :mod:`tsjit.examples.checker_mistakes` (whose resources they reuse), each ``build_*(fixed)`` builds
the tasks and the resource graph of a small program on the host, so no GPU and no device arrays are
needed: the work bodies are read by the checker, never run.  A group mistake is caught when the group
is built (rule PG), when a schedule is captured, or by the TaskManager's checks (T5), so ``build(False)``
itself may raise.

* :func:`build_merge_member_release`: a Merge member released on its own instead of ``group.release()``;
* :func:`build_merge_release_without_wait`: the Merge release comes after a wait on one member only;
* :func:`build_fork_member_commit`: a Fork member committed on its own instead of ``group.commit()``;
* :func:`build_fork_bytes_mismatch`: Fork members that expect different TMA bytes per stage.

:data:`MISTAKES` maps each name to ``(what is wrong, build function)``.
"""
from __future__ import annotations

from tsjit import ts
from tsjit.examples.checker_mistakes import TILE_BYTES, Chunks, Result, ScaledOut, TileLoads, threads

__all__ = ["merge_program", "fork_program", "build_merge_member_release", "build_merge_release_without_wait", "build_fork_member_commit",
           "build_fork_bytes_mismatch", "MISTAKES"]

TRIPS = 6                   # iterations of every domain loop


def _tile_ring(name: str, num_bytes: int = 2 * TILE_BYTES) -> TileLoads:
    """A 4-stage TMA ring whose stages each receive an A and a B tile, read by four consumer warps."""
    config = ts.PipelineConfig.create_tma_async_pipeline_cfg(4, num_bytes, threads(1), threads(128),
                                                             num_bytes_per_warp_per_cta=num_bytes)
    return TileLoads(name=name, pipeline_config=config)


def merge_program(*, member_release: bool = False, wait_both: bool = True):
    """A Merge group: ``load_a`` copies chunks into ``smem_a`` (AsyncAsync), ``load_b`` TMA-loads tiles into ``smem_b``;
    ``store`` waits on both members of the Merge group ``ab`` and releases once, ``ab.release()``."""
    a = Chunks(name="smem_a", pipeline_config=ts.PipelineConfig.create_async_async_pipeline_cfg(
        4, threads(32), threads(128)))
    b = _tile_ring("smem_b")
    ab = ts.PipelineGroup("ab", [a, b], ts.PipelineGroupMode.Merge)
    out = ScaledOut(name="out", ring=a)

    @ts.schedule
    def fill_a(r: Chunks):
        with ts.domain_loop(0, TRIPS, 1):
            r.acquire()
            r.fill()
            r.commit()

    @ts.schedule
    def load_b(r: TileLoads):
        with ts.domain_loop(0, TRIPS, 1):
            r.acquire()
            r.load_a()
            r.load_b()
            r.commit()

    @ts.schedule
    def store(g, sa, sb, o: ScaledOut):
        with ts.domain_loop(0, TRIPS, 1):
            sa.wait()
            if wait_both:
                sb.wait()
            stage = sa.take()
            sb.mma()
            o.write(stage=stage)
            if member_release:
                sa.release()
            else:
                g.release()

    tasks = [ts.Task("load_a", [], [a], 0, 1, schedule=fill_a(ab.smem_a)),
             ts.Task("load_b", [], [b], 1, 1, schedule=load_b(ab.smem_b)),
             ts.Task("store", [a, b], [out], 2, 4, schedule=store(ab, ab.smem_a, ab.smem_b, out))]
    return tasks, {out: [a, b]}, {}


def fork_program(*, member_commit: bool = False, bytes_b: int = 2 * TILE_BYTES):
    """A Fork group: ``load`` acquires both members of the Fork group ``ab``, TMA-loads one stage into ``a_mma`` and
    commits once, ``ab.commit()``; ``mma`` and ``act`` each wait on the shared full barrier, read, and
    release their own member."""
    a, b = _tile_ring("a_mma"), _tile_ring("a_act", bytes_b)
    ab = ts.PipelineGroup("ab", [a, b], ts.PipelineGroupMode.Fork)
    out_mma, out_act = Result(name="out_mma"), Result(name="out_act")

    @ts.schedule
    def load(g, sa, sb):
        with ts.domain_loop(0, TRIPS, 1):
            sa.acquire()
            sb.acquire()
            sa.load_a()
            sa.load_b()
            if member_commit:
                sa.commit()
            else:
                g.commit()

    @ts.schedule
    def consume(s, o: Result):
        with ts.domain_loop(0, TRIPS, 1):
            s.wait()
            s.mma()
            s.release()
        o.store()

    tasks = [ts.Task("load", [], [a, b], 0, 1, schedule=load(ab, ab.a_mma, ab.a_act)),
             ts.Task("mma", [a], [out_mma], 1, 4, schedule=consume(ab.a_mma, out_mma)),
             ts.Task("act", [b], [out_act], 5, 4, schedule=consume(ab.a_act, out_act))]
    return tasks, {out_mma: [a], out_act: [b]}, {}


def build_merge_member_release(fixed: bool):
    """The store task releases ``ab.smem_a`` alone; the members share one empty barrier (``ab.release()``)."""
    return merge_program(member_release=not fixed)


def build_merge_release_without_wait(fixed: bool):
    """``ab.release()`` frees both members' stage, but the store task only waited on ``ab.smem_a``."""
    return merge_program(wait_both=fixed)


def build_fork_member_commit(fixed: bool):
    """The load task commits ``ab.a_mma`` alone; the members share one full barrier (``ab.commit()``)."""
    return fork_program(member_commit=not fixed)


def build_fork_bytes_mismatch(fixed: bool):
    """``a_act`` expects half the bytes of ``a_mma``, but one TMA copy fills the stage both read."""
    return fork_program(bytes_b=2 * TILE_BYTES if fixed else TILE_BYTES)


#: name -> (the mistake in one line, its build function)
MISTAKES = {
    "merge_member_release": ("a Merge member released on its own instead of group.release()",
                             build_merge_member_release),
    "merge_release_without_wait": ("a Merge release that never waited on one member",
                                   build_merge_release_without_wait),
    "fork_member_commit": ("a Fork member committed on its own instead of group.commit()",
                           build_fork_member_commit),
    "fork_bytes_mismatch": ("Fork members with different transaction bytes", build_fork_bytes_mismatch),
}
