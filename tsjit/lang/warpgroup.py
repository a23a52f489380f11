"""The warps the code being emitted runs on, when the compiler knows them, and the warpgroup rule.

A warpgroup is 4 consecutive warps whose first warp index is a multiple of 4 (threads ``128*g ..
128*g+127`` of the CTA); a warpgroup instruction (``wgmma.*``, ``setmaxnreg``) is executed by all
128 threads of a warpgroup together (PTX ISA 8.6 §9.7.15, "warpgroup").  Code a Task Scheduling
task emits runs on the task's warps ``[warp_idx, warp_idx + num_warps)``, a fact the lowering states
with :func:`static_warp_range`; :func:`require_whole_warpgroups` (called by the ``tsjit.wgmma``
builtins) refuses a warpgroup instruction there when that range is not whole warpgroups.  Outside
such a range (a plain kernel's own branches) nothing is known statically: the CPU interpreter
reports a warpgroup collective whose warps do not form a warpgroup when it runs.
"""
from __future__ import annotations

import contextlib
import contextvars

from tsjit.errors import CompilationError

__all__ = ["static_warp_range", "require_whole_warpgroups"]

#: (first warp, end warp, who runs there) of the code being emitted, or None when unknown.
_RANGE: contextvars.ContextVar[tuple[int, int, str] | None] = contextvars.ContextVar(
    "tsjit_static_warp_range", default=None)


@contextlib.contextmanager
def static_warp_range(first: int, end: int, owner: str):
    """Within the block, the emitted code runs on warps ``first .. end - 1`` only (``owner`` names them
    in messages, e.g. ``"task 'mma'"``).  A range that is not made of ints leaves nothing known."""
    known = all(isinstance(v, int) and not isinstance(v, bool) for v in (first, end))
    token = _RANGE.set((first, end, owner) if known else None)
    try:
        yield
    finally:
        _RANGE.reset(token)


def require_whole_warpgroups(instruction: str) -> None:
    """Refuse the warpgroup instruction ``instruction`` when the static warp range is not whole warpgroups.

    Raises:
        CompilationError: the code runs on warps whose first index or count is not a multiple of 4;
            the message names the warps, the rule (PTX ISA §9.7.15) and the task fields to change.
    """
    known = _RANGE.get()
    if known is None:
        return
    first, end, owner = known
    if first % 4 == 0 and (end - first) % 4 == 0 and end > first:
        return
    aligned = first - first % 4
    raise CompilationError(
        f"{instruction} is a warpgroup instruction, but {owner} runs on warps {first}-{end - 1}, which are not "
        f"whole warpgroups: a warpgroup is 4 consecutive warps whose first warp index is a multiple of 4, and all "
        f"128 of its threads execute the instruction together (PTX ISA 9.7.15). Give the task warp_idx a multiple "
        f"of 4 and num_warps a multiple of 4 (e.g. warp_idx={aligned if aligned + 4 <= first else aligned + 4}, "
        f"num_warps=4), moving the other tasks' warps around it")
