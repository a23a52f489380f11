"""stage_info.stage_idx in the work of a resource without a pipeline (newcomer report 8, item 3): it is
None there; using it as an index names the resource, what it is, and the fix (the stage from take())."""
from dataclasses import dataclass

import numpy as np
import pytest

import tsjit
from tsjit import ts
from tsjit.errors import CompilationError

from .test_two_consumer_tasks import BM, BN, M, N, Ring


@dataclass(kw_only=True)
class RowSumsOwnStage(ts.MemoryResource):
    sums: object
    ring: object

    @ts.producer_work()
    def rowsum(self, si, stage):
        bm, bn = self.ring.tmap.box_shape
        lane = tsjit.lane_idx()
        if lane < bm:
            acc = tsjit.Float32(0)
            for c in range(bn):
                acc += self.ring.tiles[si.stage_idx, lane, c]      # the mistake: rs has no pipeline
            self.sums[si.loop_offset, lane] = acc


@tsjit.kernel
def one(tmap, sums, num_tiles, tiles_n):
    cfg = ts.PipelineConfig.create_tma_async_pipeline_cfg(2, tmap.box_bytes,
        ts.CooperativeGroup(ts.Agent.Thread, 1), ts.CooperativeGroup(ts.Agent.Thread, 32))
    ring = Ring(name="ring", pipeline_config=cfg, tmap=tmap, tiles_n=tiles_n)
    rs = RowSumsOwnStage(name="rs", sums=sums, ring=ring)

    @ts.schedule
    def produce(r: Ring):
        with ts.domain_loop(0, num_tiles, 1):
            r.acquire(); r.load(); r.commit()

    @ts.schedule
    def rows(r: Ring, s: RowSumsOwnStage):
        with ts.domain_loop(0, num_tiles, 1):
            r.wait(); st = r.take(); s.rowsum(st); r.release()
    tasks = [ts.Task("tma", [], [ring], warp_idx=0, num_warps=1, schedule=produce(ring)),
             ts.Task("rows", [ring], [rs], warp_idx=1, num_warps=1, schedule=rows(ring, rs))]
    m = ts.TaskManager(tasks, {rs: [ring]})
    m.setup_resources_and_tasks()
    m.run()


def test_stage_idx_of_a_resource_without_pipeline_names_it_and_the_fix():
    a = np.zeros((M, N), np.float32)
    nt = -(-M // BM) * -(-N // BN)
    with pytest.raises(CompilationError) as info:
        one.interpret[(1,), (64,)](tsjit.TensorMap(a, (BM, BN)), np.zeros((nt, BM), np.float32), nt, -(-N // BN))
    text = str(info.value)
    assert "`si.stage_idx` is None in the work of 'rs'" in text
    assert "without a pipeline_config" in text and "st = ring.take()" in text
    assert "test_stage_idx_without_pipeline.py" in text and "cannot index" not in text
