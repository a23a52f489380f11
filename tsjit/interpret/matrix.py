"""Warp-collective 8x8 matrix loads and stores (``ldmatrix`` / ``stmatrix``, ``.m8n8.b16``) for the
CPU interpreter.

``ldmatrix.sync.aligned.m8n8.x{1,2,4}{.trans}.shared.b16 d, [addr]`` and ``stmatrix`` move ``num``
8x8 matrices of 16-bit elements between shared memory and the registers of one warp (PTX ISA
§9.7.14.5.15 "ldmatrix", §9.7.14.5.16 "stmatrix"):

* Lanes ``8j .. 8j + 7`` give the addresses of rows ``0 .. 7`` of matrix ``j`` (each row 16
  contiguous bytes, 16-byte aligned); the addresses of lanes ``>= 8 * num`` are not used.
* Register ``j`` of lane ``l`` holds two elements of matrix ``j``, the first in bits 0-15: row
  ``l // 4``, columns ``2 * (l % 4)`` and ``+ 1``; with ``.trans``, column ``l // 4`` of rows
  ``2 * (l % 4)`` and ``+ 1`` (the matrix is transposed on the way).

The functions take all 32 lanes at once (the instruction is ``.sync.aligned``).
"""
from __future__ import annotations

import numpy as np

from tsjit.errors import InterpretError

WARP = 32
ROW_BYTES = 16
MATRIX_COUNTS = (1, 2, 4)


def _rows(smem: np.ndarray, addresses, num: int, what: str) -> np.ndarray:
    """Byte indices ``(num, 8, 16)`` of the rows the lanes address, checked."""
    if num not in MATRIX_COUNTS:
        raise InterpretError(f"{what}: .x{num} does not exist; the count is 1, 2 or 4")
    addresses = np.asarray(addresses, dtype=np.int64).reshape(-1)
    if addresses.size != WARP:
        raise InterpretError(f"{what}: needs the addresses of all {WARP} lanes, got {addresses.size}")
    used = addresses[:8 * num]
    bad = np.nonzero(used % ROW_BYTES)[0]
    if bad.size:
        lane = int(bad[0])
        raise InterpretError(f"{what}: lane {lane} gives shared-memory address {int(used[lane])}, which is not "
                             f"16-byte aligned (each matrix row is 16 contiguous bytes)")
    outside = np.nonzero((used < 0) | (used + ROW_BYTES > smem.size))[0]
    if outside.size:
        lane = int(outside[0])
        raise InterpretError(f"{what}: lane {lane} gives row address {int(used[lane])}, outside the CTA's "
                             f"{smem.size} bytes of shared memory")
    return used.reshape(num, 8)[:, :, None] + np.arange(ROW_BYTES)


def _lane_elements(trans: bool):
    """(row, col) index arrays ``(32, 2)``: the two elements of a register of each lane."""
    lane = np.arange(WARP)[:, None]
    pair = np.arange(2)[None, :]
    if trans:
        return 2 * (lane % 4) + pair, np.broadcast_to(lane // 4, (WARP, 2))
    return np.broadcast_to(lane // 4, (WARP, 2)), 2 * (lane % 4) + pair


def ldmatrix(smem: np.ndarray, addresses, num: int, trans: bool) -> np.ndarray:
    """Registers ``(32, num)`` uint32 that ``ldmatrix.m8n8.x{num}{.trans}.b16`` gives each lane.

    Args:
        smem: the CTA's uint8 shared-memory window.
        addresses: ``(32,)`` row addresses (byte offsets), one per lane.
        num: 1, 2 or 4 matrices.
        trans: ``.trans``.

    Raises:
        InterpretError: a used address not 16-byte aligned or outside shared memory, or a bad count.
    """
    index = _rows(smem, addresses, num, "ldmatrix")
    matrices = np.ascontiguousarray(smem[index]).view("<u2")                 # (num, 8 rows, 8 columns)
    rows, cols = _lane_elements(trans)
    pairs = matrices[:, rows, cols].astype(np.uint32)                       # (num, 32, 2)
    return (pairs[..., 0] | (pairs[..., 1] << np.uint32(16))).T.copy()


def stmatrix(smem: np.ndarray, addresses, values, num: int, trans: bool) -> None:
    """Write what ``stmatrix.m8n8.x{num}{.trans}.b16`` stores: ``values`` ``(32, num)`` uint32 (each
    lane's registers) into the rows the lanes address.

    Raises:
        InterpretError: as :func:`ldmatrix`, or ``values`` of the wrong shape.
    """
    index = _rows(smem, addresses, num, "stmatrix")
    registers = np.asarray(values, dtype=np.uint64).astype(np.uint32)
    if registers.shape != (WARP, num):
        raise InterpretError(f"stmatrix: needs (32 lanes, {num} registers), got shape {registers.shape}")
    matrices = np.empty((num, 8, 8), dtype=np.uint16)
    rows, cols = _lane_elements(trans)
    halves = np.stack([registers & 0xFFFF, registers >> 16], axis=-1).astype(np.uint16)   # (32, num, 2)
    matrices[:, rows, cols] = halves.transpose(1, 0, 2)
    smem[index] = matrices.view(np.uint8).reshape(num, 8, ROW_BYTES)


__all__ = ["ldmatrix", "stmatrix"]
