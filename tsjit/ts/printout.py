"""TaskManager printouts.

Schedule table: one column per task headed ``name[warp_start:warp_end)``, a centred
title for the single combined "Full (Head + Loop + Tail)" run, then one row per round
of the lock-step walk (:mod:`tsjit.ts.simulate`).  Each 30-character cell reads
``<resource (<=10 chars)> <stage tag> <phase tag> <call index>``; stage tags are
``str(ScheduleStage)`` (``ConsWrk``, ``->ConsWai``, ``ProdCmt->`` ...), phase tags ``H``
head, ``F`` first iteration, ``L`` last iteration, ``E`` every(n), ``W``
when_true/when_false, ``T`` tail, blank for a plain loop step.  A blocked or finished
task shows an empty cell; after a deadlock a last ``BLK`` row shows where each remaining
task is stuck (``!``).  The table ends with a closing rule and a legend line (every column of a
cell, the call index too).

Register report: the default registers per thread, then per task
``numWarps x (default - requested) = contribution``, then the total against the
65536-register file with the free registers in 8-register x 32-thread blocks, then the
net budget (the sum of contributions; negative is an error, W2).
"""
from __future__ import annotations

from tsjit.ts.simulate import SimulatedStep
from tsjit.ts.verify.registers import (REGISTERS_PER_SM, default_registers_per_thread,
                                       register_request, rounded_warps)

__all__ = ["format_cell", "format_schedule_table", "format_register_report", "CELL_WIDTH"]

CELL_WIDTH = 30
TITLE = "Full (Head + Loop + Tail)"
LEGEND = ("phase: H head, F first iter, L last iter, E every(n), W when_true/when_false, "
          "T tail, blank loop; number: the call's index among the section's calls of that resource "
          "operation (0 first; C0's 'ConsumerWait 0'); empty cell: task blocked or done")


def format_cell(entry: SimulatedStep | None) -> str:
    """``<resource> <stage tag> <phase> <call idx>`` padded to :data:`CELL_WIDTH`."""
    if entry is None:
        return " " * CELL_WIDTH
    step = entry.step
    text = f"{step.resource.name[:10]:<10} {step.stage.tag:<9} {entry.phase:<1} {step.call_index:>3}"
    return f"{text:<{CELL_WIDTH}}"[:CELL_WIDTH]


def format_schedule_table(tasks, rows: list[dict], blocked=()) -> str:
    """The schedule table for ``tasks`` and the walk ``rows`` (task id -> SimulatedStep).

    ``blocked``: ``(task, SimulatedStep)`` pairs of a deadlocked walk; they are shown in a
    last row marked ``BLK`` with a ``!`` after each stuck step.
    """
    index_width = max(4, len(str(len(rows))))
    headers = [f"{t.label[:CELL_WIDTH]:<{CELL_WIDTH}}" for t in tasks]
    header = (f"{'step':>{index_width}} | " + " | ".join(headers)).rstrip()
    width = max(index_width + len(tasks) * (CELL_WIDTH + 3), len(TITLE) + 20)
    lines = [f" {TITLE} ".center(width, "="), header, "-" * width]
    for number, row in enumerate(rows):
        cells = [format_cell(row.get(id(t))) for t in tasks]
        lines.append(f"{number:>{index_width}} | " + " | ".join(cells).rstrip())
    if blocked:
        stuck = {id(task): entry for task, entry in blocked}
        cells = [(format_cell(stuck[id(t)]).rstrip() + " !").ljust(CELL_WIDTH)[:CELL_WIDTH]
                 if id(t) in stuck else format_cell(None) for t in tasks]
        lines.append(f"{'BLK':>{index_width}} | " + " | ".join(cells).rstrip())
    lines.append(f" end of {TITLE} ".center(width, "="))
    lines.append(LEGEND)
    return "\n".join(lines)


def format_register_report(tasks, total_warps: int) -> str:
    """The register lines (see the module docstring)."""
    default = default_registers_per_thread(total_warps)
    lines = [f"[registers] default {default} per thread ({total_warps} warps, rounded to "
             f"{rounded_warps(total_warps)}; {REGISTERS_PER_SM} per SM)"]
    total = 0
    net = 0
    label_width = max(len(t.label) for t in tasks)
    for task in tasks:
        kind, regs = register_request(task, default)
        contribution = task.num_warps * (default - regs)
        net += contribution
        total += task.num_warps * 32 * regs
        action = f"  setmaxnreg.{kind} {regs}" if kind else ""
        lines.append(f"  {task.label:<{label_width}}  {task.num_warps} x ({default} - {regs}) = "
                     f"{contribution}{action}")
    free = REGISTERS_PER_SM - total
    lines.append(f"  total {total} / {REGISTERS_PER_SM} registers, {max(free, 0) // 256} free "
                 f"8-register blocks (8 x 32 threads)")
    lines.append(f"  net budget {net}{'  (negative: over budget)' if net < 0 else ''}")
    return "\n".join(lines)
