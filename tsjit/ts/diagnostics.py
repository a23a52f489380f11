"""Warnings and message helpers shared by capture and verification.

``ScheduleWarning``      capture-time warnings (S15: an output is never routed).
``VerificationWarning``  TaskManager warnings (H1) and, with ``skip_validation=True``,
                         every demoted ``VerificationError``.
``user_location()``      the ``file:line:col`` of the innermost frame outside
                         ``tsjit/ts`` (the user's schedule code), so errors point there.
``schedule_error()``     a ``ScheduleError`` located at the user's line, with the source
                         line and the rule id.
"""
from __future__ import annotations

import itertools
import os
import sys

from tsjit.errors import ScheduleError, SourceLocation

__all__ = ["ScheduleWarning", "VerificationWarning", "user_location", "schedule_error"]

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


class ScheduleWarning(UserWarning):
    """A schedule is legal but probably not what was meant (rule S15)."""


class VerificationWarning(UserWarning):
    """A TaskManager check warns (H1), or an error demoted by ``skip_validation=True``."""


def user_location() -> SourceLocation | None:
    """Location of the innermost caller frame that is not inside ``tsjit/ts``."""
    frame = sys._getframe(1)
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE_DIR):
        frame = frame.f_back
    if frame is None:
        return None
    line, col = frame.f_lineno, 0
    try:
        position = next(itertools.islice(frame.f_code.co_positions(), frame.f_lasti // 2, None))
        if position[0] is not None:
            line, col = position[0], position[2] or 0
    except (AttributeError, StopIteration, TypeError):
        pass
    return SourceLocation(frame.f_code.co_filename, line, col, frame.f_code.co_name)


def schedule_error(message: str, rule: str, location: SourceLocation | None = None,
                   error_class: type = ScheduleError) -> ScheduleError:
    """A ScheduleError ``path:line: message  [rule]`` followed by the source line."""
    location = location if location is not None else user_location()
    text = f"{message}  [{rule}]" if rule else message
    if location is not None:
        # the same shape as a CompilationError: absolute file:line:col, the line, a caret
        text = f"{location}: {text}"
        source = location.source_line()
        if source is not None:
            stripped = source.lstrip()
            text += "\n    " + stripped.rstrip()
            text += "\n    " + " " * max(0, location.col - (len(source) - len(stripped))) + "^"
    error = error_class(text)
    error.location = location
    error.rule = rule
    return error
