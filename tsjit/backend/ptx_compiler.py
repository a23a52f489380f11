"""PTX → cubin in process with NVIDIA's PTX compiler library (nvPTXCompiler), a whole-program compile.

Why: nvJitLink compiles its PTX inputs as relocatable code (what ``ptxas -c`` does) and links them, and in that
mode ptxas drops every ``setmaxnreg`` ("(C7504) Potential Performance Loss: 'setmaxnreg' ignored to maintain
compatibility across compilation units"; ptxas 13.0 ``-c`` prints the same).  The warp-specialized kernels then
keep the launch's register budget in their consumer warpgroups and spill (BENCHMARKS.md, "nvPTXCompiler").
nvPTXCompiler compiles one PTX module as a whole program, like ``ptxas`` without ``-c``: ``setmaxnreg`` is kept
and no subprocess is started.

NVIDIA ships the library only as a static archive (``libnvptxcompiler_static.a`` in the ``nvidia-nvptxcompiler``
wheel).  :func:`load` links it once into a shared library with the system C compiler
(:func:`tsjit.backend.native_build.build_once`; about 1 s and 44 MB for 13.5, beside the archive or under
``<TSJIT_CACHE_DIR>/nvptxcompiler``: :func:`library_path`) and loads it with ctypes; only the ``nvPTXCompiler*``
functions are exported (13.5's archive also needs the system's ``libstdc++.so.6``).  Without a C compiler, or
where the link fails, the library is unavailable and the assembler chooses another tool.  API: CUDA Toolkit documentation, "PTX Compiler APIs" (``nvPTXCompiler.h``).
"""
from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import sys
import threading

from tsjit import env
from tsjit.backend import native_build, wheels

__all__ = ["wheel", "library_path", "state", "load", "loaded", "compile_ptx", "PtxCompilerFailed", "INSTALL"]

#: The pip command that installs the archive.
INSTALL = "pip install 'nvidia-nvptxcompiler>=13.1,<14'"
_ARCHIVE = "libnvptxcompiler_static.a"
_FUNCTIONS = ("Create", "Destroy", "Compile", "GetCompiledProgramSize", "GetCompiledProgram", "GetErrorLogSize",
              "GetErrorLog", "GetInfoLogSize", "GetInfoLog", "GetVersion")
_EXPORTS = "{ global: nvPTXCompiler*; local: *; };\n"
# nvPTXCompileResult (nvPTXCompiler.h)
_RESULTS = {1: "invalid compiler handle", 2: "invalid input", 3: "compilation failure", 4: "internal error",
            5: "out of memory", 6: "compiler invocation incomplete", 7: "unsupported PTX version",
            8: "device-side sync unsupported on this SM", 9: "cancelled"}


class PtxCompilerFailed(Exception):
    """nvPTXCompiler rejected the PTX (or could not run); the argument is its error log."""


@functools.cache
def wheel() -> tuple[str, str] | None:
    """``("nvPTXCompiler 13.4.92", archive path)`` of the installed ``nvidia-nvptxcompiler`` wheel, or ``None``."""
    found = wheels.installed_file("nvidia_nvptxcompiler", _ARCHIVE)
    return None if found is None else (f"nvPTXCompiler {found[1]}", found[2])


def library_path(archive: str) -> str:
    """Where the shared library linked from ``archive`` is, or will be linked: beside the archive (the wheel's
    ``nvidia/cu13/lib``, where pip put code this process loads anyway) when that folder is writable, so that
    one link serves every cache directory of the environment; else under ``<TSJIT_CACHE_DIR>/nvptxcompiler/``.
    A library (or a ``.failed`` mark) already in either place wins.  The name carries a digest of the
    archive's real path, size and modification time and of how it is linked, so a new wheel links anew."""
    info = os.stat(archive)
    digest = hashlib.sha256("\0".join((os.path.realpath(archive), str(info.st_size), str(info.st_mtime_ns),
                                       _EXPORTS, ",".join(_FUNCTIONS), sys.platform)).encode()).hexdigest()[:20]
    name = f"libtsjit_nvptxcompiler_{digest}.so"
    beside, cached = os.path.join(os.path.dirname(archive), name), os.path.join(env.cache_dir(), "nvptxcompiler", name)
    for path in (beside, cached):
        if os.path.exists(path) or os.path.exists(path + ".failed"):
            return path
    return beside if os.access(os.path.dirname(archive), os.W_OK) else cached


