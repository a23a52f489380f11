"""TMA tiled copies (``cp.async.bulk.tensor``) of ranks 1 to 5, byte for byte, for the CPU interpreter.

The functions take the validated :class:`~tsjit.runtime.tensormap.TensorMapLayout` that tsjit's
host side builds (the ``cuTensorMapEncodeTiled`` arguments, innermost dimension first) and
coordinates **innermost first**, as the PTX instruction's ``{c0, c1, ...}`` operand.  They move
data; the interpreter's core applies the writes to the destination CTAs, completes the
transaction bytes on their mbarriers and keeps the bulk async-groups.

A **load** (:func:`load_box`) visits ``ceil(box[i] / element_strides[i])`` elements per dimension,
at ``coords[i] + j * element_strides[i]``, and packs them in C order (innermost dimension fastest)
from the destination address on.  Elements outside the array (any coordinate ``< 0`` or
``>= dims[i]``) are filled: zero, or with ``oob_fill="nan"`` (``NAN_REQUEST_ZERO_FMA``) the
canonical NaN of the float type (all-ones payload, positive).  Out-of-bounds elements still count
toward the transaction bytes (``layout.box_bytes``).  The packed image is then swizzled 16-byte
chunk by chunk with the bits of its shared-memory address (:mod:`tsjit.interpret.swizzle`).

A **store** (:func:`store_box`) reads the packed box back through the same swizzle and writes the
elements inside the array; rows are clipped in the innermost dimension in 16-byte granules (the
rest of the granule holding a row's last in-bounds element is written too: measured on the H200,
see :func:`tsjit.lang.tma.tma_store`).  With ``reduce`` it combines with the global values
(``cp.reduce.async.bulk.tensor`` ``.add`` / ``.min`` / ``.max``).

Rules the hardware enforces and the interpreter raises :class:`~tsjit.errors.InterpretError` for:
a shared-memory address that is not 128-byte aligned (PTX ISA), an innermost coordinate whose byte
offset is not a multiple of 16 (loads and stores; ``CUDA_ERROR_ILLEGAL_INSTRUCTION`` on the H200,
measured 2026-12-01), and for stores any negative coordinate (same measurement).

Sources: PTX ISA 8.x §9.7.9.25 "cp.async.bulk.tensor" and §9.7.9.26 "cp.reduce.async.bulk.tensor";
CUDA Driver API ``cuTensorMapEncodeTiled`` (boxDim, elementStrides, oobFill, swizzle); the H200
measurements in ``BENCHMARKS.md`` ("TMA rules measured on this H200").
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tsjit.errors import InterpretError
from tsjit.interpret import numerics
from tsjit.interpret.swizzle import SWIZZLE_SPANS, CHUNK_BYTES, swizzle_addresses
from tsjit.runtime.tensormap import TensorMapLayout, traversed_box

SMEM_ALIGN = 128            # bytes: the shared-memory operand of cp.async.bulk.tensor (PTX ISA)
START_GRANULE = 16          # bytes: the innermost start of a copy and the store's clipping unit
INT32_RANGE = range(-2 ** 31, 2 ** 31)
UNSIGNED = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
# The NaN fill per element size: the H200 writes the 16-bit pattern 0x7FF7 into every half-word of an
# out-of-bounds element (bf16/f16 0x7FF7, f32 0x7FF77FF7), measured 2026-12-01 by
# tests/gpu/test_interpret_tensor_gpu.py (nan-fill-f32 / -f16-128B / -bf16); 8 bytes by the same rule.
NAN_BITS = {2: 0x7FF7, 4: 0x7FF7_7FF7, 8: 0x7FF7_7FF7_7FF7_7FF7}
REDUCTIONS = ("add", "min", "max")


@dataclass(frozen=True)
class SmemImage:
    """What one TMA load writes into a CTA's shared memory.

    Attributes:
        chunks: int64 ``(n,)``, the 16-byte chunk index (byte address // 16) of each chunk written.
        data: uint8 ``(n, 16)``, the bytes of each chunk.
        tx_bytes: the transaction bytes the copy completes on the destination mbarrier
            (``layout.box_bytes``, out-of-bounds elements included).
    """

    chunks: np.ndarray
    data: np.ndarray
    tx_bytes: int

    def byte_range(self) -> tuple[int, int]:
        """``[start, end)`` of the shared-memory bytes written (the swizzle permutes chunks only
        within 128-byte lines, so this is the box's lines)."""
        return int(self.chunks.min()) * CHUNK_BYTES, (int(self.chunks.max()) + 1) * CHUNK_BYTES

    def write_into(self, smem: np.ndarray) -> None:
        """Store the chunks into ``smem`` (a CTA's uint8 shared-memory window).

        Raises:
            InterpretError: the image does not fit in the window.
        """
        start, end = self.byte_range()
        if end > smem.size:
            raise InterpretError(f"TMA load writes shared-memory bytes [{start}, {end}) but the CTA has only "
                                 f"{smem.size} bytes of dynamic shared memory; allocate the tile inside it")
        if smem.size % CHUNK_BYTES == 0:
            smem.reshape(-1, CHUNK_BYTES)[self.chunks] = self.data
        else:
            smem[(self.chunks[:, None] * CHUNK_BYTES + np.arange(CHUNK_BYTES)).ravel()] = self.data.ravel()


def check_layout(layout: TensorMapLayout) -> None:
    """Refuse layouts the interpreter does not model: interleaved tensor maps
    (``interleave="16B"``/``"32B"``, the NC/8HWC8 image layouts).

    Raises:
        InterpretError: naming the field.
    """
    if layout.interleave != "none":
        raise InterpretError(f"the TMA interpreter does not model interleave={layout.interleave!r} tensor maps; "
                             f"use interleave='none' (or run this kernel on the GPU)")


def _check_coords(layout: TensorMapLayout, coords, what: str, *, store: bool) -> tuple[int, ...]:
    coords = tuple(int(c) for c in coords)
    if len(coords) != layout.rank:
        raise InterpretError(f"{what}: the tensor map has rank {layout.rank} but {len(coords)} coordinates were "
                             f"given; give one per dimension")
    for axis, c in enumerate(coords):
        if c not in INT32_RANGE:
            raise InterpretError(f"{what}: coordinate {axis} (innermost first) is {c}, outside signed 32 bits")
        if store and c < 0:
            raise InterpretError(f"{what}: coordinate {axis} (innermost first) is {c}; a TMA store's box must start "
                                 f"inside the array (the H200 raises CUDA_ERROR_ILLEGAL_INSTRUCTION): store the "
                                 f"part of the tile that lies inside, or shift the box")
    inner_bytes = coords[0] * layout.dtype.itemsize
    if inner_bytes % START_GRANULE:
        step = max(1, START_GRANULE // layout.dtype.itemsize)
        raise InterpretError(f"{what}: the innermost coordinate {coords[0]} starts {inner_bytes} bytes into a row of "
                             f"{layout.dtype.name}; it must be a multiple of {START_GRANULE} bytes ({step} elements; "
                             f"the H200 raises CUDA_ERROR_ILLEGAL_INSTRUCTION)")
    return coords


def _check_smem_offset(offset: int, what: str) -> None:
    if offset < 0 or offset % SMEM_ALIGN:
        raise InterpretError(f"{what}: the shared-memory address {offset} is not {SMEM_ALIGN}-byte aligned (PTX ISA "
                             f"cp.async.bulk.tensor); align the tile (tsjit.shared_array(..., align=1024))")


def _box_grid(layout: TensorMapLayout, coords):
    """(byte offset from ``global_address``, per-dimension index arrays) of every element the box
    visits, as arrays of the packed tile's shape (outermost first)."""
    steps = layout.element_strides
    extents = traversed_box(layout.box_dims, steps)           # innermost first
    rank = layout.rank
    strides = (layout.dtype.itemsize,) + tuple(layout.global_strides)
    offsets = np.zeros((1,) * rank, dtype=np.int64)
    indices = []
    for axis in range(rank):
        shape = [1] * rank
        shape[rank - 1 - axis] = extents[axis]
        g = (coords[axis] + np.arange(extents[axis], dtype=np.int64) * steps[axis]).reshape(shape)
        offsets = offsets + g * strides[axis]
        indices.append(g)
    tile_shape = tuple(reversed(extents))
    return np.broadcast_to(offsets, tile_shape), [np.broadcast_to(g, tile_shape) for g in indices]


def _global_bytes(offsets: np.ndarray, itemsize: int) -> np.ndarray:
    """Byte offsets ``(n * itemsize,)`` of the elements at element offsets ``offsets`` ``(n,)``."""
    return (offsets[:, None] + np.arange(itemsize)).ravel()


def _smem_chunks(smem_offset: int, nbytes: int, swizzle: str, row_bytes: int) -> np.ndarray:
    """Physical chunk indices of the ``nbytes // 16`` chunks of a packed box image whose innermost rows
    are ``row_bytes`` long.  Under a swizzle, each row starts at a multiple of the swizzle span even
    when it is narrower: measured on the H200 (tests/gpu/test_interpret_tensor_gpu.py, 2026-12-01), a
    32B-swizzled box of 16-byte rows puts row r at bytes [32 r, 32 r + 16) before the XOR, leaving the
    other half of each span unwritten, so its image is span / row_bytes times the box."""
    per_row = max(1, row_bytes // CHUNK_BYTES)
    pitch = max(row_bytes, SWIZZLE_SPANS.get(swizzle, 0))
    k = np.arange(nbytes // CHUNK_BYTES, dtype=np.int64)
    logical = smem_offset + (k // per_row) * pitch + (k % per_row) * CHUNK_BYTES
    return swizzle_addresses(logical, swizzle) // CHUNK_BYTES


def load_box(layout: TensorMapLayout, coords, gmem, smem_offset: int) -> SmemImage:
    """The shared-memory image one TMA tiled load writes (``cp.async.bulk.tensor.Nd.shared::cluster
    .global.tile``), for every destination CTA of a multicast alike.

    Args:
        layout: the tensor map (``TensorMapLayout``, innermost first).
        coords: the box's first element, innermost first, signed 32-bit element indices (may be
            negative or past the end: those elements are filled).
        gmem: the interpreter's global memory (``gmem.check(address, nbytes, what)`` returns the
            allocation holding the range, with ``.base`` and a uint8 ``.data``).
        smem_offset: the destination's byte offset in the CTA's shared-memory window (128-aligned).

    Returns:
        The :class:`SmemImage` (chunks + bytes, ``tx_bytes = layout.box_bytes``).

    Raises:
        InterpretError: a misaligned destination or innermost coordinate, a wrong coordinate
            count, an interleaved layout, or in-bounds elements outside the array's allocation.
    """
    what = "TMA load"
    check_layout(layout)
    coords = _check_coords(layout, coords, what, store=False)
    _check_smem_offset(smem_offset, what)
    itemsize = layout.dtype.itemsize
    offsets, indices = _box_grid(layout, coords)
    inside = np.ones(offsets.shape, dtype=bool)
    for axis, g in enumerate(indices):
        inside &= (g >= 0) & (g < layout.global_dims[axis])
    fill = NAN_BITS[itemsize] if layout.oob_fill == "nan" else 0
    tile = np.full(offsets.size, fill, dtype=UNSIGNED[itemsize]).view(np.uint8).reshape(-1, itemsize)
    flat_inside = inside.ravel()
    if flat_inside.any():
        wanted = offsets.ravel()[flat_inside]
        low, high = int(wanted.min()), int(wanted.max()) + itemsize
        allocation = gmem.check(layout.global_address + low, high - low, f"{what} of the {layout.dtype.name} box")
        start = layout.global_address + low - allocation.base
        tile[flat_inside] = allocation.data[start + _global_bytes(wanted - low, itemsize)].reshape(-1, itemsize)
    data = tile.reshape(-1, CHUNK_BYTES)
    row_bytes = offsets.shape[-1] * itemsize
    return SmemImage(_smem_chunks(smem_offset, data.size, layout.swizzle, row_bytes), data, layout.box_bytes)


def _reduce(old: np.ndarray, new: np.ndarray, dtype, op: str) -> np.ndarray:
    """``op`` of the stored elements (storage bits of ``dtype``, as unsigned ints) and the box's."""
    storage = UNSIGNED[dtype.itemsize]
    if dtype.is_float:
        if dtype.name == "Float64":
            a, b = old.view(np.float64), new.view(np.float64)
            return {"add": a + b, "min": np.fmin(a, b), "max": np.fmax(a, b)}[op].view(storage)
        a, b = numerics.decode(old, dtype).astype(np.float64), numerics.decode(new, dtype).astype(np.float64)
        combined = {"add": a + b, "min": np.fmin(a, b), "max": np.fmax(a, b)}[op]
        return numerics.encode(combined, dtype).view(storage)
    if dtype.is_int:
        typed = np.dtype(dtype.numpy_name)
        a, b = old.view(typed), new.view(typed)
        with np.errstate(over="ignore"):
            combined = {"add": a + b, "min": np.minimum(a, b), "max": np.maximum(a, b)}[op]
        return combined.astype(typed).view(storage)
    raise InterpretError(f"TMA reduce-{op} store: {dtype.name} elements have no {op}")


@dataclass(frozen=True)
class PendingStore:
    """A TMA store whose shared-memory source has been read (at issue) and whose global writes
    are still to be made visible (the ``cp.async.bulk.wait_group`` that completes its bulk group).

    Attributes:
        source: ``[start, end)`` of the shared-memory bytes the store read (what
            ``wait_group.read`` releases: a generic write there before it is a race).
        allocation: the global allocation written (``.base``, ``.data``, ``.name``).
        where: int64 byte indices into ``allocation.data``; values: uint8 bytes, same length.
        reduce: None, ``"add"``, ``"min"`` or ``"max"``; dtype: the element type.
    """

    source: tuple
    allocation: object
    where: np.ndarray
    values: np.ndarray
    reduce: str | None
    dtype: object

    def write(self) -> None:
        """Make the store's writes (or reductions, combined with the global values now) visible."""
        if self.where.size == 0:
            return
        values = self.values
        if self.reduce is not None:
            storage = UNSIGNED[self.dtype.itemsize]
            old = self.allocation.data[self.where].view(storage)
            values = _reduce(old, values.view(storage), self.dtype, self.reduce).view(np.uint8)
        self.allocation.data[self.where] = values


def prepare_store(layout: TensorMapLayout, coords, gmem, smem: np.ndarray, smem_offset: int,
                  reduce: str | None = None) -> PendingStore:
    """Issue one TMA tiled store (``cp.async.bulk.tensor.Nd.global.shared::cta.tile.bulk_group``)
    or reduce store (``cp.reduce.async.bulk.tensor``): read the packed, swizzled box from ``smem``
    at ``smem_offset`` now, and return the global writes of the elements inside the array, to be
    made visible by :meth:`PendingStore.write` when the bulk group completes (PTX ISA §9.7.9.27:
    the source may be reused after ``wait_group.read``, the writes are complete after
    ``wait_group``).

    Args:
        layout: the tensor map.
        coords: the box's first element, innermost first, each >= 0.
        gmem: the interpreter's global memory (see :func:`load_box`).
        smem: the source CTA's uint8 shared-memory window.
        smem_offset: the source tile's byte offset (128-aligned).
        reduce: None (plain store), ``"add"``, ``"min"`` or ``"max"``.

    Clipping: outer dimensions exactly; the innermost dimension up to the end of the 16-byte
    granule holding the row's last in-bounds element (module docstring).

    Raises:
        InterpretError: a negative coordinate, a misaligned innermost coordinate or source, a
            source outside shared memory, an unknown ``reduce``, or a write outside the array's
            allocation.
    """
    what = "TMA reduce-" + reduce + " store" if reduce else "TMA store"
    if reduce is not None and reduce not in REDUCTIONS:
        raise InterpretError(f"{what}: reduce must be one of {REDUCTIONS} or None")
    check_layout(layout)
    coords = _check_coords(layout, coords, what, store=True)
    _check_smem_offset(smem_offset, what)
    itemsize = layout.dtype.itemsize
    nbytes = layout.box_bytes
    chunks = _smem_chunks(smem_offset, nbytes, layout.swizzle, layout.box_dims[0] * itemsize)
    source = (int(chunks.min()) * CHUNK_BYTES, (int(chunks.max()) + 1) * CHUNK_BYTES)
    if source[1] > smem.size:
        raise InterpretError(f"{what}: the source [{smem_offset}, {smem_offset + nbytes}) lies outside the CTA's "
                             f"{smem.size} bytes of shared memory")
    tile = smem[(chunks[:, None] * CHUNK_BYTES + np.arange(CHUNK_BYTES)).ravel()].reshape(-1, itemsize)
    offsets, indices = _box_grid(layout, coords)
    row_end = -(-layout.global_dims[0] * itemsize // START_GRANULE) * START_GRANULE   # granule-rounded row
    written = indices[0] * itemsize < row_end
    for axis, g in enumerate(indices[1:], start=1):
        written &= g < layout.global_dims[axis]
    flat = written.ravel()
    if not flat.any():
        return PendingStore(source, None, np.zeros(0, np.int64), np.zeros(0, np.uint8), reduce, layout.dtype)
    targets = offsets.ravel()[flat]
    low, high = int(targets.min()), int(targets.max()) + itemsize
    allocation = gmem.check(layout.global_address + low, high - low, f"{what} of the {layout.dtype.name} box")
    where = layout.global_address + low - allocation.base + _global_bytes(targets - low, itemsize)
    return PendingStore(source, allocation, where, np.ascontiguousarray(tile[flat]).ravel(), reduce, layout.dtype)


def store_box(layout: TensorMapLayout, coords, gmem, smem: np.ndarray, smem_offset: int,
              reduce: str | None = None) -> None:
    """:func:`prepare_store` and :meth:`PendingStore.write` at once (a store whose bulk group
    completes immediately)."""
    prepare_store(layout, coords, gmem, smem, smem_offset, reduce).write()


__all__ = ["SmemImage", "PendingStore", "check_layout", "load_box", "prepare_store", "store_box", "SMEM_ALIGN"]
