"""The staging copies of ``tsjit.ops.matmul``: for operands TMA cannot read in place (rows that are
not 16-byte aligned, a base address off 16 bytes, no unit stride at all), and for large products whose
operand rows are 16- but not 128-byte aligned (:func:`tsjit.ops.matmul` decides), each call first
copies the operand into a K-major buffer whose rows are padded to 16 (or 128) bytes (one per plan and
stream, so the GEMM's packed launch and TMA descriptors are reused), and the fast program reads that.
One kernel, rank 3 ``(batch, rows, cols)``: 16-byte vectors where source and destination rows allow
them (:func:`copy_rows`), else element by element with any strides (:func:`copy_matrix`).
"""
from __future__ import annotations

import tsjit
from tsjit.runtime.arrays import DeviceArray

THREADS = 256
MAX_CTAS = 4 * 132 * 8
UNROLL = 4                         # vectors per thread and step of copy_rows


@tsjit.kernel
def copy_matrix(src, dst, total, rows, cols):
    """``dst[b, r, c] = src[b, r, c]`` for ``b, r, c`` < ``dst``'s shape (``total`` elements); any strides."""
    i = tsjit.block_idx().x * THREADS + tsjit.thread_idx().x
    step = tsjit.grid_dim().x * THREADS
    while i < total:
        c = i % cols
        r = (i // cols) % rows
        b = i // (cols * rows)
        dst[b, r, c] = src[b, r, c]
        i += step


@tsjit.kernel
def copy_rows(src, dst, rows, cols, total_rows, VEC: tsjit.Constexpr[int]):
    """``dst[b, r, :cols] = src[b, r, :cols]`` in 16-byte vectors of ``VEC`` elements: both arrays have
    unit-stride rows whose starts are 16-byte aligned and ``cols`` is a multiple of ``VEC``.  The
    ``total_rows * cols / VEC`` vectors (row = b * rows + r) are dealt out grid-stride, :data:`UNROLL` per
    thread and step with all their loads issued before the stores (more bytes in flight per thread)."""
    chunks = cols // VEC
    total = total_rows * chunks
    step = tsjit.grid_dim().x * tsjit.block_dim().x
    for base in range(tsjit.block_idx().x * tsjit.block_dim().x + tsjit.thread_idx().x, total, step * UNROLL):
        places, values = [], []
        for u in tsjit.range_constexpr(UNROLL):
            v = tsjit.math.min(base + u * step, total - 1)      # past the end: re-read the last (not stored)
            row = v // chunks
            b = row // rows
            place = (b, row - b * rows, (v - row * chunks) * VEC)
            places.append(place)
            values.append(src.load_vector(place, VEC))
        for u in tsjit.range_constexpr(UNROLL):
            if base + u * step < total:
                dst.store_vector(places[u], values[u])


def padded_row_length(cols: int, itemsize: int, align: int = 16) -> int:
    """Elements per row giving ``align``-byte aligned rows (16: what TMA needs; 128: every TMA box row
    on its own 128-byte lines)."""
    per = align // itemsize
    return -(-cols // per) * per


def staging_buffer(dtype, batch: int, rows: int, cols: int, allocate=None, align: int = 16) -> DeviceArray:
    """A ``(batch, rows, cols)`` K-major buffer whose rows are padded to ``align`` bytes (a rank-3 view).

    ``allocate(nbytes)`` returns ``(address, owner)`` (e.g. torch's caching allocator, 256-byte aligned
    blocks); default a tsjit allocation."""
    width = padded_row_length(cols, dtype.itemsize, align)
    if allocate is None:
        storage = tsjit.empty((batch, rows, width), dtype)
        address = storage.data_ptr
    else:
        address, storage = allocate(batch * rows * width * dtype.itemsize)
    return DeviceArray((batch, rows, cols), dtype, strides=(rows * width, width, 1), data_ptr=address,
                       owner=storage)


def vector_copyable(array: DeviceArray) -> bool:
    """Whether ``array`` (rank 3) has unit-stride rows starting on 16-byte boundaries and a row length
    of whole 16-byte vectors (what :func:`copy_rows` needs)."""
    size = array.dtype.itemsize
    batch, rows, cols = array.shape
    strides = array.strides
    return (array.data_ptr % 16 == 0 and (cols == 1 or strides[2] == 1) and (cols * size) % 16 == 0
            and (rows == 1 or (strides[1] * size) % 16 == 0) and (batch == 1 or (strides[0] * size) % 16 == 0))


def copy_launch(source: DeviceArray, destination: DeviceArray):
    """The packed launch (:meth:`tsjit.Kernel.bind`) copying ``source`` into ``destination`` (both
    rank 3, same shape, any strides); call it with the stream handle.  16-byte vectors
    (:func:`copy_rows`) where both allow them, else element by element (:func:`copy_matrix`)."""
    batch, rows, cols = destination.shape
    if vector_copyable(source) and vector_copyable(destination):
        vec = 16 // source.dtype.itemsize
        vectors = batch * rows * (cols // vec)
        ctas = max(1, min(MAX_CTAS // 4, -(-vectors // (THREADS * UNROLL))))
        return copy_rows.bind(source, destination, rows, cols, batch * rows, vec, grid=(ctas,), block=(THREADS,))
    total = batch * rows * cols
    ctas = max(1, min(MAX_CTAS, -(-total // THREADS)))
    return copy_matrix.bind(source, destination, total, rows, cols, grid=(ctas,), block=(THREADS,))
