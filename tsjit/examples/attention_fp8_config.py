"""The launch defaults of the fp8 e4m3 attention forward (:mod:`tsjit.examples.attention_fp8`): tile sizes, ring
depths, conditional rescaling, FMA-pipe exponentials, row sums in the PV wgmma and stale row maxima per head_dim,
each with the H200 measurement it rests on (BENCHMARKS.md).  Plain Python, no kernel code."""
from __future__ import annotations

HEAD_DIMS = (64, 128, 256)
#: KV tile rows the fp8 kernel supports: V^T rows are loaded as boxes of 128 keys (128B swizzle) or, where BLOCK_N
#: is not a multiple of 128, of 64 keys (64B swizzle) or 32 (32B swizzle: 224, FlashAttention-3's fp8 tile at head_dim
#: 128, seven boxes)
BLOCK_NS = (64, 128, 160, 192, 224, 256)
#: default (BLOCK_N, stages of the K and V rings) per head_dim (H200, BENCHMARKS.md: at head_dim 128 224-key tiles
#: with 2 stages and conditional rescaling are 1.196x / 1.236x our bf16 forward at (4, 16, 4096, 128) / (2, 16, 8192,
#: 128) (2026-12-02, helper i16b, two runs), 192 x 3 1.18 / 1.21x, 128-key tiles 1.09-1.12x; head_dim 64 is fastest
#: with 256-key tiles); under a causal mask 192-key tiles spill 16 bytes (the mask) and 128 x 2, 3 or 4 stages are
#: within 1%, so causal problems take CAUSAL_CONFIG
DEFAULT_CONFIG = {64: (256, 2), 128: (224, 2), 256: (64, 2)}
CAUSAL_CONFIG = {64: (256, 2), 128: (128, 2), 256: (64, 2)}


#: of every 16 exponentials of P, how many the fp8 forward computes on the FMA pipe
#: (:func:`~tsjit.examples.attention_softmax.exp2_polynomial`) rather than the MUFU unit, per head_dim, without /
#: with a causal mask (H200, 2026-12-02, BENCHMARKS.md: 3 of 16 at head_dim 128 non-causal is 1.056x / 1.048x the
#: MUFU-only kernel at (4, 16, 4096, 128) / (2, 16, 8192, 128), 2 and 4 gain less; causal 0.99x, so off there;
#: head_dim 64 and 256 were not measured)
DEFAULT_EXP2_POLYNOMIAL = {64: 0, 128: 3, 256: 0}
CAUSAL_EXP2_POLYNOMIAL = {64: 0, 128: 0, 256: 0}
#: conditional rescaling per head_dim (``RESCALE_THRESHOLD``; -1: O rescaled after every KV tile), without / with a
#: causal mask or window (H200, 2026-12-02: threshold 8 with 224-key tiles is the fastest configuration at head_dim
#: 128 without a mask; causal it loses 2-3%; P stays below 2**8, within e4m3's range, and is rounded to 3 bits anyway)
DEFAULT_RESCALE_THRESHOLD = {64: -1.0, 128: 8.0, 256: -1.0}
CAUSAL_RESCALE_THRESHOLD = {64: -1.0, 128: -1.0, 256: -1.0}


def default_rescale_threshold(head_dim: int, masked: bool) -> float:
    """The ``RESCALE_THRESHOLD`` the fp8 forward launches by default for ``head_dim`` (``masked``: a causal mask or a
    sliding window)."""
    return (CAUSAL_RESCALE_THRESHOLD if masked else DEFAULT_RESCALE_THRESHOLD)[head_dim]


#: of every 16 exponentials, how many the launch with stale row maxima (``STALE_MAXIMA``) computes on the FMA pipe,
#: per head_dim (H200, 2026-12-03, BENCHMARKS.md: 4 is 1.4% / 2.2% faster than 3 at (4, 16, 4096) / (2, 16, 8192))
STALE_EXP2_POLYNOMIAL = {128: 4}


def default_exp2_polynomial(head_dim: int, masked: bool, stale: bool = False) -> int:
    """The ``EXP2_POLYNOMIAL`` the fp8 forward launches by default for ``head_dim``, with ``masked`` a causal mask or a
    sliding window (measured unmasked only, so a mask takes :data:`CAUSAL_EXP2_POLYNOMIAL`); ``stale``: with
    ``STALE_MAXIMA`` (:data:`STALE_EXP2_POLYNOMIAL`)."""
    if stale and head_dim in STALE_EXP2_POLYNOMIAL:
        return STALE_EXP2_POLYNOMIAL[head_dim]
    return (CAUSAL_EXP2_POLYNOMIAL if masked else DEFAULT_EXP2_POLYNOMIAL)[head_dim]


