"""The shared-memory swizzle patterns of TMA and wgmma, as byte-address permutations.

A swizzle of span ``S`` bytes (32, 64 or 128) permutes the 16-byte chunks of shared memory: the
chunk bits of a byte address (bits 4 .. 3 + log2(S/16)) are XORed with the bits just above the
128-byte line (bits 7 ..)::

    physical = address ^ (((address >> 7) & (S // 16 - 1)) << 4)

(CuTe ``Swizzle<3,4,3>`` for 128B, ``Swizzle<2,4,3>`` for 64B, ``Swizzle<1,4,3>`` for 32B.)  The
pattern repeats every ``8 * S`` bytes (1024 / 512 / 256: PTX ISA §9.7.15.5.1.2.2, "Starting address
of repeating pattern") and is a function of the **absolute** shared-memory address, not of the
offset into a tile: a tile that starts on a pattern boundary sees row ``r`` (``S`` bytes long)
with its chunk ``c`` at chunk ``c ^ (r % 8)`` (128B).  Measured on the H200 for 128B TMA loads
(``shared/reference/wgmma_sw128.md`` §3: byte-exact smem image); the same XOR is what the wgmma
descriptor's swizzle mode undoes (§4 there) and what ``stmatrix`` epilogues write
(:func:`tsjit.lang.epilogue.stmatrix_row_offset`).  The permutation is an involution: applying
it twice gives the address back.
"""
from __future__ import annotations

import numpy as np

from tsjit.abi import TMA_SWIZZLE_BYTES

SWIZZLE_SPANS = TMA_SWIZZLE_BYTES          # name -> span in bytes ("none" -> 0)
CHUNK_BYTES = 16                           # the unit the swizzle moves


def pattern_bytes(swizzle: str) -> int:
    """Bytes after which the ``swizzle`` pattern repeats: ``8 * span`` (0 for ``"none"``)."""
    return 8 * SWIZZLE_SPANS[swizzle]


def swizzle_addresses(addresses, swizzle: str) -> np.ndarray:
    """The physical shared-memory byte addresses of logical (unswizzled) byte ``addresses``.

    Args:
        addresses: absolute shared-memory byte addresses (int array or int; the CTA's shared
            window offsets), any shape.
        swizzle: ``"none"``, ``"32B"``, ``"64B"`` or ``"128B"``.

    Returns:
        An int64 array of the same shape (a permutation within every ``8 * span``-byte block).
    """
    span = SWIZZLE_SPANS[swizzle]
    a = np.asarray(addresses, dtype=np.int64)
    if not span:
        return a
    mask = span // CHUNK_BYTES - 1
    return a ^ (((a >> 7) & mask) << 4)


__all__ = ["SWIZZLE_SPANS", "CHUNK_BYTES", "pattern_bytes", "swizzle_addresses"]
