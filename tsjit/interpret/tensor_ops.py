"""Warp-collective matrix moves: ``ldmatrix``, ``stmatrix`` (``wgmma`` is :mod:`tsjit.interpret.wgmma_ops`).

``ldmatrix`` / ``stmatrix`` (PTX ISA §9.7.14.5.15-16) are warp collectives over all 32 lanes: lane
``8 j + r`` gives the address of row ``r`` of matrix ``j``; :mod:`tsjit.interpret.matrix` moves the
bytes and the fragments.
"""
from __future__ import annotations

import re

import numpy as np

from tsjit.errors import InterpretError
from tsjit.interpret import matrix
from tsjit.interpret import memory as M
from tsjit.interpret.registry import handles_prefix
from tsjit.interpret.sync import warp_collective

_NV = "llvm.nvvm."
FULL_MASK = 0xFFFFFFFF


def _matrix_shape(name: str):
    found = re.search(r"\.x(\d)(\.trans)?\.", name)
    return int(found.group(1)), bool(found.group(2))


def _row_addresses(rv, num: int, where: str, what: str):
    threads = sorted(rv.inputs, key=lambda t: t.lane)
    addresses = np.zeros(32, np.int64)
    for t in threads:
        addresses[t.lane] = rv.inputs[t][0] & M.OFFSET_MASK
    window = threads[0].cta.window
    for lane in range(8 * num):
        window.check(int(addresses[lane]), 16, f"{what} row of lane {lane}", where)
        if addresses[lane] % 16:
            raise InterpretError(f"{what} at {where}: lane {lane} gives row address {addresses[lane]}, which is not "
                                 f"16-byte aligned")
    return threads, addresses, window


@handles_prefix(_NV + "ldmatrix.sync.aligned.")
def _ldmatrix(tr, instr, d, args):
    num, trans = _matrix_shape(instr.callee.name)
    src, = args
    where = tr.where(instr)

    def compute(rv):
        threads, addresses, window = _row_addresses(rv, num, where, "ldmatrix")
        if window.tracker is not None:
            for lane in range(8 * num):
                window.tracker.read(threads[lane], int(addresses[lane]), 16, where)
        out = matrix.ldmatrix(window.data, addresses, num, trans)
        return {t: (int(out[t.lane, 0]) if num == 1 else tuple(int(x) for x in out[t.lane])) for t in threads}

    return warp_collective(f"ldmatrix.x{num}", lambda f: FULL_MASK, lambda f: (f[src],), compute, where, d)


@handles_prefix(_NV + "stmatrix.sync.aligned.")
def _stmatrix(tr, instr, d, args):
    num, trans = _matrix_shape(instr.callee.name)
    dst = args[0]
    regs = args[1:1 + num]
    where = tr.where(instr)

    def compute(rv):
        threads, addresses, window = _row_addresses(rv, num, where, "stmatrix")
        values = np.array([rv.inputs[t][1] for t in threads], dtype=np.uint32).reshape(32, num)
        if window.tracker is not None:
            for lane in range(8 * num):
                window.tracker.write(threads[lane], int(addresses[lane]), 16, where)
        matrix.stmatrix(window.data, addresses, values, num, trans)
        return {t: None for t in threads}

    return warp_collective(f"stmatrix.x{num}", lambda f: FULL_MASK, lambda f: (f[dst], tuple(f[r] for r in regs)),
                           compute, where, None)
