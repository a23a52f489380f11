"""The verbose ``[smem-layout]`` report lists the ``tsjit.shared_array`` buffers resources allocate in
``__post_init__`` (issue 10 §3: it said ``0 allocation(s) ... data 0 B`` while the kernel used them)."""
import numpy as np

import tsjit
from tsjit import ts
from tsjit.examples.ts_tma_copy import LOAD_WARPS, STORE_WARPS, GmemTiles, SmemTiles


@tsjit.kernel
def reported_tma_copy(src_map, dst, num_tiles, tiles_n, STAGES: tsjit.Constexpr[int]):
    cfg = ts.PipelineConfig.create_tma_async_pipeline_cfg(
        STAGES, 32 * 32 * 4, ts.CooperativeGroup(ts.Agent.Thread, LOAD_WARPS),
        ts.CooperativeGroup(ts.Agent.Thread, STORE_WARPS * 32))
    smem = SmemTiles(name="smem", pipeline_config=cfg, src_map=src_map, box_m=32, box_n=32, tiles_n=tiles_n)
    gmem = GmemTiles(name="gmem", dst=dst, smem=smem, first_thread=LOAD_WARPS * 32)

    @ts.schedule
    def load_schedule(s: SmemTiles):
        with ts.domain_loop(tsjit.block_idx().x, num_tiles, tsjit.grid_dim().x):
            s.acquire()
            s.tma_load()
            s.commit()

    @ts.schedule
    def store_schedule(s: SmemTiles, g: GmemTiles):
        with ts.domain_loop(tsjit.block_idx().x, num_tiles, tsjit.grid_dim().x):
            s.wait()
            stage = s.read()
            g.store(stage)
            s.release()

    load = ts.Task("load", [], [smem], warp_idx=0, num_warps=LOAD_WARPS, schedule=load_schedule(smem))
    store = ts.Task("store", [smem], [gmem], warp_idx=LOAD_WARPS, num_warps=STORE_WARPS,
                    schedule=store_schedule(smem, gmem))
    manager = ts.TaskManager([load, store], {gmem: [smem]}, verbose=True)
    manager.setup_resources_and_tasks()
    manager.run()


def test_smem_layout_report_counts_shared_array_buffers(capsys, monkeypatch):
    monkeypatch.setenv("TSJIT_ALWAYS_COMPILE", "1")  # the report prints while compiling
    stages = 3
    spec = tsjit.tensormap_spec(tsjit.Float32, (32, 32))
    compiled = tsjit.compile(reported_tma_copy, spec, np.zeros((64, 64), np.float32), 4, 2, stages)
    report = [line for line in capsys.readouterr().out.splitlines() if "smem-layout" in line or "shared_array" in line]
    tile_bytes = stages * 32 * 32 * 4
    assert any("smem.tiles (shared_array)" in line and str(tile_bytes) in line for line in report), report
    total = next(line for line in report if "= total" in line)
    reported_total = int(total.split("= total ")[1].split(" B")[0])
    assert f"shared_array {tile_bytes} B" in total
    assert reported_total <= compiled.metadata["smem_bytes"] <= reported_total + 1024  # alignment padding only
