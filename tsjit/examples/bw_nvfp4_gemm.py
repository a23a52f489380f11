"""CUTLASS Task Scheduling tutorial 8 ported (05/01, Blackwell): a block-scaled NVFP4 GEMM.
It compiles, verifies and assembles for ``sm_100f``, and it runs under the CPU interpreter
(``TSJIT_INTERPRET=1``, :func:`run_tutorial8`), whose block-scaled ``tcgen05.mma`` and ``tcgen05.cp``
(:mod:`tsjit.interpret.tcgen05_scaled`) check it against the float64 product of the dequantized inputs
(:func:`reference`); no Blackwell GPU has run it.  The host path: :func:`quantize_nvfp4` packs a float matrix
into NVFP4 (E2M1 values, two per byte, one UE4M3 scale per 16 elements) and :func:`interleave_scales` lays
the scales out as the MMA reads them from tensor memory.

``C (M, N) = (A * SFA) @ (B * SFB)^T``: A (M, K) and B (N, K) as packed E2M1 (``K / 2`` bytes per row),
SFA (M, K / 16) and SFB (N, K / 16) UE4M3 scale factors, fp32 accumulation in tensor memory, bf16 C.  One CTA
computes one 128 x 128 tile (grid ``(N / 128, M / 128)``; M and N multiples of 128, K of 256), walking K tiles
of 256 elements.

**Target.** ``kind::mxf4nvf4`` with UE4M3 scales (``scale_vec::4X`` / ``.block16``) needs PTX ISA 8.7 (PTX ISA
9.1 §9.7.16.10.9.1), which tsjit emits for ``sm_100f`` (PTX 8.8) but not for ``sm_100a`` (PTX 8.6): this
tutorial builds for ``sm_100f``, the family target that runs on every 10.x GPU.

**Scale factors in tensor memory** (PTX ISA §9.7.16.10.7): one MMA (K = 64) scales each row of A and of B
with four UE4M3 bytes, one per 16 elements, which it reads from a 32-lane x 4-column TMEM tile per 128 rows
(row ``r`` in lane ``r % 32``, column ``r // 32``, byte ``j`` = chunk ``j``), duplicated in all four 32-lane
quarters.  The duplication is the ISA text's; the row-to-(lane, column) placement is its Figures 233 / 242,
read from public secondary documentation (:mod:`tsjit.interpret.tcgen05_scaled`).  :func:`interleave_scales`
writes the scales in that order, 512 bytes (32 rows of 16 bytes) per 128 rows and MMA, so a TMA box of
128 x 16 bytes brings one K tile's four MMAs' worth and each ``tcgen05.cp.32x128b.warpx4`` copies 32 rows of
16 bytes into lanes ``r`` of every quarter.

Tasks (7 warps):

* ``load`` (warp 0): one **TmaUmma** ring ``ab`` of A and B tiles (128 rows x 128 bytes = 256 E2M1 values,
  128-byte swizzled boxes);
* ``load_sf`` (warp 6): a second **TmaUmma** ring ``sf`` of the scale-factor tiles (the interleaved
  128 x 16-byte boxes of SFA and SFB of a K tile); the two rings form a **Merge** group, so the MMA warp
  frees a stage of both with one ``tcgen05.commit``;
* ``mma`` (warp 1): per K tile waits on both members, copies the stage's scale factors into its TMEM columns
  (eight ``tcgen05.cp.32x128b.warpx4``: SFA and SFB of each MMA, 4 columns each), issues four
  ``tcgen05.mma.kind::mxf4nvf4.block_scale.block16`` m128n128k64 (the copies and the MMAs come from one thread,
  so the tensor pipe orders them, PTX ISA §9.7.16.6 "pipelined tcgen05 instructions") and releases the stage;
  each stage has its own 32 scale columns, refilled only after that stage's release; ``acc.commit()`` hands
  the accumulator over (**UmmaAsync**);
* ``epilogue`` (warps 2-5): ``tcgen05.ld`` of its accumulator row, bf16 stores.
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
MMAS = K_TILE // MMA_K       # MMAs per K tile
SF_VECTOR = 16               # NVFP4: one UE4M3 scale per 16 elements
SF_BYTES = K_TILE // SF_VECTOR     # 16 scale bytes per row and K tile (4 per MMA)
SF_ROWS = 32                       # rows of one interleaved scale block: 32 lanes x 16 bytes = 128 rows x 4 scales
SF_COLUMNS = 4                     # TMEM columns of one MMA's SFA (and, N = 128, SFB)
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
    """The float64 C a run of :func:`nvfp4_gemm` is compared with: the product of the dequantized
    operands (``quantize_nvfp4(...)[2]``), ``A @ B^T``."""
    return np.asarray(a_values, np.float64) @ np.asarray(b_values, np.float64).T


def interleave_scales(scale_codes: np.ndarray) -> np.ndarray:
    """The scale bytes ``scale_codes`` (R, K / 16) in the order the MMA reads them from TMEM: uint8
    ``(R / 128 * K / 64 * 32, 16)``, block ``(t, g)`` (rows ``32 (t K / 64 + g) ..`` of it) holding the four
    scales of MMA ``g`` for rows ``128 t ..``: byte ``4 c + j`` of block row ``i`` is the scale of row
    ``128 t + 32 c + i``, chunk ``4 g + j`` (module docstring).

    Raises:
        UsageValueError: R not a multiple of 128 or K / 16 not a multiple of 4.
    """
    codes = np.asarray(scale_codes, dtype=np.uint8)
    rows, chunks = codes.shape
    if rows % BM or chunks % 4:
        raise UsageValueError(f"interleave_scales needs rows a multiple of {BM} and K a multiple of {MMA_K} "
                              f"(scale columns a multiple of 4), got {codes.shape}")
    blocks = codes.reshape(rows // BM, 4, SF_ROWS, chunks // 4, 4)          # (t, c, i, g, j)
    return np.ascontiguousarray(blocks.transpose(0, 3, 2, 1, 4)).reshape(-1, 16)


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
    """The ring of scale-factor tiles (SFA and SFB of one K tile: 128 interleaved rows x 16 UE4M3 bytes each,
    :func:`interleave_scales`) and, per stage, the 32 TMEM columns the MMAs read them from (4 for the SFA and
    4 for the SFB of each of the K tile's four MMAs).  ``k_blocks`` is K / 64 (the interleaved blocks per
    128 rows)."""

    sfa_map: object
    sfb_map: object
    k_blocks: object
    sfa_tiles: object = None
    sfb_tiles: object = None
    tmem: object = None

    def __post_init__(self):
        self.sfa_tiles = tsjit.shared_array(tsjit.Uint8, (STAGES, BM, SF_BYTES), align=128)
        self.sfb_tiles = tsjit.shared_array(tsjit.Uint8, (STAGES, BN, SF_BYTES), align=128)
        self.tmem = ts.TmemAllocation("scale_factors", 2 * SF_COLUMNS * MMAS * STAGES)

    def get_tmem_requirements(self):
        return [self.tmem]

    @ts.producer_work()
    def tma_load(self, stage_info):
        first = stage_info.loop_offset * MMAS * SF_ROWS
        if tsjit.elect_one():
            stage = stage_info.stage_idx
            tsjit.tma_load(self.sfa_map, self.sfa_tiles[stage], stage_info.barrier,
                           (tsjit.block_idx().y * self.k_blocks * SF_ROWS + first, 0))
            tsjit.tma_load(self.sfb_map, self.sfb_tiles[stage], stage_info.barrier,
                           (tsjit.block_idx().x * self.k_blocks * SF_ROWS + first, 0))

    def copy_to_tmem(self, stage_info, stage):
        """One thread: ``tcgen05.cp.32x128b.warpx4`` of each MMA's SFA and SFB block (32 rows x 16 bytes) of the
        stage into its TMEM columns (duplicated into the four lane quarters); returns the TMEM addresses of
        MMA 0's SFA and SFB (MMA ``kk``'s are ``SF_COLUMNS x kk`` columns on)."""
        base = stage_info.context.tmem_ptr_i32 + self.tmem.offset + stage * (2 * SF_COLUMNS * MMAS)
        for tiles, column in ((self.sfa_tiles, 0), (self.sfb_tiles, SF_COLUMNS * MMAS)):
            blocks = tiles[stage].reshape((MMAS, SF_ROWS, SF_BYTES))
            for kk in tsjit.range_constexpr(MMAS):
                desc = tcgen05.make_smem_descriptor(blocks[kk], swizzle="none", leading_byte_offset=128,
                                                    stride_byte_offset=128)
                tcgen05.cp(base + column + kk * SF_COLUMNS, desc, shape="32x128b", multicast="warpx4")
        return base, base + SF_COLUMNS * MMAS


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
            for kk in tsjit.range_constexpr(MMAS):
                tcgen05.mma_block_scaled(d, a_desc.k_step(kk), b_desc.k_step(kk), sfa + kk * SF_COLUMNS,
                                         sfb + kk * SF_COLUMNS, m=BM, n=BN,
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
    sf = ScaleTiles(name="sf", sfa_map=sfa_map, sfb_map=sfb_map, k_blocks=K // MMA_K,
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


def run_tutorial8(M: int, N: int, K: int, rng=None, grouped: bool = True):
    """C = (A * SFA) @ (B * SFB)^T on fresh random inputs, NVFP4-quantized on the host (C poisoned with NaN
    first), on the current device or the CPU interpreter (``TSJIT_INTERPRET=1``, target ``sm_100f``);
    returns (C as float64, the float64 :func:`reference` of the dequantized operands).

    Raises:
        UsageValueError: M or N not a multiple of 128, or K not a multiple of 256.
    """
    from tsjit.runtime.arrays import bfloat16_bits_to_float32
    if M % BM or N % BN or K % K_TILE or min(M, N, K) <= 0:
        raise UsageValueError(f"run_tutorial8 needs M and N multiples of {BM} and K a multiple of {K_TILE}, got "
                              f"M={M}, N={N}, K={K}")
    rng = rng or np.random.default_rng()
    a_packed, a_scales, a_values = quantize_nvfp4(rng.standard_normal((M, K)) * rng.uniform(0.1, 10, (M, 1)))
    b_packed, b_scales, b_values = quantize_nvfp4(rng.standard_normal((N, K)))
    u8 = tsjit.Uint8
    a_map = tsjit.TensorMap(tsjit.to_device(a_packed, dtype=u8), (BM, K_BYTES), swizzle="128B")
    b_map = tsjit.TensorMap(tsjit.to_device(b_packed, dtype=u8), (BN, K_BYTES), swizzle="128B")
    sfa_map = tsjit.TensorMap(tsjit.to_device(interleave_scales(a_scales), dtype=u8), (BM, SF_BYTES))
    sfb_map = tsjit.TensorMap(tsjit.to_device(interleave_scales(b_scales), dtype=u8), (BN, SF_BYTES))
    c = tsjit.empty((M, N), tsjit.BFloat16).fill_bytes(0xFF)
    nvfp4_gemm[(N // BN, M // BM), (THREADS,)](a_map, b_map, sfa_map, sfb_map, c, K, grouped)
    got = bfloat16_bits_to_float32(c.numpy()).astype(np.float64)
    return got, reference(a_values, b_values)
