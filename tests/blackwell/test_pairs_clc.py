"""CLC dynamic persistent scheduling over a cluster of 2 CTAs (sm_100a), lowered from the protocol table's
ClcFetchAsync row: CTA 0's scheduler waits on its empty barrier and arms the full barrier of every CTA of the
cluster (lane j arms CTA j, ``mapa`` + ``mbarrier.arrive.expect_tx...shared::cluster``), issues
``try_cancel.multicast::cluster::all``; each CTA takes ``first_ctaid.x + cluster rank``; every consumer thread
of both CTAs releases to CTA 0's empty barrier; the launch contract asks for the cluster.  The exhaustive
checker models both CTAs (CTA 0 fetches for the cluster) and proves it SAFE."""
import numpy as np
import pytest

import tsjit
from tsjit import ts
from tsjit.examples.ts_persistent import TileDest, TileSource
from tsjit.ts.verify import exhaustive
from tsjit.ts.work_queue import CLC_RESPONSE_BYTES, TileSchedulerConfig, WorkQueue

F32 = np.zeros(4096, np.float32)


@tsjit.kernel
def clc_cluster_copy(src, dst, num_tiles, TILE: tsjit.Constexpr[int], CLUSTER: tsjit.Constexpr[int]):
    """dst = src in tiles of TILE elements, one tile per CTA, CLC-stolen in clusters of CLUSTER CTAs along x."""
    warps = 4
    clc = ts.PipelineConfig.create_clc_fetch_async_pipeline_cfg(
        2, CLC_RESPONSE_BYTES, ts.CooperativeGroup(ts.Agent.Thread, 1),
        ts.CooperativeGroup(ts.Agent.Thread, (1 + warps) * 32 * CLUSTER), (1, CLUSTER, 1, 1))
    wq = WorkQueue(name="tiles", pipeline_config=clc, tile_scheduler_config=TileSchedulerConfig.
                   create_clc_dynamic_persistent_tile_scheduler_params((num_tiles,)))
    source = TileSource(name="source", src=src, tile=TILE)
    dest = TileDest(name="dest", dst=dst, tile=TILE)
    lane = tsjit.thread_idx().x - 32

    @ts.schedule
    def scheduler_schedule(q: WorkQueue):
        with ts.work_tile_loop(q):
            with ts.domain_loop(0, 0, 1):
                pass
            q.acquire()
            q.fetch_work_tile()
            q.commit()
            q.wait()
            q.get_and_advance_work_tile()
            q.release()

    @ts.schedule
    def copy_schedule(q: WorkQueue, s: TileSource, d: TileDest):
        with ts.work_tile_loop(q):
            with ts.domain_loop(lane, TILE, warps * 32):
                item = s.load()
                d.store(item)
            q.wait()
            q.get_and_advance_work_tile()
            q.release()

    scheduler = ts.Task("scheduler", [wq], [wq], warp_idx=0, num_warps=1, schedule=scheduler_schedule(wq))
    copy = ts.Task("copy", [wq, source], [dest], warp_idx=1, num_warps=warps,
                   schedule=copy_schedule(wq, source, dest))
    manager = ts.TaskManager([scheduler, copy], {wq: [wq], dest: [source, wq]}, verbose=False)
    manager.setup_resources_and_tasks()
    manager.run()


@pytest.fixture
def verdicts(monkeypatch):
    seen = []
    original = exhaustive.check_all_interleavings
    monkeypatch.setattr(exhaustive, "check_all_interleavings",
                        lambda *a, **k: seen.append(original(*a, **k)) or seen[-1])
    return seen


@pytest.fixture(scope="module")
def two_cta():
    return tsjit.compile(clc_cluster_copy, F32, F32, 16, 256, 2, target="sm_100a")


def test_two_cta_clc_copy_is_verified_safe_with_both_ctas_modelled(verdicts):
    tsjit.compile(clc_cluster_copy, F32, F32, 16, 256, 2, target="sm_100a")
    assert [r.verdict for r in verdicts] == ["SAFE"]
    assert any("every CTA of the 2-CTA cluster is modelled" in note for note in verdicts[0].notes)


def test_cta_0_fetches_for_the_cluster_with_a_multicast_try_cancel(two_cta):
    ptx = two_cta.ptx
    assert "clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes.multicast::cluster::all" \
           ".b128" in ptx
    assert "%cluster_ctarank" in ptx
    assert "mbarrier.arrive.expect_tx.release.cluster.shared::cluster.b64" in ptx    # CTA 0 arms CTA j's barrier
    assert "mapa.shared::cluster" in ptx


def test_consumers_release_to_cta_0_and_the_launch_needs_the_cluster(two_cta):
    # a consumer release: a CTA-scope release fence, then relaxed remote arrives (no MEMBAR.ALL.GPU)
    assert "mbarrier.arrive.relaxed.cluster.shared::cluster.b64" in two_cta.ptx and "fence.release.cta" in two_cta.ptx
    assert two_cta.launch_requirements.cluster == (2, 1, 1)
    assert ".reqnctapercluster 2, 1, 1" in two_cta.ptx


def test_a_launch_without_the_cluster_is_refused(two_cta):
    from tsjit.errors import LaunchError
    requirements = two_cta.launch_requirements
    with pytest.raises(LaunchError) as err:
        requirements.check("clc_cluster_copy", (16,), (160,), None, 4096, None)
    assert "cluster=" in str(err.value)
    with pytest.raises(LaunchError) as err:
        requirements.check("clc_cluster_copy", (15,), (160,), (2, 1, 1), 4096, None)
    assert "cluster" in str(err.value)


def test_a_clc_cluster_along_y_is_refused():
    clc = ts.PipelineConfig.create_clc_fetch_async_pipeline_cfg(
        2, CLC_RESPONSE_BYTES, ts.CooperativeGroup(ts.Agent.Thread, 1), ts.CooperativeGroup(ts.Agent.Thread, 256),
        (1, 1, 2, 1))
    with pytest.raises(tsjit.VerificationError) as err:
        WorkQueue(name="tiles", pipeline_config=clc, tile_scheduler_config=TileSchedulerConfig.
                  create_clc_dynamic_persistent_tile_scheduler_params((8,)))
    assert err.value.check == "Q1" and "(1, 1, 2, 1)" in str(err.value) and "(V, M, 1, 1)" in str(err.value)
