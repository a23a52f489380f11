"""The fp8 (e4m3) forward of the attention kernel (issue 16), FlashAttention-3's fp8 scheme: Q, K and V in
Float8E4M3 with one dequantization scale per tensor, fp32 softmax, P rounded to e4m3 for the PV wgmma, O in bf16.

``O = softmax(scale * (q_scale Q)(k_scale K)^T + mask) (v_scale V)``: ``q_scale * k_scale`` folds into the
softmax scale (``scale_log2 = scale * q_scale * k_scale * log2 e``) and ``v_scale`` multiplies O when it is stored
(:attr:`~tsjit.examples.attention_tiles.AttentionShape.output_scale`), so the LSE is that of the dequantized
problem.  The program is :mod:`tsjit.examples.attention`'s (the same tasks, schedules, rings, ping-pong and tile
order, :func:`~tsjit.examples.attention.run_program`) with three resources changed:

* Q and K tiles hold 128 e4m3 per 128-byte swizzled row (64 with 64B swizzle for head_dim 64): one QK^T wgmma
  (``m64nNk32.f32.e4m3.e4m3``) per 32 columns of head_dim;
* **V transposed.** 8-bit wgmma reads both operands K-major only (PTX ISA §9.7.15.5.1.2: the transpose bits exist
  for 16-bit types), and the PV product reduces over keys, so V must be in shared memory with the keys
  contiguous: the host passes V^T, a ``(batch, kv_heads, head_dim, keys)`` tensor (:func:`transposed_v`; keys
  padded to a multiple of 16 with zeros), loaded as ``head_dim x BLOCK_N`` boxes (BLOCK_N bytes per row);
* **P in the 8-bit A-fragment layout.** A register of an 8-bit wgmma A fragment holds 4 consecutive K elements:
  thread lane ``4g + q`` holds, of rows ``g`` and ``g + 8`` of its warp, the keys ``4q .. 4q + 3`` and
  ``16 + 4q .. 16 + 4q + 3`` of each 32-key step (PTX ISA §9.7.15.5.1.1, the m64nNk32 A layout).  The fp32
  accumulator of S gives that thread the keys ``2q, 2q + 1, 8 + 2q, 9 + 2q`` of each 16 (Figure 149).  Instead of
  moving P between threads, the thread packs the four keys it has into a register, so A's K position
  ``4q + j`` of each 16 carries key :data:`KEY_ORDER` ``[4q + j]``, and V^T stores its keys in that order within
  each group of 16 (the host transposition does it at no extra cost): the product sums the same pairs.

* **Row sums in the PV wgmma** (``MMA_ROW_SUMS``; head_dim 128 where no LSE is stored): each V^T box has a row of
  e4m3 ones (and 7 of zeros) below its head_dim rows, written once per CTA, so the PV wgmma is m64n(head_dim + 8) and
  O's column head_dim is the row sum of the e4m3 P, rescaled with O: the softmax loses its row-sum FADDs (the
  normalization then matches the rounded P exactly; the LSE would be ~1e-2 off, so a launch that stores it sums the
  fp32 P as before).  The softmax's exponentials on the FMA pipe are then quadratic
  (:mod:`tsjit.examples.attention_fp8_softmax`), computed straight from the scores against integral row maxima
  (``FUSED_EXP2``), and P is packed to e4m3 before the PV wait (``ORDERING`` 3).
* **Stale row maxima** (``STALE_MAXIMA``, the launch without LSE at head_dim 128, not masked): P is computed against
  the previous tiles' maxima and packed; only where some P reaches 2**8 does the warp reduce the tile's maxima and
  compute P again (:meth:`KTilesFp8.stale_softmax`), so most KV tiles have no max reduction.

Supported: head_dim 64, 128, 256; causal or not, sliding windows, GQA/MQA; fixed-length batches and packed
variable-length ones (``VARLEN``).  The key order within each 16 keys of V^T is relative to the sequence's start, so
a packed V^T puts sequence ``b`` at key :func:`varlen_value_start` ``(cu_seqlens_k[b], b)``, a multiple of 16 (each
sequence padded with zeros to the next one; :func:`varlen_value_keys` keys in all), while K and Q stay packed
without padding.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import tsjit
from tsjit import ts
from tsjit import wgmma
from tsjit.examples import attention as base
from tsjit.examples import attention_resources as resources
from tsjit.examples.attention_resources import score_geometry  # noqa: F401  (re-exported)
from tsjit.examples.attention_config import BOX, TURN_BARRIERS
from tsjit.examples.attention_fp8_config import (  # noqa: F401  (re-exported: the launch defaults)
    BLOCK_NS, CAUSAL_CONFIG, CAUSAL_EXP2_POLYNOMIAL, CAUSAL_MMA_ROW_SUMS, CAUSAL_RESCALE_THRESHOLD,
    CAUSAL_ROW_SUMS_CONFIG, CAUSAL_ROW_SUMS_STALE_MAXIMA, DEFAULT_CONFIG, DEFAULT_EXP2_POLYNOMIAL, DEFAULT_MMA_ROW_SUMS,
    DEFAULT_RESCALE_THRESHOLD, EXP2_DEGREE, HEAD_DIMS, ROW_SUMS_CONFIG, ROW_SUMS_EXP2_DEGREE, ROW_SUMS_STALE_MAXIMA,
    STALE_EXP2_POLYNOMIAL, default_config, default_exp2_degree, default_exp2_polynomial, default_mma_row_sums,
    default_rescale_threshold, default_stale_maxima)
from tsjit.examples.attention_fp8_softmax import (bitcast, exponentials, integral_maxima, online_softmax_fp8,
                                                  or_tree, overflow_bits, without_empty)
from tsjit.examples.attention_softmax import NEG_INF, mask_scores
from tsjit.examples.attention_tiles import AttentionShape
from tsjit.lang import turns
from tsjit.lang.epilogue import pack_fp8_quad
from tsjit.lang.fragment import Fragment
from tsjit.lang.values import Value, cast_to
from tsjit.backend import emit
from tsjit.ts.work_queue import TileSchedulerConfig, WorkQueue


#: the key each K position of a 16-key group of the PV wgmma's A operand carries (module docstring)
KEY_ORDER = tuple(8 * (j // 2) + 2 * q + j % 2 for q in range(4) for j in range(4))
KEY_GROUP = 16


def varlen_value_start(k_start, batch):
    """The first key of sequence ``batch`` in a packed V^T (variable-length problems): ``16 * (ceil(k_start / 16) +
    batch)`` with ``k_start = cu_seqlens_k[batch]``, a multiple of :data:`KEY_GROUP`, so every sequence's 16-key
    groups are those of :data:`KEY_ORDER`; the next sequence starts at least ``length`` keys later (the ``+ batch``
    absorbs the rounding), so sequences never overlap.  Device code (Int32 values) or host ints."""
    return KEY_GROUP * ((k_start + (KEY_GROUP - 1)) // KEY_GROUP + batch)


def varlen_value_keys(total_k: int, batch: int) -> int:
    """Keys of the packed V^T of ``batch`` sequences of ``total_k`` keys in all: the start of a sequence ``batch``
    (:func:`varlen_value_start`), which covers every sequence's padded keys (host ints)."""
    return varlen_value_start(total_k, batch)


