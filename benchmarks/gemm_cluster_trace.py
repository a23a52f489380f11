"""Issue 15 (2026-12-02, helper i15c): per-stage timestamps of the tutorial GEMM (``tsjit/examples/gemm.py``),
single CTAs against 2-CTA clusters.  The kernel is the tutorial's program with a traced ring: the producer
records ``clock64`` when each K tile's acquire has passed (its empty barrier), the first MMA warp when each K
tile's wait has passed (its full barrier), both for the first ``T`` K iterations of each CTA, plus
``%globaltimer``-free per-CTA totals (first and last event).  From them, per CTA: cycles per K tile in the
steady state, how far the producer runs ahead, and how long the consumer waits.

    PYTHONPATH=. python benchmarks/gemm_cluster_trace.py [--shape M,N,K] [--stages 4]
"""
from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass

try:
    import torch
except ImportError:       # compile-only use on a machine without torch
    torch = None

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import tsjit                                                     # noqa: E402
from tsjit import ts, wgmma                                      # noqa: E402
from tsjit.examples import gemm                                  # noqa: E402
from tsjit.examples.gemm import BM, BK, CONSUMER_WARPGROUPS, THREADS, ABStages, ClusterWorkQueue, OutputC  # noqa
from tsjit.ops.gemm_program import mainloop_schedules, K_STEPS   # noqa: E402
from tsjit.ts.work_queue import TileSchedulerConfig              # noqa: E402

T = 256     # K iterations traced per CTA and role


@dataclass(kw_only=True)
class TracedStages(ABStages):
    trace: object = None
    k_tiles: object = 1

    def _iteration(self, stage_info, k_tiles):
        c = self.cluster_m
        first = tsjit.block_idx().x // c
        return (stage_info.work_tile.tile_idx - first) // (tsjit.grid_dim().x // c) * k_tiles + stage_info.loop_offset

    @ts.producer_work()
    def tma_load(self, stage_info):
        now = tsjit.clock64()
        m, n, _ = stage_info.work_tile.coords
        k = stage_info.loop_offset * BK
        if tsjit.elect_one():
            stage = stage_info.stage_idx
            c = self.cluster_m
            if tsjit.const_expr(c == 1):
                tsjit.tma_load(self.a_map, self.a_tiles[stage], stage_info.barrier, (m * BM, k))
                tsjit.tma_load(self.b_map, self.b_tiles[stage], stage_info.barrier, (n * self.block_n, k))
            else:
                rank = tsjit.cluster_ctarank()
                part = self.block_n // c
                tsjit.tma_load(self.a_map, self.a_tiles[stage], stage_info.barrier, ((m * c + rank) * BM, k))
                tsjit.tma_load(self.b_map, self.b_parts[stage, rank], stage_info.barrier,
                               (n * self.block_n + rank * part, k), multicast_mask=(1 << c) - 1)
            it = self._iteration(stage_info, self.k_tiles)
            if it < T:
                self.trace[(tsjit.block_idx().x * 2) * T + it] = now

    @ts.consumer_work(returns="acc")
    def mma(self, stage_info, acc):
        now = tsjit.clock64()
        warpgroup = tsjit.warp_idx() // 4 - 1
        x_tile, x_major, y_tile, y_major = self.operand_tiles(stage_info.stage_idx, warpgroup)
        x_desc = wgmma.make_descriptor(x_tile, major=x_major, swizzle="128B")
        y_desc = wgmma.make_descriptor(y_tile, major=y_major, swizzle="128B")
        wgmma.fence()
        for kk in tsjit.range_constexpr(K_STEPS):
            acc = wgmma.mma_async(acc, x_desc.k_step(kk), y_desc.k_step(kk), n=self.block_n)
        wgmma.commit_group()
        wgmma.wait_group(1)
        if tsjit.thread_idx().x == 128:
            it = self._iteration(stage_info, self.k_tiles)
            if it < T:
                self.trace[(tsjit.block_idx().x * 2 + 1) * T + it] = now
        return acc