#: whether a launch that stores no LSE has the PV wgmma sum P (``MMA_ROW_SUMS``: a ones row below V^T, so the softmax
#: drops its row-sum FADDs), per head_dim, without / with a causal mask or window; such launches take
#: ROW_SUMS_CONFIG / CAUSAL_ROW_SUMS_CONFIG tiles (the 8 more accumulator registers per thread do not fit 224-key
#: tiles: ptxas spills and serializes the wgmmas) and ROW_SUMS_EXP2_DEGREE.  A launch that stores the LSE sums the
#: fp32 P as before: the sums of the e4m3 P put the LSE up to ~1e-2 off (interpreter), the output is as accurate.
DEFAULT_MMA_ROW_SUMS = {64: False, 128: True, 256: False}
CAUSAL_MMA_ROW_SUMS = {64: False, 128: True, 256: False}
ROW_SUMS_CONFIG = {128: (160, 3)}
CAUSAL_ROW_SUMS_CONFIG = {128: (192, 3)}
#: whether the launch with row sums in the PV wgmma (no LSE) runs its softmax against the stale row maxima
#: (``STALE_MAXIMA``), per head_dim, without / with a causal mask or window: its S, packed P, O and the P in flight
#: fit 160-key tiles (192 spill 132 bytes; with the mask 160 spill 40, 128 fit)
ROW_SUMS_STALE_MAXIMA = {128: True}
CAUSAL_ROW_SUMS_STALE_MAXIMA = {128: False}
#: the polynomial degree of the FMA-pipe exponentials (``EXP2_DEGREE``), without / with row sums in the PV wgmma
EXP2_DEGREE = 3
ROW_SUMS_EXP2_DEGREE = 2


def default_mma_row_sums(head_dim: int, masked: bool, store_lse: bool = True) -> bool:
    """Whether the fp8 forward launches with ``MMA_ROW_SUMS`` by default: never where it stores the LSE, else per
    :data:`DEFAULT_MMA_ROW_SUMS` (``masked``: a causal mask or window, :data:`CAUSAL_MMA_ROW_SUMS`).  A caller that
    chooses the tile (block_n / stages) passes False itself."""
    return not store_lse and (CAUSAL_MMA_ROW_SUMS if masked else DEFAULT_MMA_ROW_SUMS)[head_dim]


def default_exp2_degree(head_dim: int, masked: bool, row_sums: bool = False) -> int:
    """The ``EXP2_DEGREE`` the fp8 forward launches by default (``row_sums``: with ``MMA_ROW_SUMS``)."""
    return ROW_SUMS_EXP2_DEGREE if row_sums else EXP2_DEGREE


def default_stale_maxima(head_dim: int, row_sums: bool, masked: bool = False) -> bool:
    """Whether the fp8 forward launches with ``STALE_MAXIMA`` by default: with ``MMA_ROW_SUMS`` (``row_sums``, where
    no LSE is stored) per :data:`ROW_SUMS_STALE_MAXIMA` (``masked``: a causal mask or window,
    :data:`CAUSAL_ROW_SUMS_STALE_MAXIMA`)."""
    return row_sums and (CAUSAL_ROW_SUMS_STALE_MAXIMA if masked else ROW_SUMS_STALE_MAXIMA).get(head_dim, False)


def default_config(head_dim: int, causal: bool, row_sums: bool = False) -> tuple[int, int]:
    """(BLOCK_N, stages) the fp8 forward launches by default for ``head_dim`` (causal or not; ``row_sums``: with
    ``MMA_ROW_SUMS``)."""
    if row_sums:
        return (CAUSAL_ROW_SUMS_CONFIG if causal else ROW_SUMS_CONFIG)[head_dim]
    return (CAUSAL_CONFIG if causal else DEFAULT_CONFIG)[head_dim]


__all__ = ["HEAD_DIMS", "BLOCK_NS", "DEFAULT_CONFIG", "CAUSAL_CONFIG", "DEFAULT_EXP2_POLYNOMIAL",
           "CAUSAL_EXP2_POLYNOMIAL", "DEFAULT_RESCALE_THRESHOLD", "CAUSAL_RESCALE_THRESHOLD",
           "default_rescale_threshold", "STALE_EXP2_POLYNOMIAL", "default_exp2_polynomial", "DEFAULT_MMA_ROW_SUMS",
           "CAUSAL_MMA_ROW_SUMS", "ROW_SUMS_CONFIG", "CAUSAL_ROW_SUMS_CONFIG", "ROW_SUMS_STALE_MAXIMA",
           "CAUSAL_ROW_SUMS_STALE_MAXIMA", "EXP2_DEGREE", "ROW_SUMS_EXP2_DEGREE", "default_mma_row_sums",
           "default_exp2_degree", "default_stale_maxima", "default_config"]
