"""PTX → cubin with nvPTXCompiler (in process), ptxas (subprocess) or nvJitLink (in process).

Tool choice (:func:`select_tool`): the ``tool`` argument, else the ``TSJIT_ASSEMBLER`` environment variable
(``auto`` | ``nvptxcompiler`` | ``ptxas`` | ``nvjitlink``, default ``auto``).  ``auto`` picks, in order:

1. nvPTXCompiler, the ``nvidia-nvptxcompiler`` wheel's static library linked once with the system C compiler
   (:mod:`tsjit.backend.ptx_compiler`): a whole-program compile in process;
2. ptxas, found by ``cuda.pathfinder.find_nvidia_binary_utility("ptxas")`` or on PATH: a whole-program compile in
   a subprocess;
3. nvJitLink >= 13.1, loaded through ``cuda.pathfinder.load_nvidia_dynamic_lib``.  It compiles PTX as relocatable
   code and so drops ``setmaxnreg`` ("(C7504) ... 'setmaxnreg' ignored to maintain compatibility across
   compilation units"): the warp-specialized kernels keep the launch's register budget and spill.
   :func:`assemble` warns (naming what to install) whenever its log says so;
4. nvJitLink 13.0, with a warning: 13.0 also drops the 1024-byte alignment of the dynamic shared-memory block
   when the kernel has a static ``.shared`` variable, and TMA then faults with CUDA_ERROR_MISALIGNED_ADDRESS
   (toolchain.md §3, §6.6).  tsjit keeps all shared memory in the dynamic block, and :func:`assemble` refuses a
   nvJitLink 13.0 cubin whose ELF shows the misalignment.

All three run ptxas's optimizer with ``-O3`` and verbose statistics; :class:`AssembledKernel` carries the cubin,
the tool and its version, the kernel's register / spill / stack figures parsed from the info log, and its static
shared memory read from the cubin's ``.nv.shared.<kernel>`` ELF section (what the driver reserves per CTA,
including the padding that aligns the dynamic block).

Cost on a 2-core CPU machine (BENCHMARKS.md, "Assemblers that keep setmaxnreg"): a saxpy-sized kernel takes
8-11 ms with nvPTXCompiler, 10-12 ms with nvJitLink, 19-21 ms with ptxas; the tutorial GEMM and the attention
kernels 0.13-0.8 s with any of them.  A fresh process's first saxpy assembles in 10-11 ms with nvPTXCompiler
(its ``dlopen`` included, once the library is linked: the link, about 1.5 s, happens once per environment) and in
32-39 ms with nvJitLink (discovery + library load); ptxas's first call costs about 90 ms (``ptxas --version`` +
first exec).
"""
from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from tsjit import env
from tsjit.backend import ptx_compiler, wheels
from tsjit.backend.cubin_info import RESERVED_SMEM_BYTES, parse_statistics, performance_notes
from tsjit.backend.cubin_info import elf_section as _elf_section
from tsjit.backend.targets import Target, get_target
from tsjit.errors import CompilationError, warn

__all__ = ["AssembledKernel", "assemble", "assembler_setting", "select_tool",
           "choose_tool", "assembler_version", "available_tools", "parse_statistics",
           "check_dynamic_smem_alignment", "ASSEMBLER_ENV", "RESERVED_SMEM_BYTES",
           "adopt_ptxas", "found_ptxas", "ptxas_fingerprint"]

#: Environment variable choosing the assembler: ``auto``, ``nvptxcompiler``, ``ptxas`` or ``nvjitlink``.
ASSEMBLER_ENV = env.ASSEMBLER.name
_SETTINGS = env.ASSEMBLER.choices
_NVJITLINK_FIXED = (13, 1)      # first nvJitLink that keeps the dynamic-smem alignment
_INSTALL_NVJITLINK = "pip install 'nvidia-nvjitlink>=13.1'"
_INSTALL_PTXAS = "pip install --no-deps nvidia-cuda-nvcc==13.0.88"
_INSTALL_PTX_COMPILER = f"{ptx_compiler.INSTALL} (linked with the system C compiler: cc, gcc or clang on PATH)"


