"""Blackwell mistakes the ported tutorials (tsjit/examples/bw_*.py) can make: UMMA rings whose release is a
``tcgen05.commit`` (one arrival, landing when the MMAs have read the stage), TMEM accumulators handed over by a
commit (UmmaAsync), cp.async producers of an UMMA ring (AsyncUmma), and split-K's epilogue staging that aliases
the A/B ring the MMAs are still reading."""
from __future__ import annotations

from broken.builders import case
from tsjit.ts.memory import SmemAllocation
from tsjit.ts.pipeline import PipelineConfig
from verify_schedules import (QUEUE_EPILOGUE, FakeValue, GmemDest, Program, Ring, SmemBuffer, TaskSpec,
                              staging_allocator, static_queue, threads)

LAYOUT = (1, 1, 1, 1)
MMA_FLAG = [("ab", "wait"), ("ab", "mma"), ("flag", "fill"), ("ab", "release")]
LOAD = [("ab", "acquire"), ("ab", "tma_load"), ("ab", "tma_load_b"), ("ab", "commit")]
MMA = [("ab", "wait"), ("ab", "mma"), ("acc", "fill"), ("ab", "release")]   # acc.fill: the UMMA into TMEM


def tma_umma(consumers: int = 1, num_bytes: int = 2 * 16384):
    return PipelineConfig.create_tma_umma_pipeline_cfg(4, num_bytes, threads(1), threads(consumers), LAYOUT)


def accumulator(stages: int = 1, consumers: int = 128):
    return PipelineConfig.create_umma_async_pipeline_cfg(stages, threads(1), threads(consumers), LAYOUT)


def tutorial3(ab=tma_umma, acc=accumulator, mma_tail=(("acc", "commit"),), mma_head=(("acc", "acquire"),),
              epilogue=(("acc", "wait"), ("acc", "read"), ("c", "store"), ("acc", "release")), mma_loop=MMA, trips=4):
    """Tutorial 3's shape (load -> MMA -> TMEM -> store): TmaUmma ring ``ab``, UmmaAsync accumulator ``acc``;
    ``trips``: K tiles (4: the 4-stage ring never wraps)."""
    def program():
        def resources():
            return {"ab": Ring(name="ab", pipeline_config=ab()), "acc": Ring(name="acc", pipeline_config=acc()),
                    "c": GmemDest(name="c", dst=FakeValue("c"))}
        specs = [TaskSpec("load", 0, 1, (), ("ab",), {"loop": LOAD}, domain=(0, trips, 1)),
                 TaskSpec("mma", 1, 1, ("ab",), ("acc",), {"head": list(mma_head), "loop": list(mma_loop),
                                                           "tail": list(mma_tail)}, domain=(0, trips, 1)),
                 TaskSpec("epilogue", 2, 4, ("acc",), ("c",), {"tail": list(epilogue)}, domain=(0, 0, 1))]
        return Program("tutorial 3 shape", resources, specs, lambda r: {r["acc"]: [r["ab"]], r["c"]: [r["acc"]]})
    return program


def persistent_accumulators(acquire_each_tile: bool):
    """Tutorials 11-13's shape: a persistent MMA warp fills a two-stage TMEM accumulator ring per tile."""
    def program():
        def resources():
            return {"ab": Ring(name="ab", pipeline_config=tma_umma()),
                    "acc": Ring(name="acc", pipeline_config=accumulator(stages=2)),
                    "c": GmemDest(name="c", dst=FakeValue("c")), "wq": static_queue(tiles=4)}
        head = [("acc", "acquire")] if acquire_each_tile else []
        specs = [TaskSpec("load", 0, 1, ("wq",), ("ab",), {"loop": LOAD, "queue": list(QUEUE_EPILOGUE)},
                          domain=(0, 2, 1), persistent=True),
                 TaskSpec("mma", 1, 1, ("wq", "ab"), ("acc",), {
                     "head": head, "loop": MMA, "tail": [("acc", "commit")], "queue": list(QUEUE_EPILOGUE)},
                     domain=(0, 2, 1), persistent=True),
                 TaskSpec("epilogue", 2, 4, ("wq", "acc"), ("c",), {
                     "tail": [("acc", "wait"), ("acc", "read"), ("c", "store"), ("acc", "release")],
                     "queue": list(QUEUE_EPILOGUE)}, domain=(0, 0, 1), persistent=True)]
        return Program("persistent accumulators", resources, specs,
                       lambda r: {r["ab"]: [r["wq"]], r["acc"]: [r["ab"]], r["c"]: [r["acc"]]})
    return program


def split_k_staging(write_after_wait: bool):
    """Tutorial 9's shape: the epilogue's staging buffer aliases the A/B ring (one alias group); it may be
    written only once the accumulator's tcgen05.commit proved the MMAs done reading the ring."""
    def program():
        def resources():
            return {"ab": Ring(name="ab", pipeline_config=tma_umma(), allocation=SmemAllocation("ab_tiles", 4 * 16384)),
                    "flag": Ring(name="flag", pipeline_config=accumulator()),
                    "c_smem": SmemBuffer(name="c_smem", allocation=SmemAllocation("partials", 32768))}
        epilogue = [("flag", "wait"), ("c_smem", "write"), ("flag", "release")] if write_after_wait else \
            [("c_smem", "write"), ("flag", "wait"), ("flag", "release")]
        specs = [TaskSpec("load", 0, 1, (), ("ab",), {"loop": LOAD}, domain=(0, 4, 1)),
                 TaskSpec("mma", 1, 1, ("ab",), ("flag",), {"head": [("flag", "acquire")], "loop": MMA_FLAG,
                                                            "tail": [("flag", "commit")]}, domain=(0, 4, 1)),
                 TaskSpec("epilogue", 2, 4, ("flag",), ("c_smem",), {"tail": epilogue}, domain=(0, 0, 1))]
        return Program("split-K staging", resources, specs,
                       lambda r: {r["flag"]: [r["ab"]], r["c_smem"]: [r["flag"]]},
                       allocator=staging_allocator("ab", "c_smem", True))
    return program


