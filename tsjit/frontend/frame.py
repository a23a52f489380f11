"""The compiler's per-function state and the thread's current code generator.

:class:`Frame` is the state of one function being compiled (the kernel, or an inlined
``@tsjit.func``).  :func:`current_generator` finds the code generator compiling on this
thread: a ``@tsjit.func`` called from compile-time Python code and the TS lowering use it
to reach the compiler.  Both live here, below :mod:`.codegen` and :mod:`.calls`, so that
neither has to import the other back.
"""
from __future__ import annotations

import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: codegen imports this module
    from tsjit.frontend.codegen import CodeGenerator
    from tsjit.frontend.source import ParsedFunction

__all__ = ["Frame", "current_generator", "active_generator"]

_local = threading.local()


class Frame:
    """State of one function being compiled (the kernel, or an inlined ``@tsjit.func``).

    Attributes:
        parsed: the function's parsed source (:class:`~tsjit.frontend.source.ParsedFunction`).
        scope: the current bindings, name -> object (compile-time value or device handle).
        is_kernel: True for the kernel itself, False for an inlined device function.
        returns: ``ssa.Edge`` objects whose scope holds ``{"<return>": value}``, one per ``return``.
        dropped: names that lost their binding at a join (for the undefined-name hint).
        loops: the enclosing ``control.LoopContext`` / ``control.StaticLoop`` objects.
        dynamic_depth: run-time ifs/loops entered since the frame began.
        arguments: the kernel's arguments as bound on entry, name -> object (empty for a device
            function), so an error can tell a value passed in from one computed.
    """

    def __init__(self, parsed: "ParsedFunction", scope: dict, *, is_kernel: bool):
        self.parsed = parsed
        self.scope = scope
        self.is_kernel = is_kernel
        self.returns: list = []
        self.dropped: set = set()
        self.loops: list = []
        self.dynamic_depth = 0
        self.arguments = dict(scope) if is_kernel else {}


def current_generator() -> "CodeGenerator | None":
    """The code generator compiling on this thread, or ``None``."""
    stack = getattr(_local, "stack", None)
    return stack[-1] if stack else None


class active_generator:
    """Context manager making ``gen`` the current generator (for trace-time callbacks)."""

    def __init__(self, gen: "CodeGenerator"):
        self.gen = gen

    def __enter__(self):
        stack = getattr(_local, "stack", None)
        if stack is None:
            stack = _local.stack = []
        stack.append(self.gen)
        return self.gen

    def __exit__(self, *exc):
        _local.stack.pop()
