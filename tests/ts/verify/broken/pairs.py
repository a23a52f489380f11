"""Blackwell mistakes: 2-CTA UMMA pairs (V = 2) and CLC scheduling over a cluster.

``pair_gemm`` is tutorial 6's mainloop over one pair (``cta_layout_vmnk = (2, 1, 1, 1)``), two output tiles of
one K tile each: a TMA task
fills the TmaUmma ring ``ab`` on both CTAs (the pair leader arms its full barrier with both CTAs'
bytes, ``num_bytes_per_warp_per_cta x 2``); the MMA task waits and releases ``ab`` and acquires and
commits the UmmaAsync accumulator ``acc`` with ``SignalingThreads.CtaLeader`` (the pair leader's side;
the peer's copy of the task skips it); the epilogue warpgroup of each CTA waits on its own ``acc`` full
barrier (the leader's commit is multicast to both) and releases to the leader's empty barrier
(128 x 2 arrivals).  ``clc_program`` is a CLC-scheduled copy over a 2-CTA cluster: CTA 0's scheduler
task fetches for both CTAs, every thread of both CTAs releases to CTA 0.
"""
from __future__ import annotations

from dataclasses import dataclass

from broken.builders import case
from tsjit.ts.pipeline import PipelineConfig, SignalingThreads
from tsjit.ts.work_queue import TileSchedulerConfig, WorkQueue
from verify_schedules import QUEUE_EPILOGUE, FakeValue, GmemDest, GmemSource, Program, Ring, TaskSpec, threads

PAIR = (2, 1, 1, 1)
PER_WARP = 16384
LEADER = SignalingThreads.CtaLeader
ALL = SignalingThreads.All

MMA_LOOP = [("acc", "acquire"), ("ab", "wait"), ("ab", "mma"), ("acc", "fill"), ("ab", "release"),
            ("acc", "commit")]


@dataclass(kw_only=True)
class Accumulator(Ring):
    """The TMEM accumulator ring; ``ab``: the A/B ring its MMA work (``fill``) reads."""

    ab: object = None
EPILOGUE = [("acc", "wait"), ("acc", "read"), ("out", "store"), ("acc", "release")]


def pair_gemm(*, num_bytes=PER_WARP * 2, per_warp=PER_WARP, ab_consumers=1, ab_consumer=LEADER,
              acc_producer=LEADER, acc_consumers=256, acc_layout=PAIR, mma_loop=MMA_LOOP, epilogue=EPILOGUE,
              mma_cta=None, epilogue_cta=None, trips=2):
    """A Program factory for the pair GEMM with one knob turned (the defaults are correct); ``trips``: tiles of
    each task (2: the ring never wraps)."""
    def program():
        def resources():
            ab = Ring(name="ab", pipeline_config=PipelineConfig.create_tma_umma_pipeline_cfg(
                2, num_bytes, threads(1), threads(ab_consumers), PAIR, consumer_signaling_threads=ab_consumer,
                num_bytes_per_warp_per_cta=per_warp))
            acc = Accumulator(name="acc", ab=ab, pipeline_config=PipelineConfig.create_umma_async_pipeline_cfg(
                1, threads(1), threads(acc_consumers), acc_layout, producer_signaling_threads=acc_producer))
            return {"ab": ab, "acc": acc, "out": GmemDest(name="out", dst=FakeValue("c"), smem=acc)}
        specs = [TaskSpec("load", 0, 1, (), ("ab",), {"loop": [("ab", "acquire"), ("ab", "tma_load"),
                                                              ("ab", "commit")]}, domain=(0, trips, 1)),
                 TaskSpec("mma", 1, 1, ("ab",), ("acc",), {"loop": list(mma_loop)}, domain=(0, trips, 1),
                          only_cta=mma_cta),
                 TaskSpec("epi", 4, 4, ("acc",), ("out",), {"loop": list(epilogue)}, domain=(0, trips, 1),
                          only_cta=epilogue_cta)]
        return Program("2-CTA pair GEMM", resources, specs, lambda r: {r["acc"]: [r["ab"]], r["out"]: [r["acc"]]})
    return program


def clc_program(*, num_bytes=16, consumers=2 * 5 * 32, scheduler_cta=None, second_scheduler=False):
    """A CLC-scheduled copy over a 2-CTA cluster (``(1, 2, 1, 1)``): a one-warp scheduler task and a 4-warp
    copy task per CTA, both ending each tile with the queue epilogue (the queue's self-edge)."""
    def program():
        def resources():
            clc = PipelineConfig.create_clc_fetch_async_pipeline_cfg(2, num_bytes, threads(1), threads(consumers),
                                                                     (1, 2, 1, 1))
            wq = WorkQueue(name="wq", pipeline_config=clc, tile_scheduler_config=TileSchedulerConfig.
                           create_clc_dynamic_persistent_tile_scheduler_params((8,)))
            return {"wq": wq, "src": GmemSource(name="src", src=FakeValue("src")),
                    "dst": GmemDest(name="dst", dst=FakeValue("dst"))}
        fetch = [("wq", "acquire"), ("wq", "fetch_work_tile"), ("wq", "commit")] + list(QUEUE_EPILOGUE)
        specs = [TaskSpec("sched", 0, 1, ("wq",), ("wq",), {"queue": fetch}, domain=(0, 0, 1), persistent=True,
                          only_cta=scheduler_cta),
                 TaskSpec("copy", 1, 4, ("wq", "src"), ("dst",), {"loop": [("src", "load"), ("dst", "store")],
                                                                  "queue": list(QUEUE_EPILOGUE)},
                          domain=(0, 2, 1), persistent=True)]
        if second_scheduler:
            specs.insert(1, TaskSpec("sched2", 5, 1, ("wq",), ("wq",), {"queue": fetch}, domain=(0, 0, 1),
                                     persistent=True))
        return Program("CLC over a 2-CTA cluster", resources, specs,
                       lambda r: {r["wq"]: [r["wq"]], r["dst"]: [r["src"], r["wq"]]})
    return program


