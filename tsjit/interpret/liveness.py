"""Which SSA values of a kernel's LLVM IR function are live just after an instruction (classic backward
liveness over the control-flow graph, phi operands used on their incoming edge).

The interpreter uses it to narrow work that touches a thread's frame at one instruction to the values
that can still be read there: :mod:`tsjit.interpret.wgmma_ops` replaces the in-flight accumulator
registers of retired MMAs only in the slots live after the ``wgmma.wait_group`` (a value no later
instruction reads needs no replacing).  Values are known by ``id()`` of their llvmlite objects, and the
analysis is restricted to a ``universe`` of such ids (the few hundred values a caller cares about).
"""
from __future__ import annotations

from llvmlite import ir

__all__ = ["Liveness"]


def _uses(instr) -> list:
    if isinstance(instr, ir.CallInstr):
        return list(instr.args)
    return list(instr.operands)


def _successors(term) -> list:
    if isinstance(term, ir.SwitchInstr):
        return [term.default] + [block for _, block in term.cases]
    return [op for op in getattr(term, "operands", ()) if isinstance(op, ir.Block)]


class Liveness:
    """Liveness of the values with ids in ``universe`` over ``function`` (an ``llvmlite.ir.Function``).

    :meth:`after` ``(instr)`` is the set of ids in ``universe`` that some instruction reachable from just
    after ``instr`` reads before they are redefined (an SSA value is defined once, so: read later on some
    path that does not pass through its definition again); a phi reads its incoming value at the end of
    the incoming block."""

    def __init__(self, function, universe):
        self.universe = universe = frozenset(universe)
        self.block_of = {}
        blocks = list(function.blocks)
        defs, upward, phi_defs, edge_uses, succs = {}, {}, {}, {}, {}
        for bb in blocks:
            defined, exposed, phis = set(), set(), set()
            for instr in bb.instructions:
                self.block_of[id(instr)] = bb
                if isinstance(instr, ir.PhiInstr):
                    if id(instr) in universe:
                        phis.add(id(instr))
                        defined.add(id(instr))
                    continue
                for value in _uses(instr):
                    key = id(value)
                    if key in universe and key not in defined:
                        exposed.add(key)
                if id(instr) in universe:
                    defined.add(id(instr))
            defs[id(bb)], upward[id(bb)], phi_defs[id(bb)] = defined, exposed, phis
            succs[id(bb)] = _successors(bb.instructions[-1]) if bb.instructions else []
            for succ in succs[id(bb)]:
                used = set()
                for instr in succ.instructions:
                    if not isinstance(instr, ir.PhiInstr):
                        break
                    for value, pred in instr.incomings:
                        if pred is bb and id(value) in universe:
                            used.add(id(value))
                edge_uses[(id(bb), id(succ))] = used
        live_in = {id(bb): set(upward[id(bb)]) for bb in blocks}
        live_out = {id(bb): set() for bb in blocks}
        changed = True
        while changed:
            changed = False
            for bb in reversed(blocks):
                key = id(bb)
                out = set()
                for succ in succs[key]:
                    out |= live_in[id(succ)]
                    out |= edge_uses[(key, id(succ))]
                if out != live_out[key]:
                    live_out[key] = out
                    new_in = upward[key] | (out - defs[key])
                    if new_in != live_in[key]:
                        live_in[key] = new_in
                    changed = True
        self.live_out = live_out

    def after(self, instr) -> set:
        """The ids of ``universe`` live just after ``instr`` (an instruction of the function)."""
        bb = self.block_of[id(instr)]
        instructions = bb.instructions
        position = next(i for i, x in enumerate(instructions) if x is instr)
        live = set(self.live_out[id(bb)])
        universe = self.universe
        for later in reversed(instructions[position + 1:]):
            if isinstance(later, ir.PhiInstr):
                continue
            live.discard(id(later))
            for value in _uses(later):
                if id(value) in universe:
                    live.add(id(value))
        return live
