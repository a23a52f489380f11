"""Cluster launch control (CLC, sm_100a / sm_100f) under the interpreter: a simulated launch queue.

The interpreter runs a grid's clusters one after another, in launch order (:attr:`Machine.launch_queue`
holds those not started yet).  ``clusterlaunchcontrol.try_cancel`` (PTX ISA 9.1 §9.7.13.17) takes the
next not-yet-started cluster off that queue (it will never be launched by itself: the caller does its
work) and answers with its first CTA's ``%ctaid``; when the queue is empty the answer says "not
canceled".  The 16-byte response is written to the issuing CTA's shared memory (``.multicast::cluster::all``:
to every CTA of its cluster, same offset) as an asynchronous-proxy write, and 16 transaction bytes
complete on the mbarrier at the given offset there, as for a TMA load.

The response is opaque in PTX (decoded only by ``clusterlaunchcontrol.query_cancel``, §9.7.13.18); the
interpreter's encoding: byte 0 bit 0 = canceled, then the first CTA's x, y, z as little-endian u32 at
bytes 4, 8, 12 (all-ones when nothing was canceled: the PTX ISA leaves them undefined).
"""
from __future__ import annotations

import numpy as np

from tsjit.interpret import memory as M
from tsjit.interpret.async_ops import deliver
from tsjit.interpret.races import snapshot
from tsjit.interpret.registry import handles

__all__ = ["RESPONSE_BYTES", "cancel_next", "encode_response"]

RESPONSE_BYTES = 16
_CLC = "llvm.nvvm.clusterlaunchcontrol."
_UNDEFINED = 0xFFFFFFFF


def cancel_next(machine):
    """The first CTA's ``(x, y, z)`` of the next cluster of ``machine``'s launch queue, taken off it; None
    when every cluster has started (or been canceled)."""
    if not machine.launch_queue:
        return None
    _index, cluster_id = machine.launch_queue.popleft()
    return tuple(c * d for c, d in zip(cluster_id, machine.cluster_dims))


def encode_response(first_ctaid) -> bytes:
    """The 16-byte response for a canceled cluster whose first CTA is ``first_ctaid`` (None: not canceled)."""
    if first_ctaid is None:
        return bytes(4) + (_UNDEFINED.to_bytes(4, "little") * 3)
    return (1).to_bytes(4, "little") + b"".join(int(c).to_bytes(4, "little") for c in first_ctaid)


@handles(_CLC + "try_cancel.async.shared", _CLC + "try_cancel.async.multicast.shared")
def _try_cancel(tr, instr, d, args):
    slot, bar = args
    multicast = ".multicast." in instr.callee.name
    where = tr.where(instr)

    def try_cancel(f):
        th = f[0]
        offset = f[slot] & M.OFFSET_MASK
        ctas = th.cta.cluster.ctas if multicast else [th.cta]
        response = np.frombuffer(encode_response(cancel_next(th.machine)), np.uint8)
        for cta in ctas:
            cta.window.check(offset, RESPONSE_BYTES, "clusterlaunchcontrol.try_cancel response", where)
            cta.window.data[offset:offset + RESPONSE_BYTES] = response
        clock = snapshot(th) if th.machine.checks else None
        deliver(th, None, RESPONSE_BYTES, [(cta, offset) for cta in ctas], f[bar] & M.OFFSET_MASK, where, clock)
    return try_cancel


@handles(_CLC + "query_cancel.is_canceled")
def _is_canceled(tr, instr, d, args):
    raw, = args

    def is_canceled(f):
        f[d] = f[raw] & 1
    return is_canceled


def _first_ctaid(axis: int):
    def factory(tr, instr, d, args):
        raw, = args

        def first_ctaid(f):
            f[d] = (f[raw] >> (32 * (axis + 1))) & 0xFFFFFFFF
        return first_ctaid
    return factory


for _axis, _name in enumerate("xyz"):
    handles(_CLC + f"query_cancel.get_first_ctaid.{_name}")(_first_ctaid(_axis))
