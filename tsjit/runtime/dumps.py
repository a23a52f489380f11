"""``TSJIT_DUMP_DIR``: the compile's stages written to a folder (a debugging aid that never fails a compile).

:func:`dump_compiled` writes what ``tsjit.compile`` / a launch built or loaded from the disk cache;
:func:`write_dump` is the shared writer (the CPU interpreter dumps its ``.ll`` / ``.py`` through it).
"""
from __future__ import annotations

import os

from tsjit import env
from tsjit.errors import warn

__all__ = ["dump_compiled", "write_dump"]


def _folded_or_none(compiled):
    """The folded source for the dump, or None (with a warning) if it cannot be printed: the dump
    is a debugging aid and never fails a compile."""
    try:
        return compiled.folded_source
    except Exception as exc:  # noqa: BLE001 - any printing failure only costs the .py file
        warn(f"TSJIT_DUMP_DIR: the folded source of {compiled.name!r} could not be printed ({exc}); "
             f"the .ll/.ptx/.cubin dumps are written without it", RuntimeWarning)
        return None


def dump_compiled(compiled) -> None:
    """Write a compiled kernel's ``.ll`` / ``.ptx`` / ``.cubin`` (and, unless it came from the disk cache,
    its folded ``.py``) to ``TSJIT_DUMP_DIR`` as ``<name>-<key prefix>.*``; a no-op when it is unset."""
    if not env.dump_dir():
        return
    # A disk-cache hit has no folded source at hand (it would rerun the frontend): no .py then.
    write_dump(f"{compiled.name}-{compiled.metadata.key[:12]}",
               {".ll": compiled.llir, ".ptx": compiled.ptx, ".cubin": compiled.cubin},
               folded_from=None if compiled.metadata.from_cache else compiled)


def write_dump(stem: str, files: dict, folded_from=None) -> None:
    """Write ``files`` (suffix -> ``str`` / ``bytes``; ``None``: a stage not at hand, skipped) as
    ``<TSJIT_DUMP_DIR>/<stem><suffix>``; a no-op when ``TSJIT_DUMP_DIR`` is unset.  ``folded_from``: an
    object with ``name`` and ``folded_source`` (a compiled or lowered kernel) whose folded source becomes
    ``<stem>.py`` (a source that cannot be printed warns and is left out).

    Dumping is a debugging aid: a directory that cannot be written warns once (``RuntimeWarning``)
    and never fails the compile (or the CPU interpreter's lowering, which dumps its ``.ll`` / ``.py`` too).
    """
    directory = env.dump_dir()
    if not directory:
        return
    if folded_from is not None:
        files = {**files, ".py": _folded_or_none(folded_from)}
    try:
        os.makedirs(directory, exist_ok=True)
        for suffix, data in files.items():
            if data is None:  # a cache entry that did not keep this stage
                continue
            binary = isinstance(data, (bytes, bytearray))
            with open(os.path.join(directory, stem + suffix), "wb" if binary else "w") as fh:
                fh.write(data)
    except OSError as exc:  # dumping is a debugging aid: it never fails a compile
        if directory not in _dump_warned:
            _dump_warned.add(directory)
            warn(f"TSJIT_DUMP_DIR={directory!r} cannot be written ({exc.strerror or exc}); kernels "
                 f"compile without dumps. Point it at a writable directory.", RuntimeWarning)


_dump_warned: set = set()
