"""``vprintf`` of ``tsjit.device_print``: the C format string and the packed argument buffer.

CUDA's ``vprintf(format, args)`` receives a pointer to the format string and a pointer to a buffer
holding the arguments, each aligned to its size (``double`` for floats, 32- or 64-bit integers).
"""
from __future__ import annotations

import re
import struct

from tsjit.interpret.memory_ops import resolve

__all__ = ["format_printf"]

_SPEC = re.compile(r"%([-+ #0]*\d*(?:\.\d+)?)(hh|h|ll|l|z)?([diouxXeEfgGcsp%])")


def _read_string(th, address: int) -> str:
    out = bytearray()
    while True:
        views, off, _kind, _owner = resolve(th, 0, address + len(out), 1, "printf format read", "vprintf")
        byte = views["B"][off]
        if byte == 0:
            return out.decode("utf-8", "replace")
        out.append(byte)


def format_printf(th, fmt_address: int, args_address: int) -> str:
    """The text one ``vprintf`` call prints (C semantics for the conversions tsjit emits)."""
    fmt = _read_string(th, fmt_address)
    offset = 0
    pieces, last = [], 0
    for m in _SPEC.finditer(fmt):
        pieces.append(fmt[last:m.start()])
        last = m.end()
        flags, length, conv = m.groups()
        if conv == "%":
            pieces.append("%")
            continue
        if conv in "eEfgG":
            size, code = 8, "d"
        elif conv == "s":
            size, code = 8, "Q"
        elif length in ("ll", "l", "z") or conv == "p":
            size, code = 8, "q" if conv in "di" else "Q"
        else:
            size, code = 4, "i" if conv in "di" else "I"
        offset = (offset + size - 1) // size * size
        views, off, _k, _o = resolve(th, 0, args_address + offset, size, "printf argument read", "vprintf")
        raw = bytes(views["B"][off:off + size])
        value = struct.unpack("<" + code, raw)[0]
        offset += size
        if conv == "s":
            pieces.append(_read_string(th, value))
        elif conv == "c":
            pieces.append(chr(value & 0xFF))
        elif conv == "p":
            pieces.append(hex(value))
        else:
            pieces.append(("%" + flags + conv) % value)
    pieces.append(fmt[last:])
    return "".join(pieces)
