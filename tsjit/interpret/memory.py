"""Memory of the CPU interpreter: global allocations, shared-memory windows, local memory, addresses.

Address spaces (LLVM NVPTX numbering) and how their pointer values look in the interpreter:

* ``addrspace(1)`` global and generic global addresses: the **real host address** of a registered
  numpy buffer (an array argument, an interpreter-mode device array, a kernel constant).  Memory is
  never dereferenced raw: :meth:`GlobalMemory.find` returns the :class:`Allocation` holding an
  address, so an access outside every allocation is an :class:`~tsjit.errors.InterpretError` naming
  the nearest array, the element index and the source line instead of a segfault.
* ``addrspace(3)`` shared::cta: a byte offset into the CTA's window (one ``uint8`` numpy array, the
  ``tsjit_smem`` block; 1024-aligned on hardware, so swizzle address bits agree).
* ``addrspace(7)`` shared::cluster: ``((rank + 1) << 24) | offset`` (``mapa`` makes them).
* generic shared addresses (``cvta``): :data:`GENERIC_SHARED` ``| ((rank + 1) << 24) | offset``;
  generic local (``alloca``) addresses: :data:`GENERIC_LOCAL` ``| (thread << 24) | offset``.

See ``tsjit/interpret/INTERFACE.md`` for the contract with the tensor-side modules.
"""
from __future__ import annotations

import bisect
import weakref

import numpy as np

from tsjit.errors import InterpretError

__all__ = ["Allocation", "GlobalMemory", "SharedWindow", "LocalMemory", "GENERIC_SHARED", "GENERIC_LOCAL",
           "CLUSTER_SHIFT", "OFFSET_MASK", "register_host_array", "registered_array"]

CLUSTER_SHIFT = 24
OFFSET_MASK = (1 << CLUSTER_SHIFT) - 1
GENERIC_SHARED = 0xF << 56
GENERIC_LOCAL = 0xE << 56
_SPACE_MASK = 0xFF << 56

#: typed views of a byte buffer: format letter -> itemsize
VIEW_FORMATS = {"B": 1, "H": 2, "I": 4, "Q": 8, "f": 4, "d": 8}


def _views(data: np.ndarray) -> dict:
    raw = memoryview(data).cast("B")
    out = {}
    for fmt, size in VIEW_FORMATS.items():
        usable = len(raw) - len(raw) % size
        out[fmt] = raw[:usable].cast(fmt) if usable else memoryview(b"").cast(fmt) if fmt == "B" else None
    return out


class Allocation:
    """One registered global buffer.

    Attributes:
        base: host address of byte 0.
        nbytes: its size in bytes.
        data: ``uint8`` 1-D writable numpy view of all its bytes.
        name: what it is called in messages (the kernel argument's name, ``"device array (64,) Float32"``).
        itemsize: element size used to express offsets as element indices in messages.
        views: typed ``memoryview`` casts of ``data`` (format letter -> view), for fast scalar access.
        pdl_guard: in a ``pdl=True`` launch, the bytes the primary grid wrote (:mod:`tsjit.interpret.pdl`),
            else None (a ``pdl=True`` launch is translated without the fast global load/store paths, so
            every access to it reaches :func:`tsjit.interpret.memory_ops.resolve`, which checks it).
    """

    def __init__(self, data: np.ndarray, name: str, itemsize: int = 1, owner=None):
        self.data = data
        self.base = int(data.ctypes.data)
        self.nbytes = int(data.nbytes)
        self.name = name
        self.itemsize = itemsize
        self.owner = owner
        self.views = _views(data) if self.nbytes else {}
        self.pdl_guard = None

    def describe(self, address: int) -> str:
        offset = address - self.base
        return (f"{self.name} at byte offset {offset} (element {offset // self.itemsize}; the array has "
                f"{self.nbytes // self.itemsize} elements, {self.nbytes} bytes)")


