"""Dispatch of ``call`` instructions: intrinsics by name, inline PTX by pattern.

Imports every handler module so their registrations (:mod:`tsjit.interpret.registry`) are in place.
Inline PTX tsjit emits and its meaning here:

* ``// <task> warp: [a, b)`` and ``// <resource>_<operation>`` (the TS lowering's step comments,
  :mod:`tsjit.ts.lower_debug`): the thread's current task and step, for reports;
* an empty template whose outputs are tied to its inputs (``tsjit.wgmma.fence_operand``), and the
  ``mov.b32 $0, $1;`` that fences a conversion to a 16-bit float from LLVM's InstCombine: identity;
* ``wgmma.mma_async``: :mod:`tsjit.interpret.wgmma_ops`;
* the leader-routed ``cp.async.bulk.tensor ... .cta_group::2`` load of a 2-CTA pair: :mod:`tsjit.interpret.tma_pair`;
* the debug-build helpers (``nanosleep``, ``fence.sc.sys``, ``st.volatile``, ``trap``).
"""
from __future__ import annotations

import re

from llvmlite import ir

from tsjit.errors import InterpretError
from tsjit.interpret import (async_ops, clc, intrinsics, numerics, sync_ops, tcgen05_ops, tensor_ops,  # noqa: F401
                             tma_pair, wgmma_ops)  # registrations
from tsjit.interpret.registry import ASM_PATTERNS, EXACT, PREFIXES, handles_asm

__all__ = ["call_handler"]

_TASK = re.compile(r"^// (.+) warp: \[(\d+), (\d+)\)$")


def call_handler(tr, instr, d, args):
    """The op for call ``instr`` (see :mod:`tsjit.interpret.registry` for the factory protocol).

    Raises:
        InterpretError: an intrinsic or inline PTX the interpreter does not implement (names it).
    """
    callee = instr.callee
    if isinstance(callee, ir.InlineAsm):
        text = callee.asm
        for pattern, factory in ASM_PATTERNS:
            match = pattern.search(text)
            if match:
                return factory(tr, instr, d, args, match)
        raise InterpretError(f"the interpreter does not implement the inline PTX `{text[:120]}` "
                             f"({tr.where(instr)})")
    name = callee.name
    factory = EXACT.get(name)
    if factory is None:
        for prefix, candidate in PREFIXES:
            if name.startswith(prefix):
                factory = candidate
                break
    if factory is None:
        raise InterpretError(f"the interpreter does not implement `{name}` yet ({tr.where(instr)}); tsjit "
                             f"compiles it for the GPU, but this kernel cannot run under TSJIT_INTERPRET=1")
    return factory(tr, instr, d, args)


@handles_asm(r"^// ")
def _comment(tr, instr, d, args, match):
    text = instr.callee.asm[3:].replace("$$", "$")
    task = _TASK.match(instr.callee.asm.replace("$$", "$"))
    if task:
        name = task.group(1)

        def enter_task(f):
            th = f[0]
            th.task = f"{name} (warps {task.group(2)}-{int(task.group(3)) - 1})"
            th.step = ""
        return enter_task

    def step(f):
        th = f[0]
        th.step = text
        th.steps_seen[text] = th.steps_seen.get(text, 0) + 1
    return step


@handles_asm(r"^$|^mov\.b(16|32|64) \$0, \$1;$")
def _identity(tr, instr, d, args, match):
    if d is None:
        return None
    if isinstance(instr.type, ir.BaseStructType):
        def identity(f):
            f[d] = tuple(f[a] for a in args)
        return identity
    a = args[0]

    def identity1(f):
        f[d] = f[a]
    return identity1


@handles_asm(r"^\{ \.reg \.b16 lo, hi; cvt\.rn\.satfinite\.(e4m3|e5m2)x2\.f32 lo, \$2, \$1; "
             r"cvt\.rn\.satfinite\.(?:e4m3|e5m2)x2\.f32 hi, \$4, \$3; mov\.b32 \$0, \{lo, hi\}; \}$")
def _fp8_quad(tr, instr, d, args, match):
    """``tsjit.lang.epilogue.pack_fp8_quad``: four Float32 values -> one register of FP8 codes, the first in
    bits 0-7 (``cvt.rn.satfinite``: ties to even, saturated, NaN kept)."""
    kind = match.group(1)

    def pack(f):
        f[d] = sum(numerics.to_bits(float(f[a]), kind) << (8 * i) for i, a in enumerate(args))
    return pack


@handles_asm(r"^(nanosleep|fence\.sc\.sys|fence\.acq_rel|st\.volatile)")
def _debug_helpers(tr, instr, d, args, match):
    return None


@handles_asm(r"^createpolicy\.fractional\.L2::\w+\.b64 \$0, 1\.0;$")
def _cache_policy(tr, instr, d, args, match):
    """``tsjit.tma_load``'s ``cache_policy``: an L2 eviction priority changes no value; an opaque 0 register."""
    def policy(f):
        f[d] = 0
    return policy


@handles_asm(r"^trap;")
def _trap(tr, instr, d, args, match):
    where = tr.where(instr)

    def trap(f):
        raise InterpretError(f"{f[0].describe()} executed `trap` at {where}")
    return trap