def pack_probabilities_fp8(p, dtype):
    """P (Float32 accumulator layout, ``N / 2`` registers) rounded to FP8 ``dtype`` and packed four to a
    register: per 32 keys ``c``, the four A registers of one k32 wgmma (rows ``r`` / ``r + 8``, keys of the first
    / second 16), each the thread's keys ``2q, 2q + 1, 8 + 2q, 9 + 2q`` of its 16 (:data:`KEY_ORDER`)."""
    packed = []
    for c in range(len(p) // 16):
        for half in range(2):                 # keys 0-15, 16-31 of the step
            for row in range(2):              # rows r, r + 8
                i = 16 * c + 8 * half + 2 * row
                packed.append(pack_fp8_quad([p[i], p[i + 1], p[i + 4], p[i + 5]], dtype))
    return Fragment(packed, tsjit.Int32)


def value_box_keys(block_n: int) -> int:
    """Keys per V^T box (one TMA box, one swizzled row per head_dim index): the largest of 128, 64 and 32 that
    divides BLOCK_N (the box row's bytes are its swizzle span, 128B / 64B / 32B)."""
    return next(keys for keys in (128, 64, 32) if block_n % keys == 0)


class ValueBoxes:
    """The PV wgmma's B operand over one V^T stage of ``boxes`` boxes of ``keys`` keys: :meth:`k_step` ``(kk)`` is
    the K-major descriptor of keys ``32 kk .. 32 kk + 31`` (compile-time Python, like a MatrixDescriptor's).  ``moved``:
    one descriptor is built (box 0) and the others move its start address on the descriptor's low 32-bit word by a
    compile-time byte offset (:func:`advance_low_word`): building each box's descriptor from its address cost a
    dependent 64-bit chain of eight instructions per wgmma, issued while the warpgroup holds the tensor-core turn
    (H200, Nsight Compute, 2026-12-02: 13% of the consumer warps' samples; yet without row sums, moving them measured
    2.5% slower, so only the row-sum kernel takes it).  Not ``moved``: each box's descriptor from its address."""

    def __init__(self, stage_tiles, keys, moved=False):
        self.tiles, self.keys, self.moved = stage_tiles, keys, moved
        self.base = wgmma.make_descriptor(stage_tiles[0], major="K", swizzle=f"{keys}B") if moved else None
        self.box_bytes = stage_tiles.strides[0] * stage_tiles.dtype.itemsize

    def k_step(self, kk):
        steps = self.keys // 32
        if not self.moved:           # the earlier code: each box's descriptor from its address (the baseline)
            desc = wgmma.make_descriptor(self.tiles[kk // steps], major="K", swizzle=f"{self.keys}B")
            return resources.k_step(desc, kk % steps)
        return advance_low_word(self.base, (kk // steps) * self.box_bytes + (kk % steps) * 32)


def advance_low_word(desc, nbytes: int):
    """``desc`` (a MatrixDescriptor) with its start address moved by ``nbytes`` (a compile-time multiple of 16) on its
    low 32-bit word, behind an opaque ``mov.b32`` as :func:`~tsjit.examples.attention_resources.k_step` does (the
    14-bit address field cannot carry into the upper word below 256 KiB of shared memory)."""
    if nbytes == 0:
        return desc
    word = emit.current().inline_asm(emit.I32, "mov.b32 $0, $1;", "=r,r", [cast_to(desc, tsjit.Uint32).ir],
                                     side_effect=False)
    low = Value(word, tsjit.Uint32) + nbytes // 16
    moved = cast_to(low, tsjit.Uint64) | (desc & 0xFFFFFFFF00000000)
    return wgmma.MatrixDescriptor(moved.ir, desc.element_dtype, desc.major, desc.swizzle, desc.leading_byte_offset,
                                  desc.stride_byte_offset)


@dataclass(kw_only=True)
class KTilesFp8(resources.KTiles):
    """The K ring of e4m3 tiles: S = Q K^T with k32 wgmma, the fp8 online softmax
    (:func:`~tsjit.examples.attention_fp8_softmax.online_softmax_fp8`: ``row_sums`` False where the PV wgmma sums P,
    ``exp2_degree`` of the FMA-pipe exponentials) and P packed to e4m3 (:func:`pack_probabilities_fp8`)."""

    row_sums: bool = True
    exp2_degree: int = 3
    ordering: int = 3
    max_chains: int = 4
    fused_exp2: bool = False
    stale_maxima: bool = False

    @ts.consumer_work(returns=("s", "stats"))
    def softmax(self, stage_info, s, stats, *, overlapped: tsjit.Constexpr[bool] = False,
                peeled: tsjit.Constexpr[bool] = False):
        """As :meth:`KTiles.softmax <tsjit.examples.attention_resources.KTiles.softmax>` with the fp8 online softmax.
        Without row sums, the never-taken store that keeps the exponentials under the PV in flight depends on the
        bits of P instead (P >= 0 has clear sign bits; :func:`sign_bits`), or (``ordering`` 3) on the bits of P
        packed to e4m3, which then leaves in S's registers for :meth:`convert`."""
        shape = self.shape
        wgmma.wait_group(1 if overlapped else 0)
        s = wgmma.fence_operand(s)
        row0, col0, bounds, masked = score_geometry(shape, stage_info, peeled)
        if masked:
            s = mask_scores(s, row0, col0, *bounds)
        if tsjit.const_expr(self.stale_maxima):
            return STALE_SOFTMAX(self, s, stats, overlapped, peeled)
        p, stats = online_softmax_fp8(s, stats, shape.scale_log2, shape.rescale_threshold, shape.exp2_polynomial,
                                      row_sums=self.row_sums, degree=self.exp2_degree, max_chains=self.max_chains,
                                      fused=self.fused_exp2)
        if tsjit.const_expr(overlapped and self.row_sums):
            if stats[2] + stats[3] < 0.0:            # never (row sums are >= 0): see KTiles.softmax
                self.order_slot[0] = stats[2]
        elif tsjit.const_expr(self.ordering == 3 and not self.row_sums):
            packed = pack_probabilities_fp8(p, self.tmap.dtype)
            zero = packed_sign_bits(packed)          # 0 (P >= 0), which ptxas cannot know
            if tsjit.const_expr(overlapped):
                if zero != 0:                        # never: the ordering store, on the packed P
                    self.order_slot[0] = stats[0]
            # S's registers carry the packed P and the zero (the rest unused): convert finishes after the wait
            p = Fragment([bitcast(packed[i], tsjit.Float32) for i in range(len(packed))] +
                         [bitcast(zero, tsjit.Float32)] + [0.0] * (len(p) - len(packed) - 1), tsjit.Float32)
        elif tsjit.const_expr(overlapped and self.ordering == 1):
            if sign_bits(p) != 0:                    # never (P >= 0): the same ordering store, on P's bits
                self.order_slot[0] = stats[0]
        return p, stats

    def stale_softmax(self, s, stats, overlapped: tsjit.Constexpr[bool], peeled: tsjit.Constexpr[bool]):
        """The online softmax against the stale row maxima (``stale_maxima``; with row sums in the PV wgmma and no
        LSE): ``stats[0:2]`` hold the running maxima in exp2 units, rounded to integers.  P is computed against
        them and packed to e4m3 first; only where that leaves some P >= 2**8 on the warp (:func:`overflow_bits`:
        an add and a third of an OR per packed register), or a row has seen no key yet, does the warp (a uniform
        branch) take the row maxima of S, move to them and compute P again, with O's rescale factors.  That is the
        conditional rescaling of threshold 8 decided on P itself, so the common KV tile has no FMNMX reduction, no
        shuffles and no alpha exp2.  Returns S's registers carrying the packed P and a zero (as ``ORDERING`` 3) and
        the statistics."""
        shape = self.shape
        scale = shape.scale_log2
        stale = [stats[0], stats[1]]
        dtype = self.tmap.dtype
        current0, current1 = stats[0], stats[1]
        alpha0, alpha1, grew = stats[4] * 0.0 + 1.0, stats[5] * 0.0 + 1.0, stats[6] * 0.0
        if tsjit.const_expr(peeled):
            slow = tsjit.vote_any(stale[0] == stale[0])                     # always: no maxima yet
            packed = Fragment.zeros(shape.block_n // 8, tsjit.Int32)
            flag = packed[0]
        else:
            packed = pack_probabilities_fp8(Fragment(exponentials(s, without_empty(stale), scale,
                                                                  shape.exp2_polynomial, self.exp2_degree,
                                                                  self.fused_exp2), tsjit.Float32), dtype)
            flag = overflow_bits(packed)
            slow = tsjit.vote_any((flag != 0) | (stale[0] == NEG_INF) | (stale[1] == NEG_INF))
        if slow:                                     # warp-uniform: move to the row maxima of this tile
            grown = integral_maxima(s, stale, scale, self.max_chains)
            packed = pack_probabilities_fp8(Fragment(exponentials(s, without_empty(grown), scale,
                                                                  shape.exp2_polynomial, self.exp2_degree,
                                                                  self.fused_exp2), tsjit.Float32), dtype)
            flag = overflow_bits(packed)             # 0 now (P <= 2**0.5)
            alpha0 = tsjit.select(stale[0] == NEG_INF, 0.0, tsjit.math.exp2(stale[0] - grown[0], ftz=True))
            alpha1 = tsjit.select(stale[1] == NEG_INF, 0.0, tsjit.math.exp2(stale[1] - grown[1], ftz=True))
            current0, current1 = grown[0], grown[1]
            grew = alpha0 * 0.0 + 1.0
        if tsjit.const_expr(overlapped):
            if flag != 0:                            # never: keeps the exponentials above the PV wait
                self.order_slot[0] = stats[0]
        p = Fragment([bitcast(packed[i], tsjit.Float32) for i in range(len(packed))] +
                     [bitcast(flag, tsjit.Float32)] + [0.0] * (len(s) - len(packed) - 1), tsjit.Float32)
        return p, Fragment([current0, current1, stats[2], stats[3], alpha0, alpha1, grew], tsjit.Float32)

    @ts.consumer_work(returns="p", work_attrs=ts.WorkAttr.AUXILIARY)
    def convert(self, stage_info, s):
        """P (fp32) -> the e4m3 A registers of the PV wgmma (after the previous PV has retired).  ``ORDERING`` 3
        (without fp32 row sums) packed P before the wait already: S's first ``block_n / 8``
        registers and a zero, bitcast to Float32; P is then that packing XOR the zero, new registers defined after
        the wait (ptxas's own copy of the packing would be 24 moves there)."""
        if tsjit.const_expr((self.ordering == 3 or self.stale_maxima) and not self.row_sums):
            count = self.shape.block_n // 8
            zero = bitcast(s[count], tsjit.Int32)
            return Fragment([bitcast(s[i], tsjit.Int32) ^ zero for i in range(count)], tsjit.Int32)
        return pack_probabilities_fp8(s, self.tmap.dtype)


#: :meth:`KTilesFp8.stale_softmax` as a device function (inlined into :meth:`KTilesFp8.softmax`)
STALE_SOFTMAX = tsjit.func(KTilesFp8.stale_softmax)


def sign_bits(values):
    """The OR of the sign bits of the Float32 ``values`` (a Fragment), as three-input ORs (one LOP3 per two values):
    a value that depends on every one of them, for an ordering store (compile-time Python).  (An OR of P packed to
    e4m3 would be cheaper, but the next PV then reads registers defined while the current one is in flight, and ptxas
    serializes the wgmmas: C7513.)"""
    return or_tree([bitcast(v, tsjit.Int32) for v in values]) & (-2**31)         # 0x80000000 as an Int32


def packed_sign_bits(packed):
    """The OR of the sign bits of the e4m3 codes in the Int32 Fragment ``packed`` (three-input ORs)."""
    return or_tree(packed) & (-2139062144)                                      # 0x80808080 as an Int32


@dataclass(kw_only=True)
class VTransposedTiles(resources.VTiles):
    """The V ring holding V^T tiles (head_dim rows of BLOCK_N keys, in :data:`KEY_ORDER` within each 16), one
    TMA box each; the PV wgmma reads them K-major.

    ``ones_rows`` 8 (0: none): each box has 8 more rows after its head_dim TMA-filled ones, written once per CTA
    (:meth:`start_turns`): a row of e4m3 ones, then 7 of zeros, so the PV wgmma is m64n(head_dim + 8) and column
    head_dim of O is the row sum of (e4m3) P, rescaled with O (:class:`AttentionOutputFp8` reads it)."""

    ones_rows: int = 0
    moved_descriptors: bool = False

    def __post_init__(self):
        super().__post_init__()
        columns = self.shape.head_dim + self.ones_rows
        self.o = ts.TaskLocalVariable(Fragment, default_factory=lambda: Fragment.zeros(columns // 2),
                                      docs="the warpgroup's 64 x (head_dim + ones_rows) fp32 output accumulator")

    def tile_shape(self):
        keys = value_box_keys(self.shape.block_n)
        return (self.pipeline_config.num_stages, self.shape.block_n // keys, self.shape.head_dim + self.ones_rows, keys)

    def tma_bytes_per_stage(self):
        return self.tmap.box_bytes * (self.shape.block_n // value_box_keys(self.shape.block_n))

    def value_descriptor(self, stage):
        return ValueBoxes(self.tiles[stage], value_box_keys(self.shape.block_n), self.moved_descriptors)

    @ts.consumer_work(returns="o", work_attrs=ts.WorkAttr.AUXILIARY)
    def zero_output(self, stage_info):
        return Fragment.zeros((self.shape.head_dim + self.ones_rows) // 2)

    @ts.consumer_work(work_attrs=ts.WorkAttr.AUXILIARY)
    def start_turns(self, stage_info):
        """Once per CTA: the ones rows of every box (each consumer warpgroup writes them all, the same bytes, then
        fences them for the async proxy and syncs its 128 threads on its epilogue barrier), then the first turn
        (:meth:`VTiles.start_turns <tsjit.examples.attention_resources.VTiles.start_turns>`)."""
        if tsjit.const_expr(self.ones_rows > 0):
            shape = self.shape
            keys = value_box_keys(shape.block_n)
            boxes = self.pipeline_config.num_stages * (shape.block_n // keys)
            rows = shape.head_dim + self.ones_rows
            words = self.tiles.reinterpret(tsjit.Int32).reshape((boxes, rows, keys // 4))
            per_row = keys // 16                                   # 16-byte chunks per row
            chunks = self.ones_rows * per_row                      # of one box's extra rows
            tid = tsjit.thread_idx().x % 128
            for i in tsjit.range_constexpr(-(-boxes * chunks // 128)):
                index = tid + 128 * i
                if index < boxes * chunks:
                    chunk = index % chunks
                    value = tsjit.select(chunk < per_row, ONES_E4M3X4, 0)       # the first extra row: ones
                    words.store_vector((index // chunks, shape.head_dim + chunk // per_row, (chunk % per_row) * 4),
                                       [value, value, value, value])
            tsjit.fence_proxy_async()
            tsjit.named_barrier_sync(1 + tsjit.warp_idx() // 4 - 1, 128)
        if tsjit.const_expr(self.shape.pingpong):
            if tsjit.warp_idx() // 4 == self.shape.block_m // 64:
                turns.give_first_turn(TURN_BARRIERS[self.shape.block_m // 64])

    @ts.consumer_work(returns="o")
    def issue_accumulate(self, stage_info, p, o, *, last: tsjit.Constexpr[bool] = False):
        """As :meth:`VTiles.issue_accumulate <tsjit.examples.attention_resources.VTiles.issue_accumulate>`, N =
        head_dim + ``ones_rows``."""
        shape = self.shape
        warpgroup = tsjit.warp_idx() // 4 - 1
        if tsjit.const_expr(shape.pingpong and last):
            turns.take_turn(warpgroup, TURN_BARRIERS[shape.block_m // 64])
        b_desc = self.value_descriptor(stage_info.stage_idx)
        o = wgmma.fence_operand(o)
        p = wgmma.fence_operand(p)
        wgmma.fence()
        for kk in tsjit.range_constexpr(shape.block_n // 32):                 # 32 keys each
            a = Fragment([p[4 * kk], p[4 * kk + 1], p[4 * kk + 2], p[4 * kk + 3]], tsjit.Int32)
            o = wgmma.mma_async(o, a, resources.k_step(b_desc, kk), n=shape.head_dim + self.ones_rows,
                                a_dtype=self.tmap.dtype)
        wgmma.commit_group()
        if tsjit.const_expr(shape.pingpong):
            turns.pass_turn(warpgroup, TURN_BARRIERS[shape.block_m // 64], shape.block_m // 64)
        return o

    @ts.producer_work()
    def tma_load(self, stage_info, *, lagging: tsjit.Constexpr[bool] = False):
        """Load V^T of the tile's KV tile (as :meth:`KVRing.tma_load`: ``lagging`` is one tile behind); in a packed
        variable-length V^T the sequence starts at :func:`varlen_value_start`, not at its K row."""
        shape = self.shape
        tile = shape.position(stage_info.work_tile)
        key = self.first_key(tile, stage_info, lagging)
        if tsjit.const_expr(shape.cu_k is not None):
            key = key - tile.k_start + varlen_value_start(tile.k_start, tile.batch)
        keys = value_box_keys(shape.block_n)
        if tsjit.elect_one():
            for box in tsjit.range_constexpr(shape.block_n // keys):
                tsjit.tma_load(self.tmap, self.tiles[stage_info.stage_idx, box], stage_info.barrier,
                               (tile.tensor_batch, tile.head // shape.group, 0, key + box * keys))


@dataclass(kw_only=True)
class AttentionOutputFp8(resources.AttentionOutput):
    """The O / LSE epilogue; with ``ones_rows`` (the V ring's) the row sums of P are O's column head_dim (registers
    ``head_dim / 2`` and ``+ 2`` of the thread of each row quad that holds it, 0 in the other three), and the
    statistics' ``l`` are ignored."""

    ones_rows: int = 0

    @ts.producer_work()
    def store(self, stage_info, o, stats, q_stage):
        """Normalize and store O (:meth:`AttentionOutput.store
        <tsjit.examples.attention_resources.AttentionOutput.store>`, inlined), its row sums taken from O."""
        if tsjit.const_expr(self.ones_rows > 0):
            half = self.shape.head_dim // 2
            stats = Fragment([stats[0], stats[1], o[half], o[half + 2], stats[4], stats[5], stats[6]], tsjit.Float32)
            o = Fragment([o[i] for i in range(half)], tsjit.Float32)
        BASE_STORE(self, stage_info, o, stats, q_stage)


#: the bf16 forward's epilogue body as a device function (inlined into :meth:`AttentionOutputFp8.store`)
BASE_STORE = tsjit.func(resources.AttentionOutput.store)
#: four e4m3 ones (0x38) in one Int32: a chunk of the ones row
ONES_E4M3X4 = 0x38383838
#: rows below each V^T box with ``MMA_ROW_SUMS`` (one of ones, seven of zeros: wgmma N grows in steps of 8)
ONES_ROWS = 8


@tsjit.kernel
def attention_forward_fp8(q_map, k_map, vt_map, o_map, out, lse, tiles, cu_seqlens_q, cu_seqlens_k, seqlen_q, seqlen_k,
                          heads, group, scale_log2, v_scale, window_left, window_right, HEAD_DIM: tsjit.Constexpr[int],
                          BLOCK_N: tsjit.Constexpr[int], STAGES: tsjit.Constexpr[int], CAUSAL: tsjit.Constexpr[bool],
                          STORE_LSE: tsjit.Constexpr[bool] = True, PINGPONG: tsjit.Constexpr[bool] = True,
                          Q_STAGES: tsjit.Constexpr[int] = 2, WINDOW: tsjit.Constexpr[bool] = False,
                          TABLE: tsjit.Constexpr[bool] = False, DIRECT_STORE: tsjit.Constexpr[bool] = False,
                          EXP2_POLYNOMIAL: tsjit.Constexpr[int] = 0, VARLEN: tsjit.Constexpr[bool] = False,
                          RESCALE_THRESHOLD: tsjit.Constexpr[float] = -1.0, MMA_ROW_SUMS: tsjit.Constexpr[bool] = False,
                          EXP2_DEGREE: tsjit.Constexpr[int] = 3, ORDERING: tsjit.Constexpr[int] = 3,
                          MAX_CHAINS: tsjit.Constexpr[int] = 4, MOVED_DESCRIPTORS: tsjit.Constexpr[bool] = False,
                          FUSED_EXP2: tsjit.Constexpr[bool] = True, STALE_MAXIMA: tsjit.Constexpr[bool] = False):
    """The fp8 forward (module docstring), two consumer warpgroups, the software-pipelined schedule.

    ``q_map`` / ``k_map``: TensorMaps of the Float8E4M3 Q (B, S_q, H, D) and K (B, S_k, H_kv, D), boxes
    (1, 128, 1, W) and (1, BLOCK_N, 1, W), ``W = min(128, D)`` columns, ``W``-byte swizzle; ``vt_map``: of V^T
    (B, H_kv, D, S_k padded to 16) (:func:`transposed_v`), box (1, 1, D, K) with K = :func:`value_box_keys`
    (BLOCK_N), K-byte swizzle;
    ``o_map``: of the BFloat16 O (B, S_q, H, D), box (1, 64, 1, 64), 128B swizzle; ``out``: O as a rank-2
    (B * S_q, H * D) tensor (``DIRECT_STORE``: head_dim 256, variable length); ``lse``: Float32 (B, H, S_q);
    ``tiles``: the tile table (``TABLE``); ``cu_seqlens_q/k``: Int32 (batch + 1) prefix sums of the sequence lengths
    (``VARLEN``, which needs ``TABLE`` and ``DIRECT_STORE``: Q, K, O packed as B = 1, V^T packed by
    :func:`varlen_value_start`); ``scale_log2 = scale * q_scale * k_scale * log2 e``; ``v_scale``: V's scale (Float32);
    ``EXP2_POLYNOMIAL``: of every 16 exponentials of P, how many run on the FMA pipe rather than the MUFU unit
    (:func:`~tsjit.examples.attention_softmax.exp2_polynomial`; 0: none; :func:`default_exp2_polynomial`);
    ``RESCALE_THRESHOLD`` >= 0: conditional rescaling as in :func:`~tsjit.examples.attention.attention_forward`
    (P stays below ``2**RESCALE_THRESHOLD``, within e4m3's range up to 448 for thresholds <= 8), negative: O is
    rescaled after every KV tile; ``MMA_ROW_SUMS``: the PV wgmma sums P (a ones row below V^T, N = head_dim + 8:
    :class:`VTransposedTiles`) instead of the softmax's FADDs; ``EXP2_DEGREE``: 2 or 3, the polynomial of the
    FMA-pipe exponentials (:func:`~tsjit.examples.attention_fp8_softmax.exp2_fma`); ``ORDERING``: with
    ``MMA_ROW_SUMS``, what the never-taken store that keeps the exponentials above the PV wait depends on
    (:meth:`KTilesFp8.softmax`): 3 P packed to e4m3 (12 LOP3 per 192 keys; the packing then crosses the wait in S's
    registers and an XOR with that zero copies it into P's: H200, BENCHMARKS.md 2026-12-03), 1 the sign bits of
    the fp32 P (48 LOP3), 0 none (ptxas then waits for the PV before the softmax);
    ``MAX_CHAINS``: independent running maxima per row in the softmax; ``MOVED_DESCRIPTORS``: the V^T boxes'
    descriptors moved from box 0's (:class:`ValueBoxes`; ``tsjit.ops.attention`` takes it with ``MMA_ROW_SUMS``, where
    it was measured faster; without row sums it measured 2.5% slower at 224-key tiles, BENCHMARKS.md 2026-12-02);
    ``FUSED_EXP2`` (with ``MMA_ROW_SUMS``, ``EXP2_DEGREE`` 2, ``EXP2_POLYNOMIAL`` > 0 and no LSE stored, else
    ignored): the FMA-pipe exponentials straight from the scores against integral maxima
    (:class:`~tsjit.examples.attention_fp8_softmax.FusedExp2`; the LSE would have to carry the rounding).
    Launch with 384 threads and a persistent grid."""
    block_m = 128
    if tsjit.const_expr(VARLEN and not (TABLE and DIRECT_STORE)):
        raise tsjit.CompilationError("attention_forward_fp8: VARLEN needs TABLE (the tiles of the sequences) and "
                                     "DIRECT_STORE (rows past a sequence belong to the next one)")
    if tsjit.const_expr(TABLE):
        queue_config = TileSchedulerConfig.create_static_persistent_tile_scheduler_params(tiles.shape[0])
    else:
        queue_config = TileSchedulerConfig.create_static_persistent_tile_scheduler_params(
            lse.shape[0] * heads, (seqlen_q + block_m - 1) // block_m)
    wq = WorkQueue(name="tiles", tile_scheduler_config=queue_config)
    producer = ts.CooperativeGroup(ts.Agent.Thread, 1)
    consumers = ts.CooperativeGroup(ts.Agent.Thread, 8)
    tile_bytes = HEAD_DIM * BLOCK_N                                      # one byte per e4m3
    q_cfg = ts.PipelineConfig.create_tma_async_pipeline_cfg(Q_STAGES, block_m * HEAD_DIM, producer, consumers)
    k_cfg = ts.PipelineConfig.create_tma_async_pipeline_cfg(STAGES, tile_bytes, producer, consumers)
    v_cfg = ts.PipelineConfig.create_tma_async_pipeline_cfg(STAGES, tile_bytes, producer, consumers)
    shape = AttentionShape(seqlen_q=seqlen_q, seqlen_k=seqlen_k, heads=heads, group=group,
                           num_m_blocks=(seqlen_q + block_m - 1) // block_m, scale_log2=scale_log2, head_dim=HEAD_DIM,
                           block_n=BLOCK_N, causal=CAUSAL, pingpong=PINGPONG, window=WINDOW, window_left=window_left,
                           window_right=window_right, table=tiles if TABLE else None,
                           cu_q=cu_seqlens_q if VARLEN else None, cu_k=cu_seqlens_k if VARLEN else None,
                           direct_store=DIRECT_STORE,
                           output_scale=v_scale, exp2_polynomial=EXP2_POLYNOMIAL,
                           rescale_threshold=RESCALE_THRESHOLD if RESCALE_THRESHOLD >= 0 else None)
    qs = resources.QTile(name="q", pipeline_config=q_cfg, q_map=q_map, shape=shape)
    ones_rows = ONES_ROWS if MMA_ROW_SUMS else 0
    ks = KTilesFp8(name="k", pipeline_config=k_cfg, tmap=k_map, q=qs, shape=shape, row_sums=not MMA_ROW_SUMS,
                   exp2_degree=EXP2_DEGREE, ordering=ORDERING, max_chains=MAX_CHAINS,
                   fused_exp2=FUSED_EXP2 and MMA_ROW_SUMS and EXP2_DEGREE == 2 and EXP2_POLYNOMIAL > 0
                   and not STORE_LSE, stale_maxima=STALE_MAXIMA and MMA_ROW_SUMS and not STORE_LSE)
    vs = VTransposedTiles(name="v", pipeline_config=v_cfg, tmap=vt_map, shape=shape, ones_rows=ones_rows,
                          moved_descriptors=MOVED_DESCRIPTORS)
    output = AttentionOutputFp8(name="o", o_map=o_map, out=out, lse=lse, shape=shape, store_lse=STORE_LSE,
                                ones_rows=ones_rows)
    base.run_program(wq, qs, ks, vs, output, shape, True, 2)


def transposed_v(v_bits: np.ndarray) -> np.ndarray:
    """V^T in the kernel's layout, from FP8 codes (uint8) ``(batch, keys, kv_heads, head_dim)`` (host, numpy):
    ``(batch, kv_heads, head_dim, keys rounded up to 16)``, zero-padded, each 16 keys in :data:`KEY_ORDER`
    (``out[..., 16 g + l] = v[:, 16 g + KEY_ORDER[l]]``).  ``tsjit.ops.attention`` does the same on torch tensors."""
    batch, keys, kv_heads, head_dim = v_bits.shape
    padded = -(-keys // KEY_GROUP) * KEY_GROUP
    full = np.zeros((batch, padded, kv_heads, head_dim), v_bits.dtype)
    full[:, :keys] = v_bits
    grouped = full.reshape(batch, padded // KEY_GROUP, KEY_GROUP, kv_heads, head_dim)[:, :, list(KEY_ORDER)]
    return np.ascontiguousarray(grouped.reshape(batch, padded, kv_heads, head_dim).transpose(0, 2, 3, 1))


def varlen_value_rows(lengths_k) -> np.ndarray:
    """Where each key of a packed variable-length K lands in the packed V^T (host, numpy Int64, one entry per packed
    key): key ``t`` of sequence ``b`` goes to :func:`varlen_value_start` ``(cu_seqlens_k[b], b) + t``."""
    lengths = np.asarray(lengths_k, np.int64)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]) if len(lengths) else np.zeros(0, np.int64)
    shift = np.array([varlen_value_start(int(c), b) - int(c) for b, c in enumerate(starts)], np.int64)
    return np.arange(int(lengths.sum()), dtype=np.int64) + np.repeat(shift, lengths)


def transposed_v_varlen(v_bits: np.ndarray, lengths_k) -> np.ndarray:
    """The packed V^T of a variable-length V (host, numpy): FP8 codes ``(total_k, kv_heads, head_dim)`` ->
    ``(1, kv_heads, head_dim, varlen_value_keys(total_k, batch))``, sequence ``b`` from key
    :func:`varlen_value_start`, zero between sequences, each 16 keys in :data:`KEY_ORDER` (:func:`transposed_v`)."""
    total, kv_heads, head_dim = v_bits.shape
    full = np.zeros((varlen_value_keys(total, len(lengths_k)), kv_heads, head_dim), v_bits.dtype)
    full[varlen_value_rows(lengths_k)] = v_bits
    return transposed_v(full[None])


def compile_config(head_dim=128, causal=False, *, block_n=None, stages=None, store_lse=True, pingpong=True,
                   q_stages=2, window=False, table=None, direct_store=None, exp2_polynomial=None, varlen=False,
                   rescale_threshold=None, mma_row_sums=None, exp2_degree=None, ordering=3, max_chains=4,
                   moved_descriptors=None, fused_exp2=True, stale_maxima=None):
    """Compile :func:`attention_forward_fp8` for sm_90a from argument specs alone (no GPU): the configuration
    ``tsjit.ops.attention`` launches for Float8E4M3 inputs with these options.  Returns the CompiledKernel."""
    tiles_given = block_n is not None or stages is not None
    if mma_row_sums is None:
        mma_row_sums = not tiles_given and default_mma_row_sums(head_dim, causal or window, store_lse)
    default_n, default_stages = default_config(head_dim, causal, mma_row_sums)
    block_n, stages = block_n or default_n, stages or default_stages
    table = (causal or window or varlen) if table is None else table
    direct_store = (varlen or head_dim == 256) if direct_store is None else direct_store
    if stale_maxima is None:
        stale_maxima = not tiles_given and default_stale_maxima(head_dim, mma_row_sums, causal or window)
    if exp2_polynomial is None:
        exp2_polynomial = default_exp2_polynomial(head_dim, causal or window, stale_maxima)
    fp8 = tsjit.Float8E4M3
    width = min(128, head_dim)
    q = tsjit.tensormap_spec(fp8, (1, 128, 1, width), swizzle=f"{width}B")
    k = tsjit.tensormap_spec(fp8, (1, block_n, 1, width), swizzle=f"{width}B")
    keys = value_box_keys(block_n)
    vt = tsjit.tensormap_spec(fp8, (1, 1, head_dim, keys), swizzle=f"{keys}B")
    o = tsjit.tensormap_spec(tsjit.BFloat16, (1, 64, 1, BOX), swizzle="128B")
    out = tsjit.spec((2000, 16 * head_dim), tsjit.BFloat16)
    lse = tsjit.spec((1 if varlen else 2, 16, 1000), tsjit.Float32)
    tiles = tsjit.spec((300, 2), tsjit.Int32)
    cu = tsjit.spec((3,), tsjit.Int32)
    return tsjit.compile(attention_forward_fp8, q, k, vt, o, out, lse, tiles, cu, cu, 1000, 1000, 16, 2, 0.18, 1.5, 200,
                         0, head_dim, block_n, stages, causal, store_lse, pingpong, q_stages, window, table,
                         direct_store, exp2_polynomial, varlen,
                         float(default_rescale_threshold(head_dim, causal or window) if rescale_threshold is None
                               else rescale_threshold),
                         mma_row_sums,
                         default_exp2_degree(head_dim, causal or window, mma_row_sums) if exp2_degree is None
                         else exp2_degree,
                         int(ordering), max_chains, mma_row_sums if moved_descriptors is None else moved_descriptors,
                         fused_exp2, stale_maxima)


__all__ = ["attention_forward_fp8", "compile_config", "transposed_v", "pack_probabilities_fp8", "KTilesFp8",
           "VTransposedTiles", "ValueBoxes", "advance_low_word", "value_box_keys", "varlen_value_start", "varlen_value_keys",
           "varlen_value_rows", "transposed_v_varlen", "KEY_ORDER", "HEAD_DIMS", "BLOCK_NS", "DEFAULT_CONFIG",
           "CAUSAL_CONFIG", "default_config", "DEFAULT_EXP2_POLYNOMIAL",
           "CAUSAL_EXP2_POLYNOMIAL", "default_exp2_polynomial", "DEFAULT_RESCALE_THRESHOLD",
           "CAUSAL_RESCALE_THRESHOLD", "default_rescale_threshold", "AttentionOutputFp8", "sign_bits",
           "ONES_ROWS", "ONES_E4M3X4", "DEFAULT_MMA_ROW_SUMS", "CAUSAL_MMA_ROW_SUMS", "EXP2_DEGREE",
           "ROW_SUMS_EXP2_DEGREE", "ROW_SUMS_CONFIG", "CAUSAL_ROW_SUMS_CONFIG", "default_mma_row_sums", "default_exp2_degree",
           "score_geometry", "packed_sign_bits", "ROW_SUMS_STALE_MAXIMA", "CAUSAL_ROW_SUMS_STALE_MAXIMA",
           "default_stale_maxima", "STALE_SOFTMAX", "STALE_EXP2_POLYNOMIAL"]
