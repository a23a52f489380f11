"""CUTLASS Task Scheduling tutorial 3 ported: a non-persistent 128 x 256 bf16 GEMM, load -> MMA ->
TMEM -> store, ``C (M, N) = A (M, K) @ B (N, K)^T`` with fp32 accumulation and bf16 output.  One
source builds for Blackwell (sm_100a: tcgen05 UMMA, accumulator in tensor memory) and for Hopper
(sm_90a: wgmma, accumulator in registers); the kernel picks the MMA resources with
``tsjit.const_expr(tsjit.tcgen05.available())``.

One CTA computes one 128 x 256 tile of C (grid ``(ceil(N / 256), ceil(M / 128))``).  The K loop
walks ``ceil(K / 64)`` K tiles; A and B tiles are 128-byte swizzled TMA boxes (128 x 64 and
256 x 64 bf16), so each K tile is four MMAs of K = 16 (descriptor ``k_step`` 0..3).

**sm_100a** (6 warps, 192 threads):

* ``load`` (warp 0): ``ab.acquire``, one elected thread TMA-loads the A and B tiles into the stage
  (the full barrier armed with the stage's bytes), ``ab.commit`` -- a **TmaUmma** ring.
* ``mma`` (warp 1): ``acc.acquire`` (the TMEM accumulator is free), then per K tile ``ab.wait``,
  ``ab.operands`` routes the stage index to ``acc.mma``, whose elected thread issues the four
  ``tcgen05.mma`` m128n256k16 into TMEM (``accumulate`` false on the first), ``ab.release`` (a
  ``tcgen05.commit`` to the stage's empty barrier: the hardware
  frees the stage when these MMAs have read it); after the loop ``acc.commit`` (a
  ``tcgen05.commit`` to the accumulator's full barrier) -- a one-stage **UmmaAsync** ring.
* ``store`` (warps 2-5, one warpgroup): ``acc.wait``, each thread loads its accumulator row from
  TMEM (``tcgen05.ld.32x32b``, 32 columns at a time) and stores bf16 to C with bounds masks,
  ``acc.release``.  With ``EPILOGUE="tma"`` the warpgroup instead reads TMEM with ``tcgen05.ld.16x256b``,
  writes bf16 with ``stmatrix`` into four 128B-swizzled 128 x 64 boxes in shared memory
  (``AccumulatorView.store_shared``, the Hopper epilogue's layout), fences the async proxy, syncs its 128
  threads on named barrier 1, and one thread TMA-stores the boxes.
* TMEM: the accumulator resource asks for 256 columns (``get_tmem_requirements``); the TaskManager
  allocates them in ``setup_resources_and_tasks`` and frees them at the end of ``run``.

**sm_90a** (12 warps): the same TMA ring is a **TmaAsync** ring; two MMA warpgroups (warps 4-11,
64 rows each) wait on each stage, issue four ``wgmma`` m64n256k16 into their register accumulators,
``wait_group(0)`` and release the stage; after the loop each warpgroup stores its rows.  Warps 1-3
are an empty padding task (a warpgroup starts at a multiple of 4 warps).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import tsjit
from tsjit import tcgen05, ts, wgmma
from tsjit.lang.epilogue import store_fragment_global, tma_store_tile
from tsjit.lang.fragment import Fragment

BM, BN, BK = 128, 256, 64
STAGES = 3
MMA_K = 16
BLACKWELL_THREADS = 6 * 32
HOPPER_THREADS = 12 * 32
EPILOGUES = ("direct", "tma")
C_BOX = (BM, 64)                     # the TMA store box of C for EPILOGUE="tma" (128B swizzle: 64 bf16 columns)


def threads_for(target: str) -> int:
    """Threads per CTA of :func:`gemm_tutorial3` on ``target``."""
    return BLACKWELL_THREADS if target.startswith("sm_100") else HOPPER_THREADS


@dataclass(kw_only=True)
class ABTiles(ts.MemoryResource):
    """The TMA ring of A (128 x 64) and B (256 x 64) tiles; its consumer works issue the MMAs."""

    a_map: object
    b_map: object
    a_tiles: object = None
    b_tiles: object = None
    acc: ts.TaskLocalVariable = ts.TaskLocalVariable.uninitialized()
    stage: ts.TaskLocalVariable = ts.TaskLocalVariable.uninitialized()

    def __post_init__(self):
        self.a_tiles = tsjit.shared_array(self.a_map.dtype, (STAGES, BM, BK), align=1024)
        self.b_tiles = tsjit.shared_array(self.b_map.dtype, (STAGES, BN, BK), align=1024)
        self.acc = ts.TaskLocalVariable(Fragment, default_factory=lambda: Fragment.zeros(BN // 2),
                                        docs="sm_90a: the warpgroup's 64 x 256 fp32 accumulator")
        self.stage = ts.TaskLocalVariable(tsjit.Int32, default=0, docs="sm_100a: the stage the MMAs read")

    @ts.producer_work()
    def tma_load(self, stage_info):
        k = stage_info.loop_offset * BK
        if tsjit.elect_one():
            stage = stage_info.stage_idx
            tsjit.tma_load(self.a_map, self.a_tiles[stage], stage_info.barrier, (tsjit.block_idx().y * BM, k))
            tsjit.tma_load(self.b_map, self.b_tiles[stage], stage_info.barrier, (tsjit.block_idx().x * BN, k))

    @ts.consumer_work(returns="stage")
    def operands(self, stage_info):
        """sm_100a: the ring stage whose tiles the MMA warp multiplies (routed to ``acc.mma``)."""
        return stage_info.stage_idx

    @ts.consumer_work(returns="acc", work_attrs=ts.WorkAttr.AUXILIARY)
    def zero_accumulator(self, stage_info):
        return Fragment.zeros(BN // 2)

    @ts.consumer_work(returns="acc")
    def wgmma(self, stage_info, acc):
        """sm_90a: this warpgroup's 64 rows, four wgmma m64n256k16, retired before the release."""
        warpgroup = tsjit.warp_idx() // 4 - 1
        a_tile = self.a_tiles.reshape((STAGES, BM // 64, 64, BK))[stage_info.stage_idx, warpgroup]
        a_desc = wgmma.make_descriptor(a_tile, major="K", swizzle="128B")
        b_desc = wgmma.make_descriptor(self.b_tiles[stage_info.stage_idx], major="K", swizzle="128B")
        wgmma.fence()
        for kk in tsjit.range_constexpr(BK // MMA_K):
            acc = wgmma.mma_async(acc, a_desc.k_step(kk), b_desc.k_step(kk), n=BN)
        wgmma.commit_group()
        wgmma.wait_group(0)
        return wgmma.fence_operand(acc)


@dataclass(kw_only=True)
class TmemAccumulator(ts.MemoryResource):
    """sm_100a: the 128 x 256 fp32 accumulator in tensor memory (a one-stage UmmaAsync ring: the MMA
    warp's commit hands it to the store warpgroup, whose release hands it back)."""

    c: object
    ab: object
    epilogue: str = "direct"
    tmem: object = None
    staging: object = None

    def __post_init__(self):
        self.tmem = ts.TmemAllocation("accumulator", BN)
        if self.epilogue == "tma":     # the (BN / 64, 128, 64) swizzled boxes the TMA stores read
            self.staging = tsjit.shared_array(self.c.dtype, (BN // C_BOX[1], BM, C_BOX[1]), align=1024)

    def get_tmem_requirements(self):
        return [self.tmem]

    @ts.producer_work()
    def mma(self, stage_info, stage):
        """One thread issues the K tile's four MMAs (A, B of ring stage ``stage``) into the accumulator."""
        d = stage_info.context.tmem_ptr_i32 + self.tmem.offset
        if tsjit.elect_one():
            a_desc = tcgen05.make_smem_descriptor(self.ab.a_tiles[stage])
            b_desc = tcgen05.make_smem_descriptor(self.ab.b_tiles[stage])
            for kk in tsjit.range_constexpr(BK // MMA_K):
                tcgen05.mma(d, a_desc.k_step(kk), b_desc.k_step(kk), m=BM, n=BN,
                            accumulate=(stage_info.loop_offset > 0) | (kk > 0))

    @ts.consumer_work()
    def store(self, stage_info):
        base = stage_info.context.tmem_ptr_i32 + self.tmem.offset
        view = tcgen05.accumulator(base, columns=BN)
        if tsjit.const_expr(self.epilogue == "direct"):
            view.store_global(self.c, tsjit.block_idx().y * BM, tsjit.block_idx().x * BN, chunk=32)
        else:
            # TMEM -> registers (16x256b) -> bf16 -> stmatrix into the swizzled boxes -> one thread TMA-stores
            view.store_shared(self.staging, swizzle="128B", chunk=32)
            tsjit.fence_proxy_async()                      # the generic-proxy writes, visible to the TMA unit
            tsjit.named_barrier_sync(1, 128)               # the store warpgroup's 128 threads
            if tsjit.thread_idx().x % 128 == 0:
                tma_store_tile(self.c, self.staging, (tsjit.block_idx().y * BM, tsjit.block_idx().x * BN))
                tsjit.bulk_commit_group()
                tsjit.bulk_wait_group(0)                   # done reading shared memory before the CTA exits


@dataclass(kw_only=True)
class OutputC(ts.MemoryResource):
    """sm_90a: C in global memory, written from the warpgroups' register accumulators."""

    c: object

    @ts.producer_work()
    def store(self, stage_info, acc):
        warpgroup = tsjit.warp_idx() // 4 - 1
        store_fragment_global(acc, self.c, tsjit.block_idx().y * BM + warpgroup * 64, tsjit.block_idx().x * BN,
                              tid=tsjit.thread_idx().x % 128)


@tsjit.kernel
def gemm_tutorial3(a_map, b_map, c, K, EPILOGUE: tsjit.Constexpr[str] = "direct"):
    """C = A @ B^T for bf16 A (M, K), B (N, K) and C (M, N); grid ``(ceil(N / 256), ceil(M / 128))``, block
    :func:`threads_for` the target (192 on sm_100a, 384 on sm_90a).

    ``EPILOGUE="direct"``: ``c`` is the global tensor, stored from registers with bounds masks.
    ``EPILOGUE="tma"`` (sm_100a): ``c`` is C's TensorMap (box :data:`C_BOX`, ``swizzle="128B"``); the store
    warpgroup stages the tile through shared memory with ``stmatrix`` and TMA-stores it (TMA clips the edges)."""
    if tsjit.const_expr(EPILOGUE not in EPILOGUES):
        raise tsjit.CompilationError(f"gemm_tutorial3: EPILOGUE must be one of {list(EPILOGUES)}, got {EPILOGUE!r}")
    k_tiles = (K + BK - 1) // BK
    stage_bytes = (BM + BN) * BK * a_map.dtype.itemsize
    one = ts.CooperativeGroup(ts.Agent.Thread, 1)

    @ts.schedule
    def load_schedule(s: ABTiles):
        with ts.domain_loop(0, k_tiles, 1):
            s.acquire()
            s.tma_load()
            s.commit()

    if tsjit.const_expr(tcgen05.available()):
        ab_cfg = ts.PipelineConfig.create_tma_umma_pipeline_cfg(STAGES, stage_bytes, one, one, (1, 1, 1, 1))
        acc_cfg = ts.PipelineConfig.create_umma_async_pipeline_cfg(1, one, ts.CooperativeGroup(ts.Agent.Thread, 128),
                                                                   (1, 1, 1, 1))
        ab = ABTiles(name="ab", pipeline_config=ab_cfg, a_map=a_map, b_map=b_map)
        acc = TmemAccumulator(name="acc", pipeline_config=acc_cfg, c=c, ab=ab, epilogue=EPILOGUE)

        @ts.schedule
        def mma_schedule(s: ABTiles, t: TmemAccumulator):
            t.acquire()
            with ts.domain_loop(0, k_tiles, 1):
                s.wait()
                stage = s.operands()
                t.mma(stage)
                s.release()
            t.commit()

        @ts.schedule
        def store_schedule(t: TmemAccumulator):
            with ts.domain_loop(0, 0, 1):
                pass
            t.wait()
            t.store()
            t.release()

        load = ts.Task("load", [], [ab], warp_idx=0, num_warps=1, schedule=load_schedule(ab))
        mma = ts.Task("mma", [ab], [acc], warp_idx=1, num_warps=1, schedule=mma_schedule(ab, acc))
        store = ts.Task("store", [acc], [], warp_idx=2, num_warps=4, schedule=store_schedule(acc))
        manager = ts.TaskManager([load, mma, store], {acc: [ab]}, verbose=False)
    else:
        if tsjit.const_expr(EPILOGUE != "direct"):
            raise tsjit.CompilationError("gemm_tutorial3: EPILOGUE='tma' is the sm_100a TMEM epilogue; on sm_90a use "
                                         "EPILOGUE='direct' (the Hopper GEMM's TMA epilogue is tsjit.examples.gemm)")
        ab_cfg = ts.PipelineConfig.create_tma_async_pipeline_cfg(STAGES, stage_bytes, one,
                                                                 ts.CooperativeGroup(ts.Agent.Thread, 8))
        ab = ABTiles(name="ab", pipeline_config=ab_cfg, a_map=a_map, b_map=b_map)
        out = OutputC(name="c", c=c)

        @ts.schedule
        def idle_schedule():
            with ts.domain_loop(0, 0, 1):
                pass

        @ts.schedule
        def mma_schedule(s: ABTiles, o: OutputC):
            acc = s.zero_accumulator()
            with ts.domain_loop(0, k_tiles, 1):
                s.wait()
                acc = s.wgmma(acc)
                s.release()
            o.store(acc)

        load = ts.Task("load", [], [ab], warp_idx=0, num_warps=1, schedule=load_schedule(ab))
        idle = ts.Task("idle", [], [], warp_idx=1, num_warps=3, schedule=idle_schedule())
        mma = ts.Task("mma", [ab], [out], warp_idx=4, num_warps=8, schedule=mma_schedule(ab, out))
        manager = ts.TaskManager([load, idle, mma], {out: [ab]}, verbose=False)
    manager.setup_resources_and_tasks()
    manager.run()


def compile_for(target: str, M: int = 256, N: int = 512, K: int = 256, epilogue: str = "direct"):
    """``tsjit.compile`` of :func:`gemm_tutorial3` for ``target`` with bf16 specs (no GPU needed)."""
    a_map = tsjit.tensormap_spec(tsjit.BFloat16, (BM, BK), swizzle="128B")
    b_map = tsjit.tensormap_spec(tsjit.BFloat16, (BN, BK), swizzle="128B")
    if epilogue == "tma":
        c = tsjit.tensormap_spec(tsjit.BFloat16, C_BOX, swizzle="128B")
    else:
        c = tsjit.spec((M, N), tsjit.BFloat16)
    return tsjit.compile(gemm_tutorial3, a_map, b_map, c, K, EPILOGUE=epilogue, target=target)


def run_tutorial3(M: int, N: int, K: int, rng=None):
    """C = A @ B^T on fresh random bf16 inputs (C poisoned with 0xFFFF = NaN first) on the current GPU;
    returns (C as float64, the float64 reference of the bf16-rounded inputs)."""
    from tsjit.runtime.arrays import bfloat16_bits_to_float32, float_to_bfloat16_bits
    from tsjit.runtime.driver import device_properties
    rng = rng or np.random.default_rng()
    a = bfloat16_bits_to_float32(float_to_bfloat16_bits(rng.standard_normal((M, K)).astype(np.float32)))
    b = bfloat16_bits_to_float32(float_to_bfloat16_bits(rng.standard_normal((N, K)).astype(np.float32)))
    da = tsjit.to_device(a, dtype=tsjit.BFloat16)
    db = tsjit.to_device(b, dtype=tsjit.BFloat16)
    c = tsjit.empty((M, N), tsjit.BFloat16).fill_bytes(0xFF)
    a_map = tsjit.TensorMap(da, (BM, BK), swizzle="128B")
    b_map = tsjit.TensorMap(db, (BN, BK), swizzle="128B")
    grid = ((N + BN - 1) // BN, (M + BM - 1) // BM)
    gemm_tutorial3[grid, (threads_for(device_properties().default_target),)](a_map, b_map, c, K)
    got = bfloat16_bits_to_float32(c.numpy()).astype(np.float64)
    return got, a.astype(np.float64) @ b.astype(np.float64).T
