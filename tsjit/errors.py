"""The tsjit error hierarchy.

Every mistake a user can make surfaces as one of these classes, never as a bare
``assert``, ``KeyError`` or an LLVM abort:

``TsjitError``
  ├── ``CompilationError``  device code cannot be compiled; carries the absolute
  │                         ``file:line:col``, the source line and a caret, and the
  │                         chain of device-function calls that led there.
  ├── ``ScheduleError``     a Task Scheduling schedule is malformed at capture time.
  ├── ``VerificationError`` the TaskManager's whole-program checks failed (names the
  │                         task, resource, stage and schedule step, and what to change).
  ├── ``LaunchError``       a launch cannot proceed (names the argument, expected vs given).
  ├── ``InterpretError``    the CPU interpreter (``TSJIT_INTERPRET=1``) found a fault in a
  │                         running kernel: deadlock, out-of-bounds access, race, read of
  │                         uninitialized shared memory (names CTA, warp, thread, line).
  ├── ``UsageError``        a host API is called wrongly (names the call and the argument,
  │     │                   and says what to pass instead):
  │     ├── ``UsageTypeError``   an argument of the wrong type (also a ``TypeError``);
  │     ├── ``UsageValueError``  an argument out of range (also a ``ValueError``);
  │     ├── ``UsageKeyError``    an unknown name or object (also a ``KeyError``);
  │     ├── ``UsageStateError``  a call out of order, or a needed tool is missing (also a
  │     │                        ``RuntimeError``).
  │     └── ``CompileArgumentError`` (under UsageTypeError) an argument of ``tsjit.compile``
  │                              does not fit the kernel (also a ``LaunchError``).
  └── ``CacheError``        internal to the on-disk cache; never escapes it.

``ScheduleError`` and ``VerificationError`` also derive from ``ValueError``, and each
``UsageError`` from the built-in exception it refines, so code written against the reference
Task Scheduling API (which raises ``ValueError`` / ``TypeError``) keeps working.

A bare built-in exception (``RuntimeError``, ...) is raised only for a broken internal
invariant; its message starts with "internal error, please report".
"""
from __future__ import annotations

import contextlib
import contextvars
import linecache
import os
import sys
import types
import warnings
from dataclasses import dataclass
from typing import Callable


class TsjitError(Exception):
    """Base class of every error tsjit raises on purpose.

    Its printed traceback ends at the user's own frames: tsjit's internal frames are left out
    (plain ``python``: :func:`install_excepthook`; IPython and Jupyter: ``_render_traceback_``;
    pytest: ``__tracebackhide__`` in tsjit's API modules, see :func:`hide_from_pytest`).
    ``err.__traceback__`` itself is kept whole for debuggers.
    """

    def _render_traceback_(self) -> list[str]:
        """IPython's hook for an exception's own traceback text: the user's frames only (IPython's
        own ``exec`` frames are left out too, as IPython does for its tracebacks)."""
        return "".join(format_user_traceback(self, hide=("IPython.", "ipykernel."))).rstrip("\n").split("\n")


@dataclass(frozen=True)
class SourceLocation:
    """A position in a Python source file: absolute path, 1-based line, 0-based column."""

    filename: str
    line: int
    col: int = 0
    function: str = ""

    def __str__(self) -> str:
        return f"{self.filename}:{self.line}:{self.col + 1}"

    def source_line(self) -> str | None:
        """The text of this line, or ``None`` when the file cannot be read."""
        text = linecache.getline(self.filename, self.line)
        return text.rstrip("\n") if text else None


