"""Background start-up of LLVM, overlapping a cold compile's Python frontend (issue 10 §2).

A process's first compile loads LLVM's native library (``llvmlite.binding``: a 180 MB shared object whose
``dlopen`` and static initializers take 40-100 ms) and builds the NVPTX target machine and the O3 pass
builder.  None of it depends on the kernel, and most of it runs without the GIL, so :func:`llvm` does it
on a daemon thread while the frontend traces the kernel; the LLVM stage (:mod:`tsjit.backend.nvptx`) then
finds it done, or waits for it.  A disk-cache hit never starts it.  This module imports nothing heavy.
"""
from __future__ import annotations

import threading

_lock = threading.Lock()
_started: set[str] = set()


def llvm(target_name: str) -> threading.Thread | None:
    """Start loading LLVM and building ``target_name``'s target machine and O3 pass builder (see the
    module docstring) on a daemon thread; ``None`` when that was already started in this process.
    Never raises: a failure there is met again, and reported, by the compile's own LLVM step."""
    with _lock:
        if target_name in _started:
            return None
        _started.add(target_name)
    thread = threading.Thread(target=_warm, args=(target_name,), name="tsjit-llvm-prewarm", daemon=True)
    thread.start()
    return thread


def _warm(target_name: str) -> None:
    try:
        from tsjit.backend import nvptx  # lazily: that import is the native library's load
        nvptx.warm(target_name)
    except Exception:  # noqa: BLE001 - the compiling thread reports it (see llvm())
        pass
