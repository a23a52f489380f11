"""Arrival counts, TMA byte counts and several tasks on one ring."""
from __future__ import annotations

from broken.builders import CONS, PROD, PROD_TMA, case, ring_program
from tsjit.ts.pipeline import PipelineConfig, SignalingThreads
from verify_schedules import (FakeValue, GmemDest, Program, Ring, TaskSpec, async_config,
                              threads, tma_config)

TILE = 8192


def async_counts(producers=32, consumers=128, prod_warps=1, cons_warps=4):
    return lambda: ring_program(lambda: async_config(4, producers=producers,
                                                     consumers=consumers),
                                PROD, CONS, prod_warps=prod_warps, cons_warps=cons_warps)


def ab_tma(num_bytes, per_warp=2 * TILE):
    """A TMA producer loading an A and a B tile per stage (two copies of one tile each)."""
    producer = [("ring", "acquire"), ("ring", "tma_load"), ("ring", "tma_load_b"),
                ("ring", "commit")]
    return lambda: ring_program(lambda: tma_config(4, num_bytes, 1, 128,
                                                   num_bytes_per_warp_per_cta=per_warp),
                                producer, CONS)


def two_warp_tma(leader: bool):
    """A 2-warp TMA producer; with TaskWarpLeader only its first warp arms the stage."""
    signalling = SignalingThreads.TaskWarpLeader if leader else SignalingThreads.All
    return lambda: ring_program(
        lambda: tma_config(4, 2 * TILE, 1, 128, num_bytes_per_warp_per_cta=TILE,
                           producer_signaling_threads=signalling),
        PROD_TMA, CONS, prod_warps=2)


def two_consumers(consumer_group=256, second_releases=True):
    """GEMM-like: one TMA warp feeds two consumer warpgroups that both read every stage."""
    def program():
        def resources():
            ring = Ring(name="ring", pipeline_config=tma_config(4, 2 * TILE, 1, consumer_group))
            return {"ring": ring, "out": GmemDest(name="out", dst=FakeValue("out"))}
        loop = [("ring", "wait"), ("ring", "mma"), ("ring", "release")]
        specs = [TaskSpec("load", 0, 1, (), ("ring",), {"loop": PROD_TMA}, domain=(0, 8, 1)),
                 TaskSpec("mma0", 4, 4, ("ring",), ("out",), {"loop": loop,
                                                             "tail": [("out", "store")]},
                          domain=(0, 8, 1)),
                 TaskSpec("mma1", 8, 4, ("ring",), ("out",), {
                     "loop": loop if second_releases else loop[:2],
                     "tail": [("out", "store")]}, domain=(0, 8, 1))]
        return Program("two consumers", resources, specs, lambda r: {r["out"]: [r["ring"]]})
    return program


def two_producers(both_fill: bool):
    """Two 1-warp producer tasks fill one ring without interleave lanes."""
    def program():
        def resources():
            ring = Ring(name="ring", pipeline_config=async_config(4, producers=32,
                                                                  consumers=128))
            return {"ring": ring, "out": GmemDest(name="out", dst=FakeValue("out"), smem=ring)}
        specs = [TaskSpec("prod_a", 0, 1, (), ("ring",), {"loop": PROD}, domain=(0, 6, 1)),
                 TaskSpec("prod_b", 1, 1, (), ("ring",), {"loop": PROD}, domain=(0, 6, 1)),
                 TaskSpec("cons", 4, 4, ("ring",), ("out",), {"loop": CONS}, domain=(0, 6, 1))]
        if not both_fill:    # the fix: one producer task, the other one idle
            specs[1] = TaskSpec("prod_b", 1, 1, (), (), {}, domain=(0, 0, 1))
        return Program("two producers", resources, specs, lambda r: {r["out"]: [r["ring"]]})
    return program


