"""Hopper GEMM written in Task Scheduling: C = A @ B^T (A: (M, K), B: (N, K), both K-major bf16/fp16),
fp32 accumulation, bf16/fp16 output.

Program (one CTA = 3 warpgroups, 384 threads):

* ``load`` (warp 0, ``setmaxnreg`` down to 40 with the ``idle`` padding warps 1-3): for each work
  tile of a static persistent WorkQueue in grouped (L2-friendly) order, walks the K tiles:
  ``acquire`` a ring stage, TMA-load the A tile (BM x BK) and the B tile (BN x BK), both 128-byte
  swizzled, signalling the stage's full barrier (``expect_tx`` = the stage's bytes), ``commit``.
* ``mma`` (warpgroups 1 and 2, ``setmaxnreg`` up to 232): each warpgroup owns 64 rows of the
  BM = 128 tile.  Per K tile: ``wait`` for the stage, issue BK / 16 ``wgmma.mma_async`` (m64nBNk16)
  into the register accumulator, ``commit_group``, ``wait_group(1)`` — so one MMA group stays in
  flight — and release the *previous* stage (its MMAs have retired; ``advance_on_wait`` keeps the
  lagging release cursor).  After the K loop: ``wait_group(0)``, release the last stage, and store
  the accumulator (converted to the output dtype, bounds-masked) to C.
* Every task ends each tile with the queue epilogue (``wait``, ``get_and_advance_work_tile``,
  ``release``); the TaskManager verifies the whole program (bracketing, counts, bytes, deadlock)
  before any code is emitted.

M, N, K: any sizes whose rows are 16-byte aligned (K a multiple of 8 for 16-bit inputs); TMA
zero-fills out-of-bounds A/B elements and the epilogue masks C.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import tsjit
from tsjit import ts
from tsjit import wgmma
from tsjit.lang.epilogue import store_fragment_global, store_fragment_shared
from tsjit.lang.fragment import Fragment
from tsjit.ops.gemm_program import WarpgroupMmaRing, mainloop_schedules
from tsjit.ts.work_queue import TileSchedulerConfig, WorkQueue

BM, BK = 128, 64
CONSUMER_WARPGROUPS = 2
THREADS = 128 * (1 + CONSUMER_WARPGROUPS)


@dataclass(kw_only=True)
class ABStages(WarpgroupMmaRing):
    """The TMA ring of A and B tiles; its consumer works run the warpgroup MMAs."""

    a_map: object
    b_map: object
    cluster_m: int = 1
    b_major: str = "K"
    a_tiles: object = None
    b_tiles: object = None
    b_parts: object = None
    acc: ts.TaskLocalVariable = ts.TaskLocalVariable.uninitialized()

    def __post_init__(self):
        stages = self.pipeline_config.num_stages
        dtype = self.a_map.dtype
        self.a_tiles = tsjit.shared_array(dtype, (stages, CONSUMER_WARPGROUPS, 64, BK), align=1024)
        c = self.cluster_m
        if self.b_major == "K":
            # B (N, K): rows loaded in `cluster_m` parts, each CTA multicasting its part to the whole cluster
            self.b_parts = tsjit.shared_array(dtype, (stages, c, self.block_n // c, BK), align=1024)
            self.b_tiles = self.b_parts.reshape((stages, self.block_n, BK))
        else:
            # B (K, N): 64-column boxes [n-box][k][n], the MN-major layout wgmma reads with trans-b
            self.b_tiles = tsjit.shared_array(dtype, (stages, self.block_n // 64, BK, 64), align=1024)
        n = self.block_n
        self.acc = ts.TaskLocalVariable(Fragment, default_factory=lambda: Fragment.zeros(n // 2),
                                        docs="the warpgroup's 64 x BN fp32 accumulator")

    @ts.producer_work()
    def tma_load(self, stage_info):
        m, n, _ = stage_info.work_tile.coords
        k = stage_info.loop_offset * BK
        if tsjit.elect_one():
            stage = stage_info.stage_idx
            c = self.cluster_m
            if tsjit.const_expr(self.b_major == "MN"):
                rank = tsjit.cluster_ctarank() if c > 1 else 0
                boxes = self.block_n // 64 // c
                tsjit.tma_load(self.a_map, self.a_tiles[stage], stage_info.barrier, ((m * c + rank) * BM, k))
                for j in tsjit.range_constexpr(boxes):
                    box = rank * boxes + j
                    if tsjit.const_expr(c == 1):
                        tsjit.tma_load(self.b_map, self.b_tiles[stage, box], stage_info.barrier,
                                       (k, n * self.block_n + box * 64))
                    else:
                        tsjit.tma_load(self.b_map, self.b_tiles[stage, box], stage_info.barrier,
                                       (k, n * self.block_n + box * 64), multicast_mask=(1 << c) - 1)
            elif tsjit.const_expr(c == 1):
                tsjit.tma_load(self.a_map, self.a_tiles[stage], stage_info.barrier, (m * BM, k))
                tsjit.tma_load(self.b_map, self.b_tiles[stage], stage_info.barrier, (n * self.block_n, k))
            else:
                rank = tsjit.cluster_ctarank()
                part = self.block_n // c
                tsjit.tma_load(self.a_map, self.a_tiles[stage], stage_info.barrier, ((m * c + rank) * BM, k))
                tsjit.tma_load(self.b_map, self.b_parts[stage, rank], stage_info.barrier,
                               (n * self.block_n + rank * part, k), multicast_mask=(1 << c) - 1)

    def operand_tiles(self, stage, warpgroup):
        """The consumer works (zero_accumulator, mma, retire) come from WarpgroupMmaRing: this
        warpgroup's 64 rows of the A tile (K-major) and the B tile of ``stage``."""
        return self.a_tiles[stage, warpgroup], "K", self.b_tiles[stage], self.b_major


