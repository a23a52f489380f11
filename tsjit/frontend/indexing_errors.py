"""Messages for an array used where an element is meant: ``x[i] * s`` with ``x`` of rank 2 (a sub-array
view, not a number) and ``out[i, 0]`` on a rank-1 ``out``; each names the array as the kernel writes it."""
from __future__ import annotations

import ast

from tsjit.errors import CompilationError
from tsjit.lang.memory import Tensor

__all__ = ["not_an_element", "named_container"]


def not_an_element(node: ast.expr, tensor: Tensor) -> str:
    """Why an array cannot be an arithmetic operand, naming it as written and the indices it lacks."""
    text = ast.unparse(node)
    more = ", ".join("jkl"[:tensor.rank]) if tensor.rank <= 3 else "..."
    if isinstance(node, ast.Subscript):
        given = len(node.slice.elts) if isinstance(node.slice, ast.Tuple) else 1
        base, index = ast.unparse(node.value), ast.unparse(node.slice)
        return (f"`{text}` indexes the rank-{tensor.rank + given} array `{base}` with {given} index(es), so it is a "
                f"rank-{tensor.rank} sub-array, not an element; an element needs {tensor.rank + given} indices "
                f"(e.g. `{base}[{index}, {more}]`), or pass a rank-{given} array")
    return (f"`{text}` is a rank-{tensor.rank} {tensor.dtype.name} array, not an element; index it with "
            f"{tensor.rank} indices (e.g. `{text}[{more}]`)")


def named_container(exc: CompilationError, node: ast.expr, container) -> CompilationError:
    """``exc`` raised by indexing an array, with the array named as written (`out`: ...)."""
    if not isinstance(container, Tensor) or exc.location is not None:
        return exc
    return CompilationError(f"`{ast.unparse(node)}` (rank {container.rank}): {exc.message}", None, exc.call_chain)
