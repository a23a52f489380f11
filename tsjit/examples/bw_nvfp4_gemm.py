"""CUTLASS Task Scheduling tutorial 8 ported (05/01, Blackwell): a block-scaled NVFP4 GEMM.
**Compile-only**: it compiles, verifies and assembles for ``sm_100f``, but nothing here executes it -- there
is no Blackwell GPU, and the CPU interpreter has no block-scaled ``tcgen05.mma`` (it models ``tcgen05.cp``), so the
device path is not checked against numbers.  The host path is real and tested: :func:`quantize_nvfp4` packs a
float matrix into NVFP4 (E2M1 values, two per byte, one UE4M3 scale per 16 elements) and
:func:`reference` is the float64 product of the dequantized operands a Blackwell run would be compared with.

``C (M, N) = (A * SFA) @ (B * SFB)^T``: A (M, K) and B (N, K) as packed E2M1 (``K / 2`` bytes per row),
SFA (M, K / 16) and SFB (N, K / 16) UE4M3 scale factors, fp32 accumulation in tensor memory, bf16 C.  One CTA
computes one 128 x 128 tile (grid ``(ceil(N / 128), ceil(M / 128))``), walking K tiles of 256 elements.

**Target.** ``kind::mxf4nvf4`` with UE4M3 scales (``scale_vec::4X`` / ``.block16``) needs PTX ISA 8.7 (PTX ISA
9.1 §9.7.16.10.9.1), which tsjit emits for ``sm_100f`` (PTX 8.8) but not for ``sm_100a`` (PTX 8.6): this
tutorial builds for ``sm_100f``, the family target that runs on every 10.x GPU.

Tasks (7 warps):

* ``load`` (warp 0): one **TmaUmma** ring ``ab`` of A and B tiles (128 rows x 128 bytes = 256 E2M1 values,
  128-byte swizzled boxes);
* ``load_sf`` (warp 6): a second **TmaUmma** ring ``sf`` of the scale-factor tiles (128 rows x 16 bytes:
  the 16 UE4M3 scales of a row's K tile, for A and for B); the two rings form a **Merge** group, so the MMA
  warp frees a stage of both with one ``tcgen05.commit``;
* ``mma`` (warp 1): per K tile waits on both members, copies the stage's scale factors into its TMEM columns
  (``tcgen05.cp.128x128b``: lane ``r`` gets row ``r``'s 16 scale bytes, four 32-bit columns, one per MMA),
  issues four ``tcgen05.mma.kind::mxf4nvf4.block_scale.block16`` m128n128k64 (the copy and the MMAs come from
  one thread, so the tensor pipe orders them, PTX ISA §9.7.16.6 "pipelined tcgen05 instructions") and
  releases the stage; each stage has its own scale columns, refilled only after that stage's release;
  ``acc.commit()`` hands the accumulator over (**UmmaAsync**);
* ``epilogue`` (warps 2-5): ``tcgen05.ld`` of its accumulator row, bf16 stores.

What is not verified without a Blackwell run: the TMEM scale-factor layout the MMA expects for ``M = N = 128``
(taken as "lane = row, column ``kk`` = the four scales of MMA ``kk``", PTX ISA §9.7.16.10.7) and the scale
tiles' shared-memory descriptor (no swizzle, 8-row core matrices 128 bytes apart).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import tsjit
from tsjit import tcgen05, ts
from tsjit.errors import UsageValueError
from tsjit.examples.bw_umma import UmmaAccumulator

BM, BN = 128, 128
K_TILE = 256                 # E2M1 elements per stage: one 128-byte swizzle row
K_BYTES = K_TILE // 2
MMA_K = 64                   # kind::mxf4nvf4: K = 64 per MMA (32 bytes)
SF_VECTOR = 16               # NVFP4: one UE4M3 scale per 16 elements
SF_BYTES = K_TILE // SF_VECTOR
STAGES = 3
TARGET = "sm_100f"
THREADS = 7 * 32
ONE = ts.CooperativeGroup(ts.Agent.Thread, 1)
LAYOUT = (1, 1, 1, 1)

#: the 8 non-negative E2M1 values (PTX ISA §5.2.5.1, "e2m1": 1 sign, 2 exponent, 1 mantissa bit, bias 1)
E2M1_VALUES = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])


def _ue4m3_values() -> np.ndarray:
    """The 127 finite non-negative UE4M3 values, by code 0..126 (4 exponent bits, bias 7, 3 mantissa bits;
    0x7F is NaN)."""
    codes = np.arange(127)
    exponent, mantissa = codes >> 3, codes & 7
    return np.where(exponent == 0, mantissa / 8 * 2.0 ** -6, (1 + mantissa / 8) * 2.0 ** (exponent - 7))


UE4M3_VALUES = _ue4m3_values()


def quantize_nvfp4(x: np.ndarray):
    """NVFP4 of a float matrix ``x`` (R, K), K a multiple of 16.

    Each block of 16 consecutive elements of a row gets the smallest UE4M3 scale ``s >= amax / 6`` (6 is the
    largest E2M1 value), and each element the E2M1 value nearest ``x / s``.

    Returns:
        ``(packed, scales, dequantized)``: uint8 (R, K / 2) with element ``2 j`` in the low nibble of byte ``j``
        (sign in bit 3), uint8 (R, K / 16) UE4M3 codes, and the float64 values they encode.

    Raises:
        UsageValueError: K is not a multiple of 16, or ``x`` is not finite.
    """
    x = np.asarray(x, dtype=np.float64)
    rows, k = x.shape
    if k % SF_VECTOR or not np.isfinite(x).all():
        raise UsageValueError(f"quantize_nvfp4 needs finite values and K a multiple of {SF_VECTOR}, got K={k}")
    blocks = x.reshape(rows, k // SF_VECTOR, SF_VECTOR)
    amax = np.abs(blocks).max(axis=2)
    scale_codes = np.minimum(np.searchsorted(UE4M3_VALUES, amax / 6.0), 126)
    scale_codes = np.where(amax == 0, 56, scale_codes)            # 56: 1.0, any scale of an all-zero block
    scales = UE4M3_VALUES[scale_codes]
    scaled = np.abs(blocks) / scales[:, :, None]
    magnitude = np.abs(scaled[..., None] - E2M1_VALUES).argmin(axis=-1)
    nibbles = (magnitude | np.where(blocks < 0, 8, 0)).reshape(rows, k).astype(np.uint8)
    packed = (nibbles[:, 0::2] | (nibbles[:, 1::2] << 4)).astype(np.uint8)
    values = np.where(blocks < 0, -1.0, 1.0) * E2M1_VALUES[magnitude] * scales[:, :, None]
    return packed, scale_codes.astype(np.uint8), values.reshape(rows, k)


def reference(a_values: np.ndarray, b_values: np.ndarray) -> np.ndarray:
    """The float64 C a Blackwell run of :func:`nvfp4_gemm` is compared with: the product of the dequantized
    operands (``quantize_nvfp4(...)[2]``), ``A @ B^T``."""
    return np.asarray(a_values, np.float64) @ np.asarray(b_values, np.float64).T


@dataclass(kw_only=True)
class Fp4Tiles(ts.MemoryResource):
    """The ring of packed A and B tiles (128 x 128 bytes each, 128-byte swizzled TMA boxes)."""

    a_map: object
    b_map: object
    a_tiles: object = None
    b_tiles: object = None
    stage: ts.TaskLocalVariable = ts.TaskLocalVariable.uninitialized()

    def __post_init__(self):
        self.a_tiles = tsjit.shared_array(tsjit.Uint8, (STAGES, BM, K_BYTES), align=1024)
        self.b_tiles = tsjit.shared_array(tsjit.Uint8, (STAGES, BN, K_BYTES), align=1024)
        self.stage = ts.TaskLocalVariable(tsjit.Int32, default=0, docs="the stage the MMAs read")

    @ts.producer_work()
    def tma_load(self, stage_info):
        k = stage_info.loop_offset * K_BYTES
        if tsjit.elect_one():
            stage = stage_info.stage_idx
            tsjit.tma_load(self.a_map, self.a_tiles[stage], stage_info.barrier, (tsjit.block_idx().y * BM, k))
            tsjit.tma_load(self.b_map, self.b_tiles[stage], stage_info.barrier, (tsjit.block_idx().x * BN, k))

    @ts.consumer_work(returns="stage")
    def operands(self, stage_info):
        return stage_info.stage_idx


@dataclass(kw_only=True)
class ScaleTiles(ts.MemoryResource):
    """The ring of scale-factor tiles (SFA and SFB: 128 rows x 16 UE4M3 bytes each) and, per stage, the
    8 TMEM columns the MMA reads them from (4 for A, 4 for B)."""

    sfa_map: object
    sfb_map: object
    sfa_tiles: object = None
    sfb_tiles: object = None
    tmem: object = None

    def __post_init__(self):
        self.sfa_tiles = tsjit.shared_array(tsjit.Uint8, (STAGES, BM, SF_BYTES), align=128)
        self.sfb_tiles = tsjit.shared_array(tsjit.Uint8, (STAGES, BN, SF_BYTES), align=128)
        self.tmem = ts.TmemAllocation("scale_factors", 8 * STAGES)

    def get_tmem_requirements(self):
        return [self.tmem]

    @ts.producer_work()
    def tma_load(self, stage_info):
        k = stage_info.loop_offset * SF_BYTES
        if tsjit.elect_one():
            stage = stage_info.stage_idx
            tsjit.tma_load(self.sfa_map, self.sfa_tiles[stage], stage_info.barrier, (tsjit.block_idx().y * BM, k))
            tsjit.tma_load(self.sfb_map, self.sfb_tiles[stage], stage_info.barrier, (tsjit.block_idx().x * BN, k))

    def copy_to_tmem(self, stage_info, stage):
        """One thread: ``tcgen05.cp`` of the stage's SFA and SFB tiles into its TMEM columns; returns their
        addresses (SFA's 4 columns, then SFB's)."""
        base = stage_info.context.tmem_ptr_i32 + self.tmem.offset + stage * 8
        for tiles, column in ((self.sfa_tiles, 0), (self.sfb_tiles, 4)):
            desc = tcgen05.make_smem_descriptor(tiles[stage], swizzle="none", leading_byte_offset=128,
                                                stride_byte_offset=128)
            tcgen05.cp(base + column, desc, shape="128x128b")
        return base, base + 4


@dataclass(kw_only=True)
class BlockScaledAccumulator(UmmaAccumulator):
    """The 128 x 128 fp32 accumulator (TMEM) of block-scaled MMAs; ``scales`` is the :class:`ScaleTiles` ring."""

    scales: object
    c: object

    @ts.producer_work()
    def mma(self, stage_info, stage):
        d = self.address(stage_info, stage_info.stage_idx)
        if tsjit.elect_one():
            sfa, sfb = self.scales.copy_to_tmem(stage_info, stage)
            a_desc = tcgen05.make_smem_descriptor(self.operands.a_tiles[stage], element_type="e2m1")
            b_desc = tcgen05.make_smem_descriptor(self.operands.b_tiles[stage], element_type="e2m1")
            for kk in tsjit.range_constexpr(K_TILE // MMA_K):
                tcgen05.mma_block_scaled(d, a_desc.k_step(kk), b_desc.k_step(kk), sfa + kk, sfb + kk, m=BM, n=BN,
                                         kind="mxf4nvf4", a_dtype="e2m1", b_dtype="e2m1", scale_type="ue4m3",
                                         accumulate=(stage_info.loop_offset > 0) | (kk > 0))

    @ts.consumer_work()
    def store(self, stage_info):
        self.view(stage_info).store_global(self.c, tsjit.block_idx().y * BM, tsjit.block_idx().x * BN, chunk=32)


@tsjit.kernel
def nvfp4_gemm(a_map, b_map, sfa_map, sfb_map, c, K, GROUPED: tsjit.Constexpr[bool] = True):
    """C = (A * SFA) @ (B * SFB)^T; grid ``(ceil(N / 128), ceil(M / 128))``, 224 threads (sm_100f)."""
    k_tiles = (K + K_TILE - 1) // K_TILE
    ab = Fp4Tiles(name="ab", a_map=a_map, b_map=b_map, pipeline_config=ts.PipelineConfig.create_tma_umma_pipeline_cfg(
        STAGES, (BM + BN) * K_BYTES, ONE, ONE, LAYOUT))
    sf = ScaleTiles(name="sf", sfa_map=sfa_map, sfb_map=sfb_map,
                    pipeline_config=ts.PipelineConfig.create_tma_umma_pipeline_cfg(
                        STAGES, (BM + BN) * SF_BYTES, ONE, ONE, LAYOUT))
    acc = BlockScaledAccumulator(name="acc", operands=ab, scales=sf, block_n=BN, c=c,
                                 pipeline_config=ts.PipelineConfig.create_umma_async_pipeline_cfg(
                                     1, ONE, ts.CooperativeGroup(ts.Agent.Thread, 128), LAYOUT))
    group = ts.PipelineGroup("operands", [ab, sf], ts.PipelineGroupMode.Merge) if GROUPED else None

    @ts.schedule
    def load(s):
        with ts.domain_loop(0, k_tiles, 1):
            s.acquire()
            s.tma_load()
            s.commit()

    @ts.schedule
    def mma(s_ab, s_sf, t: BlockScaledAccumulator, *groups):
        t.acquire()
        with ts.domain_loop(0, k_tiles, 1):
            s_ab.wait()
            s_sf.wait()
            t.mma(s_ab.operands())
            if groups:
                groups[0].release()      # one tcgen05.commit frees the stage of both rings
            else:
                s_ab.release()
                s_sf.release()
        t.commit()

    @ts.schedule
    def epilogue(t: BlockScaledAccumulator):
        with ts.domain_loop(0, 0, 1):
            pass
        t.wait()
        t.store()
        t.release()

    m_ab, m_sf, groups = (group.ab, group.sf, (group,)) if GROUPED else (ab, sf, ())
    tasks = [ts.Task("load", [], [ab], warp_idx=0, num_warps=1, schedule=load(m_ab)),
             ts.Task("mma", [ab, sf], [acc], warp_idx=1, num_warps=1, schedule=mma(m_ab, m_sf, acc, *groups)),
             ts.Task("epilogue", [acc], [], warp_idx=2, num_warps=4, schedule=epilogue(acc)),
             ts.Task("load_sf", [], [sf], warp_idx=6, num_warps=1, schedule=load(m_sf))]
    manager = ts.TaskManager(tasks, {acc: [ab, sf]}, verbose=False)
    manager.setup_resources_and_tasks()
    manager.run()


def compile_for(target: str = TARGET, M: int = 512, N: int = 512, K: int = 1024, grouped: bool = True):
    """``tsjit.compile`` of :func:`nvfp4_gemm` for ``target`` (no GPU needed)."""
    u8 = tsjit.Uint8
    return tsjit.compile(nvfp4_gemm, tsjit.tensormap_spec(u8, (BM, K_BYTES), swizzle="128B"),
                         tsjit.tensormap_spec(u8, (BN, K_BYTES), swizzle="128B"), tsjit.tensormap_spec(u8, (BM, SF_BYTES)),
                         tsjit.tensormap_spec(u8, (BN, SF_BYTES)), tsjit.spec((M, N), tsjit.BFloat16), K, grouped,
                         target=target)
