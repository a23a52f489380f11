"""Where the TaskManager's verbose reports go: ``print`` to stdout, where a reader that went away is harmless.

``verbose=True`` is the reference's default, so every compile of a TS program prints its schedule table,
register report and shared-memory layout.  A script piped into ``head`` closes the pipe after a few lines;
the next write raises ``BrokenPipeError`` (Python ignores SIGPIPE), which used to escape from
``TaskManager(...)`` as a failed compile.  :func:`report` treats it as what it is, nobody reading: it points
stdout's file descriptor at ``os.devnull`` (the pipe's read end is gone for good, so nothing that could still
be read is lost; the interpreter's final flush then succeeds too) and the compile goes on.
"""
from __future__ import annotations

import os
import sys

__all__ = ["report"]


def report(text: str) -> None:
    """``print(text)`` for a verbose report; a closed stdout (``BrokenPipeError``) silences the rest of the output."""
    try:
        print(text)
        sys.stdout.flush()
    except BrokenPipeError:
        _discard_stdout()


def _discard_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):   # no file descriptor (a notebook's stream): nothing to redirect
        pass
