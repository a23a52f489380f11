"""Stand-ins for the two CuTe DSL names the Task Scheduling reference's code examples use.

The reference's examples stack ``@cute.jit`` under ``@consumer_work`` and test a label with
``cutlass.const_expr(...)``.  To paste them unchanged, add one line::

    from tsjit.ts.cute_compat import cute, cutlass

``cute.jit`` returns the function unchanged (tsjit compiles every work body itself; no per-method
JIT decorator is needed) and ``cutlass.const_expr`` is :func:`tsjit.const_expr`.  Nothing else of
CuTe DSL is here: any other attribute raises an ``AttributeError`` that says so.
"""
from __future__ import annotations

from tsjit import lang  # the device language; lang.constexpr loads on the first const_expr lookup

__all__ = ["cute", "cutlass"]


class _Namespace:
    """A CuTe DSL module name with only the attributes tsjit stands in for."""

    def __init__(self, module: str, names: dict):
        self._module = module
        self._names = names

    def __getattr__(self, name: str):
        if name.startswith("_") or name not in self._names:
            raise AttributeError(
                f"{self._module}.{name} is CuTe DSL's, not tsjit's: tsjit.ts.cute_compat stands in only for "
                f"{', '.join(f'{self._module}.{n}' for n in self._names)} (write the rest with tsjit's API)")
        return self._names[name]()

    def __repr__(self) -> str:
        return f"<tsjit stand-in for {self._module}: {', '.join(self._names)}>"


def _jit(fn=None, **_options):
    """``@cute.jit`` / ``@cute.jit(...)``: the function unchanged."""
    return fn if fn is not None else (lambda function: function)


cute = _Namespace("cute", {"jit": lambda: _jit})
cutlass = _Namespace("cutlass", {"const_expr": lambda: lang.constexpr.const_expr})
