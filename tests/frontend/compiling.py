"""Compiling test kernels for sm_90a and reading the LLVM IR / PTX they produce.

:func:`build` compiles through the public :func:`tsjit.compile` (frontend, LLVM, assembler)
and checks that a cubin came out, so every test that builds a kernel also proves that it
assembles.  The other helpers pick pieces out of ``.llir`` / ``.ptx`` text.
"""
from __future__ import annotations

import inspect
import os
import re

import pytest

import tsjit

TARGET = "sm_90a"


def build(kernel, *args, target: str = TARGET, **constexprs) -> tsjit.CompiledKernel:
    """``tsjit.compile(kernel, *args)`` for ``target``; asserts a cubin was assembled for it."""
    compiled = tsjit.compile(kernel, *args, target=target, **constexprs)
    assert compiled.cubin, "the assembler produced no cubin"
    assert f".target {target}" in compiled.ptx
    assert compiled.metadata["target"] == target
    return compiled


def kernel_ir(llir: str) -> str:
    """The text of the kernel's ``define ... { ... }`` (declarations and metadata left out)."""
    match = re.search(r"^define .*?^}", llir, flags=re.M | re.S)
    assert match, "no function definition in the IR"
    return match.group(0)


def signature(llir: str) -> str:
    """The kernel's ``define`` line (its parameter list)."""
    return kernel_ir(llir).splitlines()[0]


def instructions(llir: str, opcode: str) -> list[str]:
    """Lines of the kernel body whose instruction is ``opcode`` (``"phi"``, ``"fadd"``, ``"call"``...),
    with runs of blanks collapsed to one space."""
    pattern = re.compile(rf"^\s+(?:%\S+ = )?{re.escape(opcode)}\b")
    return [" ".join(line.split()) for line in kernel_ir(llir).splitlines() if pattern.match(line)]


def blocks(llir: str) -> dict[str, list[str]]:
    """Basic blocks of the kernel: label -> instruction lines (in order)."""
    result: dict[str, list[str]] = {}
    current = None
    for line in kernel_ir(llir).splitlines()[2:-1]:
        label = re.match(r'^"?([\w.]+)"?:', line)
        if label:
            current = label.group(1)
            result[current] = []
        elif line.strip() and current is not None:
            result[current].append(" ".join(line.split()))
    return result


def block_of(llir: str, needle: str) -> str:
    """Label of the (only) block containing an instruction with ``needle``."""
    found = [label for label, body in blocks(llir).items() if any(needle in line for line in body)]
    assert len(found) == 1, f"{needle!r} is in blocks {found}"
    return found[0]


def calls(llir: str) -> list[str]:
    """Names of the functions the kernel calls, in order (``llvm.nvvm.shfl.sync.idx.i32``, ...)."""
    return re.findall(r'\bcall \S+ @"?([\w.$]+)"?\(', kernel_ir(llir))


def ptx_ops(ptx: str, prefix: str) -> list[str]:
    """PTX instructions (opcode with modifiers) starting with ``prefix``, e.g. ``"shfl.sync"``."""
    return re.findall(rf"^\s*(?:@!?%p\d+\s+)?({re.escape(prefix)}[\w.:]*)", ptx, flags=re.M)


def compile_error(kernel, *args, target: str = TARGET, **constexprs) -> tsjit.CompilationError:
    """The :class:`tsjit.CompilationError` that compiling ``kernel`` for ``args`` raises."""
    with pytest.raises(tsjit.CompilationError) as info:
        tsjit.compile(kernel, *args, target=target, **constexprs)
    return info.value


def position(function, snippet: str, occurrence: int = 0) -> tuple[str, int, int]:
    """(absolute file, line, 0-based character column) of ``snippet`` in ``function``'s source."""
    fn = getattr(function, "fn", function)
    lines, first = inspect.getsourcelines(fn)
    hits = [(first + n, line.index(snippet)) for n, line in enumerate(lines) if snippet in line]
    return (os.path.abspath(inspect.getsourcefile(fn)),) + hits[occurrence]


def assert_points_at(err: tsjit.CompilationError, function, snippet: str, occurrence: int = 0) -> None:
    """``err`` is located at ``snippet`` in ``function`` and renders the absolute ``file:line:col``,
    the source line and a caret under the snippet's first character."""
    filename, line, col = position(function, snippet, occurrence)
    assert err.location is not None, f"unlocated error: {err}"
    assert (err.location.filename, err.location.line, err.location.col) == (filename, line, col), str(err)
    rendered = str(err).splitlines()
    assert rendered[0].startswith(f"{filename}:{line}:{col + 1}: ")
    source = rendered[1].strip()
    assert snippet in source
    caret = rendered[2]
    assert caret.strip() == "^"
    assert caret.index("^") - 4 == source.index(snippet)  # both are indented by four spaces
