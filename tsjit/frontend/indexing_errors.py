"""Messages for an array used where an element is meant: ``x[i] * s`` with ``x`` of rank 2 (a sub-array
view, not a number) and ``out[i, 0]`` on a rank-1 ``out``; each names the array as the kernel writes it;
and for an index that is None (``tiles[si.stage_idx]`` in the work of a resource without a pipeline)."""
from __future__ import annotations

import ast

from tsjit.errors import CompilationError
from tsjit.lang.memory import Tensor

__all__ = ["not_an_element", "named_container", "none_index"]


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


def none_index(container_node: ast.expr, key_node: ast.expr, key, owner=None) -> str | None:
    """The message for an index of ``container[key]`` that is None, or None when every index is a value.

    ``owner``: the object the enclosing function calls ``self`` (a resource, in a work method), named in
    the message about ``stage_info.stage_idx`` (None for a resource without a ``pipeline_config``)."""
    nodes = key_node.elts if isinstance(key_node, ast.Tuple) else [key_node]
    keys = key if isinstance(key_node, ast.Tuple) else (key,)
    for position, (node, value) in enumerate(zip(nodes, keys)):
        if value is not None or isinstance(node, ast.Slice):
            continue
        text = ast.unparse(node)
        written = ", ".join(ast.unparse(n) for n in nodes)
        where = f"index {position} of `{ast.unparse(container_node)}[{written}]`"
        if any(isinstance(n, ast.Attribute) and n.attr == "stage_idx" for n in ast.walk(node)):
            name = getattr(owner, "name", None)
            of = f" in the work of {name!r}" if isinstance(name, str) else ""
            return (f"{where}: `{text}` is None{of}: stage_info.stage_idx is None for a resource without a "
                    f"pipeline_config (only a pipelined resource's work sees its stage). Return the stage "
                    f"from the ring's consumer work (e.g. `st = ring.take()` in the schedule) and pass it to "
                    f"this work as an argument.")
        return f"{where}: `{text}` is None; an index must be an integer value"
    return None