@dataclass(frozen=True)
class AssembledKernel:
    """A cubin and what the assembler reported about one kernel in it.

    Attributes:
        cubin: the ELF image (starts with ``b"\\x7fELF"``).
        tool: ``"nvptxcompiler"``, ``"ptxas"`` or ``"nvjitlink"``.
        tool_version: e.g. ``"nvPTXCompiler 13.5.37"`` (the wheel's version), ``"ptxas 13.0.88"`` or
            ``"nvJitLink 13.5.37"`` (wheel version when known, else ``"nvJitLink 13.5"``).
        registers: registers per thread.
        spill_stores_bytes / spill_loads_bytes: bytes spilled to local memory per thread.
        stack_frame_bytes: per-thread stack frame, bytes.
        static_smem_bytes: static shared memory per CTA, bytes: the ``.nv.shared.<kernel>`` ELF
            section (static variables, and the padding that keeps the dynamic block 1024-byte
            aligned after them) less the :data:`RESERVED_SMEM_BYTES` it starts with.  This is what
            the driver reports (``CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES``) and subtracts from the
            opt-in limit: 0 for a kernel whose shared memory is all in the dynamic block.
        info_log: the assembler's full info log (kept even when parsing missed fields).
        performance_notes: its "Potential Performance Loss" notes (:func:`~tsjit.backend.cubin_info.performance_notes`),
            e.g. nvJitLink's C7504 (setmaxnreg dropped); empty when there is none.
    """

    cubin: bytes
    tool: str
    tool_version: str
    registers: int
    spill_stores_bytes: int
    spill_loads_bytes: int
    stack_frame_bytes: int
    static_smem_bytes: int
    info_log: str
    performance_notes: tuple[str, ...] = ()


# ---------------------------------------------------------------------------------
# Tool discovery
# ---------------------------------------------------------------------------------
def assembler_setting() -> str:
    """The ``TSJIT_ASSEMBLER`` setting (:func:`tsjit.env.assembler`), lower-cased; ``"auto"`` when unset.

    Raises:
        TsjitError: the variable holds something other than auto/nvptxcompiler/ptxas/nvjitlink.
    """
    return env.assembler()


_discovery_lock = threading.Lock()  # one discovery at a time: prewarm()'s thread and the compiling thread


def _nvjitlink() -> tuple[tuple[int, int] | None, str]:
    """((major, minor) or None, version text or the reason it is unavailable); loaded once per
    process (a caller racing :func:`prewarm`'s thread waits for it instead of loading twice)."""
    if _no_search.active and not _load_nvjitlink.cache_info().currsize:
        raise _WouldSearch
    with _discovery_lock:
        return _load_nvjitlink()


class _WouldSearch(Exception):
    """Raised inside :func:`assembler_version` ``(search=False)`` where an answer needs a search or a load."""


class _NoSearch(threading.local):
    active = False


_no_search = _NoSearch()


@functools.cache
def _load_nvjitlink() -> tuple[tuple[int, int] | None, str]:
    try:
        from cuda import pathfinder  # lazily: cuda-bindings load only when a cubin is assembled
        loaded = pathfinder.load_nvidia_dynamic_lib("nvJitLink")
        from cuda.bindings import nvjitlink  # lazily: as pathfinder above
        major, minor = nvjitlink.version()
    except Exception as err:  # not installed, wrong wheel, broken library: unavailable
        return None, f"{type(err).__name__}: {err}"
    text = f"nvJitLink {major}.{minor}"
    if "site-packages" in str(getattr(loaded, "abs_path", "")):
        wheel = _wheel_nvjitlink()  # its dist-info name: importlib.metadata costs 30-100 ms to import
        if wheel is not None and wheel[0] == (int(major), int(minor)):
            text = wheel[1]
    return (int(major), int(minor)), text


