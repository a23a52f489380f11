"""Warnings and message helpers shared by capture and verification.

``ScheduleWarning``      capture-time warnings (S15: an output is never routed).
``VerificationWarning``  TaskManager warnings (H1) and, with ``skip_validation=True``,
                         every demoted ``VerificationError``.
``user_location()``      the ``file:line:col`` of the innermost frame outside
                         ``tsjit/ts`` (the user's schedule code), so errors point there.
``definition_location()`` where user code made an object (a PipelineConfig), for messages
                         about it; inside a kernel compile, the kernel line.
``located()``            a message prefixed with a location, then the source line and a caret.
``schedule_error()``     a ``ScheduleError`` located at the user's line, with the source
                         line and the rule id.
"""
from __future__ import annotations

import itertools
import os
import sys

from tsjit.errors import ScheduleError, SourceLocation, current_call_site

__all__ = ["ScheduleWarning", "VerificationWarning", "user_location", "definition_location", "located",
           "schedule_error", "frame_location", "is_internal_file"]

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_TSJIT_DIR = os.path.dirname(_PACKAGE_DIR.rstrip(os.sep)) + os.sep
_FRONTEND_DIR = os.path.join(os.path.dirname(_PACKAGE_DIR.rstrip(os.sep)), "frontend") + os.sep


class ScheduleWarning(UserWarning):
    """A schedule is legal but probably not what was meant (rule S15)."""


class VerificationWarning(UserWarning):
    """A TaskManager check warns (H1), or an error demoted by ``skip_validation=True``."""


def user_location() -> SourceLocation | None:
    """Location of the innermost caller frame that is not inside ``tsjit/ts``."""
    frame = sys._getframe(1)
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE_DIR):
        frame = frame.f_back
    return frame_location(frame)


def is_internal_file(filename: str) -> bool:
    """True for a file inside the tsjit package (its frames are never the user's line)."""
    return os.path.abspath(filename).startswith(_TSJIT_DIR)


def frame_location(frame) -> SourceLocation | None:
    """``file:line:col`` (and function name) of the expression ``frame`` is executing."""
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


def definition_location() -> SourceLocation | None:
    """Where the user's code is making the object under construction: the innermost caller frame
    outside ``tsjit/ts``, or, when that frame is the kernel compiler's (a call made from a kernel
    body at compile time), the kernel line making the call."""
    frame = sys._getframe(1)
    while frame is not None and (os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE_DIR)
                                 or frame.f_code.co_name == "__init__" and frame.f_code.co_filename == "<string>"):  # dataclass
        frame = frame.f_back
    location = frame_location(frame)
    if location is not None and os.path.abspath(location.filename).startswith(_FRONTEND_DIR):
        return current_call_site() or location
    return location


def located(text: str, location: SourceLocation | None) -> str:
    """``path:line:col: text`` followed by the source line and a caret under the column (the shape
    of a CompilationError); ``text`` unchanged without a location."""
    if location is None:
        return text
    out = f"{location}: {text}"
    source = location.source_line()
    if source is not None:
        stripped = source.lstrip()
        out += "\n    " + stripped.rstrip()
        out += "\n    " + " " * max(0, location.col - (len(source) - len(stripped))) + "^"
    return out


def schedule_error(message: str, rule: str, location: SourceLocation | None = None,
                   error_class: type = ScheduleError) -> ScheduleError:
    """A ScheduleError ``path:line: message  [rule]`` followed by the source line."""
    location = location if location is not None else user_location()
    text = located(f"{message}  [{rule}]" if rule else message, location)
    error = error_class(text)
    error.location = location
    error.rule = rule
    return error
