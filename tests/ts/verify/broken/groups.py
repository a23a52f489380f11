"""Pipeline-group mistakes (issue 12 §3), each with its corrected twin.

The programs are host-side stand-ins (``verify_schedules`` resources): a Merge (two producers, one
consumer releasing once), a Fork (one producer committing once, two consumers) and a FusedMerge.
A group mistake may be caught when the group is built (rule PG), when the schedule is captured
(S8 / T5) or by the TaskManager's checks, so for these :class:`~broken.BrokenCase` s ``build(fixed)``
itself may raise, and ``expect`` maps the check / rule id to the names the error must contain.
They run in ``tests/ts/groups/test_group_corpus.py``; :data:`CASES` holds them.
"""
from __future__ import annotations

from typing import Callable

from broken import BrokenCase
from verify_schedules import FakeValue, GmemDest, Ring, async_config, tma_config

from tsjit.ts import PipelineGroup, PipelineGroupMode, Task, domain_loop, schedule
from tsjit.ts.memory import SmemAllocator
from tsjit.ts.pipeline import PipelineConfig, CooperativeGroup, Agent

__all__ = ["CASES", "merge_program", "fork_program", "fused_program"]

M = PipelineGroupMode


def _rings(kinds, stages=(4, 4), consumers=(128, 128), byte_counts=(8192, 8192), **kw):
    made = []
    for i, kind in enumerate(kinds):
        name = f"smem_{'ab'[i]}"
        if kind == "tma":
            cfg = tma_config(stages[i], byte_counts[i], producers=1, consumers=consumers[i], **kw.get(name, {}))
        elif kind == "umma":
            cfg = PipelineConfig.create_tma_umma_pipeline_cfg(stages[i], byte_counts[i], CooperativeGroup(Agent.Thread, 1),
                                                              CooperativeGroup(Agent.Thread, 1))
        elif kind == "async_umma":
            cfg = PipelineConfig.create_async_umma_pipeline_cfg(stages[i], CooperativeGroup(Agent.Thread, 32),
                                                                CooperativeGroup(Agent.Thread, 1))
        else:
            cfg = async_config(stages[i], producers=32, consumers=consumers[i], **kw.get(name, {}))
        made.append(Ring(name=name, pipeline_config=cfg))
    return made


def merge_program(kinds=("async", "tma"), mode=M.Merge, *, release="group", wait_b=True, declare_b=True,
                  release_before_read=False, bare=False, stages=(4, 4), consumers=(128, 128), trips=6,
                  allocator=None):
    """Producers ``la`` / ``lb`` fill ``smem_a`` / ``smem_b``; ``st`` waits on both, stores, releases once."""
    a, b = _rings(kinds, stages, consumers)
    group = PipelineGroup("ab", [a, b], mode)
    out = GmemDest(name="out", dst=FakeValue("out"), smem=a)
    fill = {"async": "fill", "tma": "tma_load"}

    def producer(kind):
        @schedule
        def load(s):
            with domain_loop(0, trips, 1):
                s.acquire()
                getattr(s, fill[kind])()
                s.commit()
        return load

    @schedule
    def store(g, sa, sb, o):
        with domain_loop(0, trips, 1):
            if mode is M.FusedMerge:
                g.wait()
            else:
                sa.wait()
                if wait_b:
                    sb.wait()
            if release_before_read:
                g.release()
            o.store(sa.read())
            if release == "group" and not release_before_read:
                g.release()
            elif release == "member":
                sa.release()

    members = (a, b) if bare else (group.smem_a, group.smem_b)
    tasks = [Task("la", [], [a], 0, 1, producer(kinds[0])(members[0])),
             Task("lb", [], [b], 1, 1, producer(kinds[1])(members[1])),
             Task("st", [a, b] if declare_b else [a], [out], 2, 4, store(group, *members, out))]
    options = {"smem_allocator": allocator(a, b, group)} if allocator else {}
    return tasks, {out: [a, b]}, options


def fork_program(kinds=("tma", "tma"), *, commit="group", acquire_b=True, byte_counts=(8192, 8192),
                 release_b=True, trips=6):
    """``p`` acquires both members, TMA-loads the tile once (into ``smem_a``), commits once; ``ca`` and
    ``cb`` each wait, read and release their own member."""
    a, b = _rings(kinds, byte_counts=byte_counts)
    group = PipelineGroup("ab", [a, b], M.Fork)
    out_a = GmemDest(name="out_a", dst=FakeValue("oa"), smem=a)
    out_b = GmemDest(name="out_b", dst=FakeValue("ob"), smem=b)

    @schedule
    def produce(g, sa, sb):
        with domain_loop(0, trips, 1):
            sa.acquire()
            if acquire_b:
                sb.acquire()
            sa.tma_load()
            if commit == "group":
                g.commit()
            else:
                sa.commit()

    def consumer(release):
        @schedule
        def consume(s, o):
            with domain_loop(0, trips, 1):
                s.wait()
                o.store(s.read())
                if release:
                    s.release()
        return consume

    tasks = [Task("p", [], [a, b], 0, 1, produce(group, group.smem_a, group.smem_b)),
             Task("ca", [a], [out_a], 1, 4, consumer(True)(group.smem_a, out_a)),
             Task("cb", [b], [out_b], 5, 4, consumer(release_b)(group.smem_b, out_b))]
    return tasks, {out_a: [a], out_b: [b]}, {}


