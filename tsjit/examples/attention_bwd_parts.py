"""Parts of the attention backward (:mod:`tsjit.examples.attention_bwd`, issue 16) outside its Task Scheduling
program: the preprocess kernel (the row statistics the backward reads) and the inline-PTX helper of its
TMA reduction of dQ (``DQ_TMA``)."""
from __future__ import annotations

import tsjit
from tsjit.backend import emit
from tsjit.examples.attention_config import LOG2_E
from tsjit.lang.values import integer_operand


def tma_reduce_add(tmap, tile, coords):
    """Add the Float32 shared-memory ``tile`` (the box of ``tmap``, row-major, no swizzle) into the box at ``coords``
    (outermost first) of the global tensor: ``cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group``
    (PTX ISA §9.7.9.25.5.2, sm_90; the TMA unit reads the tile and adds it in L2; completion by bulk groups, as TMA
    stores); inline PTX, so the CPU interpreter does not run it (compile-time Python in a work body)."""
    km = emit.current()
    smem = km.builder.ptrtoint(tile.ptr.ir, emit.I32)
    inner_first = [integer_operand(c, tsjit.Int32, "tma_reduce_add: coordinate").ir for c in reversed(coords)]
    km.inline_asm(emit.VOID, "cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group "
                             "[$0, {$2, $3}], [$1];", "l,r,r,r,~{memory}", [tmap.ir, smem, *inner_first])



# -- the preprocess ------------------------------------------------------------------------------
PREPROCESS_THREADS = 256


@tsjit.kernel
def attention_backward_preprocess(out, dout, lse, stats, seqlen_q, heads, padded_q, rows,
                                  HEAD_DIM: tsjit.Constexpr[int]):
    """The row statistics the backward reads: ``stats[b, h, 0, i] = lse[b, h, i] * log2 e`` (+inf where the LSE is
    -inf, a row that sees no key, and for the padding rows ``seqlen_q <= i < padded_q``) and ``stats[b, h, 1, i] =
    sum_c dout[b, i, h, c] * out[b, i, h, c]`` in Float32 (0 for the padding).

    ``out`` / ``dout``: flat views of contiguous (B, S_q, H, D) tensors of the input dtype; ``lse``: Float32
    (B, H, S_q); ``stats``: Float32 (B, H, 2, padded_q); ``rows = B * padded_q * H``.  One warp per (b, i, h)
    (h fastest, so a warp's neighbours read the next head of the same token): each lane loads ``D / 32``
    consecutive elements of both rows (one vector load each), the products are summed in Float32 per lane and
    over the warp with shuffles.  Launch with :data:`PREPROCESS_THREADS` threads and any grid (grid-stride)."""
    per_lane = HEAD_DIM // 32
    lane = tsjit.lane_idx()
    warps = tsjit.grid_dim().x * (PREPROCESS_THREADS // 32)
    for row in range(tsjit.block_idx().x * (PREPROCESS_THREADS // 32) + tsjit.thread_idx().x // 32, rows, warps):
        head = row % heads
        token = row // heads                        # b * padded_q + i
        b, i = token // padded_q, token % padded_q
        total = tsjit.Float32(0)
        if i < seqlen_q:
            base = ((b * seqlen_q + i) * heads + head) * HEAD_DIM + lane * per_lane
            o = out.load_vector(base, per_lane)
            g = dout.load_vector(base, per_lane)
            for c in tsjit.range_constexpr(per_lane):
                total = tsjit.math.fma(tsjit.Float32(o[c]), tsjit.Float32(g[c]), total)
        for offset in tsjit.range_constexpr(5):
            total = total + tsjit.shuffle_xor(total, 16 >> offset)
        if lane == 0:
            lse2 = float("inf")
            if i < seqlen_q:
                value = lse[b, head, i]
                lse2 = tsjit.select(value == float("-inf"), float("inf"), value * LOG2_E)
            stats[b, head, 0, i] = lse2
            stats[b, head, 1, i] = total


__all__ = ["tma_reduce_add", "attention_backward_preprocess", "PREPROCESS_THREADS"]
