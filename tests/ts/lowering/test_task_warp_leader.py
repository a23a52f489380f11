"""TaskWarpLeader on a multi-warp TMA producer (issue 4): every producer warp waits on the empty barrier,
but only the task's first warp arms the full barrier, once, with the aggregate bytes."""
from dataclasses import dataclass

import tsjit
from tsjit import ts

WARPS = 2
BOX = (32, 64)


@dataclass(kw_only=True)
class Tiles(ts.MemoryResource):
    src_map: object
    tiles: object = None
    stage: ts.TaskLocalVariable = ts.TaskLocalVariable.uninitialized()

    def __post_init__(self):
        self.tiles = tsjit.shared_array(tsjit.Float32, (2, WARPS, BOX[0], BOX[1]), align=1024)
        self.stage = ts.TaskLocalVariable(tsjit.Int32, default=0)

    def tma_bytes_per_stage(self):
        return WARPS * BOX[0] * BOX[1] * 4        # one box per producer warp

    @ts.producer_work()
    def load(self, stage_info):
        part = tsjit.warp_idx()                  # each producer warp loads its own box of the stage
        if tsjit.elect_one():
            tsjit.tma_load(self.src_map, self.tiles[stage_info.stage_idx, part], stage_info.barrier,
                           (part * BOX[0], stage_info.loop_offset * BOX[1]))

    @ts.consumer_work(returns="stage")
    def take(self, stage_info):
        return stage_info.stage_idx


@dataclass(kw_only=True)
class Out(ts.MemoryResource):
    dst: object

    @ts.producer_work()
    def store(self, stage_info, stage):
        self.dst[tsjit.thread_idx().x] = stage


@tsjit.kernel
def two_warp_producer(src_map, dst, n):
    cfg = ts.PipelineConfig.create_tma_async_pipeline_cfg(
        2, WARPS * BOX[0] * BOX[1] * 4, ts.CooperativeGroup(ts.Agent.Thread, 1),
        ts.CooperativeGroup(ts.Agent.Thread, 128), producer_signaling_threads=ts.SignalingThreads.TaskWarpLeader,
        num_bytes_per_warp_per_cta=BOX[0] * BOX[1] * 4)
    tiles = Tiles(name="tiles", pipeline_config=cfg, src_map=src_map)
    out = Out(name="out", dst=dst)

    @ts.schedule
    def produce(t: Tiles):
        with ts.domain_loop(0, n, 1):
            t.acquire()
            t.load()
            t.commit()

    @ts.schedule
    def consume(t: Tiles, o: Out):
        with ts.domain_loop(0, n, 1):
            t.wait()
            s = t.take()
            o.store(s)
            t.release()

    producer = ts.Task("producer", [], [tiles], warp_idx=0, num_warps=WARPS, schedule=produce(tiles))
    consumer = ts.Task("consumer", [tiles], [out], warp_idx=WARPS, num_warps=4, schedule=consume(tiles, out))
    manager = ts.TaskManager([producer, consumer], {out: [tiles]}, verbose=False)
    manager.setup_resources_and_tasks()
    manager.run()


def test_p2_names_the_byte_count_when_a_stage_loads_several_boxes(monkeypatch):
    """Without tma_bytes_per_stage() the check sees one box per stage and rejects the aggregate count."""
    import numpy as np
    import pytest
    monkeypatch.setenv("TSJIT_DISABLE_CACHE", "1")
    fresh = tsjit.kernel(two_warp_producer.fn)          # no in-memory entry from other tests
    original = Tiles.tma_bytes_per_stage
    try:
        del Tiles.tma_bytes_per_stage
        with pytest.raises(tsjit.VerificationError) as err:
            tsjit.compile(fresh, tsjit.tensormap_spec(tsjit.Float32, BOX), np.zeros(256, np.int32), 9)
        assert err.value.check == "P2" and "16384" in str(err.value) and "8192" in str(err.value)
    finally:
        Tiles.tma_bytes_per_stage = original


def test_only_the_first_warp_arms_with_the_aggregate_bytes():
    import numpy as np
    c = tsjit.compile(two_warp_producer, tsjit.tensormap_spec(tsjit.Float32, BOX), np.zeros(256, np.int32), 8)
    ptx = c.ptx
    arms = [line for line in ptx.splitlines() if "mbarrier.arrive.expect_tx" in line]
    assert len(arms) == 1
    # the full barrier expects one arrival (the leader warp), with both warps' bytes
    assert str(WARPS * BOX[0] * BOX[1] * 4) in ptx
    assert "mbarrier.init.shared.b64" in ptx
