"""The table of call handlers: NVVM / LLVM intrinsic name -> factory of the closure that executes it.

A factory is ``factory(tr, instr, d, args) -> op`` where ``tr`` is the
:class:`~tsjit.interpret.translate.Translator`, ``instr`` the ``call``, ``d`` the result slot (None for
void) and ``args`` the operand slots.  The op is ``op(f)`` or, for an instruction that may wait, a
generator function marked with :func:`blocking`.  Modules register with :func:`handles` (exact names)
or :func:`handles_prefix` (a family such as ``llvm.nvvm.shfl.sync.``); :mod:`tsjit.interpret.handlers`
imports them all and dispatches.
"""
from __future__ import annotations

import re

from llvmlite import ir

from tsjit.interpret.scalars import constant_value

__all__ = ["EXACT", "PREFIXES", "ASM_PATTERNS", "handles", "handles_prefix", "handles_asm", "blocking", "constant_arg"]

EXACT: dict = {}
PREFIXES: list = []
ASM_PATTERNS: list = []   # (compiled regex on the asm text, factory(tr, instr, d, args, match))


def handles(*names):
    """Register the decorated factory for each intrinsic in ``names`` (full LLVM names)."""
    def register(factory):
        for name in names:
            EXACT[name] = factory
        return factory
    return register


def handles_prefix(prefix: str):
    """Register the decorated factory for every intrinsic whose name starts with ``prefix``."""
    def register(factory):
        PREFIXES.append((prefix, factory))
        PREFIXES.sort(key=lambda item: -len(item[0]))
        return factory
    return register


def handles_asm(pattern: str):
    """Register the decorated factory for inline PTX whose text matches regex ``pattern``
    (``re.search``); the factory gets the match as a fifth argument."""
    compiled = re.compile(pattern, re.S)

    def register(factory):
        ASM_PATTERNS.append((compiled, factory))
        return factory
    return register


def blocking(generator_function):
    """Mark ``generator_function`` (``g(f)``, run with ``yield from``) as an instruction that may wait."""
    generator_function.blocking = True
    return generator_function


def constant_arg(tr, instr, index: int):
    """The compile-time value of operand ``index`` of ``instr`` (an immediate), or None."""
    value = instr.args[index]
    return constant_value(value) if isinstance(value, ir.Constant) else None