class CompilationError(TsjitError):
    """Device code could not be compiled.

    ``str(err)`` shows the absolute ``file:line:col``, the offending source line with a
    caret under the column, the message, and (when the error happened inside a called
    device function) the call chain from the kernel down.

    Attributes:
        message: what is wrong and what to change, without location.
        location: the :class:`SourceLocation` of the construct, or ``None``.
        call_chain: locations of the calls that led to it, outermost first.
    """

    def __init__(self, message: str, location: SourceLocation | None = None,
                 call_chain: tuple[SourceLocation, ...] = ()):
        self.message = message
        self.location = location
        self.call_chain = tuple(call_chain)
        super().__init__(self._render())

    def _render(self) -> str:
        if self.location is None:
            return self.message
        parts = [f"{self.location}: {self.message}"]
        line = self.location.source_line()
        if line is not None:
            stripped = line.lstrip()
            indent = len(line) - len(stripped)
            parts.append("    " + stripped)
            parts.append("    " + " " * max(0, self.location.col - indent) + "^")
        sites = list(reversed(self.call_chain))  # innermost caller first, the kernel last
        if len(sites) > 8:  # a deep (recursive) chain: its two ends tell the story
            sites = sites[:4] + [f"... {len(sites) - 7} more calls ..."] + sites[-3:]
        for site in sites:
            if isinstance(site, str):
                parts.append("  " + site)
                continue
            where = f" (in {site.function})" if site.function else ""
            parts.append(f"  called from {site}{where}")
            text = site.source_line()
            if text is not None:
                parts.append("    " + text.strip())
        return "\n".join(parts)

    def with_location(self, location: SourceLocation) -> "CompilationError":
        """A copy located at ``location`` unless this error already has a location."""
        if self.location is not None:
            return self
        return CompilationError(self.message, location, self.call_chain)

    def with_caller(self, site: SourceLocation) -> "CompilationError":
        """A copy with ``site`` (the call that led to the failing code, one level further out)
        added at the outer end of the call chain."""
        return CompilationError(self.message, self.location, (site,) + self.call_chain)

    def __reduce__(self):
        return (CompilationError, (self.message, self.location, self.call_chain))


class ScheduleError(TsjitError, ValueError):
    """A schedule is malformed at capture time (grammar rules S1-S15)."""


class VerificationError(TsjitError, ValueError):
    """The TaskManager's static checks rejected the program.

    Attributes:
        check: the rule id (``"C0"``, ``"B1"``, ``"P1"``, ...), or ``""``.
    """

    def __init__(self, message: str, check: str = ""):
        self.check = check
        super().__init__(f"[{check}] {message}" if check else message)


class LaunchError(TsjitError):
    """A kernel launch cannot proceed: bad argument, bad launch configuration, driver error."""


class InterpretError(TsjitError):
    """The CPU interpreter (:mod:`tsjit.interpret`) found a fault while running a kernel: a deadlock
    (every live thread blocked), an out-of-bounds global or shared access, a shared-memory race
    between barrier epochs, a read of uninitialized shared memory, or an instruction it cannot
    execute.  The message names the CTA, warp, thread, task and source line."""


class UsageError(TsjitError):
    """A host API (resources, allocators, tasks, the TaskManager, decorators) is used wrongly.

    The message names the call and the argument and says what to pass instead.  Raised as one
    of the subclasses below, which also derive from the matching built-in exception.
    """


class UsageTypeError(UsageError, TypeError):
    """An argument has the wrong type (``except TypeError`` catches it too)."""


class UsageValueError(UsageError, ValueError):
    """An argument has the right type but a wrong value (``except ValueError`` catches it too)."""


class UsageKeyError(UsageError, KeyError):
    """An unknown name or object was looked up (``except KeyError`` catches it too)."""

    def __str__(self) -> str:  # KeyError's own str() would quote the message
        return str(self.args[0]) if self.args else ""


class UsageStateError(UsageError, RuntimeError):
    """A call made out of order (twice, too early, too late), or one that needs a tool that is
    not installed (``except RuntimeError`` catches it too)."""


class CompileArgumentError(UsageTypeError, LaunchError):
    """An argument of ``tsjit.compile`` / ``Kernel.compile`` does not fit the kernel's parameters
    (missing, unexpected, wrong type or dtype).  A :class:`UsageError` (and ``TypeError``); also a
    :class:`LaunchError`, which compile raised for these before, so ``except LaunchError`` still
    catches it."""


class CacheError(TsjitError):
    """An on-disk cache entry is unreadable. Internal: the cache treats it as a miss."""


def did_you_mean(name: str, candidates) -> str:
    """`` Did you mean 'x'?`` for up to three close matches of ``name`` among ``candidates`` (difflib,
    cutoff 0.4), or ``""``."""
    import difflib  # lazily: only an error message needs it; `import tsjit` stays cheap
    close = difflib.get_close_matches(name, sorted(set(candidates)), n=3, cutoff=0.4)
    if not close:
        return ""
    return " Did you mean " + " or ".join(repr(c) for c in close) + "?"


def short_path(path: str) -> str:
    """``path`` relative to the current directory when that is shorter (for messages only)."""
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return rel if len(rel) < len(path) else path


# -- tracebacks without tsjit's frames --------------------------------------------------------------
#: the file name prefix of code tsjit generates at run time (``<tsjit warm launch of N parameters>``)
GENERATED_CODE_PREFIX = "<tsjit "


def _is_internal(filename: str) -> bool:
    return filename.startswith(GENERATED_CODE_PREFIX) or os.path.abspath(filename).startswith(_PACKAGE_DIR)


