"""Files a compile writes besides the cubin (``TaskManager.render()`` SVGs), recorded so that a
disk-cache hit writes them again.

A compile runs the kernel's Python (and so a ``manager.render("graph.svg")`` call in it) only on
a cache miss.  :func:`recording` collects every file :func:`record` is told about during one
compile; the runtime stores the list (``[[path, text], ...]``, JSON) in the cache entry's
metadata under ``"artifacts"`` and :func:`replay` writes them on a hit, so a warm run leaves the
same files behind as a cold one.  Paths are kept as the program gave them (relative paths are
relative to the current directory at the time of writing, as for a fresh compile).
"""
from __future__ import annotations

import contextlib
import contextvars
import os

from tsjit.errors import warn

_recording: contextvars.ContextVar[list | None] = contextvars.ContextVar("tsjit_artifacts", default=None)


@contextlib.contextmanager
def recording():
    """Collect the files recorded during the ``with`` block; yields the list ``[[path, text], ...]``."""
    files: list = []
    token = _recording.set(files)
    try:
        yield files
    finally:
        _recording.reset(token)


def record(path: str) -> None:
    """Note the text file at ``path`` (just written by compile-time code) for the cache entry; a no-op
    outside a compile or when the file cannot be read back."""
    files = _recording.get()
    if files is None:
        return
    try:
        with open(path, encoding="utf-8") as handle:
            files.append([os.fspath(path), handle.read()])
    except (OSError, UnicodeDecodeError):
        pass


def replay(files) -> None:
    """Write the recorded ``files`` (from a cache entry's metadata) again.  A file that cannot be
    written is a RuntimeWarning naming it, never an error: the kernel itself came from the cache."""
    for path, text in files or ():
        try:
            directory = os.path.dirname(path)
            if directory:
                os.makedirs(directory, exist_ok=True)
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(text)
        except OSError as exc:
            warn(f"cannot write {path!r} (recorded by the kernel's compile, e.g. TaskManager.render) "
                 f"on this cache hit: {exc.strerror or exc}", RuntimeWarning)
