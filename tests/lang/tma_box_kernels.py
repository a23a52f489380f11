"""TMA box kernels for tensor maps of every rank (1 to 5), and their numpy references.

:func:`box_roundtrip` loads one box (which may stick out of the array on any side) into a
poisoned shared-memory tile, copies the tile to ``loaded``, then overwrites the tile with
``values`` and TMA-stores it as a box at other coordinates.  :func:`multicast_box` has CTA 0 of
a 2-CTA cluster multicast one box into both CTAs.  ``tests/lang`` compiles them for every case
(no GPU); ``tests/gpu/test_tma_ranks_gpu.py`` runs them and compares bit for bit with
:func:`expected_load` / :func:`expected_store`.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import tsjit
from tsjit.runtime.arrays import float_to_bfloat16_bits

THREADS = 128
MAX_RANK = 5


@tsjit.kernel
def box_roundtrip(src_map, dst_map, poison, loaded, values, l0, l1, l2, l3, l4, s0, s1, s2, s3, s4,
                  RANK: tsjit.Constexpr[int], TILE_ELEMENTS: tsjit.Constexpr[int]):
    """loaded = the box of ``src_map`` at (l0..l4)[-RANK:]; then the box of ``dst_map`` at
    (s0..s4)[-RANK:] = values.  One CTA of THREADS threads."""
    tile = tsjit.shared_array(src_map.dtype, TILE_ELEMENTS, align=1024)
    bar = tsjit.shared_array(tsjit.Int64, 1, align=8)
    tid = tsjit.thread_idx().x
    threads = tsjit.block_dim().x
    if tid == 0:
        tsjit.mbarrier_init(bar.ptr, 1)
        tsjit.fence_mbarrier_init()
    for i in range(tid, TILE_ELEMENTS, threads):       # poison: the fill must come from TMA
        tile[i] = poison[i]
    tsjit.fence_proxy_async()
    tsjit.syncthreads()
    if tid == 0:
        tsjit.mbarrier_arrive_expect_tx(bar.ptr, src_map.box_bytes)
        tsjit.tma_load(src_map, tile, bar.ptr, (l0, l1, l2, l3, l4)[MAX_RANK - RANK:])
    tsjit.mbarrier_wait(bar.ptr, 0)
    for i in range(tid, TILE_ELEMENTS, threads):
        loaded[i] = tile[i]
    tsjit.syncthreads()
    for i in range(tid, TILE_ELEMENTS, threads):
        tile[i] = values[i]
    tsjit.fence_proxy_async()
    tsjit.syncthreads()
    if tid == 0:
        tsjit.tma_store(dst_map, tile, (s0, s1, s2, s3, s4)[MAX_RANK - RANK:])
        tsjit.bulk_commit_group()
        tsjit.bulk_wait_group(0)


@tsjit.kernel
def multicast_box(src_map, poison, loaded, c0, c1, c2, c3, c4, RANK: tsjit.Constexpr[int],
                  TILE_ELEMENTS: tsjit.Constexpr[int]):
    """In a cluster of 2 CTAs, CTA 0 multicasts the box at (c0..c4)[-RANK:] into both CTAs' tiles;
    CTA r writes its tile to loaded[r * TILE_ELEMENTS:]."""
    tile = tsjit.shared_array(src_map.dtype, TILE_ELEMENTS, align=1024)
    bar = tsjit.shared_array(tsjit.Int64, 1, align=8)
    tid = tsjit.thread_idx().x
    threads = tsjit.block_dim().x
    rank = tsjit.cluster_ctarank()
    if tid == 0:
        tsjit.mbarrier_init(bar.ptr, 1)
        tsjit.fence_mbarrier_init()
    for i in range(tid, TILE_ELEMENTS, threads):
        tile[i] = poison[i]
    tsjit.fence_proxy_async()
    tsjit.cluster_sync()                                 # both barriers initialized, both tiles poisoned
    if tid == 0:
        tsjit.mbarrier_arrive_expect_tx(bar.ptr, src_map.box_bytes)
    tsjit.cluster_sync()                                 # both barriers armed
    if tid == 0 and rank == 0:
        tsjit.tma_load(src_map, tile, bar.ptr, (c0, c1, c2, c3, c4)[MAX_RANK - RANK:], multicast_mask=3)
    tsjit.mbarrier_wait(bar.ptr, 0)
    for i in range(tid, TILE_ELEMENTS, threads):
        loaded[rank * TILE_ELEMENTS + i] = tile[i]
    tsjit.cluster_sync()                                 # no CTA leaves while the multicast may be in flight


@dataclass(frozen=True)
class BoxCase:
    """One load/store pair.  Shapes and coordinates outermost first.

    ``storage`` is the allocation the array is a view of (default: the array itself); the store
    must not touch its padding.  ``element_strides`` apply to the load; the store writes the packed
    tile as a box of :attr:`tile_shape`."""

    name: str
    dtype: object
    shape: tuple
    box: tuple
    load_at: tuple
    store_at: tuple
    storage: tuple | None = None
    element_strides: tuple | None = None
    oob_fill: str = "zero"

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def steps(self) -> tuple:
        return self.element_strides or (1,) * self.rank

    @property
    def tile_shape(self) -> tuple:
        return tuple(-(-b // s) for b, s in zip(self.box, self.steps))

    @property
    def tile_elements(self) -> int:
        return int(np.prod(self.tile_shape))

    def padded(self, coords) -> list[int]:
        """``coords`` as the kernel's five coordinate arguments (leading zeros)."""
        return [0] * (MAX_RANK - self.rank) + list(coords)