def prewarm(tool: str | None = None) -> threading.Thread | None:
    """Start the discovery of the assembler :func:`select_tool` will want on a daemon thread, so that
    it overlaps the LLVM step of a compile (which releases the GIL); :func:`select_tool` then finds it
    done (or waits for it).  For nvPTXCompiler that is the link of its library (once per cache
    directory, a subprocess) or its ``dlopen``; for ptxas (``TSJIT_ASSEMBLER=ptxas``, or ``auto``
    where nvPTXCompiler is unavailable) the search and ``ptxas --version``, a subprocess; for
    nvJitLink cuda.pathfinder's discovery, the cuda-bindings import and the ``dlopen`` (100-300 ms;
    they hold the GIL, so a start before the frontend would only interleave with it).
    Does nothing (``None``) when the setting is invalid (reported later by :func:`select_tool`) or
    the tool is already found.  Never raises."""
    try:
        setting = tool.strip().lower() if tool else assembler_setting()
        target = _discovery_step(setting)
    except Exception:
        return None
    if target is None:
        return None
    thread = threading.Thread(target=target, name="tsjit-assembler-prewarm", daemon=True)
    thread.start()
    return thread


def _discovery_step(setting: str):
    """The next slow step :func:`select_tool` would take for ``setting``, or None when nothing is left."""
    if setting in ("auto", "nvptxcompiler"):
        state = ptx_compiler.state()[0]
        if state == "pending" or (state == "ready" and not ptx_compiler.loaded()):
            return ptx_compiler.load
        if state == "ready" or setting == "nvptxcompiler":
            return None
    if setting in ("auto", "ptxas") and not (_known_ptxas or _find_ptxas.cache_info().currsize):
        return _ptxas
    if setting in ("auto", "nvjitlink") and not (setting == "auto" and _ptxas()[0] is not None) \
            and not _load_nvjitlink.cache_info().currsize:
        return _nvjitlink
    return None


def _ptx_compiler() -> str | None:
    """nvPTXCompiler's version text when it can assemble, else None; links and loads it (once) unless inside
    :func:`assembler_version` ``(search=False)``, where an unlinked library raises :class:`_WouldSearch`
    (a linked one counts as usable there: its ``dlopen`` is left to the compile)."""
    state, text = ptx_compiler.state()
    if state == "unavailable":
        return None
    if _no_search.active:
        if state == "pending":
            raise _WouldSearch
        return text
    library, text = ptx_compiler.load()
    return text if library is not None else None


def _wheel_nvjitlink() -> tuple[tuple[int, int], str] | None:
    """((major, minor), ``"nvJitLink 13.5.37"``) of the ``nvidia-nvjitlink`` wheel on ``sys.path``
    (:func:`tsjit.backend.wheels.installed_file`: its ``*.dist-info`` name and ``RECORD``; the library
    file it installed must exist: that is the file cuda.pathfinder loads first); ``None`` without such a wheel."""
    return _nvjitlink_wheel()


@functools.cache
def _nvjitlink_wheel() -> tuple[tuple[int, int], str] | None:
    found = wheels.installed_file("nvidia_nvjitlink", "nvJitLink")
    return None if found is None else (found[0], f"nvJitLink {found[1]}")


_ptxas_lock = threading.Lock()  # prewarm()'s thread and the compiling thread find ptxas once
_known_ptxas: list = []          # [(path, version)] adopted from a memo (adopt_ptxas): no search, no subprocess


def _ptxas() -> tuple[str | None, str]:
    """(path or None, version text or the reason it is unavailable); found once per process (a
    caller racing :func:`prewarm`'s thread waits for it)."""
    if _no_search.active and not _known_ptxas and not _find_ptxas.cache_info().currsize:
        raise _WouldSearch
    with _ptxas_lock:
        return _known_ptxas[0] if _known_ptxas else _find_ptxas()


def found_ptxas() -> tuple[str, str] | None:
    """``(path, "ptxas 13.0.88")`` when this process has found ptxas (searched or adopted), else ``None``
    (not looked for yet, or not found).  Never searches."""
    with _ptxas_lock:
        found = _known_ptxas[0] if _known_ptxas else (_find_ptxas() if _find_ptxas.cache_info().currsize else None)
    return found if found is not None and found[0] else None


def adopt_ptxas(path: str, version: str) -> None:
    """Take ``(path, version)`` as this process's ptxas instead of searching for it (cuda.pathfinder's
    import and search, ``ptxas --version``: 50-250 ms).  The caller vouches that a search would find
    this file and that it is unchanged: :func:`ptxas_fingerprint` is the same as when it was found.
    Has no effect once ptxas was searched for or adopted."""
    with _ptxas_lock:
        if not _known_ptxas and not _find_ptxas.cache_info().currsize:
            _known_ptxas.append((path, version))


