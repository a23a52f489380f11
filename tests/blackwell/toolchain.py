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


def assert_register_split_kept(cubin: bytes, tmp_path) -> None:
    """Where cuobjdump exists: the SASS of a warp-specialized ``cubin`` has at least two USETMAXREG (its
    ``setmaxnreg.dec`` / ``.inc`` were kept, not dropped as nvJitLink's relocatable compile does: C7504) and no
    local-memory traffic (LDL / STL: spills)."""
    if cuobjdump() is None:
        return
    text = sass(cubin, tmp_path)
    assert len(re.findall(r"\bUSETMAXREG\b", text)) >= 2, "setmaxnreg dropped (no USETMAXREG in the SASS)"
    assert not re.search(r"\b(LDL|STL)\b", text), "local memory (spills) in the SASS"