def async_umma_operand(producers: int):
    """Tutorial 11's A ring: 64 cp.async threads fill an AsyncUmma ring the MMA warp consumes."""
    def program():
        def resources():
            a = Ring(name="ab", pipeline_config=PipelineConfig.create_async_umma_pipeline_cfg(
                4, threads(producers), threads(1), LAYOUT))
            return {"ab": a, "acc": Ring(name="acc", pipeline_config=accumulator()),
                    "c": GmemDest(name="c", dst=FakeValue("c"))}
        specs = [TaskSpec("load_a", 2, 2, (), ("ab",), {"loop": [("ab", "acquire"), ("ab", "fill"), ("ab", "commit")]},
                          domain=(0, 4, 1)),
                 TaskSpec("mma", 1, 1, ("ab",), ("acc",), {"head": [("acc", "acquire")], "loop": MMA,
                                                           "tail": [("acc", "commit")]}, domain=(0, 4, 1)),
                 TaskSpec("epilogue", 4, 4, ("acc",), ("c",), {
                     "tail": [("acc", "wait"), ("acc", "read"), ("c", "store"), ("acc", "release")]}, domain=(0, 0, 1))]
        return Program("AsyncUmma operand", resources, specs, lambda r: {r["acc"]: [r["ab"]], r["c"]: [r["acc"]]})
    return program


CASES = [
    case("umma_ring_consumer_group_counts_the_mma_warp", "a TmaUmma ring's consumer_group counts the MMA warp's "
         "32 threads, but its release is one tcgen05.commit (one arrival)",
         tutorial3(ab=lambda: tma_umma(consumers=32)), tutorial3(),
         P1=("'ab'", "TmaUmma", "'mma'", "tcgen05.commit"), X=("'load'", "'ab'", "ProducerAcquire")),
    case("accumulator_consumer_group_of_one", "the UmmaAsync accumulator's consumer_group is 1, but all 128 "
         "epilogue threads release it", tutorial3(acc=lambda: accumulator(consumers=1)), tutorial3(),
         P1=("'acc'", "UmmaAsync", "'epilogue'"), X=("'epilogue'", "acc.empty[0]", "ConsumerRelease")),
    case("accumulator_released_before_its_tmem_is_read", "the epilogue releases the TMEM accumulator before "
         "its tcgen05.ld", tutorial3(epilogue=(("acc", "wait"), ("acc", "release"), ("acc", "read"), ("c", "store"))),
         tutorial3(), B1=("'epilogue'", "'acc'", "ConsumerWork 'read'")),
    case("accumulator_read_before_its_wait", "the epilogue loads the TMEM accumulator before waiting for the MMA "
         "warp's tcgen05.commit", tutorial3(epilogue=(("acc", "read"), ("c", "store"), ("acc", "wait"),
                                                        ("acc", "release"))), tutorial3(),
         B1=("'epilogue'", "'acc'", "ConsumerWork 'read'"), X=("'mma'", "'epilogue'", "race on 'acc'")),
    case("accumulator_never_committed", "the MMA warp never commits the TMEM accumulator: the epilogue waits for a "
         "tcgen05.commit that never comes", tutorial3(mma_tail=()), tutorial3(),
         C0=("'epilogue'", "acc ConsumerWait"), X=("'epilogue'", "'acc'", "ConsumerWait")),
    case("accumulator_committed_per_k_tile", "the MMA warp acquires and commits the accumulator inside the K "
         "loop, handing the epilogue a partial sum per K tile",
         tutorial3(mma_head=(), mma_tail=(), mma_loop=[("acc", "acquire")] + MMA + [("acc", "commit")]), tutorial3(),
         C0=("'mma'", "acc ProducerAcquire"), X=("'load'", "'ab'", "ProducerAcquire")),
    case("accumulator_never_acquired", "the MMA warp commits the TMEM accumulator without acquiring it (it may "
         "overwrite the tile the epilogue is still reading)", persistent_accumulators(False),
         persistent_accumulators(True), C0=("acc", "ConsumerRelease", "ProducerAcquire")),
    case("umma_stage_released_before_its_mma", "the MMA warp's tcgen05.commit releasing the stage comes before "
         "the MMA that reads it", tutorial3(mma_loop=[("ab", "wait"), ("ab", "release"), ("ab", "mma"), ("acc", "fill")]), tutorial3(),
         B1=("'mma'", "'ab'", "ConsumerWork 'mma'")),
    case("split_k_staging_written_before_the_accumulator_commit", "split-K's epilogue writes its staging, which "
         "aliases the A/B ring, before the accumulator's commit proved the MMAs done reading it",
         split_k_staging(False), split_k_staging(True),
         X=("'epilogue'", "'c_smem'", "ProducerWork 'write'", "smem[")),
    case("async_umma_producers_counted_as_one", "an AsyncUmma ring filled by 64 cp.async threads counts one "
         "producer thread", async_umma_operand(1), async_umma_operand(64),
         P1=("'ab'", "AsyncUmma", "'load_a'"), X=("'load_a'", "ab.full[0]", "ProducerCommit")),
]
