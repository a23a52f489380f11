"""``kernel[grid, block]``: the launcher object and its warm path.

A :class:`Launcher` holds one launch configuration of one kernel.  Calling it takes the warm path when it
can: each kernel's launchers are of a subclass (:func:`launcher_class`) whose ``__call__`` is generated for
the kernel's parameter kinds (:func:`tsjit.runtime.launch.hot_method`), so a warm launch is one Python frame
(signature, :class:`~tsjit.runtime.launch.HotLaunch` lookup, packing, the ctypes driver call).  Everything
else goes through :meth:`Launcher.general` and the kernel's full :meth:`~tsjit.runtime.kernel.Kernel.launch`.
"""
from __future__ import annotations

import threading

from tsjit import env
from tsjit.errors import hide_from_pytest
from tsjit.runtime import streams
from tsjit.runtime.launch import HotLaunch, argument_signature, hot_method, raw_cu_launch_kernel_ex

__tracebackhide__ = hide_from_pytest  # pytest shows a TsjitError without tsjit's frames


class Launcher:
    """``kernel[grid, block]`` or ``kernel[grid, block, smem_bytes]``: calling it launches the kernel
    with that configuration (keywords ``stream``, ``cluster``, ``pdl``, ``check_launch`` as
    :meth:`Kernel.launch`).

    The warm path (positional arguments, no cluster/pdl override, a fixed grid): the kernel's
    generated :func:`~tsjit.runtime.launch.hot_caller` computes the arguments' signature, finds the
    :class:`~tsjit.runtime.launch.HotLaunch`, packs the changing values into its private parameter
    block and makes one ``cuLaunchKernelEx`` through ctypes
    (:func:`~tsjit.runtime.launch.raw_cu_launch_kernel_ex`).  ``stream=None`` is this thread's
    :func:`tsjit.use_stream` stream, else the legacy default stream.  Everything else, and every
    first call of a signature, goes through :meth:`Kernel.launch`.
    """

    __slots__ = ("kernel", "grid", "block", "smem", "hot", "fast")

    def __init__(self, kernel: "Kernel", grid, block, smem):
        self.kernel, self.grid, self.block, self.smem = kernel, grid, block, smem
        self.hot: dict = {}
        try:   # a callable grid depends on the arguments; a list grid is checked on every launch
            self.fast = not callable(grid) and hash((grid, block, smem)) is not None
        except TypeError:
            self.fast = False

    def __repr__(self) -> str:
        return f"<tsjit launcher {self.kernel.__qualname__}[{self.grid}, {self.block}]>"

    def __call__(self, *args, stream=None, cluster=None, pdl=False, check_launch=True, **kwargs):
        # Each kernel's launchers are of a subclass whose __call__ is generated (launch.hot_method); this
        # one serves a Launcher made directly.
        if self.fast and not kwargs and cluster is None and not pdl and check_launch \
                and len(args) == len(self.kernel.kinds) and not env.interpret_requested() \
                and self.kernel.hot_call(self.hot, args, stream):   # the warm launch, generated for this kernel
            return None
        return self.general(args, stream, cluster, pdl, check_launch, kwargs)

    def general(self, args, stream, cluster, pdl, check_launch, kwargs):
        """Every launch the generated warm path does not take: a signature's first launch (which makes its
        :class:`~tsjit.runtime.launch.HotLaunch`), TMA descriptors, keywords, overrides, the interpreter."""
        kernel = self.kernel
        if self.fast and not kwargs and cluster is None and not pdl and check_launch \
                and len(args) == len(kernel.kinds) and not env.interpret_requested():
            sig, dyn = argument_signature(args, kernel.kinds)
            hot = self.hot.get(sig)
            if hot is not None and hot.thread == threading.get_ident() and hot.env_state == env.code_state():
                hot(dyn, streams.stream_value(stream))
                return None
            if sig is not None:
                kernel.launch(*args, grid=self.grid, block=self.block, smem_bytes=self.smem, stream=stream)
                self._warm(sig)
                return None
        return kernel.launch(*args, grid=self.grid, block=self.block, smem_bytes=self.smem, stream=stream,
                             cluster=cluster, pdl=pdl, check_launch=check_launch, **kwargs)

    def _warm(self, sig) -> None:
        """After a first launch of ``sig`` through :meth:`Kernel.launch`, remember its hot record."""
        plan = self.kernel._plans.get(sig)
        launch_ex = raw_cu_launch_kernel_ex()
        if plan is None or launch_ex is None or plan.function is None:
            return
        smem = self.smem if self.smem > plan.smem else plan.smem
        prepared = plan.prepared.get((self.grid, self.block, smem, None, False, True))
        if prepared is None:
            return
        if len(self.hot) >= 256:
            self.hot.clear()
        self.hot[sig] = HotLaunch(plan, prepared, launch_ex)


def launcher_class(kinds) -> type:
    """A :class:`Launcher` subclass whose ``__call__`` is :func:`~tsjit.runtime.launch.hot_method`
    generated for a kernel's parameter ``kinds`` (one per kernel)."""
    return type("Launcher", (Launcher,), {"__slots__": (), "__call__": hot_method(kinds, env.interpret_requested),
                                          "__doc__": Launcher.__doc__, "__module__": __name__,
                                          "__qualname__": "Launcher"})
