"""The reference's cluster signalling forms, run as written (issue 10 §1 rows that issue 12 §2 built):
``SignalingThreads.CtaLeader`` on a producer and on a consumer side, ``consumer_wait_signaling_threads``,
``Task(run_only_on_cta_id=0)`` and ``mcast_mode_mn``.  Each program runs on the CPU interpreter (or
the GPU) on fresh random data into a poisoned destination and must copy exactly."""
import numpy as np
import pytest

from ts.lowering import leader_programs as lp
from ts.lowering import multicast_programs as mp
from ts.lowering import split_consumer_programs as sc

conformance = pytest.mark.conformance


@conformance("A1", "field consumer_signaling_threads")
@conformance("A1", "field consumer_wait_signaling_threads")
@conformance("§1.4", "CtaLeader")
@conformance("§1.4", "consumer_wait_signaling_threads")
@conformance("§1.9", "run_only_on_cta_id=k")
def test_split_consumer_waits_on_every_cta_and_releases_on_the_leader(monkeypatch):
    monkeypatch.setenv("TSJIT_INTERPRET", "1")
    got, expected = sc.run(64, 32, 16, 2, 1)
    assert np.array_equal(got, expected)


@conformance("A1", "field producer_signaling_threads")
def test_a_leader_only_tma_producer_loads_for_every_cta_of_the_cluster(monkeypatch):
    """``producer_signaling_threads=CtaLeader``: the leader CTA's producer waits, arms every CTA's full
    barrier and loads the tile into both CTAs' shared memory; each CTA stores its copy."""
    monkeypatch.setenv("TSJIT_INTERPRET", "1")
    got, expected = lp.run(32, 32, 16, 2, 1, leader_producer=True)
    assert np.array_equal(got, expected)


@conformance("§1.4", "mcast_mode_mn")
def test_multicast_copy_releases_to_the_peer_cta(monkeypatch):
    monkeypatch.setenv("TSJIT_INTERPRET", "1")
    got, expected = mp.run(64, 32, 16, 2, 1)
    assert np.array_equal(got, expected)


@conformance("A7", "WorkQueue wrapping ClcDynamicPersistentTileScheduler")
@conformance("§1.4", "create_clc_fetch_async_pipeline_cfg")
@conformance("§1.5", "wq.fetch_work_tile()")
@conformance("§1.5", "wq.get_and_advance_work_tile()")
@conformance("§1.5", "WorkQueue self-edge {wq: [wq]}")
@conformance("§1.5", "create_clc_dynamic_persistent_tile_scheduler_params(params, response_ptr)")
def test_clc_dynamic_persistent_copy_runs_on_the_interpreters_launch_queue(monkeypatch):
    """The CLC persistent copy (sm_100a: clusterlaunchcontrol.try_cancel / query_cancel), its scheduler task
    with the queue self-edge, run against the interpreter's simulated launch queue."""
    from tsjit.examples import bw_clc_copy
    import tsjit
    monkeypatch.setenv("TSJIT_INTERPRET", "1")
    monkeypatch.setenv("TSJIT_TARGET", "sm_100a")   # the interpreter runs the Blackwell build
    tile, warps, num_tiles = 256, 2, 5
    src = np.random.default_rng().standard_normal(num_tiles * tile).astype(np.float32)
    dst = tsjit.empty((num_tiles * tile,), tsjit.Float32).fill_bytes(0xFF)
    bw_clc_copy.clc_copy[(num_tiles,), ((1 + warps) * 32,)](tsjit.to_device(src), dst, num_tiles, tile, warps)
    assert np.array_equal(dst.numpy(), src)