CASES = [
    BoxCase("rank1-f32-issue9", tsjit.Float32, (100,), (64,), (60,), (40,)),
    BoxCase("rank1-f32-long", tsjit.Float32, (1000,), (64,), (-16,), (988,)),
    BoxCase("rank2-f16-padded-view", tsjit.Float16, (37, 50), (16, 32), (30, 40), (24, 24), storage=(37, 56)),
    BoxCase("rank2-bf16-nan-fill", tsjit.BFloat16, (20, 24), (8, 16), (16, -8), (4, 16), oob_fill="nan"),
    BoxCase("rank3-f32", tsjit.Float32, (5, 9, 24), (2, 4, 8), (4, -2, 20), (4, 7, 20)),
    BoxCase("rank3-f32-element-strides", tsjit.Float32, (6, 20, 16), (4, 8, 8), (3, 15, 12), (5, 18, 12),
            element_strides=(2, 3, 1)),
    BoxCase("rank4-u8", tsjit.Uint8, (3, 4, 6, 48), (2, 3, 4, 16), (2, 2, 4, 32), (2, 2, 3, 32)),
    BoxCase("rank5-f32", tsjit.Float32, (2, 3, 4, 5, 12), (2, 2, 2, 4, 8), (1, 2, -1, 3, 8), (1, 1, 3, 2, 8)),
    BoxCase("rank5-i64", tsjit.Int64, (2, 2, 3, 3, 6), (2, 2, 2, 2, 2), (1, 1, 2, 2, 4), (1, 0, 2, 2, 4)),
]


def random_values(dtype, shape, rng) -> np.ndarray:
    """Fresh random host data of ``dtype`` (BFloat16 as uint16 bits); never the all-ones poison pattern."""
    if dtype is tsjit.BFloat16:
        return float_to_bfloat16_bits(rng.standard_normal(shape))
    np_dtype = dtype.numpy
    if np.issubdtype(np_dtype, np.floating):
        return rng.standard_normal(shape).astype(np_dtype)
    return rng.integers(0, min(np.iinfo(np_dtype).max, 1000), size=shape).astype(np_dtype)   # never -1 / max


def poison(dtype, shape) -> np.ndarray:
    """Host array of ``dtype``'s storage type with every byte 0xFF (NaN for floats, -1 / max for ints)."""
    np_dtype = dtype.numpy
    return np.full(int(np.prod(shape)) * np_dtype.itemsize, 0xFF, np.uint8).view(np_dtype).reshape(shape)


def _box_coordinates(origin, extent_shape, steps):
    """Global coordinates, shape (rank, elements), of every element of a packed tile in C order."""
    rank = len(origin)
    index = np.indices(extent_shape).reshape(rank, -1)
    return np.asarray(origin)[:, None] + index * np.asarray(steps)[:, None]


def _in_bounds(coords, shape) -> np.ndarray:
    return np.all((coords >= 0) & (coords < np.asarray(shape)[:, None]), axis=0)


def expected_load(case: BoxCase, source: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(tile, out_of_bounds mask): the packed tile a load of ``case`` fills from ``source`` (the
    array's host values), zero where out of bounds (the mask says where; NaN fill checks it)."""
    coords = _box_coordinates(case.load_at, case.tile_shape, case.steps)
    inside = _in_bounds(coords, case.shape)
    tile = np.zeros(case.tile_elements, source.dtype)
    tile[inside] = source[tuple(coords[:, inside])]
    return tile, ~inside


STORE_GRANULE_BYTES = 16   # a TMA store clips the innermost dimension in 16-byte granules (tsjit.tma_store)


def store_clip_shape(case: BoxCase) -> tuple:
    """The extents a TMA store of ``case`` clips to: the array's, except the innermost one rounded up
    to whole 16-byte granules (measured on the H200: the granule holding the row's end is written
    whole, so a view's padding after a row that is not a multiple of 16 bytes is written too)."""
    per_granule = STORE_GRANULE_BYTES // case.dtype.itemsize
    inner = -(-case.shape[-1] // per_granule) * per_granule
    return (*case.shape[:-1], inner)


def expected_store(case: BoxCase, storage: np.ndarray, values: np.ndarray) -> np.ndarray:
    """The destination storage after storing ``values`` as the box at ``case.store_at``, clipped
    to :func:`store_clip_shape` (never past the storage's row stride)."""
    coords = _box_coordinates(case.store_at, case.tile_shape, (1,) * case.rank)
    inside = _in_bounds(coords, store_clip_shape(case))
    result = storage.copy()
    result[tuple(coords[:, inside])] = values[inside]
    return result