#: What cuda.pathfinder's ``find_nvidia_binary_utility`` (and the PATH fallback) consult: conda, the CUDA
#: toolkit variables, PATH; the dynamic loader's search (its CTK-root fallback resolves libcudart).
_DISCOVERY_VARIABLES = ("CONDA_PREFIX", "CUDA_PATH", "CUDA_HOME", "PATH", "LD_LIBRARY_PATH")


def _file_identity(path: str | None) -> list | None:
    try:
        info = os.stat(path)
    except (OSError, TypeError, ValueError):
        return None
    return [info.st_size, info.st_mtime_ns, info.st_ino, info.st_dev]


def ptxas_fingerprint(path: str) -> list:
    """What decides which ptxas the search finds and what ``path`` is, as JSON-able data: equal
    fingerprints mean a new search would find the same, unchanged file.  It covers the file itself
    (size, mtime, inode), the environment variables the search reads (:data:`_DISCOVERY_VARIABLES`)
    and where the toolkit roots they name (and ``/usr/local/cuda``) resolve to, every site-packages
    directory's mtime (installing or removing any wheel, e.g. ``nvidia-cuda-nvcc``, changes it), the
    dynamic loader's cache (``/etc/ld.so.cache``), the interpreter and this module's search rule.
    About 20 system calls."""
    import site  # lazily: only a ptxas fingerprint needs it (the interpreter imported it at start-up: cheap)
    folders = list(site.getsitepackages()) if hasattr(site, "getsitepackages") else []
    if site.ENABLE_USER_SITE:
        folders.append(site.getusersitepackages())
    values = [os.environ.get(name) for name in _DISCOVERY_VARIABLES]
    roots = [os.path.realpath(v) if v else None for v in values[:3]] + [os.path.realpath("/usr/local/cuda")]
    return [1, path, _file_identity(path), values, roots, [[f, _file_identity(f)] for f in folders],
            _file_identity("/etc/ld.so.cache"), sys.executable]


@functools.cache
def _find_ptxas() -> tuple[str | None, str]:
    path = None
    try:
        from cuda import pathfinder  # lazily: cuda-bindings load only when a cubin is assembled
        path = pathfinder.find_nvidia_binary_utility("ptxas")
    except Exception:
        path = None
    path = path or shutil.which("ptxas")
    if not path:
        return None, "ptxas not found by cuda.pathfinder or on PATH"
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True,
                             timeout=30).stdout
    except (OSError, subprocess.SubprocessError) as err:
        return None, f"{path} --version failed: {err}"
    match = re.search(r"\bV(\d+\.\d+\.\d+)", out) or re.search(r"release (\d+\.\d+)", out)
    return path, f"ptxas {match.group(1) if match else 'unknown'}"


def available_tools() -> list[str]:
    """The assemblers this process can use, in ``auto``'s order (nvPTXCompiler's library is linked if needed)."""
    tools = []
    if _ptx_compiler() is not None:
        tools.append("nvptxcompiler")
    if _ptxas()[0] is not None:
        tools.append("ptxas")
    if _nvjitlink()[0] is not None:
        tools.append("nvjitlink")
    return tools


