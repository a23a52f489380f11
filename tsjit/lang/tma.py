"""TMA (the Tensor Memory Accelerator) in device code.

A :class:`TensorMapHandle` is the device side of a host :class:`tsjit.TensorMap`: a 128-byte
descriptor passed by value as a ``__grid_constant__`` parameter (``.param .align 128``).
Coordinates are given outermost first, like numpy indices and ``box_shape`` (the hardware
wants them innermost first; tsjit reverses them) and count *elements*, not tiles.

* :func:`tma_load` — tile global -> shared, completing on an mbarrier
  (``cp.async.bulk.tensor.Nd.shared::cluster.global.tile.mbarrier::complete_tx::bytes``),
  optionally multicast to the CTAs of a cluster.  Out-of-bounds elements are filled
  (zero or NaN, per the descriptor) and still count toward the transaction bytes.
* :func:`tma_store` — tile shared -> global (``...global.shared::cta.tile.bulk_group``);
  out-of-bounds elements are not written.  Follow with :func:`bulk_commit_group` and
  :func:`bulk_wait_group`.
Sources: PTX ISA 8.6 §9.7.9.25 "cp.async.bulk.tensor", §9.7.9.27 commit/wait_group.
"""
from __future__ import annotations

from llvmlite import ir

from tsjit.backend import emit
from tsjit.errors import CompilationError
from tsjit.lang import dtypes as dt
from tsjit.lang.memory import Pointer, Tensor
from tsjit.lang.values import Value, as_value, cast_to


class TensorMapHandle:
    """A TMA descriptor kernel parameter.

    Attributes:
        ir: the ``ptr byval([128 x i8])`` parameter (a generic address of the descriptor).
        dtype: element type; box_shape: tile shape, outermost first; rank: dimensions.
        box_bytes: bytes one full-box copy delivers (the ``expect_tx`` count).
    """

    def __init__(self, param, spec):
        self.ir = param
        self.dtype = spec.dtype
        self.box_shape = tuple(spec.box_shape)
        self.rank = spec.rank
        self.swizzle = spec.swizzle
        nbytes = self.dtype.itemsize
        for extent in self.box_shape:
            nbytes *= extent
        self.box_bytes = nbytes

    def __repr__(self) -> str:
        return f"TensorMapHandle[{self.dtype.name}, box {self.box_shape}]"


def _tmap(tmap, name: str) -> TensorMapHandle:
    if not isinstance(tmap, TensorMapHandle):
        raise CompilationError(f"tsjit.{name} needs a tsjit.TensorMap kernel argument, got {type(tmap).__name__}")
    return tmap


def _coords(tmap: TensorMapHandle, coords, name: str) -> list:
    coords = tuple(coords) if isinstance(coords, (tuple, list)) else (coords,)
    if len(coords) != tmap.rank:
        raise CompilationError(f"tsjit.{name}: the tensor map has rank {tmap.rank} but {len(coords)} "
                               f"coordinates were given")
    return [cast_to(as_value(c, dt.Int32), dt.Int32).ir for c in reversed(coords)]


def _smem_address(dst, name: str, align: int = 128):
    if isinstance(dst, Tensor):
        dst = dst.ptr
    if not isinstance(dst, Pointer) or dst.address_space != emit.SHARED:
        raise CompilationError(f"tsjit.{name} needs a shared-memory tile (tsjit.shared_array or a TS allocation)")
    if dst.alignment < align:
        raise CompilationError(f"tsjit.{name}: the shared-memory tile must be {align}-byte aligned "
                               f"(PTX ISA cp.async.bulk.tensor); it is only known to be {dst.alignment}-byte aligned")
    return dst


def tma_load(tmap, dst, barrier, coords, *, multicast_mask=None) -> None:
    """Copy the box at ``coords`` of ``tmap`` into shared memory ``dst``; completion is signalled on
    ``barrier`` as transaction bytes (arm it with :func:`tsjit.mbarrier_arrive_expect_tx`).

    Args:
        tmap: a TensorMap kernel argument.
        dst: shared-memory tile (Tensor or Pointer), 128-byte aligned (1024 for 128B swizzle).
        barrier: the mbarrier (shared ``Pointer[Int64]``) of this CTA.
        coords: element coordinates of the box's first element, outermost first (Int32).
        multicast_mask: a 16-bit mask of cluster CTAs that receive the tile (each at the same
            shared-memory offset, each signalling its own barrier at that offset), or None.
    """
    t = _tmap(tmap, "tma_load")
    align = 1024 if t.swizzle == "128B" else 128
    d = _smem_address(dst, "tma_load", align)
    if not isinstance(barrier, Pointer) or barrier.address_space != emit.SHARED:
        raise CompilationError("tsjit.tma_load: `barrier` must be a shared-memory mbarrier pointer")
    km = emit.current()
    b = km.builder
    dst_cluster = b.addrspacecast(d.ir, emit.pointer_type(emit.SHARED_CLUSTER))
    use_mask = multicast_mask is not None
    mask = cast_to(as_value(multicast_mask if use_mask else 0, dt.Int16), dt.Int16).ir
    args = [dst_cluster, barrier.ir, t.ir, *_coords(t, coords, "tma_load"), mask, ir.Constant(emit.I64, 0),
            ir.Constant(emit.I1, int(use_mask)), ir.Constant(emit.I1, 0), ir.Constant(emit.I32, 0)]
    km.intrinsic(f"llvm.nvvm.cp.async.bulk.tensor.g2s.tile.{t.rank}d", args)


def tma_store(tmap, src, coords) -> None:
    """Copy shared-memory tile ``src`` to the box at ``coords`` of ``tmap`` (bulk-group completion).

    Threads that wrote ``src`` must execute :func:`tsjit.fence_proxy_async` and synchronize first."""
    t = _tmap(tmap, "tma_store")
    s = _smem_address(src, "tma_store")
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
