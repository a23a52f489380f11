"""TMA (the Tensor Memory Accelerator) in device code, for tensor maps of rank 1 to 5.

A :class:`TensorMapHandle` is the device side of a host :class:`tsjit.TensorMap`: a 128-byte
descriptor passed by value as a ``__grid_constant__`` parameter (``.param .align 128``).
Coordinates are given outermost first, like numpy indices and ``box_shape`` (the hardware
wants them innermost first; tsjit reverses them), count *elements*, not tiles, and are signed
32-bit: a box may start before the array (negative coordinates) or run past its end.

* :func:`tma_load` — box global -> shared, completing on an mbarrier
  (``cp.async.bulk.tensor.{1..5}d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
  [dst], [tensorMap, {c0, ...}], [mbar]``), optionally ``.multicast::cluster`` to the CTAs
  of a ``ctaMask``.  Out-of-bounds elements are filled (zero or NaN, per the descriptor)
  and still count toward the transaction bytes (:attr:`TensorMapHandle.box_bytes`).
* :func:`tma_store` — box shared -> global
  (``cp.async.bulk.tensor.{1..5}d.global.shared::cta.tile.bulk_group [tensorMap, {c0, ...}],
  [src]``); out-of-bounds elements are not written (the box is clipped to the array).
  Follow with :func:`bulk_commit_group` and :func:`bulk_wait_group`.

The shared-memory tile of a copy is the box packed in C order (innermost dimension
fastest), ``ceil(box[i] / element_strides[i])`` elements per dimension.
Sources: PTX ISA 8.6 §9.7.9.25 "cp.async.bulk.tensor", §9.7.9.27 commit/wait_group.
"""
from __future__ import annotations

import math

from llvmlite import ir

from tsjit import abi
from tsjit.backend import emit
from tsjit.errors import CompilationError
from tsjit.lang import dtypes as dt
from tsjit.lang.builtins import cluster_ctarank
from tsjit.lang.memory import Pointer, Tensor
from tsjit.lang.sync import map_shared_rank
from tsjit.lang.tmem import require_tcgen05_target
from tsjit.lang.values import Value, as_value, cast_to, integer_operand


