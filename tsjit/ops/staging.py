"""The slow but always-correct path of ``tsjit.ops.matmul`` for operands TMA cannot read in place
(rows that are not 16-byte aligned, a base address off 16 bytes, no unit stride at all): the
operand is copied into a fresh K-major buffer whose rows are padded to 16 bytes, and the fast
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


def k_major_copy(source: DeviceArray, batch: int, rows: int, cols: int, stream: int, allocate=None) -> DeviceArray:
    """A ``(batch, rows, cols)`` copy of ``source`` (a rank-3 DeviceArray view of any strides) with
    16-byte aligned rows, as a rank-3 view of a padded allocation; launched on ``stream``.

    ``allocate(nbytes)`` returns ``(address, owner)`` of stream-ordered memory (torch's caching
    allocator, so the buffer is not reused before the launch that reads it ran); default a tsjit
    allocation (``cuMemFree`` waits for the device)."""
    dtype = source.dtype
    width = padded_row_length(cols, dtype.itemsize)
    if allocate is None:
        storage = tsjit.empty((batch, rows, width), dtype)
        address = storage.data_ptr
    else:
        address, storage = allocate(batch * rows * width * dtype.itemsize)
    view = DeviceArray((batch, rows, cols), dtype, strides=(rows * width, width, 1), data_ptr=address,
                       owner=storage)
    total = batch * rows * cols
    ctas = max(1, min(MAX_CTAS, -(-total // THREADS)))
    copy_matrix[(ctas,), (THREADS,)](source, view, total, rows, cols, stream=stream)
    return view
