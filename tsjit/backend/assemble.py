"""PTX → cubin with nvJitLink (in process) or ptxas (subprocess).

Tool choice (:func:`select_tool`): the ``tool`` argument, else the
``TSJIT_ASSEMBLER`` environment variable (``auto`` | ``nvjitlink`` | ``ptxas``,
default ``auto``).  ``auto`` picks, in order (toolchain.md §3):

1. nvJitLink >= 13.1, loaded through ``cuda.pathfinder.load_nvidia_dynamic_lib``;
2. ptxas, found by ``cuda.pathfinder.find_nvidia_binary_utility("ptxas")`` or on PATH;
3. nvJitLink 13.0, with a warning: 13.0 drops the 1024-byte alignment of the dynamic
   shared-memory block when the kernel also has a static ``.shared`` variable, and TMA
   then faults with CUDA_ERROR_MISALIGNED_ADDRESS (toolchain.md §3, §6.6).  tsjit keeps
   all shared memory in the dynamic block, and :func:`assemble` refuses a nvJitLink
   13.0 cubin whose ELF shows the misalignment.

Both tools run ptxas with ``-O3`` and verbose statistics; :class:`AssembledKernel`
carries the cubin, the tool and its version, the kernel's register / spill / stack
figures parsed from the info log, and its static shared memory read from the cubin's
``.nv.shared.<kernel>`` ELF section (what the driver reserves per CTA, including the
padding that aligns the dynamic block).

Cost on a saxpy-sized kernel (measured on a 2-core CPU machine): nvJitLink 13.5 about
7 ms, the first call of a process about 40 ms (discovery + library load); ptxas 13.0
about 15 ms, the first call about 90 ms (``ptxas --version`` + first exec).
"""
from __future__ import annotations

import functools
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from tsjit import env
from tsjit.backend.targets import Target, get_target
from tsjit.errors import CompilationError, warn

__all__ = ["AssembledKernel", "assemble", "assembler_setting", "select_tool",
           "choose_tool", "assembler_version", "available_tools", "parse_statistics",
           "check_dynamic_smem_alignment", "ASSEMBLER_ENV", "RESERVED_SMEM_BYTES",
           "adopt_ptxas", "found_ptxas", "ptxas_fingerprint"]

#: Environment variable choosing the assembler: ``auto``, ``nvjitlink`` or ``ptxas``.
ASSEMBLER_ENV = env.ASSEMBLER.name
_SETTINGS = env.ASSEMBLER.choices
_NVJITLINK_FIXED = (13, 1)      # first nvJitLink that keeps the dynamic-smem alignment
#: Shared memory the hardware reserves at the start of every CTA's window on sm_80 and later (CUDA C++
#: Programming Guide, "Technical Specifications per Compute Capability": 1 KB reserved for system use per
#: block).  The ELF's ``.nv.shared.<kernel>`` section covers it (a kernel whose shared memory is all in the
#: dynamic block has a 1024-byte section, and its dynamic block starts at 0x400), but neither the driver's
#: ``CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES`` nor the opt-in limit counts it: on the H200 such a kernel reports
#: 0 static bytes and launches with the whole 232448-byte opt-in limit as dynamic shared memory.
RESERVED_SMEM_BYTES = 1024
_INSTALL_NVJITLINK = "pip install 'nvidia-nvjitlink>=13.1'"
_INSTALL_PTXAS = "pip install --no-deps nvidia-cuda-nvcc==13.0.88"