@tsjit.kernel
def gemm_trace(a_map, b_map, c, c_map, trace, M, N, K, BN: tsjit.Constexpr[int], STAGES: tsjit.Constexpr[int],
               GROUP_M: tsjit.Constexpr[int], CLUSTER_M: tsjit.Constexpr[int] = 1):
    """The tutorial GEMM (B (N, K), TMA epilogue) with a traced ring."""
    tiles_m = (M + BM * CLUSTER_M - 1) // (BM * CLUSTER_M)
    tiles_n = (N + BN - 1) // BN
    k_tiles = (K + BK - 1) // BK
    queue_config = TileSchedulerConfig.create_static_persistent_tile_scheduler_params(
        tiles_m, tiles_n, order="grouped", group_size_m=max(1, GROUP_M // CLUSTER_M))
    wq = ClusterWorkQueue(name="tiles", tile_scheduler_config=queue_config)
    wq.cluster = CLUSTER_M
    stage_bytes = (BM + BN) * BK * a_map.dtype.itemsize
    cfg = ts.PipelineConfig.create_tma_async_pipeline_cfg(
        STAGES, stage_bytes, ts.CooperativeGroup(ts.Agent.Thread, 1),
        ts.CooperativeGroup(ts.Agent.Thread, CONSUMER_WARPGROUPS * 4), advance_on_wait=True,
        cta_layout_vmnk=(1, CLUSTER_M, 1, 1) if CLUSTER_M > 1 else None)
    ab = TracedStages(name="ab", pipeline_config=cfg, a_map=a_map, b_map=b_map, block_n=BN, cluster_m=CLUSTER_M,
                      trace=trace, k_tiles=k_tiles)
    staged = BN if STAGES <= 3 else min(BN, gemm.EPILOGUE_COLUMNS)
    out = OutputC(name="c", c=c, c_map=c_map, block_n=BN, cluster_m=CLUSTER_M, mode="tma", staged_columns=staged)
    load_schedule, idle_schedule, mma_schedule = mainloop_schedules(k_tiles)
    load = ts.Task("load", [wq], [ab], warp_idx=0, num_warps=1, schedule=load_schedule(wq, ab), num_registers=40)
    idle = ts.Task("idle", [wq], [], warp_idx=1, num_warps=3, schedule=idle_schedule(wq), num_registers=40)
    mma = ts.Task("mma", [wq, ab], [out], warp_idx=4, num_warps=4 * CONSUMER_WARPGROUPS,
                  schedule=mma_schedule(wq, ab, out), num_registers=232)
    manager = ts.TaskManager([load, idle, mma], {ab: [wq], out: [ab]}, verbose=False)
    manager.setup_resources_and_tasks()
    manager.run()


def traced_run(a, b, c, *, block_n, stages, cluster_m, sms=132, group_m=8):
    """Launch once (after one warm-up); returns the (grid, 2, T) int64 trace (-1: not reached)."""
    M, K = a.shape
    N = b.shape[0]
    a_map = tsjit.TensorMap(a, (BM, BK), swizzle="128B")
    b_map = tsjit.TensorMap(b, (block_n // cluster_m, BK), swizzle="128B")
    c_map = tsjit.TensorMap(c, (64, 64), swizzle="128B")
    cluster_tiles = -(-M // (BM * cluster_m)) * -(-N // block_n)
    grid = min(cluster_tiles, sms // cluster_m) * cluster_m
    trace = torch.full((grid * 2 * T,), -1, device="cuda", dtype=torch.int64)
    launch = gemm_trace[(grid,), (THREADS,)]
    for _ in range(2):
        trace.fill_(-1)
        launch(a_map, b_map, c, c_map, trace, M, N, K, block_n, stages, group_m, cluster_m)
    torch.cuda.synchronize()
    return trace.view(grid, 2, T).cpu()


def summarize(tr, label, k_tiles):
    """Median over CTAs of: cycles per K tile (consumer wait-to-wait, steady state), consumer lag behind the
    producer's acquire of the same K tile, and the first tile's total."""
    import statistics
    per_tile, lead, first = [], [], []
    for cta in range(tr.shape[0]):
        p, q = tr[cta, 0], tr[cta, 1]
        n = int(((p >= 0) & (q >= 0)).sum())
        if n < 8:
            continue
        lo, hi = 4, min(n, k_tiles) - 1      # inside the first tile, past the ring fill
        if hi > lo:
            per_tile.append((q[hi] - q[lo]).item() / (hi - lo))
            lead.append(statistics.median((q[lo:hi] - p[lo:hi]).tolist()))
        first.append((q[min(n, k_tiles) - 1] - p[0]).item())
    med = statistics.median
    print(f"| {label} | {len(per_tile)} | {med(per_tile):.0f} | {min(per_tile):.0f} - {max(per_tile):.0f} | "
          f"{med(lead):.0f} | {med(first):.0f} |")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--shapes", nargs="*", default=["4096,4096,4096,256", "256,4096,4096,128"])
    parser.add_argument("--stages", type=int, default=4)
    args = parser.parse_args()
    print("| shape, variant | CTAs | cycles / K tile (median) | min - max over CTAs | consumer wait - producer "
          "acquire, cycles | first tile, cycles |")
    print("|---|---|---|---|---|---|")
    for shape in args.shapes:
        M, N, K, bn = (int(x) for x in shape.split(","))
        a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(N, K, device="cuda", dtype=torch.bfloat16)
        c = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
        for cm in (1, 2):
            tr = traced_run(a, b, c, block_n=bn, stages=args.stages, cluster_m=cm)
            summarize(tr, f"{M}x{N}x{K} BN={bn} cluster_m={cm}", -(-K // BK))
            ref = (a.float() @ b.float().T)
            err = ((c.float() - ref).abs().max() / ref.abs().max()).item()
            print(f"|   rel err {err:.1e} | | | | | |")


if __name__ == "__main__":
    main()
