"""Register budget: the default formula, setmaxnreg requests, W1/W2.

Default registers per thread (what each thread gets when the register file is split
evenly): ``65536 // (W4 * 32 * 8) * 8`` with ``W4`` = the CTA's warps rounded up to a
multiple of 4 (12 warps -> 168), capped at 256 (the ``setmaxnreg`` maximum).

A task with ``num_registers`` asks ``setmaxnreg`` for that many registers per thread:
``inc`` above the default, ``dec`` below it.  ``setmaxnreg`` acts on a whole warpgroup
(4 aligned warps), hence:

W1  all tasks overlapping one 4-warp group agree on ``num_registers``; when they set it,
    they cover all 4 warps (add a padding task with an empty schedule otherwise).
W2  ``sum(warps * 32 * registers) <= 65536`` and the net budget
    ``sum(warps * (default - registers))`` is not negative.
"""
from __future__ import annotations

from tsjit.ts.verify.findings import Finding, error

__all__ = ["REGISTERS_PER_SM", "default_registers_per_thread", "register_request",
           "check_warpgroup_registers", "check_register_budget", "rounded_warps"]

REGISTERS_PER_SM = 65536
MAX_REGISTERS_PER_THREAD = 256


def rounded_warps(total_warps: int) -> int:
    """``total_warps`` rounded up to a multiple of 4 (whole warpgroups)."""
    return max(4, (total_warps + 3) // 4 * 4)


def default_registers_per_thread(total_warps: int) -> int:
    """``65536 // (rounded warps * 32 * 8) * 8``, capped at 256."""
    per_thread = REGISTERS_PER_SM // (rounded_warps(total_warps) * 32 * 8) * 8
    return min(per_thread, MAX_REGISTERS_PER_THREAD)


def register_request(task, default: int) -> tuple[str | None, int]:
    """``("inc" | "dec" | None, registers per thread)`` for the task's setmaxnreg."""
    if task.num_registers is None or task.num_registers == default:
        return None, default if task.num_registers is None else task.num_registers
    return ("inc" if task.num_registers > default else "dec"), task.num_registers


def check_warpgroup_registers(manager) -> list[Finding]:
    """W1: tasks sharing a warpgroup agree on num_registers and cover it."""
    tasks = manager.tasks
    if all(t.num_registers is None for t in tasks):
        return []
    out = []
    for group in range(rounded_warps(manager.total_warps) // 4):
        lo, hi = 4 * group, 4 * group + 4
        members = [t for t in tasks if t.warp_start < hi and lo < t.warp_end]
        values = {t.num_registers for t in members}
        listing = ", ".join(f"{t.label} num_registers={t.num_registers}" for t in members)
        if len(values) > 1:
            out.append(error("W1", (
                f"warpgroup {group} (warps {lo}-{hi - 1}) mixes register requests: {listing}. "
                f"setmaxnreg applies to the whole warpgroup.\n  Give these tasks the same "
                f"num_registers, or move them to different warpgroups.")))
            continue
        if values == {None} or not members:
            continue
        covered = {w for t in members for w in range(max(lo, t.warp_start), min(hi, t.warp_end))}
        missing = sorted(set(range(lo, hi)) - covered)
        if missing:
            out.append(error("W1", (
                f"warpgroup {group} (warps {lo}-{hi - 1}) sets num_registers ({listing}) but "
                f"warp(s) {', '.join(map(str, missing))} run no task.\n  Add a padding task on "
                f"warp_idx={missing[0]}, num_warps={len(missing)} with an empty schedule "
                f"(`with domain_loop(0, 0, 1): pass`) and the same num_registers.")))
    return out


def check_register_budget(manager) -> list[Finding]:
    """W2: the register file is not over-subscribed and the net budget is >= 0."""
    default = manager.default_registers_per_thread
    total = sum(t.num_warps * 32 * register_request(t, default)[1] for t in manager.tasks)
    net = sum(t.num_warps * (default - register_request(t, default)[1]) for t in manager.tasks)
    out = []
    if total > REGISTERS_PER_SM:
        out.append(error("W2", (
            f"the tasks need {total} registers, more than the {REGISTERS_PER_SM} of an SM "
            f"({', '.join(f'{t.label}: {t.num_warps} x 32 x {register_request(t, default)[1]}' for t in manager.tasks)}).\n"
            f"  Lower num_registers of the largest tasks or use fewer warps.")))
    if net < 0:
        out.append(error("W2", (
            f"negative register budget {net}: tasks ask for more registers above the default "
            f"{default} than the others give up.\n  Lower the increased num_registers or "
            f"decrease other tasks' num_registers.")))
    return out
