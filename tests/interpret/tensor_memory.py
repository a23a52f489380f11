"""A stand-in for the interpreter's global memory in the tensor-side unit tests: numpy arrays
registered as allocations, found by host address (the contract of ``tsjit/interpret/INTERFACE.md``:
``gmem.check(address, nbytes, what)`` returns the allocation, with ``.base`` and a uint8 ``.data``)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tsjit.errors import InterpretError


@dataclass
class Allocation:
    base: int
    data: np.ndarray
    name: str


class ArrayMemory:
    """Global memory made of the numpy arrays passed to :meth:`add` (each must be C-contiguous)."""

    def __init__(self):
        self.allocations: list[Allocation] = []

    def add(self, array: np.ndarray, name: str) -> int:
        """Register ``array``; returns its address."""
        assert array.flags.c_contiguous
        self.allocations.append(Allocation(array.ctypes.data, array.reshape(-1).view(np.uint8), name))
        return array.ctypes.data

    def check(self, address: int, nbytes: int, what: str) -> Allocation:
        for allocation in self.allocations:
            if allocation.base <= address < allocation.base + allocation.data.size:
                offset = address - allocation.base
                if offset + nbytes > allocation.data.size:
                    raise InterpretError(f"{what}: bytes [{offset}, {offset + nbytes}) leave '{allocation.name}' "
                                         f"({allocation.data.size} bytes)")
                return allocation
        raise InterpretError(f"{what}: address 0x{address:x} is in no allocation")