class GlobalMemory:
    """The global address space of one launch: its registered :class:`Allocation` objects by address."""

    def __init__(self):
        self._bases: list[int] = []
        self._allocs: list[Allocation] = []

    def add(self, data: np.ndarray, name: str, itemsize: int = 1, owner=None) -> Allocation:
        """Register ``data`` (any C-contiguous numpy array) under ``name``; returns its allocation
        (an address already registered keeps its first name unless the new buffer is larger)."""
        flat = data.reshape(-1).view(np.uint8) if data.size else np.zeros(0, np.uint8)
        alloc = Allocation(flat, name, itemsize, owner)
        i = bisect.bisect_left(self._bases, alloc.base)
        if i < len(self._bases) and self._bases[i] == alloc.base:
            if self._allocs[i].nbytes >= alloc.nbytes:
                return self._allocs[i]
            self._allocs[i] = alloc
            return alloc
        self._bases.insert(i, alloc.base)
        self._allocs.insert(i, alloc)
        return alloc

    def allocations(self) -> list[Allocation]:
        """Every registered allocation, by address."""
        return list(self._allocs)

    def find(self, address: int) -> Allocation | None:
        """The allocation holding ``address``, or ``None``."""
        i = bisect.bisect_right(self._bases, address) - 1
        if i >= 0:
            alloc = self._allocs[i]
            if address < alloc.base + alloc.nbytes:
                return alloc
        return None

    def nearest(self, address: int) -> Allocation | None:
        """The allocation whose range is closest to ``address`` (for messages)."""
        if not self._allocs:
            return None
        return min(self._allocs, key=lambda a: 0 if a.base <= address < a.base + a.nbytes
                   else min(abs(address - a.base), abs(address - a.base - a.nbytes)))

    def allocation(self, address: int) -> Allocation:
        """The allocation holding ``address``.

        Raises:
            InterpretError: no registered array contains it (names the nearest one).
        """
        alloc = self.find(address)
        if alloc is None:
            raise InterpretError(self.out_of_bounds(address, 1, "global memory access"))
        return alloc

    def check(self, address: int, nbytes: int, what: str) -> Allocation:
        """The allocation holding ``[address, address + nbytes)``.

        Raises:
            InterpretError: the range leaves every allocation (names ``what``, the array, the offset).
        """
        alloc = self.find(address)
        if alloc is None or address + nbytes > alloc.base + alloc.nbytes:
            raise InterpretError(self.out_of_bounds(address, nbytes, what))
        return alloc

    def out_of_bounds(self, address: int, nbytes: int, what: str) -> str:
        near = self.nearest(address)
        where = near.describe(address) if near is not None else "no array is registered"
        return (f"out-of-bounds {what}: {nbytes} byte(s) at address 0x{address:x}, which is {where}; "
                f"check the index computation and the bounds test")


class SharedWindow:
    """The shared memory of one CTA: ``data`` (``uint8`` numpy array of ``nbytes``) and typed views."""

    def __init__(self, nbytes: int, rank: int, nearest=None):
        self.nbytes = nbytes
        self.rank = rank
        self.nearest = nearest  # (offset, nbytes) -> the access named by the nearest reservation, or None
        self.data = np.zeros(max(nbytes, 8), np.uint8)
        self.views = _views(self.data)
        self.tracker = None   # a races.SharedTracker when checks are on
        self.copies = {}      # 4-byte word offset -> (issuing thread, line) of a cp.async not yet retired

    def unretired(self, offset: int, nbytes: int):
        """The ``(thread, line)`` of a ``cp.async`` not yet retired whose destination overlaps
        ``[offset, offset + nbytes)``, or None."""
        copies = self.copies
        for word in range(offset - offset % 4, offset + nbytes, 4):
            found = copies.get(word)
            if found is not None:
                return found
        return None

    def check(self, offset: int, nbytes: int, what: str, line: str = "") -> None:
        """Raise an InterpretError when ``[offset, offset + nbytes)`` leaves the window."""
        if offset < 0 or offset + nbytes > self.nbytes:
            named = self.nearest(offset, nbytes) if self.nearest is not None else ""
            raise InterpretError(f"out-of-bounds shared-memory {what}: {nbytes} byte(s) at offset {offset} of "
                                 f"CTA rank {self.rank}'s shared memory ({self.nbytes} bytes laid out)"
                                 + (f", {named}" if named else "") + (f" at {line}" if line else "")
                                 + "; check the index computation and the bounds test")


_NO_LOCAL = np.zeros(0, np.uint8)


class LocalMemory:
    """Per-thread stack memory for ``alloca`` (device_print argument buffers, spilled aggregates)."""

    def __init__(self, thread_uid: int):
        self.base = GENERIC_LOCAL | (thread_uid << CLUSTER_SHIFT)
        self.data = _NO_LOCAL      # grown at the first alloca (most threads never use local memory)
        self.used = 0
        self.views = None

    def allocate(self, nbytes: int, align: int) -> int:
        offset = (self.used + align - 1) // align * align
        self.used = offset + nbytes
        if self.used > len(self.data):
            grown = np.zeros(max(len(self.data) * 2, self.used, 256), np.uint8)
            grown[:len(self.data)] = self.data
            self.data = grown
            self.views = _views(self.data)
        return self.base + offset


def space_of_generic(address: int) -> str:
    """``"shared"``, ``"local"`` or ``"global"`` for a generic address."""
    top = address & _SPACE_MASK
    if top == GENERIC_SHARED:
        return "shared"
    if top == GENERIC_LOCAL:
        return "local"
    return "global"


# -- interpreter-mode device arrays: host buffers known by address ---------------------------------
_HOST_ARRAYS: "weakref.WeakValueDictionary[int, object]" = weakref.WeakValueDictionary()


def register_host_array(owner, buffer: np.ndarray) -> None:
    """Remember ``buffer`` (the host storage of interpreter-mode device array ``owner``) by address, so
    a TensorMap or a raw pointer into it resolves at launch."""
    owner._interpret_buffer = buffer
    _HOST_ARRAYS[int(buffer.ctypes.data)] = owner


def registered_array(address: int):
    """The interpreter-mode device array whose buffer starts at ``address``, or None."""
    return _HOST_ARRAYS.get(address)


def registered_arrays() -> list:
    """Every live interpreter-mode device array."""
    return list(_HOST_ARRAYS.values())
