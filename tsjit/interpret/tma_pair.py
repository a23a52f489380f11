"""The leader-routed TMA load of a 2-CTA UMMA pair under the interpreter: the inline PTX
``cp.async.bulk.tensor.Nd.shared::cluster.global.tile.mbarrier::complete_tx::bytes[.multicast::cluster]
.cta_group::2 [dst], [tensorMap, {c...}], [mbar][, ctaMask]`` that ``tsjit.tma_load(..., cta_group=2)`` emits
(:mod:`tsjit.lang.tma`).  PTX ISA 9.1 §9.7.9.27: with ``.cta_group::2`` the mbarrier signalled may be in the
peer CTA of the destination's pair.  Here the box lands at ``dst`` (or, multicast, at the same offset in every
CTA of ``ctaMask``) and its bytes complete on the barrier ``mbar`` names: the pair leader's (a ``mapa``
address; for a multicast, the leader of each destination's pair, at that offset).  The copy itself is
:mod:`tsjit.interpret.async_ops`'s (same image, same race bookkeeping).
"""
from __future__ import annotations

from tsjit.errors import InterpretError
from tsjit.interpret import memory as M
from tsjit.interpret import tma
from tsjit.interpret.async_ops import deliver, tensor_layout
from tsjit.interpret.pdl import check_allocation
from tsjit.interpret.races import snapshot
from tsjit.interpret.registry import handles_asm

__all__ = []


def _cta(th, address: int, what: str, where: str):
    ctas = th.cta.cluster.ctas
    rank = (address >> M.CLUSTER_SHIFT) - 1
    if not 0 <= rank < len(ctas):
        raise InterpretError(f"TMA (cta_group::2) at {where}: the {what} 0x{address:x} is not a shared::cluster "
                             f"address of this cluster's {len(ctas)} CTAs")
    return ctas[rank]


@handles_asm(r"^cp\.async\.bulk\.tensor\.(\d)d\.shared::cluster\.global\.tile\.mbarrier::complete_tx::bytes"
             r"(\.multicast::cluster)?\.cta_group::2 ")
def _tma_load_pair(tr, instr, d, args, match):
    rank = int(match.group(1))
    multicast = match.group(2) is not None
    dst, tmap, bar = args[0], args[1], args[2]
    coords = args[3:3 + rank]
    mask_slot = args[3 + rank] if multicast else None
    where = tr.where(instr)

    def tma_load(f):
        th = f[0]
        layout = tensor_layout(th, f[tmap], where)
        check_allocation(th, th.machine.gmem.find(layout.global_address), "TMA load", where)
        box = tuple((f[c] ^ 0x80000000) - 0x80000000 for c in coords)
        offset, bar_offset = f[dst] & M.OFFSET_MASK, f[bar] & M.OFFSET_MASK
        if multicast:
            mask = f[mask_slot]
            targets = [cta for cta in th.cta.cluster.ctas if mask >> cta.rank & 1]
            if not targets:
                raise InterpretError(f"TMA multicast with an empty cta_mask ({th.describe()})")
            ctas = th.cta.cluster.ctas
            routed = [(cta, ctas[cta.rank - cta.rank % 2]) for cta in targets]
        else:
            routed = [(_cta(th, f[dst], "destination", where), _cta(th, f[bar], "mbarrier", where))]
        clock = snapshot(th) if th.machine.checks else None
        for cta, leader in routed:
            image = tma.load_box(layout, box, th.machine.gmem, offset)
            deliver(th, image, image.tx_bytes, [(cta, offset)], bar_offset, where, clock, barrier_cta=leader)
    return tma_load