def split_loads(num_bytes=TILE, per_warp=TILE):
    """Tutorial 04's split A/B loads: two 1-warp TMA tasks fill one stage, each arming the full
    barrier and bringing its own tile (``per_warp``: num_bytes_per_warp_per_cta, or None)."""
    def program():
        def resources():
            ring = Ring(name="ring", pipeline_config=tma_config(
                4, num_bytes, 2, 128, num_bytes_per_warp_per_cta=per_warp))
            return {"ring": ring, "out": GmemDest(name="out", dst=FakeValue("out"), smem=ring)}
        specs = [TaskSpec(name, warp, 1, (), ("ring",), {"loop": [
                     ("ring", "acquire"), ("ring", work), ("ring", "commit")]}, domain=(0, 6, 1))
                 for name, warp, work in (("load_a", 0, "tma_load"), ("load_b", 1, "tma_load_b"))]
        specs.append(TaskSpec("cons", 4, 4, ("ring",), ("out",), {"loop": CONS}, domain=(0, 6, 1)))
        return Program("split A/B loads", resources, specs, lambda r: {r["out"]: [r["ring"]]})
    return program


def cluster_consumers(config, producer_work="fill", producer_cta=None):
    """One producer (on every CTA, or on ``producer_cta`` only) and a 4-warp consumer on every
    CTA of a cluster (``config`` makes the ring)."""
    producer = [("ring", "acquire"), ("ring", producer_work), ("ring", "commit")]

    def program():
        built = ring_program(config, producer, CONS, name="cluster ring")
        built.specs[0].only_cta = producer_cta
        return built
    return program


def umma_pair(consumers, producer_cta=0):
    """UmmaAsync over a 2-CTA pair: the pair leader's MMA task commits to both CTAs' full
    barriers, every epilogue thread of both CTAs arrives on the leader's empty barrier (256 for
    4 warps per CTA)."""
    return cluster_consumers(lambda: PipelineConfig.create_umma_async_pipeline_cfg(
        2, threads(1), threads(consumers), cta_layout_vmnk=(2, 1, 1, 1)), producer_cta=producer_cta)


def multicast(consumers):
    """TmaAsync over a 2 x 2 cluster with multicast (1, 1): a consumer warp arrives once per CTA
    of its row and column (M + N - 1 = 3 lanes), 12 for 4 warps."""
    return cluster_consumers(lambda: tma_config(4, TILE, 1, consumers, cta_layout_vmnk=(1, 2, 2, 1),
                                                mcast_mode_mn=(1, 1)), "tma_load")


def clc_ring(consumers):
    """ClcFetchAsync over 2 CTAs: CTA 0 waits, arms every CTA's full barrier and writes the 16-byte
    response into each; every consumer thread of both CTAs arrives on CTA 0's empty barrier."""
    return cluster_consumers(lambda: PipelineConfig.create_clc_fetch_async_pipeline_cfg(
        2, 16, threads(1), threads(consumers), cta_layout_vmnk=(1, 2, 1, 1)), "tma_load")