@dataclass(frozen=True)
class AssembledKernel:
    """A cubin and what the assembler reported about one kernel in it.

    Attributes:
        cubin: the ELF image (starts with ``b"\\x7fELF"``).
        tool: ``"nvjitlink"`` or ``"ptxas"``.
        tool_version: e.g. ``"nvJitLink 13.5.37"`` (wheel version when known, else
            ``"nvJitLink 13.5"``) or ``"ptxas 13.0.88"``.
        registers: registers per thread.
        spill_stores_bytes / spill_loads_bytes: bytes spilled to local memory per thread.
        stack_frame_bytes: per-thread stack frame, bytes.
        static_smem_bytes: static shared memory per CTA, bytes: the ``.nv.shared.<kernel>`` ELF
            section (static variables, and the padding that keeps the dynamic block 1024-byte
            aligned after them) less the :data:`RESERVED_SMEM_BYTES` it starts with.  This is what
            the driver reports (``CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES``) and subtracts from the
            opt-in limit: 0 for a kernel whose shared memory is all in the dynamic block.
        info_log: the assembler's full info log (kept even when parsing missed fields).
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


# ---------------------------------------------------------------------------------
# Tool discovery
# ---------------------------------------------------------------------------------
def assembler_setting() -> str:
    """The ``TSJIT_ASSEMBLER`` setting (:func:`tsjit.env.assembler`), lower-cased; ``"auto"`` when unset.

    Raises:
        TsjitError: the variable holds something other than auto/nvjitlink/ptxas.
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
    done (or waits for it).  For nvJitLink that is cuda.pathfinder's discovery, the cuda-bindings
    import and the ``dlopen`` (100-300 ms; they hold the GIL, so a start before the frontend would
    only interleave with it); for ptxas (``TSJIT_ASSEMBLER=ptxas``, or ``auto`` with an nvJitLink
    wheel older than 13.1, which ``auto`` skips without loading it) the search and ``ptxas
    --version``, a subprocess.
    Does nothing (``None``) when the setting is invalid (reported later by :func:`select_tool`) or
    the tool is already found.  Never raises."""
    try:
        setting = tool.strip().lower() if tool else assembler_setting()
        wants_ptxas = setting == "ptxas" or (setting == "auto" and _skips_nvjitlink_wheel())
    except Exception:
        return None
    if wants_ptxas:
        if _known_ptxas or _find_ptxas.cache_info().currsize:
            return None
        thread = threading.Thread(target=_ptxas, name="tsjit-assembler-prewarm", daemon=True)
    else:
        if _load_nvjitlink.cache_info().currsize:
            return None
        thread = threading.Thread(target=_nvjitlink, name="tsjit-assembler-prewarm", daemon=True)
    thread.start()
    return thread


def _skips_nvjitlink_wheel() -> bool:
    """Whether ``auto`` can pass over nvJitLink without loading it: the ``nvidia-nvjitlink`` wheel
    (the library cuda.pathfinder loads first) is older than 13.1."""
    wheel = _wheel_nvjitlink()
    return wheel is not None and wheel[0] < _NVJITLINK_FIXED


@functools.cache
def _wheel_nvjitlink() -> tuple[tuple[int, int], str] | None:
    """((major, minor), ``"nvJitLink 13.5.37"``) of the ``nvidia-nvjitlink`` wheel on ``sys.path``,
    read from its ``*.dist-info`` directory name and ``RECORD`` (the library file it installed must
    exist: that is the file cuda.pathfinder loads first); ``None`` without such a wheel."""
    for site in sys.path:
        try:
            names = os.listdir(site or ".")
        except OSError:
            continue
        for name in names:
            if not name.startswith("nvidia_nvjitlink"):
                continue
            match = re.match(r"^nvidia_nvjitlink(?:_cu\d+)?-(\d+)\.(\d+)\.([\w.]+)\.dist-info$", name)
            if not match:
                continue
            try:
                with open(os.path.join(site, name, "RECORD")) as fh:
                    files = [line.split(",", 1)[0] for line in fh]
            except OSError:
                continue
            if any("nvJitLink" in f and os.path.isfile(os.path.join(site, f)) for f in files):
                major, minor, rest = match.groups()
                return (int(major), int(minor)), f"nvJitLink {major}.{minor}.{rest}"
    return None


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
    """The assemblers this process can use, in ``auto`` preference order of kind."""
    tools = []
    if _nvjitlink()[0] is not None:
        tools.append("nvjitlink")
    if _ptxas()[0] is not None:
        tools.append("ptxas")
    return tools


def choose_tool(setting: str, nvjitlink_version: tuple[int, int] | None,
                have_ptxas: bool) -> tuple[str, str | None]:
    """The selection rule, without side effects: ``(tool, warning or None)``.

    Raises:
        CompilationError: the requested tool (or, for ``auto``, any tool) is missing;
            the message says what to ``pip install``.
    """
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
                f"run: {_INSTALL_PTXAS}, or use nvJitLink: {_INSTALL_NVJITLINK}")
        return "ptxas", None
    if setting != "auto":
        raise CompilationError(f"unknown assembler {setting!r}; use one of {', '.join(_SETTINGS)}")
    if nvjitlink_version is not None and nvjitlink_version >= _NVJITLINK_FIXED:
        return "nvjitlink", None
    if have_ptxas:
        return "ptxas", None
    if nvjitlink_version is not None:
        return "nvjitlink", (
            f"using nvJitLink {nvjitlink_version[0]}.{nvjitlink_version[1]}, which "
            f"misaligns dynamic shared memory when a kernel has static shared variables "
            f"(TMA faults); run: {_INSTALL_NVJITLINK}")
    raise CompilationError(
        f"no PTX assembler found: nvJitLink could not be loaded (cuda.pathfinder) and ptxas "
        f"is not installed; run: {_INSTALL_NVJITLINK}")


def select_tool(tool: str | None = None) -> str:
    """The assembler to use: ``tool`` if given, else ``TSJIT_ASSEMBLER`` (``auto``).

    Warns (``UserWarning``) when ``auto`` falls back to nvJitLink 13.0.
    """
    setting = tool.strip().lower() if tool else assembler_setting()
    # Probe only what the rule needs: `ptxas --version` is a subprocess, nvJitLink a dlopen (an
    # nvJitLink wheel older than 13.1 is known by its version without loading it, unless it is the
    # only tool).
    if setting == "ptxas":
        version = None
    elif setting == "auto" and _skips_nvjitlink_wheel() and _ptxas()[0] is not None:
        version = _wheel_nvjitlink()[0]
    else:
        version = _nvjitlink()[0]
    needs_ptxas = setting == "ptxas" or (
        setting == "auto" and (version or (0, 0)) < _NVJITLINK_FIXED)
    chosen, warning = choose_tool(setting, version, needs_ptxas and _ptxas()[0] is not None)
    if warning:
        warn(warning)
    return chosen


def assembler_version(tool: str | None = None, search: bool = True) -> str | None:
    """Version text of the assembler :func:`select_tool` picks (for cache keys).

    Cheap: tool discovery runs once per process (``"nvJitLink 13.5.37"``,
    ``"ptxas 13.0.88"``).  When the nvJitLink pip wheel is installed (and ``auto`` would pick it),
    its version comes from the wheel's metadata without loading the library, so a disk-cache hit
    never pays for the dlopen (:func:`_wheel_nvjitlink`).  ``search=False`` returns ``None``
    instead of searching for ptxas or loading nvJitLink (the caller can start :func:`prewarm`
    and ask again later).
    """
    setting = tool.strip().lower() if tool else assembler_setting()
    if setting in ("auto", "nvjitlink"):
        wheel = _wheel_nvjitlink()
        if wheel is not None and (setting == "nvjitlink" or wheel[0] >= _NVJITLINK_FIXED):
            return wheel[1]
    if not search:
        _no_search.active = True
        try:
            return assembler_version(tool)
        except _WouldSearch:
            return None
        finally:
            _no_search.active = False
    chosen = select_tool(tool)
    return _nvjitlink()[1] if chosen == "nvjitlink" else _ptxas()[1]


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
# Statistics
# ---------------------------------------------------------------------------------
_FUNCTION_HEADER = re.compile(
    r"(?:Compiling entry function|Function properties for) '?([\w$.]+)'?")
_FIELDS = {
    "registers": re.compile(r"\bused (\d+) registers", re.I),
    "spill_stores_bytes": re.compile(r"(\d+) bytes spill stores", re.I),
    "spill_loads_bytes": re.compile(r"(\d+) bytes spill loads", re.I),
    "stack_frame_bytes": re.compile(r"(\d+) bytes stack frame", re.I),
    "static_smem_bytes": re.compile(r"(\d+) bytes smem", re.I),
}


def parse_statistics(log: str, kernel_name: str) -> dict[str, int]:
    """Register / spill / stack / smem figures for ``kernel_name`` from a ptxas -v log.

    Lines are attributed to the function named by the nearest preceding "Compiling
    entry function 'k'" / "Function properties for k" header; the first value of each
    field wins.  Missing fields are 0.
    """
    values = dict.fromkeys(_FIELDS, 0)
    found: set[str] = set()
    current = None
    for line in log.splitlines():
        header = _FUNCTION_HEADER.search(line)
        if header:
            current = header.group(1)
            continue
        if current != kernel_name:
            continue
        for field, pattern in _FIELDS.items():
            match = pattern.search(line)
            if match and field not in found:
                values[field] = int(match.group(1))
                found.add(field)
    return values


def _elf_section(cubin: bytes, section: str) -> tuple[int, int] | None:
    """(size, alignment) of a named section of a 64-bit little-endian ELF, or None."""
    try:
        if cubin[:4] != b"\x7fELF" or cubin[4] != 2:
            return None
        shoff, = struct.unpack_from("<Q", cubin, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", cubin, 0x3A)
        headers = [struct.unpack_from("<IIQQQQIIQQ", cubin, shoff + i * shentsize)
                   for i in range(shnum)]
        names_offset = headers[shstrndx][4]
        for name_index, _type, _flags, _addr, _off, size, _link, _info, align, _ in headers:
            start = names_offset + name_index
            name = cubin[start:cubin.index(b"\0", start)].decode("ascii", "replace")
            if name == section:
                return size, align
    except (struct.error, IndexError, ValueError):
        return None
    return None


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
        tool: ``"nvjitlink"``, ``"ptxas"`` or ``"auto"``; default ``TSJIT_ASSEMBLER``.

    Raises:
        CompilationError: the tool is missing, or it rejected the PTX ("ptxas rejected
            the generated PTX for sm_90a: <log excerpt with the cited PTX lines>").
    """
    target = get_target(target)
    chosen = select_tool(tool)
    runner = _run_nvjitlink if chosen == "nvjitlink" else _run_ptxas
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
    if chosen == "nvjitlink" and (_nvjitlink()[0] or (0, 0)) < _NVJITLINK_FIXED:
        check_dynamic_smem_alignment(cubin, ptx, kernel_name, version)
    return AssembledKernel(cubin=cubin, tool=chosen, tool_version=version, info_log=log,
                           **stats)
