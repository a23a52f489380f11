"""The result record of a check and helpers that word messages consistently.

Every message names the task (with its warps), the resource, the stage, the schedule
step index and location, what is wrong, and -- on an indented second line -- what to
change (see ``STYLE.md``).
"""
from __future__ import annotations

from dataclasses import dataclass

from tsjit.ts.diagnostics import located

__all__ = ["Finding", "error", "warning", "note", "step_message", "at_config"]


@dataclass(frozen=True)
class Finding:
    """One problem found by a check.

    Attributes:
        check: the rule id (``"R0"``, ``"G2"``, ...).
        message: the full text (what is wrong, then what to change).
        is_warning: True for findings that never fail verification (H1).
        is_note: True for a warning that only the ``verbose=True`` report shows (what a check could
            not check), never a ``VerificationWarning``.
    """

    check: str
    message: str
    is_warning: bool = False
    is_note: bool = False


def error(check: str, message: str) -> Finding:
    return Finding(check, message, False)


def warning(check: str, message: str) -> Finding:
    return Finding(check, message, True)


def note(check: str, message: str) -> Finding:
    return Finding(check, message, True, True)


def step_message(task, step, what: str, fix: str) -> str:
    """``task 'x' (warps 0-3) <what> ('res' Stage 'label' at schedule step #i (f:l)).``"""
    return f"{task.describe()}: {what} ({step.describe()}).\n  {fix}"


def at_config(findings: list[Finding], config) -> list[Finding]:
    """``findings`` about ``config`` (a PipelineConfig), each located at the line that made it
    (``config.source_location``), with that line and a caret, so P1 / P2 point at the config."""
    location = getattr(config, "source_location", None)
    return [Finding(f.check, located(f.message, location), f.is_warning, f.is_note) for f in findings]
