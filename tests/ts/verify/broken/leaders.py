"""Leader signalling in a 2-CTA cluster (issue 12 §2): a split consumer's release and a leader-only side."""
from __future__ import annotations

from broken.builders import CONS, PROD_TMA, case
from tsjit.ts.pipeline import SignalingThreads
from verify_schedules import FakeValue, GmemDest, Program, Ring, TaskSpec, async_config, tma_config

CLUSTER = dict(cta_layout_vmnk=(1, 2, 1, 1))
LEADER = SignalingThreads.CtaLeader


def split_consumer(ordered: bool):
    """Every CTA's ``waiter`` waits on its own stage and stores it; the leader's ``releaser`` releases every
    CTA's stage -- after waiting on ``done``, which each waiter commits once it has read (``ordered``), or
    with nothing ordering it after the reads."""
    def program():
        def resources():
            ring = Ring(name="ring", pipeline_config=tma_config(
                4, 8192, 1, 32, consumer_signaling_threads=LEADER,
                consumer_wait_signaling_threads=SignalingThreads.All, **CLUSTER))
            done = Ring(name="done", pipeline_config=async_config(4, producers=4, consumers=1,
                                                                  consumer_signaling_threads=LEADER, **CLUSTER))
            return {"ring": ring, "done": done, "out": GmemDest(name="out", dst=FakeValue("out"), smem=ring)}
        signal = [("done", "acquire"), ("done", "commit")] if ordered else []
        waiter = [("ring", "wait"), ("ring", "read"), ("out", "store")] + signal
        releaser = [("done", "wait"), ("ring", "release"), ("done", "release")] if ordered else [("ring", "release")]
        specs = [TaskSpec("prod", 0, 1, (), ("ring",), {"loop": PROD_TMA}, domain=(0, 6, 1)),
                 TaskSpec("waiter", 1, 4, ("ring",), ("out", "done") if ordered else ("out",), {"loop": waiter},
                          domain=(0, 6, 1)),
                 TaskSpec("releaser", 5, 1, ("ring", "done") if ordered else ("ring",), (), {"loop": releaser},
                          domain=(0, 6, 1), only_cta=0)]

        def graph(r):
            return {r["out"]: [r["ring"]], r["done"]: [r["ring"]]} if ordered else {r["out"]: [r["ring"]]}
        return Program("split consumer", resources, specs, graph)
    return program


def leader_consumer(on_leader_only: bool):
    """Every CTA's copies land on the leader's stage (consumer ``CtaLeader``); the consumer task runs on the
    leader only, or on every CTA (where CTA 1's works read a stage nothing fills)."""
    def program():
        def resources():
            ring = Ring(name="ring", pipeline_config=tma_config(4, 2 * 8192, 1, 128, consumer_signaling_threads=LEADER,
                                                                num_bytes_per_warp_per_cta=8192, **CLUSTER))
            return {"ring": ring, "out": GmemDest(name="out", dst=FakeValue("out"), smem=ring)}
        specs = [TaskSpec("prod", 0, 1, (), ("ring",), {"loop": PROD_TMA}, domain=(0, 6, 1)),
                 TaskSpec("cons", 1, 4, ("ring",), ("out",), {"loop": CONS}, domain=(0, 6, 1),
                          only_cta=0 if on_leader_only else None)]
        return Program("leader consumer", resources, specs, lambda r: {r["out"]: [r["ring"]]})
    return program


CASES = [
    case("split_consumer_release_unordered", "a split consumer's releaser (leader only) releases every CTA's "
         "stage with nothing ordering it after the waiters' reads: the stage is released before it is filled",
         split_consumer(False), split_consumer(True),
         B1=("'releaser'", "'ring'", "'waiter'", "done.wait()"), X=("releaser", "'ring'")),
    case("leader_only_consumer_on_every_cta", "the consumer of a ring whose wait is the leader's "
         "(consumer_signaling_threads=CtaLeader) runs on both CTAs: CTA 1 reads a stage no wait guards",
         leader_consumer(False), leader_consumer(True),
         SG2=("'cons'", "'ring'", "run_only_on_cta_id=0", "consumer_signaling_threads")),
]
