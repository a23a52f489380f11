"""The configurations of the attention kernel (issue 16, :mod:`tsjit.examples.attention`): supported head_dims,
KV tile sizes, ring depths, consumer schedules, warpgroup counts and register budgets per head_dim (compile-time
Python; the defaults ``tsjit.ops.attention`` launches).  Measurements behind the defaults: BENCHMARKS.md."""
from __future__ import annotations

from tsjit.lang import turns

CONSUMER_WARPGROUPS = 2       # the default; head_dim 64 can run three (WARPGROUPS = 3: 192-row Q tiles)
THREADS = 128 * (1 + CONSUMER_WARPGROUPS)
BOX = 64                      # head_dim columns per 128-byte swizzled TMA box (16-bit elements)
HEAD_DIMS = (64, 128, 256)
LOG2_E = 1.4426950408889634
PRODUCER_REGISTERS = 40        # setmaxnreg of the load warps and the consumer warpgroups: what the load warps
CONSUMER_REGISTERS = 232       # give up (168 - 40, the default 65536 / 384 rounded to 8), each consumer takes (232 - 168)
PINGPONG_BARRIER = turns.TURN_BARRIER   # named barriers 3, 4: the tensor-core turn of warpgroup 0 / 1 (1, 2: epilogue)
#: per number of consumer warpgroups: setmaxnreg of the load warps and of the consumers (128 p + 128 w c <= 65536),
#: and the first named barrier of the turns (the epilogue barriers are 1 .. warpgroups)
REGISTERS = {2: (PRODUCER_REGISTERS, CONSUMER_REGISTERS), 3: (32, 160)}
TURN_BARRIERS = {2: PINGPONG_BARRIER, 3: 4}

#: default KV tile rows and ring stages per head_dim (shared memory: Q + 2 rings + O staging < 227 KiB; head_dim
#: 256 stores O from registers, its staging buffer would not fit).  head_dim 256 takes 80-key tiles (225 KiB with
#: one Q stage; FlashAttention-3's tile): H200, 2026-12-02 (helper i16a) 1.039-1.088x cuDNN where 64-key tiles
#: were 0.949-0.995x
DEFAULT_CONFIG = {64: (128, 3), 128: (128, 2), 256: (80, 2)}
#: KV tile rows the kernel supports: a multiple of 16 (the PV wgmma's K step) that is also a wgmma N for QK^T
BLOCK_NS = (64, 80, 96, 128, 160, 176, 192)
#: default stages of the Q ring per head_dim: with 2 the producer loads the next work tile's Q (and its first
#: K/V tiles) while the consumers finish the current one
DEFAULT_Q_STAGES = {64: 2, 128: 2, 256: 1}
#: the consumer schedule per head_dim: software-pipelined (``OVERLAP=True``: the softmax of KV tile j runs
#: while the PV wgmma of tile j-1 is in flight) and whether the two warpgroups take turns at the tensor cores
#: (``PINGPONG``: faster on the H200 on most shapes once the first KV tile is peeled, BENCHMARKS.md 2026-12-01).
#: The one-tile schedule (``overlap=False``) stays available as the reference.
DEFAULT_OVERLAP = {64: True, 128: True, 256: True}
DEFAULT_PINGPONG = {64: True, 128: True, 256: True}
#: conditional rescaling per head_dim (``RESCALE_THRESHOLD`` of :func:`attention_forward`, powers of 2; -1: O is
#: rescaled after every KV tile).  Off at head_dim 64 and 128 (H200, 2026-12-01, (2, 16, 8192, 128)): threshold 8
#: gains 2-5% (698 vs 683 TFLOP/s non-causal) but its stale maxima round the largest P (1.3x-2.3x flash's max error),
#: and threshold 0 (exact) loses 1-4% (the branch costs more than the rescales it skips); head_dim 64 loses with both
#: (2026-12-03: threshold 0 -2% at S = 1024).  Threshold 0 at head_dim 256, whose rescale touches twice the O
#: registers: +0.7-0.9% at (4, 16, 4096, 256) causal and not (H200, 2026-12-03, helper i16r, BENCHMARKS.md)
DEFAULT_RESCALE_THRESHOLD = {64: -1.0, 128: -1.0, 256: 0.0}
#: whether O is stored from registers (``DIRECT_STORE``) rather than through a shared-memory staging buffer and TMA
#: stores, per head_dim (fixed-length problems; variable-length ones and head_dim 256 always store directly)
DEFAULT_DIRECT_STORE = {64: False, 128: False, 256: True}
#: whether O is staged for its TMA stores in the work tile's Q stage (``O_IN_Q``) rather than a buffer of its own, per
#: head_dim (where O is not stored from registers)
DEFAULT_O_IN_Q = {64: False, 128: False, 256: False}
#: long key sequences: per head_dim, from which ``seqlen_k`` on a fixed-length problem without a sliding window
#: whose tile options are all left to the defaults runs other KV tiles: (from seqlen_k, KV tile rows, ring stages),
#: with O staged in the tile's Q stage (the room the 160-key tiles need).  H200, 2026-12-02 (BENCHMARKS.md, helper
#: i16s, 15 repetitions, noise ~0.3%): 160-key tiles with O in Q vs the 128-key default gain 4.9% / 1.8% at
#: (1, 16, 16384, 128) causal / non-causal and 3.4% / 0% at (2, 16, 8192, 128), are even at S = 4096 (-0.2-+1%) and
#: lose 1-2% at S = 2048 and 6-8% at S = 1024
LONG_KV_CONFIG = {128: (8192, 160, 2)}
#: the same without a causal mask: (from seqlen_k, KV tile rows, ring stages, Q stages), O staged in Q.  176-key
#: tiles (FlashAttention-3's non-causal head_dim-128 tile) fit with one Q stage: H200, 2026-12-02 (helper i16a)
#: 625 / 627 vs 615 / 616 TFLOP/s (the 160-key default) at (2, 16, 8192, 128), cuDNN 610 / 612; 622 / 615 vs 609 /
#: 605 in a second job (cuDNN 603 / 605)
LONG_KV_FULL_CONFIG = {128: (8192, 176, 2, 1)}
#: consumer warpgroups per head_dim (64 Q rows each; 3 fits the registers of head_dim 64 only)
DEFAULT_WARPGROUPS = {64: 3, 128: 2, 256: 2}


