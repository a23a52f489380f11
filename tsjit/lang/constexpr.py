"""Compile-time markers: ``Constexpr``, ``const_expr``, ``range_constexpr`` and ``range``.

* ``def k(x, BLOCK: tsjit.Constexpr[int])`` — ``BLOCK`` is a compile-time Python value;
  each distinct value compiles (and caches) a separate kernel.
* ``if tsjit.const_expr(cond):`` — ``cond`` must be known at compile time; only the taken
  arm is compiled.  (Any ``if`` whose condition is a compile-time value folds the same
  way; ``const_expr`` makes the intent explicit and errors if the value is dynamic.)
* ``for i in tsjit.range_constexpr(n):`` — unrolled at compile time; ``i`` is a Python int.
* ``for i in tsjit.range(a, b, step, unroll=N):`` — a run-time loop (like ``range``) with
  an unroll hint (``llvm.loop.unroll.count``).
"""
from __future__ import annotations

import builtins

import numpy as np

from tsjit.errors import CompilationError, LaunchError


class _ConstexprAnnotation:
    """The object ``tsjit.Constexpr[T]`` evaluates to."""

    __tsjit_constexpr__ = True

    def __init__(self, inner=None):
        self.inner = inner

    def __repr__(self) -> str:
        return f"tsjit.Constexpr[{getattr(self.inner, '__name__', self.inner)}]" if self.inner else "tsjit.Constexpr"

    def check(self, name: str, value) -> None:
        """Refuse a value of another type than ``T`` for ``name: tsjit.Constexpr[T]`` (``int``: Python or
        numpy integers, not bool; ``float``: also integers; ``bool``; any other class: an instance of it).

        Raises:
            LaunchError: names the argument, the annotation and the value given.
        """
        inner = self.inner
        if not isinstance(inner, type):
            return
        if inner is int:
            ok = isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))
        elif inner is float:
            ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))
        elif inner is bool:
            ok = isinstance(value, (bool, np.bool_))
        else:
            ok = isinstance(value, inner)
        if not ok:
            raise LaunchError(f"argument '{name}' is {self!r}, got {type(value).__name__} {value!r}; "
                              f"pass {'an' if inner.__name__[:1] in 'aeiou' else 'a'} {inner.__name__}")


class Constexpr:
    """Annotation marking a kernel or work-method parameter as a compile-time value:
    ``BLOCK: tsjit.Constexpr[int]``.  Its value is part of the specialization key."""

    __tsjit_constexpr__ = True

    def __class_getitem__(cls, inner):
        return _ConstexprAnnotation(inner)


def is_constexpr_annotation(annotation) -> bool:
    """True when ``annotation`` is ``tsjit.Constexpr`` / ``tsjit.Constexpr[...]`` (object or string)."""
    if annotation is None:
        return False
    if getattr(annotation, "__tsjit_constexpr__", False):
        return True
    return isinstance(annotation, str) and "Constexpr" in annotation


def const_expr(value):
    """Assert that ``value`` is known at compile time and return it.

    Raises:
        CompilationError: ``value`` is a run-time device value.
    """
    from tsjit.lang.values import Value  # lazily: a disk-cache hit reads Constexpr annotations without LLVM IR
    if isinstance(value, Value):
        raise CompilationError(
            f"tsjit.const_expr needs a compile-time value, but this expression is a run-time "
            f"{value.dtype.name}; make its inputs tsjit.Constexpr parameters or use a plain `if`")
    return value


def range_constexpr(*args):
    """``range(*args)`` evaluated at compile time; a ``for`` over it is fully unrolled."""
    for a in args:
        if not isinstance(a, int) or isinstance(a, bool):
            raise CompilationError(
                f"tsjit.range_constexpr needs compile-time integers, got {type(a).__name__}; use "
                f"range(...) for a run-time loop")
    return builtins.range(*args)  # this module's own `range` is the run-time one


class DynamicRange:
    """A run-time loop range ``[start, end)`` by ``step`` (what ``range`` means in kernel code).

    Attributes:
        start, end, step: Values or Python ints.
        unroll: unroll count hint, or ``None``.
    """

    def __init__(self, *args, unroll: int | None = None):
        if not 1 <= len(args) <= 3:
            raise CompilationError(f"range expects 1 to 3 arguments, got {len(args)}")
        if len(args) == 1:
            self.start, self.end, self.step = 0, args[0], 1
        elif len(args) == 2:
            (self.start, self.end), self.step = args, 1
        else:
            self.start, self.end, self.step = args
        if isinstance(self.step, int) and self.step == 0:
            raise CompilationError("range() step must not be zero")
        if unroll is not None and (not isinstance(unroll, int) or unroll < 1):
            raise CompilationError(f"unroll must be a positive compile-time int, got {unroll!r}")
        self.unroll = unroll


def range(*args, unroll: int | None = None) -> DynamicRange:  # noqa: A001 - mirrors Python's range
    """A run-time loop range with an optional unroll hint: ``for i in tsjit.range(0, n, unroll=4)``."""
    return DynamicRange(*args, unroll=unroll)
