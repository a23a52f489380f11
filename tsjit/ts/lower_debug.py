"""Step annotations of the TS lowering: PTX comments and ``Task(debug_print=True)`` prints.

PTX comments (on unless ``Task.emit_ptx_comments`` is False): each task's branch starts with
``// <task> warp: [start, end)`` and every step with ``// <resource>_<operation>``, where the
operation is the work label (``smem_a_tma_load``) or the pipeline operation (``smem_a_acquire``,
``smem_a_try_wait``, ...).  They are empty side-effecting inline-asm statements whose text is a
PTX comment (``// begin inline asm`` / ``// end inline asm`` around it); ptxas drops them, so the
SASS is unchanged.

Debug prints (``Task(debug_print=True)``): before each step, thread ``warp_start * 32`` of the
task in block (0, 0, 0) prints ``[ts] block 0 thread T task <task> step #<id> <resource>_<operation>
stage S <phase> iteration I`` with ``device_print`` (CUDA ``vprintf``; output appears when the host
synchronizes).  The stage is the pipeline cursor the operation uses (-1 without a pipeline), the
iteration ``(loop_offset - start) // step`` inside the domain loop (Head / Tail steps print their
phase instead).
"""
from __future__ import annotations

import re

from tsjit.lang import builtins as B
from tsjit.lang import dtypes as dt
from tsjit.lang.values import Value, cast_to, compare, constant
from tsjit.ts.enums import ScheduleStage, ScheduleStageType

__all__ = ["operation_name", "ptx_comment", "task_comment", "annotate_step"]

_OPERATIONS = {ScheduleStage.ProducerAcquire: "acquire", ScheduleStage.ProducerTryAcquire: "try_acquire",
               ScheduleStage.ProducerCommit: "commit", ScheduleStage.ConsumerWait: "wait",
               ScheduleStage.ConsumerTryWait: "try_wait", ScheduleStage.ConsumerRelease: "release"}
#: operations that use the lagging (close) cursor; the others use the open one.
_CLOSING = {ScheduleStage.ProducerCommit, ScheduleStage.ConsumerRelease}


def operation_name(step) -> str:
    """``<resource>_<operation>``: the work label, or acquire / commit / wait / release / try_*."""
    return f"{step.resource.name}_{step.label or _OPERATIONS.get(step.stage, step.stage.name)}"


def ptx_comment(ctx, text: str) -> None:
    """Emit ``// text`` into the PTX through ``ctx`` (:class:`~tsjit.frontend.structured.Structured`):
    an empty inline-asm statement, one line, ``$`` escaped."""
    ctx.ptx_comment(re.sub(r"[\r\n]+", " ", text).replace("$", "$$"))


def task_comment(ctx, task) -> None:
    """``// <task> warp: [start, end)`` at the top of the task's branch."""
    if getattr(task, "emit_ptx_comments", True):
        ptx_comment(ctx, f"{task.name} warp: [{task.warp_start}, {task.warp_end})")


def annotate_step(ctx, task, step, stage, loop) -> None:
    """The PTX comment and (with ``debug_print``) the run-time print of one step.

    Args:
        ctx: the :class:`~tsjit.frontend.structured.Structured` interface of the kernel.
        task: the Task being lowered.
        step: the schedule Step about to be emitted.
        stage: its stage index (Int32 Value or int), or None without a pipeline.
        loop: ``(offset, start, end, step)`` of the enclosing domain loop, or None (Head/Tail).
    """
    name = operation_name(step)
    if getattr(task, "emit_ptx_comments", True):
        ptx_comment(ctx, name)
    if not getattr(task, "debug_print", False):
        return
    tid = cast_to(B.thread_idx().x, dt.Int32)
    bid = B.block_idx()
    block0 = compare("==", bid.x, 0) & compare("==", bid.y, 0) & compare("==", bid.z, 0)
    elected = block0 & compare("==", tid, task.warp_start * 32)

    def print_step():
        stage_value = constant(-1, dt.Int32) if stage is None else cast_to(stage, dt.Int32) \
            if isinstance(stage, Value) else constant(int(stage), dt.Int32)
        head = f"[ts] block 0 thread {{}} task {task.name} step #{step.id} {name} stage {{}}"
        if step.section is ScheduleStageType.Loop and loop is not None:
            offset, start, _, stride = loop
            iteration = cast_to((offset - start) // stride, dt.Int32)
            B.device_print(head + " Loop iteration {}", tid, stage_value, iteration)
        else:
            B.device_print(head + f" {step.section.name}", tid, stage_value)
    ctx.if_then(elected, print_step, "ts.debug", "ts.debug.done")


def step_stage(step, cursors, scope):
    """The stage index a pipeline operation uses: the close cursor for commit / release, else the open one."""
    if cursors is None:
        return None
    return scope[cursors.close_index if step.stage in _CLOSING else cursors.open_index]
