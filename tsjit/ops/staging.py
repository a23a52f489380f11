"""The slow but always-correct path of ``tsjit.ops.matmul`` for operands TMA cannot read in place
(rows that are not 16-byte aligned, a base address off 16 bytes, no unit stride at all): each
call first copies the operand into a K-major buffer whose rows are padded to 16 bytes (one per
plan and stream, so the GEMM's packed launch and TMA descriptors are reused), and the fast
program reads that.  One elementwise kernel, any strides, rank 3 ``(batch, rows, cols)``.
"""
from __future__ import annotations

import tsjit
from tsjit.runtime.arrays import DeviceArray

THREADS = 256
MAX_CTAS = 4 * 132 * 8


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


def padded_row_length(cols: int, itemsize: int) -> int:
    """Elements per row giving 16-byte aligned rows."""
    per = 16 // itemsize
    return -(-cols // per) * per


def staging_buffer(dtype, batch: int, rows: int, cols: int, allocate=None) -> DeviceArray:
    """A ``(batch, rows, cols)`` K-major buffer whose rows are padded to 16 bytes (a rank-3 view).

    ``allocate(nbytes)`` returns ``(address, owner)`` (e.g. torch's caching allocator); default a
    tsjit allocation."""
    width = padded_row_length(cols, dtype.itemsize)
    if allocate is None:
        storage = tsjit.empty((batch, rows, width), dtype)
        address = storage.data_ptr
    else:
        address, storage = allocate(batch * rows * width * dtype.itemsize)
    return DeviceArray((batch, rows, cols), dtype, strides=(rows * width, width, 1), data_ptr=address,
                       owner=storage)


def copy_launch(source: DeviceArray, destination: DeviceArray):
    """The packed launch (:meth:`tsjit.Kernel.bind`) copying ``source`` into ``destination`` (both
    rank 3, same shape, any strides); call it with the stream handle."""
    batch, rows, cols = destination.shape
    total = batch * rows * cols
    ctas = max(1, min(MAX_CTAS, -(-total // THREADS)))
    return copy_matrix.bind(source, destination, total, rows, cols, grid=(ctas,), block=(THREADS,))