CASES = [
    case("consumer_group_one_warp_short", "consumer_group counts 3 warps (96 threads) for a "
         "4-warp consumer: the phase completes while the 4th warp still reads",
         async_counts(consumers=96), async_counts(),
         P1=("'cons'", "'ring'", "consumer_group"), X=("'cons'", "'ring'", "ConsumerRelease")),
    case("consumer_group_one_warp_too_many", "consumer_group counts 5 warps (160 threads) for "
         "a 4-warp consumer: the empty barrier never completes", async_counts(consumers=160),
         async_counts(), P1=("'cons'", "'ring'", "consumer_group"),
         X=("'prod'", "'ring'", "ProducerAcquire")),
    case("producer_group_two_warps_for_one", "producer_group counts 64 threads for a 1-warp "
         "producer: the full barrier never completes", async_counts(producers=64),
         async_counts(), P1=("'prod'", "'ring'", "producer_group"),
         X=("'cons'", "'ring'", "ConsumerWait")),
    case("consumer_group_in_lanes_off_by_one", "consumer_group counts 3 elected lanes for a "
         "4-warp consumer releasing one lane per warp", async_counts(consumers=3),
         async_counts(consumers=4), P1=("'cons'", "'ring'", "consumer_group"),
         X=("'cons'", "'ring'", "ConsumerRelease")),
    case("tma_bytes_short_by_one_tile", "num_bytes covers the A tile only; the B tile lands "
         "after the stage completed", ab_tma(TILE), ab_tma(2 * TILE),
         P2=("'ring'", "num_bytes", "16384"), X=("'prod'", "'ring'", "ProducerWork")),
    case("tma_bytes_one_tile_too_many", "num_bytes expects three tiles, the copies deliver "
         "two: the stage never completes", ab_tma(3 * TILE), ab_tma(2 * TILE),
         P2=("'ring'", "num_bytes", "24576"), X=("'cons'", "'ring'", "ConsumerWait")),
    case("tma_two_warps_without_task_warp_leader", "both warps of a 2-warp TMA producer arm "
         "the stage; producer_group expects one arrival", two_warp_tma(False),
         two_warp_tma(True), P1=("'prod'", "'ring'", "producer_group"),
         X=("'prod'", "'ring'", "ProducerAcquire")),
    case("two_consumers_counted_as_one", "two consumer warpgroups release every stage but "
         "consumer_group counts one (128 threads)", two_consumers(128), two_consumers(),
         P1=("'mma0'", "'mma1'", "'ring'", "consumer_group"),
         X=("'load'", "'ring'", "ProducerAcquire")),
    case("second_consumer_never_releases", "the second consumer warpgroup reads every stage "
         "but never releases it", two_consumers(256, False), two_consumers(),
         P1=("'mma0'", "'ring'", "consumer_group"), B1=("'mma1'", "'ring'"),
         X=("'load'", "'ring'", "ProducerAcquire")),
    case("two_producers_without_lanes", "two producer tasks fill the same stages of one ring "
         "(no interleave lanes)", two_producers(True), two_producers(False),
         P1=("'prod_a'", "'prod_b'", "'ring'", "producer_group"),
         X=("'prod_b'", "'ring'", "ProducerWork")),
    case("split_loads_without_per_warp_bytes", "two TMA tasks fill one stage (split A/B loads) "
         "without num_bytes_per_warp_per_cta: nothing says each brings its own part",
         split_loads(per_warp=None), split_loads(),
         P2=("'load_a'", "'load_b'", "'ring'", "ProducerAcquire", "num_bytes_per_warp_per_cta"),
         X=("'load_a'", "'load_b'", "'ring'", "ProducerWork", "num_bytes_per_warp_per_cta")),
    case("split_loads_bytes_do_not_add_up", "split A/B loads arm a whole stage (2 tiles) each "
         "while each brings one tile: the stage never completes", split_loads(num_bytes=2 * TILE),
         split_loads(), P2=("'ring'", "num_bytes", "8192"), X=("'cons'", "'ring'", "ConsumerWait")),
    case("umma_pair_counted_for_one_cta", "a 2-CTA UMMA pair's consumer_group counts one CTA's "
         "epilogue threads (128): the second CTA's arrivals overflow the leader's phase",
         umma_pair(128), umma_pair(256), P1=("'cons'", "'ring'", "consumer_group", "V=2"),
         X=("'cons'", "'prod'", "'ring'", "CTA 0")),
    case("clc_consumer_count_for_one_cta", "a 2-CTA CLC ring's consumer_group counts one CTA's "
         "threads: CTA 0 refills a stage CTA 1 still reads", clc_ring(128), clc_ring(256),
         P1=("'cons'", "'ring'", "consumer_group", "cluster 2"), X=("'prod'", "'cons'", "CTA 1")),
    case("umma_pair_mma_task_on_both_ctas", "the MMA task of a 2-CTA pair runs on both CTAs: the "
         "second CTA waits on an empty barrier only the leader's receives, and both commit to the "
         "pair", umma_pair(256, producer_cta=None), umma_pair(256),
         X=("'prod'", "'ring'", "CTA 1")),
    case("multicast_consumer_count_misses_a_peer", "consumer_group counts 2 multicast lanes per "
         "warp where a (1, 1) multicast over 2 x 2 reaches 3 CTAs", multicast(8), multicast(12),
         P1=("'cons'", "'ring'", "consumer_group", "12"),
         X=("'cons'", "'ring'", "ConsumerRelease", "12")),
    case("multicast_consumer_count_one_peer_too_many", "consumer_group counts 4 multicast lanes "
         "per warp: the empty barrier never completes", multicast(16), multicast(12),
         P1=("'cons'", "'ring'", "consumer_group", "12"), X=("'prod'", "'ring'", "ProducerAcquire")),
]