def state() -> tuple[str, str]:
    """Whether :func:`load` can give the library, without linking or loading it (a few ``stat`` calls):
    ``("ready", version)`` when it is linked already (or loaded), ``("pending", version)`` when :func:`load`
    would link it first (about 1 s), ``("unavailable", why)`` when there is no wheel, no C compiler, or an earlier
    link failed (its ``.failed`` mark).  ``version``: ``"nvPTXCompiler 13.5.37"``."""
    if _loaded.cache_info().currsize:
        library, text = _loaded()
        return ("ready" if library is not None else "unavailable"), text
    found = wheel()
    if found is None:
        return "unavailable", f"the nvidia-nvptxcompiler wheel is not installed ({INSTALL})"
    try:
        path = library_path(found[1])
    except OSError as err:
        return "unavailable", f"cannot read {found[1]}: {err}"
    if os.path.exists(path):
        return "ready", found[0]
    failure = native_build.failure_text(path)
    if failure is not None:
        return "unavailable", f"linking {found[1]} failed: {failure.strip()[:500]}"
    if native_build.c_compiler() is None:
        return "unavailable", f"no C compiler (cc, gcc or clang on PATH) to link {found[1]}"
    return "pending", found[0]


_lock = threading.Lock()


def loaded() -> bool:
    """Whether this process has called :func:`load` (whatever it gave)."""
    return _loaded.cache_info().currsize > 0


def load() -> tuple[ctypes.CDLL | None, str]:
    """(the library, ``"nvPTXCompiler 13.4.92"``), or (None, why it is unavailable: no wheel, no C compiler, the
    link's error); linked on the first call of a machine, loaded once per process."""
    with _lock:
        return _loaded()


@functools.cache
def _loaded() -> tuple[ctypes.CDLL | None, str]:
    found = wheel()
    if found is None:
        return None, f"the nvidia-nvptxcompiler wheel is not installed ({INSTALL})"
    text, archive = found
    try:
        path = library_path(archive)
        built = native_build.build_once(path, lambda compiler, output: _link_command(compiler, output, archive))
    except OSError as err:
        return None, f"cannot link {archive} into {env.cache_dir()}: {err}"
    if built is None:
        failure = native_build.failure_text(path)
        if failure is not None:
            return None, f"linking {archive} failed: {failure.strip()[:500]}"
        return None, f"no C compiler (cc, gcc or clang on PATH) to link {archive}"
    try:
        library = ctypes.CDLL(built)
        for name in _FUNCTIONS:
            getattr(library, f"nvPTXCompiler{name}").restype = ctypes.c_int
    except (OSError, AttributeError) as err:
        return None, f"cannot load {built}: {err}"
    return library, text


def _link_command(compiler: str, output: str, archive: str) -> list[str]:
    exports = os.path.join(os.path.dirname(output), "exports.map")
    with open(exports, "w") as handle:
        handle.write(_EXPORTS)
    keep = [f"-Wl,-u,nvPTXCompiler{name}" for name in _FUNCTIONS]
    return [compiler, "-shared", "-o", output, f"-Wl,--version-script={exports}", "-Wl,--gc-sections", "-Wl,-s",
            *keep, archive, "-l:libstdc++.so.6", "-lm", "-lpthread", "-ldl", "-lrt"]


def compile_ptx(ptx: bytes, target_name: str, options: tuple[str, ...] = ("-O3", "--verbose")) -> tuple[bytes, str]:
    """(cubin, info log) of ``ptx`` compiled for ``target_name`` (``--gpu-name=sm_90a``) as a whole program.

    Raises:
        PtxCompilerFailed: the library is unavailable, or it rejected the PTX (the argument is its error log).
    """
    library, text = load()
    if library is None:
        raise PtxCompilerFailed(text)
    handle = ctypes.c_void_p()
    source = ctypes.create_string_buffer(ptx, len(ptx))
    result = library.nvPTXCompilerCreate(ctypes.byref(handle), ctypes.c_size_t(len(ptx)), source)
    if result:
        raise PtxCompilerFailed(f"nvPTXCompilerCreate: {_RESULTS.get(result, result)}")
    try:
        arguments = [f"--gpu-name={target_name}", *options]
        array = (ctypes.c_char_p * len(arguments))(*[a.encode() for a in arguments])
        result = library.nvPTXCompilerCompile(handle, len(arguments), array)   # ctypes releases the GIL
        if result:
            log = _log(library, handle, "Error")
            raise PtxCompilerFailed(log or f"nvPTXCompilerCompile: {_RESULTS.get(result, result)}")
        size = ctypes.c_size_t()
        library.nvPTXCompilerGetCompiledProgramSize(handle, ctypes.byref(size))
        cubin = ctypes.create_string_buffer(size.value)
        library.nvPTXCompilerGetCompiledProgram(handle, cubin)
        return cubin.raw, _log(library, handle, "Info")
    finally:
        library.nvPTXCompilerDestroy(ctypes.byref(handle))


def _log(library, handle, kind: str) -> str:
    size = ctypes.c_size_t()
    getattr(library, f"nvPTXCompilerGet{kind}LogSize")(handle, ctypes.byref(size))
    if not size.value:
        return ""
    buffer = ctypes.create_string_buffer(size.value + 1)
    getattr(library, f"nvPTXCompilerGet{kind}Log")(handle, buffer)
    return buffer.value.decode("utf-8", "replace")
