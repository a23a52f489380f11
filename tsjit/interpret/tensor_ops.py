"""Tensor-core collectives: ``wgmma.mma_async`` (inline PTX), its fence / commit / wait, ldmatrix, stmatrix.

``wgmma.mma_async`` is a warpgroup collective (PTX ISA §9.7.15.5): the 128 threads rendezvous, each
giving its accumulator registers (and A fragment when A comes from registers); the matrix
descriptors must agree across the warpgroup.  :func:`tsjit.interpret.wgmma.mma` decodes the
descriptors against the CTA's shared memory exactly as the hardware does, so a wrong descriptor or
swizzle gives the GPU's wrong numbers.  The operands are read when the MMA issues (an
asynchronous-proxy read for the race checker: generic writes to them need ``fence.proxy.async``, and
must be ordered before the issue); the result registers are the asm's outputs.  ``wgmma.fence``,
``commit_group`` and ``wait_group`` order nothing more in this model.

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
from tsjit.interpret import wgmma as wgmma_math
from tsjit.interpret.races import retire
from tsjit.interpret.registry import blocking, constant_arg, handles, handles_asm, handles_prefix
from tsjit.interpret.sync import join_warpgroup, warp_collective

_NV = "llvm.nvvm."
FULL_MASK = 0xFFFFFFFF


@handles_asm(r"wgmma\.mma_async\.sync\.aligned\.m(\d+)n(\d+)k(\d+)\.(\w+)\.(\w+)\.(\w+) \{[^}]*\}, (\{[^}]*\}|\$\d+), "
             r"\$\d+, p, ([-\d, ]+);")
def _wgmma(tr, instr, d, args, match):
    m, n, k = (int(match.group(i)) for i in (1, 2, 3))
    d_type, a_type, b_type = match.group(4), match.group(5), match.group(6)
    registers_a = match.group(7).startswith("{")
    immediates = [int(x) for x in match.group(8).replace(" ", "").split(",") if x]
    scale_a, scale_b = immediates[0], immediates[1]
    if registers_a:
        trans_a, trans_b = 0, (immediates[2] if len(immediates) > 2 else 0)
    else:
        trans_a, trans_b = (immediates[2], immediates[3]) if len(immediates) > 3 else (0, 0)
    count = n // 2
    a_count = 4 if registers_a else 1
    a_slots = args[:a_count]
    b_slot = args[a_count]
    scale_slot = args[a_count + 1]
    acc_slots = args[a_count + 2:a_count + 2 + count]
    if len(acc_slots) != count:
        raise InterpretError(f"wgmma at {tr.where(instr)}: expected {count} accumulator registers, got "
                             f"{len(acc_slots)}")
    where = tr.where(instr)
    kind = f"wgmma.mma_async.m{m}n{n}k{k}"

    def compute(rv):
        threads = sorted(rv.inputs, key=lambda t: t.linear)
        first = threads[0]
        values = [rv.inputs[t] for t in threads]
        b_desc = values[0][1]
        scale_d = values[0][2]
        a_desc = None if registers_a else values[0][0][0]
        for t, v in zip(threads, values):
            if v[1] != b_desc or (not registers_a and v[0][0] != a_desc) or bool(v[2]) != bool(scale_d):
                raise InterpretError(f"{kind} at {where}: {t.describe()} gives different descriptors or scale-d than "
                                     f"thread {first.linear}; every thread of the warpgroup must give the same")
        acc = np.array([v[3] for v in values], dtype=np.float32)
        a_regs = np.array([v[0] for v in values], dtype=np.uint32) if registers_a else None
        window = first.cta.window
        if window.tracker is not None:
            records = [window.tracker.read(first, start, end - start, where, proxy="async", pending=True)
                       for start, end in wgmma_math.operand_ranges(m, n, k, a_type, b_type, a_desc, b_desc,
                                                                   trans_a, trans_b)]
            _wgmma_groups(first)["open"].extend(records)
        out = wgmma_math.mma(m, n, k, a_type, b_type, d_type, a_desc, a_regs, b_desc, window.data, acc, bool(scale_d),
                     scale_a, scale_b, trans_a, trans_b)
        return {t: tuple(float(x) for x in row) for t, row in zip(threads, out)}

    @blocking
    def wgmma(f):
        th = f[0]
        value = (tuple(f[s] for s in a_slots), f[b_slot], f[scale_slot], tuple(f[s] for s in acc_slots))
        rv = join_warpgroup(th, kind, value, compute, where)
        while rv.results is None:
            yield rv
        f[d] = rv.results[th]
    return wgmma


def _wgmma_groups(th) -> dict:
    """The warpgroup's wgmma groups (kept by its first thread, which issues for the race checker):
    ``{"open": in-flight operand reads of uncommitted MMAs, "groups": committed groups, oldest first}``."""
    if not th.wgmma:
        th.wgmma = {"open": [], "groups": []}
    return th.wgmma


@handles(_NV + "wgmma.fence.sync.aligned")
def _wgmma_fence(tr, instr, d, args):
    return None


@handles(_NV + "wgmma.commit_group.sync.aligned")
def _wgmma_commit(tr, instr, d, args):
    def commit(f):
        th = f[0]
        if th.linear % 128 == 0 and th.machine.checks:
            groups = _wgmma_groups(th)
            groups["groups"].append(groups["open"])
            groups["open"] = []
    return commit


@handles(_NV + "wgmma.wait_group.sync.aligned")
def _wgmma_wait(tr, instr, d, args):
    keep = constant_arg(tr, instr, 0)

    def wait(f):
        th = f[0]
        if th.linear % 128 == 0 and th.machine.checks:
            groups = _wgmma_groups(th)
            done = groups["groups"][:max(0, len(groups["groups"]) - keep)]
            groups["groups"] = groups["groups"][len(done):]
            for group in done:
                retire(th, group)
    return wait


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