EPILOGUE_COLUMNS = 128   # default columns of C staged in shared memory at a time, per warpgroup


@dataclass(kw_only=True)
class OutputC(ts.MemoryResource):
    """C in global memory.

    ``mode="tma"``: each warpgroup converts its accumulator to bf16 with ``stmatrix`` into a 128B-swizzled
    shared-memory staging buffer (64 x 128 per warpgroup), and one thread issues TMA stores (clipped at
    the matrix edges) — asynchronous, so the warpgroup moves on to the next tile's MMAs while they drain.
    ``mode="direct"``: bounds-masked stores straight from registers (any N).  ``mode="none"`` stores nothing
    (timing experiments only).
    """

    c: object
    c_map: object
    block_n: int
    cluster_m: int = 1
    mode: str = "tma"
    staged_columns: int = EPILOGUE_COLUMNS
    staging: object = None

    def __post_init__(self):
        if self.mode == "tma":
            self.staging = tsjit.shared_array(self.c_map.dtype,
                                              (CONSUMER_WARPGROUPS, self.staged_columns // 64, 64, 64), align=1024)

    @ts.producer_work()
    def store(self, stage_info, acc):
        if tsjit.const_expr(self.mode == "none"):
            return
        m, n, _ = stage_info.work_tile.coords
        if tsjit.const_expr(self.cluster_m > 1):
            m = m * self.cluster_m + tsjit.cluster_ctarank()
        warpgroup = tsjit.warp_idx() // 4 - 1
        tid = tsjit.thread_idx().x % 128
        row0 = m * BM + warpgroup * 64
        col0 = n * self.block_n
        if tsjit.const_expr(self.mode == "direct"):
            store_fragment_global(acc, self.c, row0, col0, tid=tid)
            return
        buffer = self.staging[warpgroup]
        columns = self.staged_columns
        per_pass = columns // 2                     # accumulator registers per staged pass
        for part in tsjit.range_constexpr(self.block_n // columns):
            if tid == 0:
                tsjit.bulk_wait_group(0, read=True)   # the previous pass has left the staging buffer
            tsjit.named_barrier_sync(1 + warpgroup, 128)
            store_fragment_shared(Fragment(acc[part * per_pass:(part + 1) * per_pass]), buffer, swizzle="128B",
                                  tid=tid)
            tsjit.fence_proxy_async()
            tsjit.named_barrier_sync(1 + warpgroup, 128)
            if tid == 0:
                for box in tsjit.range_constexpr(columns // 64):
                    tsjit.tma_store(self.c_map, buffer[box], (row0, col0 + part * columns + box * 64))
                tsjit.bulk_commit_group()

    @ts.producer_work(work_attrs=ts.WorkAttr.AUXILIARY)
    def flush(self, stage_info):
        """Before the CTA exits: TMA stores still reading the staging buffer must finish."""
        if tsjit.const_expr(self.mode == "tma"):
            if tsjit.thread_idx().x % 128 == 0:
                tsjit.bulk_wait_group(0)


class ClusterWorkQueue(WorkQueue):
    """A static persistent queue over *cluster* tiles: the CTAs of one cluster share a tile index
    (cluster ``blockIdx.x // C`` takes tiles ``c, c + gridDim.x // C, ...``); each CTA then picks its
    own row of tiles by its cluster rank."""

    cluster: int = 1

    def initial_work_tile(self):
        return self.tile_info(tsjit.block_idx().x // self.cluster)

    def next_work_tile(self, tile):
        return self.tile_info(tile.tile_idx + tsjit.grid_dim().x // self.cluster)


@tsjit.kernel
def gemm_ts(a_map, b_map, c, c_map, M, N, K, BN: tsjit.Constexpr[int], STAGES: tsjit.Constexpr[int],
            GROUP_M: tsjit.Constexpr[int], CLUSTER_M: tsjit.Constexpr[int] = 1, EPILOGUE: tsjit.Constexpr[str] = "tma",
            B_MAJOR: tsjit.Constexpr[str] = "K"):
    """C (M, N) = A (M, K) @ B^T with B (N, K) (B_MAJOR "K"), or A @ B with B (K, N) (B_MAJOR "MN");
    launch with block = 384 threads and a persistent grid (a multiple
    of CLUSTER_M; with CLUSTER_M = 2 the two CTAs of a cluster compute vertically adjacent tiles and each
    multicasts half of the shared B tile to both)."""
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
    ab = ABStages(name="ab", pipeline_config=cfg, a_map=a_map, b_map=b_map, block_n=BN, cluster_m=CLUSTER_M,
                  b_major=B_MAJOR)
    # a whole 64 x BN warpgroup tile is staged at once when the ring leaves room for it (<= 3 stages)
    staged = BN if STAGES <= 3 else min(BN, EPILOGUE_COLUMNS)
    out = OutputC(name="c", c=c, c_map=c_map, block_n=BN, cluster_m=CLUSTER_M, mode=EPILOGUE, staged_columns=staged)

    # the same three schedules as the library GEMM (tsjit.ops.gemm_program), over k_tiles K tiles
    load_schedule, idle_schedule, mma_schedule = mainloop_schedules(k_tiles)

    load = ts.Task("load", [wq], [ab], warp_idx=0, num_warps=1, schedule=load_schedule(wq, ab), num_registers=40)
    idle = ts.Task("idle", [wq], [], warp_idx=1, num_warps=3, schedule=idle_schedule(wq), num_registers=40)
    mma = ts.Task("mma", [wq, ab], [out], warp_idx=4, num_warps=4 * CONSUMER_WARPGROUPS,
                  schedule=mma_schedule(wq, ab, out), num_registers=232)
    manager = ts.TaskManager([load, idle, mma], {ab: [wq], out: [ab]}, verbose=False)
    manager.setup_resources_and_tasks()
    manager.run()


def bf16_round(x: np.ndarray) -> np.ndarray:
    """``x`` (float32) rounded to the nearest bfloat16 value, as float32."""
    from tsjit.runtime.arrays import bfloat16_bits_to_float32, float_to_bfloat16_bits
    return bfloat16_bits_to_float32(float_to_bfloat16_bits(x))


def gemm_launcher(a, b, c, *, block_n: int = 256, stages: int = 3, group_m: int = 8, cluster_m: int = 1,
                  sms: int | None = None, stream=None, epilogue: str | None = None, b_layout: str = "NK"):
    """A launcher for C = A @ B^T (``b_layout="NK"``: B is (N, K)) or C = A @ B (``"KN"``: B is (K, N)) on
    device arrays (bf16 A (M, K), C (M, N)); the TensorMaps are encoded once."""
    if b_layout not in ("NK", "KN"):
        raise ValueError(f"b_layout must be 'NK' (B is (N, K)) or 'KN' (B is (K, N)); got {b_layout!r}")
    M, K = a.shape
    N = b.shape[0] if b_layout == "NK" else b.shape[1]
    a_map = tsjit.TensorMap(a, (BM, BK), swizzle="128B")
    if b_layout == "NK":
        b_map = tsjit.TensorMap(b, (block_n // cluster_m, BK), swizzle="128B")
    else:
        b_map = tsjit.TensorMap(b, (BK, 64), swizzle="128B")
    if epilogue is None:   # TMA stores need 16-byte C rows; otherwise store from registers
        epilogue = "tma" if (N * 2) % 16 == 0 else "direct"
    c_map = tsjit.TensorMap(c, (64, 64), swizzle="128B") if epilogue == "tma" else a_map
    cluster_tiles = -(-M // (BM * cluster_m)) * -(-N // block_n)
    if sms is None:
        from tsjit import env
        from tsjit.runtime.driver import device_properties
        sms = 132 if env.interpret() else device_properties().sm_count   # the CPU interpreter: an H200's SMs
    grid = min(cluster_tiles, sms // cluster_m) * cluster_m
    launch = gemm_ts[(grid,), (THREADS,)]
    b_major = "K" if b_layout == "NK" else "MN"
    return lambda: launch(a_map, b_map, c, c_map, M, N, K, block_n, stages, group_m, cluster_m, epilogue, b_major,
                          stream=stream)


def run_gemm(M: int, N: int, K: int, *, block_n: int = 256, stages: int = 3, cluster_m: int = 1, epilogue=None,
             b_layout: str = "NK", rng=None):
    """C = A @ B^T (B (N, K)) or A @ B (``b_layout="KN"``) on fresh random bf16 inputs, output poisoned;
    returns (C as float64, float64 reference)."""
    rng = rng or np.random.default_rng()
    a = bf16_round(rng.standard_normal((M, K)).astype(np.float32))
    b = bf16_round(rng.standard_normal((N, K) if b_layout == "NK" else (K, N)).astype(np.float32))
    da = tsjit.to_device(a, dtype=tsjit.BFloat16)
    db = tsjit.to_device(b, dtype=tsjit.BFloat16)
    c = tsjit.empty((M, N), tsjit.BFloat16).fill_bytes(0xFF)
    gemm_launcher(da, db, c, block_n=block_n, stages=stages, cluster_m=cluster_m, epilogue=epilogue,
                  b_layout=b_layout)()
    from tsjit.runtime.arrays import bfloat16_bits_to_float32
    got = bfloat16_bits_to_float32(c.numpy()).astype(np.float64)
    b64 = b.astype(np.float64)
    return got, a.astype(np.float64) @ (b64.T if b_layout == "NK" else b64)
