"""Cluster launch control (CLC, sm_100a / sm_100f): a running CTA cancels a cluster that has not
launched yet and takes over its work, which is how a dynamic persistent scheduler steals tiles.
Public as ``tsjit.clc``.

``clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes.b128 [response],
[barrier]`` (PTX ISA 9.1 §9.7.13.17, "clusterlaunchcontrol.try_cancel") asks the hardware to cancel
one pending cluster; it writes a 16-byte response to shared memory and signals ``barrier`` with 16
transaction bytes (arm the barrier with ``mbarrier_arrive_expect_tx(barrier, 16)`` first).  The
``.multicast::cluster::all`` form writes the response to every CTA of the cluster.  After waiting on
the barrier, ``clusterlaunchcontrol.query_cancel`` (§9.7.13.18) decodes the response: whether a
cluster was canceled, and the ``%ctaid`` of its first CTA (whose work the caller now does).
"""
from __future__ import annotations

from llvmlite import ir

from tsjit.backend import emit
from tsjit.errors import CompilationError
from tsjit.lang import dtypes as dt
from tsjit.lang.builtins import Dim3
from tsjit.lang.memory import Pointer, Tensor
from tsjit.lang.tmem import require_tcgen05_target
from tsjit.lang.values import Value

#: bytes of one try_cancel response.
RESPONSE_BYTES = 16
_I128 = ir.IntType(128)


def _response(response, what: str) -> Pointer:
    if isinstance(response, Tensor):
        response = response.ptr
    if not isinstance(response, Pointer) or response.address_space != emit.SHARED:
        raise CompilationError(f"tsjit.clc.{what}: response must be a 16-byte shared-memory slot (a shared array "
                               f"of 16 bytes, 16-byte aligned), got {response!r}")
    if response.alignment < RESPONSE_BYTES:
        raise CompilationError(f"tsjit.clc.{what}: the response slot must be 16-byte aligned; this one is only "
                               f"known to be {response.alignment}-byte aligned")
    return response


def try_cancel(response, barrier, *, multicast: bool = False) -> None:
    """``clusterlaunchcontrol.try_cancel.async[.multicast::cluster::all].shared::cta.mbarrier::complete_tx::bytes.b128``:
    ask to cancel a not-yet-launched cluster; the 16-byte answer lands in ``response`` and completes 16
    transaction bytes on ``barrier`` (PTX ISA 9.1 §9.7.13.17).  One thread issues it.

    Args:
        response: 16-byte-aligned shared-memory slot of 16 bytes.
        barrier: the mbarrier (shared Int64 pointer) armed for 16 bytes.
        multicast: write the response to every CTA of the cluster.

    Raises:
        CompilationError: a slot that is not 16-byte aligned shared memory, a barrier that is not an
            mbarrier, or a target without CLC.
    """
    require_tcgen05_target("try_cancel", "clc")
    slot = _response(response, "try_cancel")
    if not isinstance(barrier, Pointer) or barrier.address_space != emit.SHARED or barrier.dtype.bits != 64:
        raise CompilationError(f"tsjit.clc.try_cancel: barrier must be an mbarrier (a shared-memory Int64 pointer), "
                               f"got {barrier!r}")
    name = "llvm.nvvm.clusterlaunchcontrol.try_cancel.async." + ("multicast.shared" if multicast else "shared")
    emit.current().intrinsic(name, [slot.ir, barrier.ir])


def query_cancel(response) -> tuple[Value, Dim3]:
    """Decode a try_cancel response (``clusterlaunchcontrol.query_cancel.is_canceled.pred.b128`` and
    ``.get_first_ctaid::{x,y,z}.b32.b128``, PTX ISA 9.1 §9.7.13.18): ``(canceled, first_ctaid)`` where
    ``canceled`` is a Boolean and ``first_ctaid`` the Int32 ``(x, y, z)`` of the canceled cluster's first
    CTA (undefined when nothing was canceled).  Read the response only after its barrier completed.

    Raises:
        CompilationError: as :func:`try_cancel`.
    """
    require_tcgen05_target("query_cancel", "clc")
    slot = _response(response, "query_cancel")
    km = emit.current()
    b = km.builder
    raw = b.load(slot.ir, typ=_I128, align=RESPONSE_BYTES)
    canceled = Value(km.intrinsic("llvm.nvvm.clusterlaunchcontrol.query_cancel.is_canceled", [raw]), dt.Boolean)
    ids = [Value(km.intrinsic(f"llvm.nvvm.clusterlaunchcontrol.query_cancel.get_first_ctaid.{axis}", [raw]),
                 dt.Int32) for axis in "xyz"]
    return canceled, Dim3(*ids)


def response_slot(responses, index) -> Pointer:
    """The ``index``-th 16-byte slot of an array of responses (``responses``: a 16-byte-aligned shared
    array or pointer; ``index``: int or Int32 Value), as a 16-byte-aligned Uint8 pointer.

    Raises:
        CompilationError: ``responses`` is not 16-byte-aligned shared memory.
    """
    base = _response(responses, "response_slot")
    slot = Pointer(base.ir, dt.Uint8, emit.SHARED, base.alignment).offset(
        index * RESPONSE_BYTES if isinstance(index, int) else index * RESPONSE_BYTES)
    return Pointer(slot.ir, dt.Uint8, emit.SHARED, RESPONSE_BYTES)


__all__ = ["RESPONSE_BYTES", "try_cancel", "query_cancel", "response_slot"]