def _swap(entries, a, b):
    out = list(entries)
    out[a], out[b] = out[b], out[a]
    return out


GOOD = pair_gemm()

CASES = [
    case("pair_tma_bytes_for_one_cta", "a 2-CTA pair's TmaUmma num_bytes counts one CTA's copies: the leader's "
         "full barrier completes when half of the pair's bytes have landed",
         pair_gemm(num_bytes=PER_WARP), GOOD, P2=("'ab'", "num_bytes", "32768"),
         X=("'load'", "'ab'", "ProducerWork")),
    case("pair_tma_without_per_warp_bytes", "a 2-CTA pair's TmaUmma ring without num_bytes_per_warp_per_cta: "
         "the leader arms for both CTAs' copies and nothing says how much each brings",
         pair_gemm(per_warp=None), GOOD, P2=("'ab'", "num_bytes_per_warp_per_cta")),
    case("pair_mma_consumer_without_cta_leader", "the MMA task waits on the TmaUmma ring on both CTAs of the pair "
         "(no CtaLeader): the peer's full barrier is never armed, its copies complete on the leader's",
         pair_gemm(ab_consumer=ALL), GOOD, X=("'mma'", "'ab'", "CTA 1")),
    case("pair_accumulator_producer_without_cta_leader", "the accumulator's producer (the MMA task) acquires on "
         "both CTAs (no CtaLeader): the peer's empty barrier gets no releases, the epilogues release to the leader",
         pair_gemm(acc_producer=ALL), GOOD, X=("'mma'", "'acc'", "mma@CTA1")),
    case("pair_tma_umma_consumer_counted_per_cta", "the TmaUmma consumer_group counts one commit per CTA (2) where "
         "only the pair leader commits: the empty barriers never complete", pair_gemm(ab_consumers=2), GOOD,
         P1=("'ab'", "consumer_group", "V 2"), X=("'load'", "'ab'", "ProducerAcquire")),
    case("pair_epilogue_only_on_the_leader", "the epilogue runs on the pair leader only: the peer's half of the "
         "accumulator is never drained and the leader's empty barrier waits for 128 more arrivals",
         pair_gemm(epilogue_cta=0), GOOD, X=("'mma'", "'acc'", "ProducerAcquire")),
    case("pair_mma_task_on_the_peer_cta", "the MMA task is pinned to CTA 1, the peer: with CtaLeader every "
         "barrier operation of its sides is skipped there, nobody waits, issues or commits",
         pair_gemm(mma_cta=1), GOOD, X=("'epi'", "'acc'", "ConsumerWait")),
    case("pair_ab_released_before_the_mma", "the MMA task releases the A/B stage before the accumulator work "
         "that issues the MMAs reading it: the TMA refills the stage under the MMAs (both CTAs' halves)",
         pair_gemm(mma_loop=_swap(MMA_LOOP, 3, 4)), GOOD, D1=("'mma'", "'ab'")),
    case("pair_accumulator_released_before_store", "an epilogue releases its TMEM accumulator half before "
         "storing it: the leader's next MMAs may overwrite what the peer still reads",
         pair_gemm(epilogue=_swap(EPILOGUE, 2, 3)), GOOD, B1=("'epi'", "'acc'"), X=("'epi'", "'acc'")),
    case("pair_rings_disagree_on_the_layout", "the accumulator ring says (1, 2, 1, 1) while the A/B ring is a "
         "(2, 1, 1, 1) pair: the CTA-pair routing of the two rings contradicts",
         pair_gemm(acc_layout=(1, 2, 1, 1)), GOOD, L1=("'acc'", "'ab'"), P1=("'acc'", "consumer_group")),
    case("clc_scheduler_only_on_cta_1", "the CLC scheduler task is pinned to CTA 1: CTA 0, which fetches for the "
         "cluster, has none, so no response ever arrives", clc_program(scheduler_cta=1), clc_program(),
         X=("'copy'", "'wq'", "ConsumerWait")),
    case("clc_two_scheduler_tasks", "two tasks fetch from the CLC queue: each tile is requested twice",
         clc_program(second_scheduler=True), clc_program(), Q1=("'wq'", "sched")),
    case("clc_consumer_count_one_task_short", "the CLC ring's consumer_group counts the copy task only (4 warps "
         "x 2 CTAs): the scheduler task's releases complete the phase early",
         clc_program(consumers=2 * 4 * 32), clc_program(), P1=("'wq'", "consumer_group")),
]
