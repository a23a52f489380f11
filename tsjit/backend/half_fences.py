"""Keep LLVM from building a ``half`` <-> ``bfloat`` cast while it narrows float truncations.

LLVM's InstCombine rewrites ``fptrunc (op (fpext x) ...)`` to ``op`` in the narrowest source
type followed by ``CastInst::CreateFPCast(result, destination)``.  When ``x`` is a ``half`` and
the destination a ``bfloat`` (or the reverse), both are 16 bits wide and ``CreateFPCast``
fails the assertion "Invalid cast", which aborts the whole process (llvmlite 0.50 / LLVM 22;
found by ``tests/frontend/test_fuzz.py``, seeds 2292326099 and 692104572).  A kernel that
mixes Float16 and BFloat16 values therefore gets, before each ``fptrunc`` to a 16-bit float, an
empty inline-asm move (``mov.b32`` / ``mov.b64``) that InstCombine cannot look through; ptxas
removes the move.  Kernels that use only one 16-bit float type are left untouched.
"""
from __future__ import annotations

from llvmlite import ir

from tsjit.backend.emit import BFloatType

_SIXTEEN = (ir.HalfType, BFloatType)
_MOVES = {ir.FloatType: ("mov.b32 $0, $1;", "=f,f"), ir.DoubleType: ("mov.b64 $0, $1;", "=d,d")}


def _sixteen_bit_kind(ty) -> type | None:
    for kind in _SIXTEEN:
        if isinstance(ty, kind):
            return kind
    return None


def fence_mixed_half_truncations(module: ir.Module) -> int:
    """Insert the asm fence before every ``fptrunc`` to ``half``/``bfloat`` of ``module`` when its
    functions use both 16-bit float types; returns the number of fences inserted (0 otherwise)."""
    kinds, truncations = set(), []
    for function in module.functions:
        for block in function.blocks:
            for instr in block.instructions:
                kind = _sixteen_bit_kind(instr.type)
                if kind is not None:
                    kinds.add(kind)
                for operand in getattr(instr, "operands", ()):
                    operand_kind = _sixteen_bit_kind(getattr(operand, "type", None))
                    if operand_kind is not None:
                        kinds.add(operand_kind)
                if kind is not None and getattr(instr, "opname", "") == "fptrunc":
                    truncations.append(instr)
    if len(kinds) < 2:
        return 0
    fenced = 0
    for instr in truncations:
        source = instr.operands[0]
        move = _MOVES.get(type(source.type))
        if move is None or isinstance(source, ir.Constant):
            continue
        builder = ir.IRBuilder(instr.parent)
        builder.position_before(instr)
        opaque = builder.asm(ir.FunctionType(source.type, [source.type]), move[0], move[1], [source],
                             side_effect=False)
        instr.replace_usage(source, opaque)
        fenced += 1
    return fenced
