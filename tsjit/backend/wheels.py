"""Which NVIDIA pip wheel is installed, read from its ``*.dist-info`` folder without importing anything.

``importlib.metadata`` costs 30-100 ms to import; a listing of each ``sys.path`` folder and one ``RECORD`` read
cost well under a millisecond, which matters on a disk-cache hit (the assembler's version is part of the key).
"""
from __future__ import annotations

import os
import re
import sys

__all__ = ["installed_file"]


def installed_file(distribution: str, wanted: str) -> tuple[tuple[int, int], str, str] | None:
    """``((major, minor), "13.4.92", absolute path)`` of the first file whose ``RECORD`` path contains ``wanted``
    in the wheel ``distribution`` (its normalized name, e.g. ``"nvidia_nvptxcompiler"``; a ``_cu13``-style
    suffix is accepted) on ``sys.path``, when that file exists; ``None`` without such a wheel."""
    pattern = re.compile(rf"^{re.escape(distribution)}(?:_cu\d+)?-(\d+)\.(\d+)\.([\w.]+)\.dist-info$")
    for site in sys.path:
        try:
            names = os.listdir(site or ".")
        except OSError:
            continue
        for name in names:
            if not name.startswith(distribution):
                continue
            match = pattern.match(name)
            if not match:
                continue
            try:
                with open(os.path.join(site, name, "RECORD")) as fh:
                    files = [line.split(",", 1)[0] for line in fh]
            except OSError:
                continue
            for file in files:
                path = os.path.join(site, file)
                if wanted in file and os.path.isfile(path):
                    major, minor, rest = match.groups()
                    return (int(major), int(minor)), f"{major}.{minor}.{rest}", os.path.abspath(path)
    return None
