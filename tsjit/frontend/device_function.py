"""``@tsjit.func``: a device function, inlined where kernel code calls it.

Kept apart from :mod:`tsjit.frontend.calls` (which inlines it) so that decorating a function loads
nothing of the code generator: a module of ``@tsjit.func`` helpers imports in a disk-cache hit's
process without the device language or llvmlite.
"""
from __future__ import annotations

from tsjit.errors import CompilationError
from tsjit.frontend.frame import current_generator


class DeviceFunction:
    """A Python function compiled as inlined device code (``@tsjit.func``).

    Calling it from kernel code inlines it; calling it from host Python raises
    :class:`CompilationError`.  Its source digest is part of the cache key of every kernel
    that reaches it.
    """

    __tsjit_device_function__ = True

    def __init__(self, fn):
        self.fn = fn
        self.__name__ = getattr(fn, "__name__", "func")
        self.__qualname__ = getattr(fn, "__qualname__", self.__name__)
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn

    def __call__(self, *args, **kwargs):
        gen = current_generator()
        if gen is None:
            raise CompilationError(f"@tsjit.func {self.__qualname__} can only be called from device code")
        return gen.inline(self.fn, list(args), kwargs, None)

    def __repr__(self) -> str:
        return f"<tsjit.func {self.__qualname__}>"


def func(fn=None):
    """Decorator: make ``fn`` a device function, inlined where kernel code calls it."""
    if fn is None:
        return func
    return DeviceFunction(fn)