def choose_tool(setting: str, nvjitlink_version: tuple[int, int] | None,
                have_ptxas: bool, have_ptx_compiler: bool = False) -> tuple[str, str | None]:
    """The selection rule, without side effects: ``(tool, warning or None)``.

    Raises:
        CompilationError: the requested tool (or, for ``auto``, any tool) is missing;
            the message says what to ``pip install``.
    """
    if setting == "nvptxcompiler":
        if not have_ptx_compiler:
            raise CompilationError(
                f"{ASSEMBLER_ENV}=nvptxcompiler but nvPTXCompiler is unavailable "
                f"({ptx_compiler.state()[1]}); run: {_INSTALL_PTX_COMPILER}")
        return "nvptxcompiler", None
    if setting == "nvjitlink":
        if nvjitlink_version is None:
            raise CompilationError(
                f"{ASSEMBLER_ENV}=nvjitlink but nvJitLink could not be loaded; "
                f"run: {_INSTALL_NVJITLINK}")
        return "nvjitlink", None
    if setting == "ptxas":
        if not have_ptxas:
            raise CompilationError(
                f"{ASSEMBLER_ENV}=ptxas but ptxas was not found (cuda.pathfinder, PATH); "
                f"run: {_INSTALL_PTXAS}, or use nvPTXCompiler: {_INSTALL_PTX_COMPILER}")
        return "ptxas", None
    if setting != "auto":
        raise CompilationError(f"unknown assembler {setting!r}; use one of {', '.join(_SETTINGS)}")
    if have_ptx_compiler:
        return "nvptxcompiler", None
    if have_ptxas:
        return "ptxas", None
    if nvjitlink_version is not None and nvjitlink_version >= _NVJITLINK_FIXED:
        return "nvjitlink", None
    if nvjitlink_version is not None:
        return "nvjitlink", (
            f"using nvJitLink {nvjitlink_version[0]}.{nvjitlink_version[1]}, which "
            f"misaligns dynamic shared memory when a kernel has static shared variables "
            f"(TMA faults) and drops setmaxnreg; run: {_INSTALL_PTX_COMPILER}")
    raise CompilationError(
        f"no PTX assembler found: nvPTXCompiler is unavailable ({ptx_compiler.state()[1]}), ptxas is not "
        f"installed and nvJitLink could not be loaded; run: {_INSTALL_PTX_COMPILER}")


def select_tool(tool: str | None = None) -> str:
    """The assembler to use: ``tool`` if given, else ``TSJIT_ASSEMBLER`` (``auto``).

    Probes only what the rule needs, in its order: nvPTXCompiler (its link, once; its ``dlopen``), then ptxas
    (``ptxas --version``, a subprocess), then nvJitLink (a ``dlopen``).  Warns (``UserWarning``) when ``auto``
    falls back to nvJitLink 13.0.

    Raises:
        CompilationError: as :func:`choose_tool`.
    """
    setting = tool.strip().lower() if tool else assembler_setting()
    have_ptx_compiler = setting in ("auto", "nvptxcompiler") and _ptx_compiler() is not None
    have_ptxas = setting in ("auto", "ptxas") and not have_ptx_compiler and _ptxas()[0] is not None
    wants_nvjitlink = setting == "nvjitlink" or (setting == "auto" and not (have_ptx_compiler or have_ptxas))
    chosen, warning = choose_tool(setting, _nvjitlink_version() if wants_nvjitlink else None, have_ptxas,
                                  have_ptx_compiler)
    if warning:
        warn(warning)
    return chosen


def assembler_version(tool: str | None = None, search: bool = True) -> str | None:
    """Version text of the assembler :func:`select_tool` picks (for cache keys).

    Cheap: tool discovery runs once per process (``"nvPTXCompiler 13.5.37"``, ``"ptxas 13.0.88"``,
    ``"nvJitLink 13.5.37"``).  The versions of the nvPTXCompiler and nvJitLink pip wheels come from
    their metadata (:mod:`tsjit.backend.wheels`) without loading the library, so a disk-cache hit never
    pays for a ``dlopen``.  ``search=False`` returns ``None`` instead of linking nvPTXCompiler's library,
    searching for ptxas or loading nvJitLink (the caller can start :func:`prewarm` and ask again later).
    """
    setting = tool.strip().lower() if tool else assembler_setting()
    if setting == "nvjitlink" and _wheel_nvjitlink() is not None:
        return _wheel_nvjitlink()[1]
    if not search:
        _no_search.active = True
        try:
            return assembler_version(tool)
        except _WouldSearch:
            return None
        finally:
            _no_search.active = False
    chosen = select_tool(tool)
    if chosen == "nvptxcompiler":
        return _ptx_compiler()
    if chosen == "nvjitlink":
        wheel = _wheel_nvjitlink()
        if wheel is not None and (_nvjitlink_loaded_version() in (None, wheel[0])):
            return wheel[1]
        return _nvjitlink()[1]
    return _ptxas()[1]


def _nvjitlink_version() -> tuple[int, int] | None:
    """nvJitLink's (major, minor) or None; inside :func:`assembler_version` ``(search=False)`` the pip wheel's
    version stands in for a library not loaded yet."""
    if _no_search.active and not _load_nvjitlink.cache_info().currsize and _wheel_nvjitlink() is not None:
        return _wheel_nvjitlink()[0]
    return _nvjitlink()[0]