def fused_program(kinds=("async", "tma"), *, commit_b=True, trips=6):
    """A FusedMerge: ``la`` / ``lb`` arrive on one shared full barrier; ``st`` waits and releases once."""
    a, b = _rings(kinds)
    group = PipelineGroup("ab", [a, b], M.FusedMerge)
    out = GmemDest(name="out", dst=FakeValue("out"), smem=a)

    @schedule
    def load_a(s):
        with domain_loop(0, trips, 1):
            s.acquire()
            s.fill() if kinds[0] == "async" else s.tma_load()
            s.commit()

    @schedule
    def load_b(s):
        with domain_loop(0, trips, 1):
            s.acquire()
            s.tma_load() if kinds[1] == "tma" else s.fill()
            if commit_b:
                s.commit()

    @schedule
    def store(g, sa, sb, o):
        with domain_loop(0, trips, 1):
            g.wait()
            o.store(sa.read())
            sb.mma()
            g.release()

    tasks = [Task("la", [], [a], 0, 1, load_a(group.smem_a)), Task("lb", [], [b], 1, 1, load_b(group.smem_b)),
             Task("st", [a, b], [out], 2, 4, store(group, group.smem_a, group.smem_b, out))]
    return tasks, {out: [a, b]}, {}


def _laid_out_without_group(a, b, group):
    allocator = SmemAllocator()
    allocator.compute_layout()
    return allocator


def _laid_out_with_group(a, b, group):
    allocator = SmemAllocator()
    allocator.add_pipeline_group(group)
    allocator.compute_layout()
    return allocator


def _case(name, mistake, broken: Callable, fixed: Callable, **expect) -> BrokenCase:
    return BrokenCase(name, mistake, lambda ok: (fixed if ok else broken)(), expect)


CASES = [
    _case("group_merge_mixed_consumer_kinds", "a Merge of a thread consumer and an UMMA consumer",
          lambda: merge_program(("tma", "umma")), lambda: merge_program(("tma", "tma")),
          PG=["'ab'", "'smem_a'", "'smem_b'", "consumer kinds", "PipelineGroupMode.Fork"]),
    _case("group_fork_mixed_producer_kinds", "a Fork of a thread producer and a TMA producer",
          lambda: fork_program(("async", "tma")), lambda: fork_program(("tma", "tma")),
          PG=["'ab'", "producer kinds", "PipelineGroupMode.Merge"]),
    _case("group_both_sides_differ", "members that differ in producer and consumer kind",
          lambda: merge_program(("tma", "async_umma")), lambda: merge_program(("tma", "async")),
          PG=["'ab'", "both producer kind", "consumer kind"]),
    _case("group_stage_mismatch", "Merge members with 4 and 2 stages",
          lambda: merge_program(stages=(4, 2)), lambda: merge_program(stages=(4, 4)),
          PG=["'ab'", "num_stages", "'smem_a': 4", "'smem_b': 2"]),
    _case("group_consumer_count_mismatch", "Merge members whose consumer groups differ (shared empty barrier)",
          lambda: merge_program(consumers=(128, 4)), lambda: merge_program(consumers=(128, 128)),
          PG=["'ab'", "consumer_group size", "128", "4"]),
    _case("group_fork_bytes_mismatch", "Fork members with different transaction bytes",
          lambda: fork_program(byte_counts=(8192, 4096)), lambda: fork_program(byte_counts=(8192, 8192)),
          PG=["'ab'", "num_bytes", "8192", "4096"]),
    _case("group_bare_member_argument", "a grouped member passed to a schedule without its group",
          lambda: merge_program(bare=True), lambda: merge_program(bare=False),
          S8=["'smem_a'", "'ab'", "ab.smem_a"]),
    _case("group_merge_member_release", "a Merge member released on its own instead of group.release()",
          lambda: merge_program(release="member"), lambda: merge_program(release="group"),
          T5=["smem_a.release()", "'ab'", "ab.release()"]),
    _case("group_fork_member_commit", "a Fork member committed on its own instead of group.commit()",
          lambda: fork_program(commit="member"), lambda: fork_program(commit="group"),
          T5=["smem_a.commit()", "'ab'", "ab.commit()"]),
    _case("group_merge_release_without_wait", "a Merge release that never waited on one member",
          lambda: merge_program(wait_b=False), lambda: merge_program(wait_b=True),
          T5=["ab.release()", "ab.smem_b.wait()"]),
    _case("group_fork_commit_without_acquire", "a Fork commit that never acquired one member",
          lambda: fork_program(acquire_b=False), lambda: fork_program(acquire_b=True),
          T5=["ab.commit()", "ab.smem_b.acquire()"]),
    _case("group_member_not_declared", "a Merge consumer task that does not declare one member",
          lambda: merge_program(declare_b=False), lambda: merge_program(declare_b=True),
          R0=["'st'", "'smem_b'", "src_resources"]),
    _case("group_release_before_read", "group.release() before the work that reads the stage",
          lambda: merge_program(release_before_read=True), lambda: merge_program(),
          B1=["'smem_a'"], X=["smem_a"]),
    _case("group_fork_consumer_never_releases", "one Fork consumer never releases its member",
          lambda: fork_program(release_b=False), lambda: fork_program(release_b=True),
          C0=["smem_b"], B1=["smem_b"], X=["smem_b"]),
    _case("group_fused_member_never_commits", "a FusedMerge producer that never commits",
          lambda: fused_program(commit_b=False), lambda: fused_program(commit_b=True),
          C0=["smem_b"], B1=["smem_b"], X=["ab"]),
    _case("group_allocator_without_group", "an SmemAllocator laid out without add_pipeline_group",
          lambda: merge_program(allocator=_laid_out_without_group),
          lambda: merge_program(allocator=_laid_out_with_group),
          M1=["'smem_a'", "add_pipeline_group(ab)"]),
]
