"""What a cubin and its assembler's log say about one kernel: ptxas statistics and ELF sections.

:func:`parse_statistics` reads the register / spill / stack / shared-memory figures of a ptxas ``-v`` log (the
format ptxas, nvPTXCompiler and nvJitLink all print), :func:`performance_notes` its "Potential Performance Loss"
notes; :func:`elf_section` reads a section's size and alignment
from the cubin (ELF64, little-endian: the ``.nv.shared.<kernel>`` section is the static shared memory the driver
reserves per CTA).
"""
from __future__ import annotations

import re
import struct

__all__ = ["RESERVED_SMEM_BYTES", "parse_statistics", "performance_notes", "elf_section"]

#: Shared memory the hardware reserves at the start of every CTA's window on sm_80 and later (CUDA C++
#: Programming Guide, "Technical Specifications per Compute Capability": 1 KB reserved for system use per
#: block).  The ELF's ``.nv.shared.<kernel>`` section covers it (a kernel whose shared memory is all in the
#: dynamic block has a 1024-byte section, and its dynamic block starts at 0x400), but neither the driver's
#: ``CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES`` nor the opt-in limit counts it: on the H200 such a kernel reports
#: 0 static bytes and launches with the whole 232448-byte opt-in limit as dynamic shared memory.
RESERVED_SMEM_BYTES = 1024


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


def elf_section(cubin: bytes, section: str) -> tuple[int, int] | None:
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


_PERFORMANCE_NOTE = re.compile(r"(\(C\d+\) Potential Performance Loss:[^\n]*)")


def performance_notes(log: str) -> list[str]:
    """ptxas's "Potential Performance Loss" notes in ``log``, each once, in order: e.g. ``"(C7504) Potential
    Performance Loss: 'setmaxnreg' ignored to maintain compatibility across compilation units."`` (a relocatable
    compile: nvJitLink) or ``"(C7508) ... 'setmaxnreg' ignored; unable to determine register count at entry."``
    (a kernel below its launch's register budget).  Empty when there is none."""
    return list(dict.fromkeys(match.strip() for match in _PERFORMANCE_NOTE.findall(log)))