def _nvjitlink_loaded_version() -> tuple[int, int] | None:
    """The loaded nvJitLink's (major, minor), or None before it is loaded."""
    return _load_nvjitlink()[0] if _load_nvjitlink.cache_info().currsize else None


# ---------------------------------------------------------------------------------
# Running the tools
# ---------------------------------------------------------------------------------
class _AssemblerFailed(Exception):
    """The tool rejected the PTX (or could not run); the argument is its log."""


def _run_nvjitlink(ptx: bytes, target: Target) -> tuple[bytes, str]:
    from cuda.bindings import nvjitlink  # lazily: cuda-bindings load only when a cubin is assembled

    options = [f"-arch={target.name}", "-O3", "-verbose"]
    handle = nvjitlink.create(len(options), options)
    try:
        try:
            nvjitlink.add_data(handle, nvjitlink.InputType.PTX, ptx, len(ptx), "kernel.ptx")
            nvjitlink.complete(handle)
        except nvjitlink.nvJitLinkError as err:
            size = nvjitlink.get_error_log_size(handle)
            log = bytearray(size)
            if size:
                nvjitlink.get_error_log(handle, log)
            raise _AssemblerFailed(_text(log) or str(err)) from None
        size = nvjitlink.get_info_log_size(handle)
        info = bytearray(size)
        if size:
            nvjitlink.get_info_log(handle, info)
        cubin = bytearray(nvjitlink.get_linked_cubin_size(handle))
        nvjitlink.get_linked_cubin(handle, cubin)
        return bytes(cubin), _text(info)
    finally:
        nvjitlink.destroy(handle)


def _run_ptx_compiler(ptx: bytes, target: Target) -> tuple[bytes, str]:
    try:
        return ptx_compiler.compile_ptx(ptx, target.name)
    except ptx_compiler.PtxCompilerFailed as failed:
        raise _AssemblerFailed(str(failed)) from None


def _run_ptxas(ptx: bytes, target: Target) -> tuple[bytes, str]:
    path = _ptxas()[0]
    with tempfile.TemporaryDirectory(prefix="tsjit-ptxas-") as tmp:
        source, output = Path(tmp, "kernel.ptx"), Path(tmp, "kernel.cubin")
        source.write_bytes(ptx)
        try:
            proc = subprocess.run(
                [path, f"-arch={target.name}", "-O3", "-v", str(source), "-o", str(output)],
                capture_output=True, text=True, timeout=600)
        except (OSError, subprocess.SubprocessError) as err:
            raise _AssemblerFailed(f"could not run {path}: {err}") from None
        log = (proc.stdout + proc.stderr).replace(str(source), "kernel.ptx")
        if proc.returncode != 0 or not output.exists():
            raise _AssemblerFailed(log.strip() or f"ptxas exited with {proc.returncode}")
        return output.read_bytes(), log


def _text(buffer: bytes | bytearray) -> str:
    return bytes(buffer).rstrip(b"\0").decode("utf-8", "replace")


def _log_excerpt(log: str, ptx: str, max_lines: int = 20) -> str:
    """Error lines of a log, each followed by the PTX line it cites."""
    ptx_lines = ptx.splitlines()
    picked = [line for line in log.splitlines() if re.search(r"error|fatal", line, re.I)]
    out = []
    for line in (picked or log.splitlines())[:max_lines]:
        out.append(line)
        cited = re.search(r"line (\d+);", line)
        if cited and 1 <= int(cited.group(1)) <= len(ptx_lines):
            out.append(f"    > {ptx_lines[int(cited.group(1)) - 1].strip()}")
    return "\n".join(out)


