"""CUDA streams: :class:`Stream`, this thread's :func:`use_stream`, and the raw handle of every
stream form tsjit accepts (:func:`stream_value`, :func:`stream_handle`).

A launch's ``stream=`` is ``None`` (this thread's innermost :func:`use_stream`, else the legacy
default stream, handle 0), a :class:`Stream`, an int handle, a ``CUstream``, or a torch / cupy /
cuda.core stream object (``cuda_stream`` / ``ptr`` attributes, the ``__cuda_stream__`` protocol).
"""
from __future__ import annotations

import contextlib
import threading

from tsjit.errors import LaunchError, hide_from_pytest
from tsjit.runtime import driver

__tracebackhide__ = hide_from_pytest  # pytest shows a TsjitError without tsjit's frames


class _ThreadState(threading.local):
    stream = None    # the innermost use_stream() of this thread


#: The thread-local state: ``thread_state.stream`` is this thread's innermost :func:`use_stream` stream
#: (a :class:`Stream`) or ``None``; read by the warm launch path (:func:`tsjit.runtime.launch.hot_caller`).
thread_state = _ThreadState()


class Stream:
    """A CUDA stream. ``Stream(0)`` is the legacy default stream, ``Stream.per_thread()`` the
    per-thread default stream; ``Stream.create()`` owns (and destroys) a new one."""

    def __init__(self, handle: int, *, owned: bool = False):
        self.value = int(handle)
        self._handle = None
        if owned:
            driver.finalize_quietly(self, "cuStreamDestroy", handle)

    @property
    def handle(self):
        """The ``CUstream`` object passed to the driver."""
        if self._handle is None:
            self._handle = driver.import_bindings().CUstream(self.value)
        return self._handle

    @classmethod
    def create(cls, *, non_blocking: bool = True) -> "Stream":
        """A new stream; ``non_blocking`` ones do not synchronize with the legacy stream.  Under
        ``TSJIT_INTERPRET=1`` without a GPU, a stand-in handle (interpreted launches ignore streams)."""
        if driver.interpreted():
            return cls(0x7F00)
        cu = driver.bindings()
        flags = cu.CUstream_flags.CU_STREAM_NON_BLOCKING if non_blocking else cu.CUstream_flags.CU_STREAM_DEFAULT
        raw = driver.check(cu.cuStreamCreate(flags), "cuStreamCreate")
        stream = cls(int(raw), owned=True)
        stream._handle = raw
        return stream

    @classmethod
    def per_thread(cls) -> "Stream":
        """The calling thread's per-thread default stream (``CU_STREAM_PER_THREAD``)."""
        return cls(2)

    def synchronize(self) -> None:
        """Wait for all work queued on this stream (``cuStreamSynchronize``; a no-op under the interpreter)."""
        if driver.interpreted():
            return
        driver.check(driver.bindings().cuStreamSynchronize(self.handle), "cuStreamSynchronize")

    def __int__(self) -> int:
        return self.value

    def __cuda_stream__(self) -> tuple[int, int]:  # the cuda.core stream protocol
        return (0, self.value)

    def __repr__(self) -> str:
        return f"<tsjit Stream 0x{self.value:x}>"


_LEGACY_STREAM = Stream(0)  # handle 0


def current_stream() -> Stream:
    """The stream launches use by default: this thread's :func:`use_stream`, else the legacy one."""
    return thread_state.stream or _LEGACY_STREAM


@contextlib.contextmanager
def use_stream(stream: Stream):
    """``with use_stream(s):`` makes ``s`` this thread's :func:`current_stream`."""
    previous, thread_state.stream = thread_state.stream, (
        stream if isinstance(stream, Stream) else Stream(_stream_value(stream)))
    try:
        yield thread_state.stream
    finally:
        thread_state.stream = previous


def _stream_value(stream) -> int:
    for attribute in ("cuda_stream", "ptr"):  # torch.cuda.Stream, cupy.cuda.Stream
        value = getattr(stream, attribute, None)
        if isinstance(value, int):
            return value
    if hasattr(stream, "__cuda_stream__"):  # cuda.core protocol: (version, handle)
        return int(stream.__cuda_stream__()[1])
    try:
        return int(stream)  # int, CUstream
    except (TypeError, ValueError):
        raise LaunchError(f"launch field 'stream' must be a tsjit Stream, an int handle or a CUDA stream "
                          f"object (torch/cupy/cuda.core); got {type(stream).__name__}") from None


def stream_value(stream) -> int:
    """The raw handle of ``stream`` (the forms of :func:`launch`): ``None`` is this thread's
    :func:`use_stream` stream, else 0 (the legacy default stream).  Raises ``LaunchError`` for
    an object that is no stream."""
    if stream is None:
        current = thread_state.stream
        return 0 if current is None else current.value
    if stream.__class__ is int:
        return stream
    if type(stream) is Stream:
        return stream.value
    return _stream_value(stream)


_STREAM_HANDLES: dict = {}


def stream_handle(stream):
    """The ``CUstream`` for ``stream`` (see :func:`launch` for the accepted forms; the object is
    reused per raw handle)."""
    cu = driver.loaded_bindings()
    if cu is not None and isinstance(stream, cu.CUstream):
        return stream
    value = stream_value(stream)
    cached = _STREAM_HANDLES.get(value)
    if cached is None:
        if len(_STREAM_HANDLES) > 64:
            _STREAM_HANDLES.clear()
        cached = _STREAM_HANDLES[value] = driver.import_bindings().CUstream(value)
    return cached