def default_kv_tiles(head_dim: int, seqlen_k: int, long_eligible: bool, causal: bool = True) -> tuple:
    """The default (KV tile rows, ring stages, O staged in Q, Q stages) of a problem: ``LONG_KV_CONFIG`` (causal)
    or ``LONG_KV_FULL_CONFIG`` (no mask) where the head_dim has an entry, ``long_eligible`` (a fixed-length problem
    without a sliding window, none of block_n, stages, q_stages, o_in_q and direct_store given) and ``seqlen_k``
    reaches its threshold; else ``DEFAULT_CONFIG``, ``DEFAULT_O_IN_Q`` and ``DEFAULT_Q_STAGES`` (head_dim 64, 128
    or 256; host Python)."""
    if long_eligible and not causal and head_dim in LONG_KV_FULL_CONFIG \
            and seqlen_k >= LONG_KV_FULL_CONFIG[head_dim][0]:
        _, block_n, stages, q_stages = LONG_KV_FULL_CONFIG[head_dim]
        return block_n, stages, True, q_stages
    if long_eligible and head_dim in LONG_KV_CONFIG and seqlen_k >= LONG_KV_CONFIG[head_dim][0]:
        return LONG_KV_CONFIG[head_dim][1], LONG_KV_CONFIG[head_dim][2], True, DEFAULT_Q_STAGES[head_dim]
    return DEFAULT_CONFIG[head_dim] + (DEFAULT_O_IN_Q[head_dim], DEFAULT_Q_STAGES[head_dim])


def box_columns(dtype, head_dim: int) -> int:
    """Elements per row of one swizzled TMA box of Q, K or V (one wgmma K-major tile row): 128 bytes (64 16-bit
    or 128 8-bit elements), or the whole head_dim where it is shorter (fp8 head_dim 64: 64 bytes)."""
    return min(128 // dtype.itemsize, head_dim)


def box_swizzle(dtype, head_dim: int) -> str:
    """The swizzle of those boxes (and of their wgmma descriptors): the span of one box row, 128B or 64B."""
    return f"{box_columns(dtype, head_dim) * dtype.itemsize}B"


def threads(warpgroups: int = CONSUMER_WARPGROUPS) -> int:
    """Threads per CTA: the load warpgroup and ``warpgroups`` consumer warpgroups."""
    return 128 * (1 + warpgroups)


__all__ = ["CONSUMER_WARPGROUPS", "THREADS", "BOX", "HEAD_DIMS", "LOG2_E", "PRODUCER_REGISTERS", "CONSUMER_REGISTERS",
           "PINGPONG_BARRIER", "REGISTERS", "TURN_BARRIERS", "DEFAULT_CONFIG", "BLOCK_NS", "DEFAULT_Q_STAGES",
           "DEFAULT_OVERLAP", "DEFAULT_PINGPONG", "DEFAULT_RESCALE_THRESHOLD", "DEFAULT_WARPGROUPS",
           "DEFAULT_DIRECT_STORE", "DEFAULT_O_IN_Q", "LONG_KV_CONFIG", "LONG_KV_FULL_CONFIG", "default_kv_tiles", "threads", "box_columns", "box_swizzle"]