class TensorMapHandle:
    """A TMA descriptor kernel parameter.

    Attributes:
        ir: the ``ptr byval([128 x i8])`` parameter (a generic address of the descriptor).
        dtype: element type; box_shape: box shape, outermost first; rank: dimensions (1..5).
        element_strides: traversal steps, outermost first (all 1 unless the TensorMap has others).
        tile_shape: the packed shared-memory tile one copy fills, ``ceil(box / step)`` per dimension.
        box_bytes: bytes one full-box copy delivers (the ``expect_tx`` count), out-of-bounds
            elements included.
        smem_bytes: bytes of shared memory one copy spans: ``box_bytes``, or ``rows * span`` when a
            swizzle's span is wider than the innermost row (see :func:`tsjit.abi.tma_smem_footprint`).
    """

    def __init__(self, param, spec):
        self.ir = param
        self.dtype = spec.dtype
        self.box_shape = tuple(spec.box_shape)
        self.rank = spec.rank
        self.swizzle = spec.swizzle
        self.element_strides = tuple(getattr(spec, "element_strides", None) or (1,) * self.rank)
        # The packed shared-memory tile one copy fills: ceil(box / step) elements per dimension.
        self.tile_shape = tuple(-(-box // step) for box, step in zip(self.box_shape, self.element_strides))
        nbytes = self.dtype.itemsize
        for extent in self.tile_shape:
            nbytes *= extent
        self.box_bytes = nbytes
        self.smem_bytes = abi.tma_smem_footprint(self.tile_shape, self.dtype.itemsize, self.swizzle)

    def __repr__(self) -> str:
        return f"TensorMapHandle[{self.dtype.name}, box {self.box_shape}]"

    def __getattr__(self, name: str):
        # only for names that are not attributes: `tmap.shape` (the array's shape is not in the kernel)
        if name.startswith("__") or name != "shape":
            raise AttributeError(name)
        exc = AttributeError(name)
        exc.hint = ("a tensor map argument carries its box (box_shape, tile_shape), dtype and rank; the "
                    "global array's shape lives in the descriptor only: pass the extents you need as kernel "
                    "arguments (e.g. `M, N` beside the tensor map)")
        raise exc


def _tmap(tmap, name: str) -> TensorMapHandle:
    if not isinstance(tmap, TensorMapHandle):
        raise CompilationError(f"tsjit.{name} needs a tsjit.TensorMap kernel argument, got {type(tmap).__name__}")
    return tmap


INT32_RANGE = range(-2 ** 31, 2 ** 31)
CTA_MASK_RANGE = range(1, 2 ** 16)   # ctaMask: 16 bits, at least one CTA (else the copy never completes)


def _coords(tmap: TensorMapHandle, coords, name: str) -> list:
    coords = tuple(coords) if isinstance(coords, (tuple, list)) else (coords,)
    if len(coords) != tmap.rank:
        raise CompilationError(f"tsjit.{name}: the tensor map has rank {tmap.rank} (box {tmap.box_shape}) but "
                               f"{len(coords)} coordinates were given; pass {tmap.rank}, outermost first")
    for axis, c in enumerate(coords):
        if isinstance(c, int) and not isinstance(c, bool) and c not in INT32_RANGE:
            raise CompilationError(f"tsjit.{name}: coordinate {axis} is {c}; TMA coordinates are signed 32-bit "
                                   f"element indices (-2**31 .. 2**31-1)")
    values = [integer_operand(c, dt.Int32, f"tsjit.{name}: coordinate {axis}") for axis, c in enumerate(coords)]
    return [v.ir for v in reversed(values)]


def _smem_address(tile, tmap: TensorMapHandle, name: str, align: int = 128):
    """The shared-memory Pointer of ``tile``, checked: shared, aligned, and (for a Tensor of
    compile-time shape) large enough for the packed box."""
    nbytes = None
    if isinstance(tile, Tensor):
        if all(isinstance(e, int) for e in tile.shape):
            nbytes = tile.dtype.itemsize
            for extent in tile.shape:
                nbytes *= extent
        tile = tile.ptr
    if not isinstance(tile, Pointer) or tile.address_space != emit.SHARED:
        raise CompilationError(f"tsjit.{name} needs a shared-memory tile (tsjit.shared_array or a TS allocation)")
    if tile.alignment < align:
        raise CompilationError(f"tsjit.{name}: the shared-memory tile must be {align}-byte aligned "
                               f"(PTX ISA cp.async.bulk.tensor); it is only known to be {tile.alignment}-byte aligned")
    if nbytes is not None and nbytes < tmap.smem_bytes:
        if tmap.smem_bytes > tmap.box_bytes:
            raise CompilationError(
                f"tsjit.{name}: the shared-memory tile has {nbytes} bytes but one box {tmap.box_shape} of "
                f"{tmap.dtype.name} with swizzle={tmap.swizzle!r} spans {tmap.smem_bytes} bytes: its rows of "
                f"{tmap.tile_shape[-1] * tmap.dtype.itemsize} bytes are narrower than the swizzle span, and the "
                f"hardware starts every row at a span boundary; allocate {tmap.smem_bytes} bytes, or widen the "
                f"box rows to the span, or use a narrower swizzle")
        raise CompilationError(f"tsjit.{name}: the shared-memory tile has {nbytes} bytes but one box "
                               f"{tmap.box_shape} of {tmap.dtype.name} is {tmap.box_bytes} bytes; allocate "
                               f"a tile of at least the box (e.g. tsjit.shared_array({tmap.dtype.name}, "
                               f"{tmap.tile_shape}))")
    return tile


def _cta_mask(multicast_mask):
    """The i16 ctaMask operand and the use-mask flag for ``multicast_mask`` (None = no multicast)."""
    if multicast_mask is None:
        return ir.Constant(emit.I16, 0), 0
    if isinstance(multicast_mask, bool) or (isinstance(multicast_mask, int)
                                            and multicast_mask not in CTA_MASK_RANGE):
        raise CompilationError(f"tsjit.tma_load: multicast_mask is {multicast_mask!r}; it is a 16-bit mask of "
                               f"cluster CTA ranks with at least one bit set (1 .. 0xFFFF)")
    return cast_to(as_value(multicast_mask, dt.Int16), dt.Int16).ir, 1


#: the L2 eviction priorities a load can ask for (PTX ISA "createpolicy", a data-movement instruction:
#: ``L2::evict_last``, ``evict_normal``, ``evict_first``, ``evict_unchanged``)
CACHE_POLICIES = ("evict_first", "evict_last", "evict_normal", "evict_unchanged")


def _cache_hint(cache_policy):
    """The i64 cache-policy operand and the use-hint flag of a copy for ``cache_policy`` (None: no hint): a
    ``createpolicy.fractional.L2::<priority>.b64`` over the whole access (fraction 1.0)."""
    if cache_policy is None:
        return ir.Constant(emit.I64, 0), 0
    if not isinstance(cache_policy, str) or cache_policy not in CACHE_POLICIES:
        raise CompilationError(f"tsjit.tma_load: cache_policy is {cache_policy!r}; use None or one of "
                               f"{', '.join(repr(p) for p in CACHE_POLICIES)} (PTX ISA createpolicy)")
    policy = emit.current().inline_asm(emit.I64, f"createpolicy.fractional.L2::{cache_policy}.b64 $0, 1.0;", "=l",
                                       [], side_effect=False)
    return policy, 1


def tma_load(tmap, dst, barrier, coords, *, multicast_mask=None, cta_group: int = 1, cache_policy=None) -> None:
    """Copy the box at ``coords`` of ``tmap`` into shared memory ``dst``; completion is signalled on
    ``barrier`` as transaction bytes (arm it with :func:`tsjit.mbarrier_arrive_expect_tx` for
    ``tmap.box_bytes``).  Elements outside the array are filled per the descriptor's ``oob_fill``.

    Args:
        tmap: a TensorMap kernel argument of rank 1..5.
        dst: shared-memory tile (Tensor or Pointer), 128-byte aligned (1024 for 128B swizzle);
            a Tensor of compile-time shape must hold at least ``tmap.box_bytes``.
        barrier: the mbarrier (shared ``Pointer[Int64]``) of this CTA.
        coords: element coordinates of the box's first element, outermost first, one per
            dimension (Int32; may be negative or past the end; the innermost one times the
            element size a multiple of 16 bytes: the H200 faults with ILLEGAL_INSTRUCTION
            otherwise, measured 2026-12-01).
        multicast_mask: a 16-bit mask of cluster CTAs that receive the tile (each at the same
            shared-memory offset, each signalling its own barrier at that offset), or None.
            A compile-time mask must be in 1..0xFFFF.  Needs sm_90a.
        cta_group: 1, or 2 for a 2-CTA UMMA pair (sm_100a / sm_100f): the box lands in this CTA's
            ``dst`` (or, multicast, in each CTA of the mask) but completes on the barrier at
            ``barrier``'s offset in the *pair leader* (the even cluster rank: ``rank - rank % 2``),
            whose expect_tx counts both CTAs' bytes (``.cta_group::2``; the barrier address is the
            leader's ``mapa`` address in ``shared::cluster``).  Emitted as inline PTX.
        cache_policy: None, or the L2 eviction priority of the box's lines (a compile-time string of
            :data:`CACHE_POLICIES`): ``"evict_first"`` for data read once (a streamed weight matrix: its
            lines go before the other lines of their L2 set, e.g. dirty lines that would otherwise be
            written back to make room), ``"evict_last"`` for data re-read by many CTAs.  Emitted as
            ``.L2::cache_hint`` with a ``createpolicy.fractional`` policy (fraction 1.0); cta_group 1 only.

    Raises:
        CompilationError: ``tmap`` is not a TensorMap argument, the coordinate count differs from
            its rank, a constant coordinate is outside int32, ``dst`` is not a large enough,
            aligned shared tile, ``barrier`` is not a shared pointer, the mask is out of range,
            or a compile-time innermost coordinate is not 16-byte aligned; ``cta_group`` other
            than 1 or 2, or 2 on a target without tcgen05; ``cache_policy`` not None nor one of
            :data:`CACHE_POLICIES`, or given with ``cta_group=2``.

    Source: PTX ISA 8.0+, "cp.async.bulk.tensor" (``.shared::cluster.global.tile``, ``.multicast::cluster``;
    ``.cta_group::2``: PTX ISA 8.6, sm_100a; ``.L2::cache_hint``: PTX ISA 8.0, with ``createpolicy``, 7.4).
    """
    if isinstance(cta_group, bool) or cta_group not in (1, 2):
        raise CompilationError(f"tsjit.tma_load: cta_group must be 1 or 2, got {cta_group!r}")
    if cache_policy is not None and cta_group == 2:
        raise CompilationError("tsjit.tma_load: cache_policy is supported with cta_group=1 only")
    t = _tmap(tmap, "tma_load")
    align = 1024 if t.swizzle == "128B" else 128
    d = _smem_address(dst, t, "tma_load", align)
    if not isinstance(barrier, Pointer) or barrier.address_space != emit.SHARED:
        raise CompilationError("tsjit.tma_load: `barrier` must be a shared-memory mbarrier pointer")
    mask, use_mask = _cta_mask(multicast_mask)
    _check_box_start(t, coords, "tma_load", store=False)
    cluster_coords = _coords(t, coords, "tma_load")
    km = emit.current()
    dst_cluster = km.builder.addrspacecast(d.ir, emit.pointer_type(emit.SHARED_CLUSTER))
    if cta_group == 2:
        _tma_load_pair(t, dst_cluster, barrier, cluster_coords, mask if use_mask else None)
        return
    hint, use_hint = _cache_hint(cache_policy)
    args = [dst_cluster, barrier.ir, t.ir, *cluster_coords, mask, hint,
            ir.Constant(emit.I1, use_mask), ir.Constant(emit.I1, use_hint), ir.Constant(emit.I32, 0)]
    km.intrinsic(f"llvm.nvvm.cp.async.bulk.tensor.g2s.tile.{t.rank}d", args)


def _tma_load_pair(t: TensorMapHandle, dst_cluster, barrier: Pointer, coords: list, mask) -> None:
    """``cp.async.bulk.tensor.Nd.shared::cluster.global.tile.mbarrier::complete_tx::bytes[.multicast::cluster]
    .cta_group::2 [dst], [tensorMap, {c...}], [leader's mbar][, ctaMask]`` (inline PTX: the barrier operand
    is a ``shared::cluster`` address, which the LLVM intrinsic does not take)."""
    require_tcgen05_target("tma_load(cta_group=2)", "tma")
    km = emit.current()
    rank = cast_to(cluster_ctarank(), dt.Int32)
    leader_bar = map_shared_rank(barrier, rank - rank % 2)
    i32 = ir.IntType(32)
    dst32 = km.builder.ptrtoint(dst_cluster, i32)
    bar32 = km.builder.ptrtoint(leader_bar.ir, i32)
    n = len(coords)
    coord_text = ", ".join(f"${3 + i}" for i in range(n))
    multicast = ".multicast::cluster" if mask is not None else ""
    tail = f", ${3 + n}" if mask is not None else ""
    asm = (f"cp.async.bulk.tensor.{t.rank}d.shared::cluster.global.tile.mbarrier::complete_tx::bytes{multicast}"
           f".cta_group::2 [$0], [$1, {{{coord_text}}}], [$2]{tail};")
    args = [dst32, t.ir, bar32, *coords] + ([mask] if mask is not None else [])
    constraints = "r,l,r" + ",r" * n + (",h" if mask is not None else "")
    km.inline_asm(ir.VoidType(), asm, constraints, args, side_effect=True)


STORE_START_ALIGN = 16   # bytes: the innermost start of a TMA load or store (measured, see tma_store)


def _check_box_start(tmap: TensorMapHandle, coords, name: str, *, store: bool) -> None:
    """Refuse compile-time coordinates that the hardware faults on: an innermost start that is not
    16-byte aligned (loads and stores), and for a store any negative coordinate (see
    :func:`tma_store`)."""
    coords = tuple(coords) if isinstance(coords, (tuple, list)) else (coords,)
    for axis, c in enumerate(coords):
        if not isinstance(c, int) or isinstance(c, bool):
            continue
        if store and c < 0:
            raise CompilationError(f"tsjit.{name}: coordinate {axis} is {c}; a TMA store's box must start inside "
                                   f"the array (coordinates >= 0; only its end may run past the array). Store "
                                   f"the part of the tile that lies inside, or shift the box")
        inner_bytes = c * tmap.dtype.itemsize
        if axis == len(coords) - 1 and inner_bytes % STORE_START_ALIGN:
            step = STORE_START_ALIGN // math.gcd(STORE_START_ALIGN, tmap.dtype.itemsize)
            kind = "store" if store else "load"
            raise CompilationError(f"tsjit.{name}: the innermost coordinate {c} starts {inner_bytes} bytes into a "
                                   f"row of {tmap.dtype.name}; a TMA {kind}'s innermost start must be a multiple of "
                                   f"{STORE_START_ALIGN} bytes ({step} elements): use {c - c % step} or {c - c % step + step}")


def tma_store(tmap, src, coords) -> None:
    """Copy shared-memory tile ``src`` to the box at ``coords`` of ``tmap`` (bulk-group completion).

    Elements of the box past the array's end are not written.  Threads that wrote ``src`` must
    execute :func:`tsjit.fence_proxy_async` and synchronize first.

    Unlike a load, a store's box must start inside the array: every coordinate >= 0; and, as for
    a load, the innermost coordinate times the element size must be a multiple of 16 bytes.  Measured on the H200
    (driver 580, 2026-12-01): a negative coordinate or a misaligned innermost start raises
    ``CUDA_ERROR_ILLEGAL_INSTRUCTION`` (``UTMASTG``), also when the box is otherwise in bounds;
    a box that runs past the end is clipped, in the innermost dimension to whole 16-byte granules:
    when a row is not a multiple of 16 bytes long, the store also writes the rest of the granule
    holding its last element (into the padding of a view such as ``x[:, :50]`` of a (37, 56)
    Float16 array; never past the row stride, which is a multiple of 16).  For exact clipping,
    give the destination rows a multiple of 16 bytes.  Compile-time coordinates are checked
    here; run-time ones are the caller's responsibility.

    Args:
        tmap: a TensorMap kernel argument of rank 1..5.
        src: 128-byte aligned shared-memory tile (Tensor or Pointer) holding the packed box.
        coords: element coordinates of the box's first element, outermost first (Int32), each
            >= 0; the innermost one a multiple of ``16 // itemsize`` elements.

    Raises:
        CompilationError: as for :func:`tma_load`; or a compile-time coordinate is negative, or
            the innermost one is not 16-byte aligned.

    Source: PTX ISA 8.0+, "cp.async.bulk.tensor" (``.global.shared::cta.tile.bulk_group``);
    the start rule from the H200 measurement above.
    """
    t = _tmap(tmap, "tma_store")
    s = _smem_address(src, t, "tma_store")
    _check_box_start(t, coords, "tma_store", store=True)
    args = [s.ir, t.ir, *_coords(t, coords, "tma_store"), ir.Constant(emit.I64, 0), ir.Constant(emit.I1, 0)]
    emit.current().intrinsic(f"llvm.nvvm.cp.async.bulk.tensor.s2g.tile.{t.rank}d", args)


def bulk_commit_group() -> None:
    """Close the current bulk async-group of TMA stores (``cp.async.bulk.commit_group``)."""
    emit.current().intrinsic("llvm.nvvm.cp.async.bulk.commit.group", [])


def bulk_wait_group(pending: int = 0, *, read: bool = False) -> None:
    """Wait until at most ``pending`` bulk groups are outstanding; ``read=True`` waits only until
    their shared-memory sources have been read (so the buffer can be reused)."""
    if not isinstance(pending, int) or not 0 <= pending <= 63:
        raise CompilationError(f"bulk_wait_group needs a compile-time count in 0..63, got {pending!r}")
    name = "llvm.nvvm.cp.async.bulk.wait.group" + (".read" if read else "")
    emit.current().intrinsic(name, [ir.Constant(emit.I32, pending)])


def prefetch_tensormap(tmap) -> None:
    """Prefetch the descriptor into the TMA unit's cache (``prefetch.tensormap``)."""
    t = _tmap(tmap, "prefetch_tensormap")
    emit.current().intrinsic("llvm.nvvm.prefetch.tensormap.p0", [t.ir])
