"""The V transpose of the fp8 attention forward (issue 16) as a bandwidth-bound device kernel: fp8 V in
FlashAttention's ``(batch, keys, kv_heads, head_dim)`` layout -> V^T ``(batch, kv_heads, head_dim, keys padded to
16)``, each group of 16 keys in :data:`~tsjit.examples.attention_fp8.KEY_ORDER` (the layout the PV wgmma of
:mod:`tsjit.examples.attention_fp8` reads K-major; the host reference is
:func:`~tsjit.examples.attention_fp8.transposed_v`).

The kernel moves 32-bit words (four e4m3 codes): V as Int32 ``(batch, keys, kv_heads, head_dim / 4)`` and V^T as
Int32 ``(batch, kv_heads, head_dim, keys / 4)``.  One CTA transposes a tile of :data:`TILE_KEYS` keys of one
(batch, KV head), ``head_dim / 16`` warps:

1. **Load.** Every thread reads 16-byte chunks of key rows (consecutive threads, consecutive chunks of a row: the
   warp's loads are whole 128-byte lines) into a shared-memory tile of ``TILE_KEYS x head_dim`` bytes; keys past
   the end read as 0 (V^T's padding).  Chunk ``c`` of row ``r`` is stored at chunk ``c ^ swizzle(r)``
   (:func:`chunk_swizzle`), so the transposed reads below are free of bank conflicts.
2. **Transpose.** Warp ``w`` owns head_dim rows ``16 w .. 16 w + 15`` of V^T; lane ``4 g + q`` owns output word
   ``4 g + q`` of each (keys ``16 g + 4 q .. 16 g + 4 q + 3`` in the kernel's order, that is the source keys
   ``16 g + 2 q + (0, 1, 8, 9)``, :data:`KEY_ORDER`).  It reads chunk ``w`` of those four key rows (four 16-byte
   shared loads) and builds its 16 output words byte by byte (byte ``j`` of word ``d``: byte ``d`` of key ``j``).
   Each store instruction of the warp writes 128 consecutive bytes of one V^T row.

Traffic: one read and one write of V (32 MiB each way at (4, 4096, 16, 128)); shared memory: 16 KiB per CTA at
head_dim 128.
"""
from __future__ import annotations

import tsjit
from tsjit.examples.attention_fp8 import KEY_GROUP, KEY_ORDER

#: keys per CTA tile: 32 lanes x 4 keys, so one warp's store covers 128 bytes of a V^T row
TILE_KEYS = 128
#: the source key offsets (within its 16-key group, less ``2 q``) of the four bytes of an output word
#: (``KEY_ORDER[4 q + j] = 2 q + WORD_KEYS[j]``: (0, 1, 8, 9))
WORD_KEYS = tuple(KEY_ORDER[j] for j in range(4))


def chunk_swizzle(row, chunks: int):
    """The XOR applied to the 16-byte chunk index of key row ``row`` of the shared tile: ``(row >> 1) & 3`` in bits
    0-1 and ``(row >> 4) & 1`` in bit 2, masked to ``chunks - 1`` (compile-time ``chunks``, a power of 2).  The 8
    lanes of a quarter-warp read rows ``16 g + 2 q + c`` (``g`` in 0..1, ``q`` in 0..3, ``c`` fixed), whose swizzles
    ``q + 4 g`` differ, so their 16-byte reads hit 8 different bank quadruples (head_dim >= 128; at 64, two rows share
    a 128-byte bank line and the reads are 2-way conflicted)."""
    return (((row >> 1) & 3) | (((row >> 4) & 1) << 2)) & (chunks - 1)


def threads(head_dim: int) -> int:
    """Threads per CTA of :func:`transpose_v_kernel`: one warp per 16 bytes of head_dim."""
    return 32 * (head_dim // 16)


def grid(batch: int, keys: int, kv_heads: int) -> tuple[int, int]:
    """The launch grid: (batch * kv_heads, tiles of :data:`TILE_KEYS` keys over the padded keys): the CTAs that run
    together read neighbouring heads of the same keys (whole rows of V); grid y allows 65535 tiles, 8 M keys."""
    padded = -(-keys // KEY_GROUP) * KEY_GROUP
    return (batch * kv_heads, -(-padded // TILE_KEYS))


@tsjit.kernel
def transpose_v_kernel(v, vt, keys, HEAD_DIM: tsjit.Constexpr[int]):
    """V^T from V (module docstring).

    ``v``: Int32 ``(batch, keys, kv_heads, HEAD_DIM / 4)``, the fp8 codes of V four to a word (innermost dimension
    contiguous, rows 16-byte aligned); ``vt``: Int32 ``(batch, kv_heads, HEAD_DIM, keys_padded / 4)`` with
    ``keys_padded`` = ``keys`` rounded up to 16 (contiguous innermost dimension); ``keys``: V's seqlen.  Launch with
    :func:`grid` and :func:`threads` (``HEAD_DIM``) threads; HEAD_DIM 64, 128 or 256."""
    if tsjit.const_expr(HEAD_DIM % 64 != 0 or HEAD_DIM > 256):
        raise tsjit.CompilationError(f"transpose_v_kernel: HEAD_DIM must be 64, 128 or 256, got {HEAD_DIM}")
    chunks = HEAD_DIM // 16                         # 16-byte chunks per key row = warps per CTA
    tile = tsjit.shared_array(tsjit.Int32, (TILE_KEYS, HEAD_DIM // 4), align=16)
    kv_heads = v.shape[2]
    batch = tsjit.block_idx().x // kv_heads
    head = tsjit.block_idx().x % kv_heads
    key0 = tsjit.block_idx().y * TILE_KEYS
    tid = tsjit.thread_idx().x
    last = keys - 1
    for i in tsjit.range_constexpr(TILE_KEYS // 32):            # TILE_KEYS * chunks chunks, 32 * chunks threads
        index = tid + i * 32 * chunks
        row = index // chunks
        chunk = index % chunks
        key = key0 + row
        words = v.load_vector((batch, tsjit.math.min(key, last), head, chunk * 4), 4)
        inside = key < keys
        tile.store_vector((row, (chunk ^ chunk_swizzle(row, chunks)) * 4),
                          [tsjit.select(inside, word, 0) for word in words])
    tsjit.syncthreads()
    warp = tid // 32
    lane = tid % 32
    base = 16 * (lane // 4) + 2 * (lane % 4)                  # the lane's first source key row of the tile
    column = (warp ^ chunk_swizzle(base, chunks)) * 4          # the same swizzle for base + 0, 1, 8, 9
    rows = [tile.load_vector((base + offset, column), 4) for offset in WORD_KEYS]
    quad = key0 // 4 + lane
    if quad < vt.shape[3]:
        for d in tsjit.range_constexpr(16):
            shift = 8 * (d % 4)
            word = (rows[0][d // 4] >> shift) & 0xFF
            for j in tsjit.range_constexpr(1, 4):
                word = word | (((rows[j][d // 4] >> shift) & 0xFF) << (8 * j))
            vt[batch, head, 16 * warp + d, quad] = word


__all__ = ["transpose_v_kernel", "chunk_swizzle", "threads", "grid", "TILE_KEYS", "WORD_KEYS"]