def user_traceback(tb, hide: tuple[str, ...] = ()):
    """``tb`` without the frames of files inside the tsjit package, nor of modules whose name starts
    with one of ``hide`` (a new chain; ``tb`` is unchanged)."""
    frames = []
    while tb is not None:
        module = tb.tb_frame.f_globals.get("__name__") or ""
        if not _is_internal(tb.tb_frame.f_code.co_filename) and not module.startswith(hide):
            frames.append(tb)
        tb = tb.tb_next
    result = None
    for entry in reversed(frames):
        result = types.TracebackType(result, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    return result


def format_user_traceback(exc: BaseException, hide: tuple[str, ...] = ()) -> list[str]:
    """``traceback.format_exception`` of ``exc`` with tsjit's internal frames (and ``hide``'s, see
    :func:`user_traceback`) left out."""
    import traceback  # lazily: only when an error is printed
    return traceback.format_exception(type(exc), exc, user_traceback(exc.__traceback__, hide))


def hide_from_pytest(excinfo) -> bool:
    """``__tracebackhide__`` value for tsjit's API modules: pytest hides their frames when the
    failure is a :class:`TsjitError` (a broken internal invariant keeps every frame)."""
    return excinfo.errisinstance(TsjitError)


def install_excepthook() -> None:
    """Make ``sys.excepthook`` print a :class:`TsjitError` with the user's frames only; any other
    exception goes to the hook that was installed before (called once, from ``import tsjit``)."""
    previous = sys.excepthook
    if getattr(previous, "__tsjit_hook__", False):
        return

    def hook(etype, value, tb):
        if isinstance(value, TsjitError):
            tb = user_traceback(tb) or tb
            value = value.with_traceback(tb)  # the default hook prints value.__traceback__
        previous(etype, value, tb)

    hook.__tsjit_hook__ = True
    sys.excepthook = hook


# -- warnings at the user's line --------------------------------------------------------------------
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
#: the kernel line whose compile-time call is running (set by the frontend around each host call):
#: a zero-argument callable returning a SourceLocation, so the location is computed only if needed.
_compile_time_call_site: contextvars.ContextVar[Callable[[], SourceLocation] | None] = \
    contextvars.ContextVar("tsjit_compile_time_call_site", default=None)
_registries: dict[str, dict] = {}


@contextlib.contextmanager
def compile_time_call_site(location: Callable[[], SourceLocation]):
    """Within the block, :func:`warn` without a location attributes warnings to ``location()``
    (the kernel line making a compile-time call into host code, e.g. ``ts.TaskManager(...)``)."""
    token = _compile_time_call_site.set(location)
    try:
        yield
    finally:
        _compile_time_call_site.reset(token)


def current_call_site() -> SourceLocation | None:
    """The kernel line whose compile-time call into host code is running (see
    :func:`compile_time_call_site`), or ``None`` outside a kernel compile."""
    site = _compile_time_call_site.get()
    return site() if site is not None else None


def warn(message: str, category: type[Warning] = UserWarning, location: SourceLocation | None = None) -> None:
    """Issue a warning attributed to the user's source line, not to tsjit's own files.

    The line is ``location`` when given (e.g. a schedule step's), else the kernel line whose
    compile-time call is running (:func:`compile_time_call_site`), else the innermost stack frame
    outside the tsjit package (the user's ``tsjit.compile(...)`` or launch).  The usual warning
    filters apply (``-W error``, ``warnings.simplefilter``); a repeated warning at one line is shown
    once under the default filter.
    """
    if location is None:
        location = current_call_site()
    module_globals = None
    if location is None:
        frame = sys._getframe(1)
        while frame is not None and _is_internal(frame.f_code.co_filename):
            frame = frame.f_back
        if frame is None:
            warnings.warn(message, category, stacklevel=2)
            return
        location = SourceLocation(frame.f_code.co_filename, frame.f_lineno)
        module_globals = frame.f_globals
    filename = location.filename
    module = os.path.splitext(os.path.basename(filename))[0] or "<unknown>"
    registry = _registries.setdefault(filename, {})
    try:
        warnings.warn_explicit(message, category, filename, location.line, module=module, registry=registry,
                               module_globals=module_globals)
    except ImportError:
        # the module's loader cannot give its source (``python -c``: __main__'s loader is BuiltinImporter,
        # whose get_source raises): the same warning without the source line
        warnings.warn_explicit(message, category, filename, location.line, module=module, registry=registry)
