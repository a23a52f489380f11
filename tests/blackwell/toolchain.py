"""Whether this machine can assemble sm_100a cubins, and where cuobjdump is (for SASS checks)."""
from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess

import numpy as np

import tsjit


@functools.cache
def sm100_unavailable_reason() -> str | None:
    """None when a trivial kernel assembles for sm_100a; otherwise why not (the skip reason)."""

    @tsjit.kernel
    def probe(out):
        out[0] = 1.0

    try:
        compiled = tsjit.compile(probe, np.zeros(1, np.float32), target="sm_100a")
    except tsjit.CompilationError as err:
        return f"the assembler cannot build sm_100a here: {str(err).splitlines()[0]}"
    return None if compiled.cubin else "no sm_100a cubin was produced"


@functools.cache
def cuobjdump() -> str | None:
    """Path of a cuobjdump binary (PATH, ``TSJIT_CUOBJDUMP``, or the nvidia-cuda-cuobjdump wheel), or None."""
    explicit = os.environ.get("TSJIT_CUOBJDUMP")
    if explicit and os.path.isfile(explicit):
        return explicit
    found = shutil.which("cuobjdump")
    if found:
        return found
    try:
        from cuda import pathfinder
        return pathfinder.find_nvidia_binary_utility("cuobjdump")
    except Exception:
        return None


def sass(cubin: bytes, tmp_path) -> str:
    """``cuobjdump -sass`` of ``cubin``."""
    path = tmp_path / "kernel.cubin"
    path.write_bytes(cubin)
    return subprocess.run([cuobjdump(), "-sass", str(path)], check=True, capture_output=True, text=True).stdout


_OPCODE = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9]+)")


def sass_opcodes(cubin: bytes, tmp_path) -> set:
    """The opcodes (``UTCHMMA``, ``UTCBAR``, ``LDL``, ...) in ``cuobjdump -sass`` of ``cubin``."""
    return set(_OPCODE.findall(sass(cubin, tmp_path)))
