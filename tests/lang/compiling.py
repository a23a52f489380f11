"""Compiling device-language test kernels and reading their LLVM IR / PTX.

:func:`build` goes through the public :func:`tsjit.compile` (frontend, LLVM, assembler), so every
test that builds a kernel also proves that its PTX assembles for the target.
"""
from __future__ import annotations

import re

import tsjit
from frontend.compiling import blocks, kernel_ir  # noqa: F401  (shared with the frontend tests)

TARGET = "sm_90a"


def build(kernel, *args, target: str = TARGET, **constexprs) -> tsjit.CompiledKernel:
    """``tsjit.compile(kernel, *args)`` for ``target``; asserts a cubin was assembled for it."""
    compiled = tsjit.compile(kernel, *args, target=target, **constexprs)
    assert compiled.cubin, "the assembler produced no cubin"
    assert f".target {target}" in compiled.ptx
    return compiled


def phis(llir: str, block_prefix: str, llvm_type: str) -> list[str]:
    """``phi`` lines of type ``llvm_type`` in the blocks whose label starts with ``block_prefix``."""
    return [line for label, body in blocks(llir).items() if label.startswith(block_prefix)
            for line in body if re.search(rf"= phi {re.escape(llvm_type)} ", line)]


def ptx_ops(ptx: str, prefix: str) -> list[str]:
    """PTX instructions (opcode with modifiers) starting with ``prefix``."""
    return re.findall(rf"(?:^\s*|[{{;]\s*)(?:@!?%p\d+\s+)?({re.escape(prefix)}[\w.:]*)", ptx, flags=re.M)
