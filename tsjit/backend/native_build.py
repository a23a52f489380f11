"""Host shared libraries built once with the system C compiler into tsjit's cache directory.

Two users: the native launcher (:mod:`tsjit.runtime.native_launch`, a CPython extension) and the in-process
PTX compiler (:mod:`tsjit.backend.ptx_compiler`, NVIDIA's static ``libnvptxcompiler_static.a`` linked into a
shared library that ctypes can load).  :func:`build_once` is their common rule: a library that exists is reused;
a compiler error is written next to it as ``<path>.failed`` and never retried (a later process returns ``None`` at
once); no compiler on ``PATH`` returns ``None`` without a mark, so installing one later is enough.  The library
appears atomically (built in a scratch folder beside it, then renamed), so concurrent processes never load a
half-written file.  What is built is host code loaded into the process, so its folder must be as private as
tsjit's cache directory is by default (under the user's cache directory).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sysconfig
import tempfile
from collections.abc import Callable

__all__ = ["c_compiler", "build_once", "failure_text"]


def c_compiler() -> str | None:
    """The system C compiler: Python's configured ``CC``, else ``cc``, ``gcc`` or ``clang`` on ``PATH``; ``None``
    when there is none."""
    configured = (sysconfig.get_config_var("CC") or "").split()
    for name in configured[:1] + ["cc", "gcc", "clang"]:
        found = shutil.which(name)
        if found:
            return found
    return None


def failure_text(path: str) -> str | None:
    """What the compiler said when building ``path`` failed (its ``.failed`` mark), or ``None``."""
    try:
        with open(path + ".failed") as handle:
            return handle.read()
    except OSError:
        return None


def build_once(path: str, command: Callable[[str, str], list[str]], timeout_s: float = 120) -> str | None:
    """``path`` once the library is there: built now when missing, with ``command(compiler, output)`` (the
    argument list that makes ``output``; it runs in a scratch folder beside ``path``).

    Returns ``None`` where it cannot be built: no C compiler, a ``.failed`` mark from an earlier attempt, a
    compiler error (its output becomes the mark) or a timeout (not marked: it may be the machine's load).

    Raises:
        OSError: the folder of ``path`` cannot be created or written.
    """
    if os.path.exists(path):
        return path
    if os.path.exists(path + ".failed"):
        return None
    compiler = c_compiler()
    if compiler is None:
        return None
    folder = os.path.dirname(path)
    os.makedirs(folder, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder, prefix=".build_") as scratch:
        output = os.path.join(scratch, os.path.basename(path))
        try:
            done = subprocess.run(command(compiler, output), capture_output=True, text=True, timeout=timeout_s,
                                  cwd=scratch)
        except subprocess.TimeoutExpired:
            return None
        except (OSError, subprocess.SubprocessError) as exc:
            return _failed(path, str(exc))
        if done.returncode != 0 or not os.path.exists(output):
            return _failed(path, done.stdout + done.stderr)
        os.replace(output, path)
    return path


def _failed(path: str, text: str) -> None:
    try:
        with open(path + ".failed", "w") as handle:
            handle.write(text)
    except OSError:
        pass
    return None