# ---------------------------------------------------------------------------------
# The nvJitLink 13.0 guard
# ---------------------------------------------------------------------------------
def check_dynamic_smem_alignment(cubin: bytes, ptx: str, kernel_name: str,
                                 tool_version: str) -> None:
    """Refuse a cubin whose static shared section breaks the dynamic block's alignment.

    The dynamic block starts right after ``.nv.shared.<kernel>``; nvJitLink 13.0 gives
    that section 16-byte alignment and an unpadded size (e.g. 0x410), so a block declared
    ``.extern .shared .align 1024`` lands misaligned and TMA faults (toolchain.md §3).

    Raises:
        CompilationError: the section's size or alignment is not a multiple of the
            largest ``.extern .shared .align`` in the PTX.
    """
    wanted = [int(a) for a in re.findall(r"\.extern\s+\.shared\s+\.align\s+(\d+)", ptx)]
    section = _elf_section(cubin, f".nv.shared.{kernel_name}")
    if not wanted or section is None or section[0] == 0:
        return
    size, align = section
    if align < max(wanted) or size % max(wanted):
        raise CompilationError(
            f"{tool_version} misplaced the dynamic shared memory of '{kernel_name}' "
            f"(static section: {size} bytes, align {align}; the PTX asks for align "
            f"{max(wanted)}), so TMA would fault.  Run: {_INSTALL_NVJITLINK}, or set "
            f"{ASSEMBLER_ENV}=ptxas")


# ---------------------------------------------------------------------------------
# Entry point
# ---------------------------------------------------------------------------------
def assemble(ptx: str, target: Target | str, *, kernel_name: str,
             tool: str | None = None) -> AssembledKernel:
    """Assemble PTX text into a cubin for ``target``.

    Args:
        ptx: PTX text whose ``.target`` matches ``target``.
        target: a :class:`Target` or its name (``-arch=<name>``).
        kernel_name: the ``.entry`` whose statistics are reported.
        tool: ``"nvptxcompiler"``, ``"ptxas"``, ``"nvjitlink"`` or ``"auto"``; default ``TSJIT_ASSEMBLER``.

    Warns (``UserWarning``) when ``auto`` fell back to nvJitLink and it dropped the kernel's ``setmaxnreg``
    (its log's C7504), naming what to install.

    Raises:
        CompilationError: the tool is missing, or it rejected the PTX ("ptxas rejected
            the generated PTX for sm_90a: <log excerpt with the cited PTX lines>").
    """
    target = get_target(target)
    setting = tool.strip().lower() if tool else assembler_setting()
    chosen = select_tool(setting)
    runner = _RUNNERS[chosen]
    version = assembler_version(chosen)
    try:
        cubin, log = runner(ptx.encode(), target)
    except _AssemblerFailed as failed:
        raise CompilationError(
            f"ptxas rejected the generated PTX for {target.name} ({version}):\n"
            f"{_log_excerpt(str(failed), ptx)}") from None
    stats = parse_statistics(log, kernel_name)
    section = _elf_section(cubin, f".nv.shared.{kernel_name}")
    if section is not None:   # the section starts with the block's reserved kilobyte, which no limit counts
        stats["static_smem_bytes"] = max(0, section[0] - RESERVED_SMEM_BYTES)
    if chosen == "nvjitlink":
        if (_nvjitlink()[0] or (0, 0)) < _NVJITLINK_FIXED:
            check_dynamic_smem_alignment(cubin, ptx, kernel_name, version)
        dropped = _SETMAXNREG_DROPPED.search(log) if setting == "auto" else None
        if dropped:
            warn(f"{version} ignored setmaxnreg in '{kernel_name}' ({dropped.group(0).strip()}): its "
                 f"warpgroups keep the launch's register budget and may spill "
                 f"({stats['spill_stores_bytes']} bytes of spill stores here).  Assemble it as a whole "
                 f"program: {_INSTALL_PTX_COMPILER}; or install ptxas: {_INSTALL_PTXAS}")
    return AssembledKernel(cubin=cubin, tool=chosen, tool_version=version, info_log=log,
                           performance_notes=tuple(performance_notes(log)), **stats)


_RUNNERS = {"nvptxcompiler": _run_ptx_compiler, "ptxas": _run_ptxas, "nvjitlink": _run_nvjitlink}
#: ptxas's note that it dropped setmaxnreg (relocatable compiles: nvJitLink, ``ptxas -c``)
_SETMAXNREG_DROPPED = re.compile(r"\(C7504\)[^\n]*setmaxnreg[^\n]*|'setmaxnreg' ignored[^\n]*")
