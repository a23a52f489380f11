"""Calls in device code: inlined ``@tsjit.func``, compile-time Python calls, closures.

* :class:`~tsjit.frontend.device_function.DeviceFunction` (``@tsjit.func``) is inlined at each call site: its own source is
  visited in a new frame with the arguments bound to its parameters; ``return`` anywhere
  in it merges into one result.
* Python built-ins that have device meanings (``range``, ``min``, ``max``, ``abs``) are
  redirected when an argument is a run-time value; ``print`` is rejected with a hint.
* Any other callable runs at compile time with the argument objects.  Errors it raises
  are reported at the call site (``TsjitError`` subclasses pass through unchanged).
* A nested ``def``/``lambda`` becomes a Python closure over the current bindings.
"""
from __future__ import annotations

import ast
import builtins
import inspect
import re

import numpy as np

from tsjit.errors import CompilationError, SourceLocation, TsjitError, compile_time_call_site, did_you_mean
from tsjit.frontend import guards, ssa
from tsjit.frontend.device_function import DeviceFunction
from tsjit.frontend.frame import Frame
from tsjit.frontend.source import parse_function
from tsjit.lang import math as device_math
from tsjit.lang.constexpr import DynamicRange
from tsjit.lang.memory import Pointer, Tensor
from tsjit.lang.values import Value


def _has_value(args, kwargs) -> bool:
    """True when an argument, or an item of a tuple/list argument (``max(values)``), is a device value."""
    items = list(args) + list(kwargs.values())
    items += [x for a in items if isinstance(a, (tuple, list)) for x in a]
    return any(isinstance(a, (Value, Pointer)) for a in items)


_CONVERSION_HINTS = {int: "tsjit.Int32(x)", float: "tsjit.Float32(x)", bool: "x != 0",
                     str: 'tsjit.device_print("{}", x) to print it', repr: 'tsjit.device_print("{}", x) to print it'}

#: How deep ``@tsjit.func`` calls may nest.  Each call is inlined, so a recursion must end at
#: compile time (on compile-time arguments); one that does not would exhaust Python's stack.
MAX_CALL_DEPTH = 32


def _host_math_name(func):
    """``"math.exp"`` / ``"numpy.exp"`` for a host math function (Python's ``math``/``cmath`` module, a
    numpy ufunc or a function of numpy), else None."""
    if isinstance(func, np.ufunc):
        return f"numpy.{func.__name__}"
    module = getattr(func, "__module__", None) or ""
    name = getattr(func, "__name__", None)
    if name and callable(func) and (module in ("math", "cmath") or module.split(".")[0] == "numpy"):
        return f"{module.split('.')[0]}.{name}"
    return None


def _device_math_hint(host_name: str) -> str:
    """The tsjit.math replacement of ``host_name`` (``"math.exp"`` -> ``"tsjit.math.exp"``)."""
    name = host_name.rpartition(".")[2]
    name = {"fabs": "abs", "absolute": "abs", "minimum": "min", "maximum": "max", "fmin": "min",
            "fmax": "max", "amin": "min", "amax": "max"}.get(name, name)
    if hasattr(device_math, name) and not name.startswith("_"):
        return f"tsjit.math.{name}"
    available = [n for n in device_math.available() if callable(getattr(device_math, n)) and n != "available"]
    return "one of the tsjit.math functions (" + ", ".join(available) + ")"


def _public_name(func) -> str:
    name = getattr(func, "__qualname__", getattr(func, "__name__", type(func).__name__))
    return name.replace("__tsjit_closure_maker.<locals>.", "")


def _innermost_user_frame(exc: BaseException, parsed):
    """The innermost traceback frame of ``exc`` inside a ``def`` nested in the function being compiled
    (e.g. a ``@schedule`` body), as a SourceLocation, or None (then the call site is reported)."""
    first, last = parsed.node.lineno, getattr(parsed.node, "end_lineno", None) or parsed.node.lineno
    tb, found = exc.__traceback__, None
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_filename == parsed.filename and first < code.co_firstlineno <= last:
            found = SourceLocation(parsed.filename, tb.tb_lineno, 0, code.co_name)
        tb = tb.tb_next
    return found


def _keyword_hint(func, exc: Exception) -> str:
    """For ``f() got an unexpected keyword argument 'alignn'``: the closest keyword ``func`` takes
    (`` Did you mean 'align'?``) and its keywords; ``""`` for any other error."""
    found = re.search(r"unexpected keyword argument '(\w+)'", str(exc)) if isinstance(exc, TypeError) else None
    if found is None:
        return ""
    try:
        params = inspect.signature(func).parameters.values()
    except (TypeError, ValueError):
        return ""
    names = [p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    if not names:
        return ""
    return f".{did_you_mean(found.group(1), names)} It takes the keywords: {', '.join(names)}"


def _signature_hint(func, name: str, args: list, kwargs: dict, exc: Exception) -> str:
    """For a call whose arguments do not fit ``func``'s signature (``atomic_add(out, i, v)``): the
    signature, and for a pointer parameter how to make one; ``""`` when the arguments fit (the
    TypeError came from inside ``func``) or ``func`` has no signature."""
    if not isinstance(exc, TypeError):
        return ""
    try:
        signature = inspect.signature(func)
    except (TypeError, ValueError):
        return ""
    try:
        signature.bind(*args, **kwargs)
        return ""
    except TypeError:
        pass
    params = [p.replace(annotation=inspect.Parameter.empty) for p in signature.parameters.values()]
    text = str(signature.replace(parameters=params, return_annotation=inspect.Signature.empty))
    pointers = [p.name for p in signature.parameters.values()
                if p.annotation is Pointer or p.annotation in ("Pointer", "SharedPointer")]
    hint = f". It is called as {name}{text}"
    if pointers:
        hint += f", where {pointers[0]} is a pointer: {pointers[0]} = tsjit.address_of(out, i)"
    return hint


def _with_call_site(exc, location):
    """``exc`` (a ScheduleError / VerificationError raised by compile-time code) with the kernel line that
    made the call appended (``file:line:col``, the line and a caret), so TS errors point into the kernel
    like compile errors do."""
    note = f"\n  (raised while compiling the kernel, at {location})"
    line = location.source_line()
    if line is not None:
        stripped = line.lstrip()
        note += f"\n    {stripped}\n    {' ' * max(0, location.col - (len(line) - len(stripped)))}^"
    if note in str(exc):
        return exc
    check = getattr(exc, "check", None)
    try:
        if check is not None:
            message = str(exc)[len(f"[{check}] "):] if check else str(exc)
            return type(exc)(message + note, check=check)
        return type(exc)(str(exc) + note)
    except TypeError:
        return exc


def compile_time_range(*args):
    """Python's ``range`` inside a nested ``def`` of a kernel (a ``@ts.schedule``, a helper), whose body
    runs as Python at compile time: a device value as a bound cannot be iterated there.

    Raises:
        CompilationError: a bound is a run-time device value; says to use ``ts.domain_loop`` in a
            schedule, or a compile-time bound.
    """
    if any(isinstance(a, Value) for a in args):
        raise CompilationError(
            "a Python `for` loop over range(...) with a run-time bound runs at compile time in a nested "
            "`def` (a @ts.schedule body runs once, as Python); in a schedule, loop over the work with "
            "`with ts.domain_loop(start, end, step):` (the loop runs on the device); elsewhere give range "
            "compile-time bounds, or move the loop into the kernel body")
    return builtins.range(*args)


class CallMixin:
    """Call handling of :class:`~.codegen.CodeGenerator`: device functions are inlined, every other
    callable runs at compile time, and nested ``def``/``lambda`` become closures.

    A mixin: it relies on these members of the generator it is mixed into: ``frames`` and ``frame``
    (:class:`~.frame.Frame`), ``builder``, ``dead``, ``folder``, ``regions``, and the methods
    ``visit_body``, ``new_block``, ``location``, ``error`` and ``record_references``
    (:class:`~.dependencies.RecordingMixin`).
    """
    def call(self, func, args: list, kwargs: dict, node):
        """Apply ``func`` to the evaluated ``args``/``kwargs`` at call site ``node``: inline a ``@tsjit.func``,
        turn ``range``/``min``/``max``/``abs`` of run-time values into their device forms, reject host-only
        functions given device values with a hint, else call ``func`` at compile time.

        Raises:
            CompilationError: the callee cannot take these arguments in device code, or it raised (located
                at the innermost line of the user's compile-time code, else at the call).
            ScheduleError, VerificationError: raised by the TS model; passed through with the call site.
        """
        if isinstance(func, DeviceFunction):
            return self.inline(func.fn, args, kwargs, node)
        if getattr(func, "__tsjit_kernel__", False):
            raise self.error(node, "a kernel cannot be launched from device code; call a @tsjit.func instead")
        if func is builtins.range:
            return DynamicRange(*args, **kwargs)
        if func is builtins.print:
            raise self.error(node, "print() is not available in device code; use tsjit.device_print(fmt, *args) "
                                   "for run-time values, or tsjit.static_print for compile-time ones")
        if func is builtins.len and len(args) == 1 and isinstance(args[0], Tensor):
            raise self.error(node, f"len() of a device array is not available; use x.shape[0] (its first extent; "
                                   f"this array has rank {args[0].rank})")
        if func in (builtins.min, builtins.max, builtins.abs) and _has_value(args, kwargs):
            return getattr(device_math, func.__name__)(*args)
        if func in _CONVERSION_HINTS and _has_value(args, kwargs):
            raise self.error(node, f"{func.__name__}() of a run-time value is not available; use "
                                   f"{_CONVERSION_HINTS[func]}")
        host_math = _host_math_name(func)
        if host_math is not None and _has_value(args, kwargs):
            raise self.error(node, f"Python's {host_math} runs on the host and cannot take a device value; "
                                   f"use {_device_math_hint(host_math)}")
        if getattr(getattr(func, "__func__", func), "__tsjit_work__", None) is not None:   # tsjit.ts.work
            raise self.error(node, f"`{_public_name(func)}` is a Task Scheduling work method: call it inside a "
                                   f"@ts.schedule function (as r.{func.__name__}()), which records the step; the "
                                   f"TaskManager runs its body with a StageInfo between the pipeline operations")
        guards.check_method_call(self.regions, func)
        try:
            with compile_time_call_site(lambda: self.location(node)):  # warnings point at this line
                return func(*args, **kwargs)
        except CompilationError:
            raise
        except RecursionError:
            raise self.error(node, f"calling `{_public_name(func)}` at compile time recursed too deeply") from None
        except TsjitError as exc:
            raise _with_call_site(exc, self.location(node)).with_traceback(None) from None
        except Exception as exc:
            name = _public_name(func)
            where = _innermost_user_frame(exc, self.frame.parsed)
            if where is not None:
                raise CompilationError(f"{type(exc).__name__} in compile-time code called from here: {exc}",
                                       where, (self.location(node),)) from None
            raise self.error(node, f"calling `{name}` at compile time raised {type(exc).__name__}: {exc}"
                                   f"{_keyword_hint(func, exc) or _signature_hint(func, name, args, kwargs, exc)}"
                             ) from None

    def inline(self, fn, args: list, kwargs: dict, node):
        """Compile ``fn``'s source inline with ``args``/``kwargs`` bound; returns its result object."""
        if len(self.frames) > MAX_CALL_DEPTH:
            names = [f.parsed.node.name for f in self.frames[1:]]
            recursive = fn.__name__ in names
            raise CompilationError(
                f"device function calls nest more than {MAX_CALL_DEPTH} deep"
                + (f" (`{fn.__name__}` calls itself)" if recursive else "")
                + "; a @tsjit.func is inlined at every call, so a recursion must end at compile time (on "
                  "compile-time arguments, e.g. `if tsjit.const_expr(n == 0): return ...`); otherwise rewrite "
                  "it as a loop", self.location(node) if node is not None else None)
        parsed = parse_function(fn)
        try:
            bound = parsed.signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise CompilationError(f"bad arguments for {fn.__qualname__}: {exc}",
                                   self.location(node) if node is not None and self.frames else None) from None
        bound.apply_defaults()
        scope = dict(bound.arguments)
        for pname, param in parsed.signature.parameters.items():
            if param.kind is inspect.Parameter.VAR_POSITIONAL:
                scope[pname] = tuple(scope.get(pname, ()))
        frame = Frame(parsed, scope, is_kernel=False)
        call_site = self.location(node) if (node is not None and self.frames) else None
        self.frames.append(frame)
        folder = self.folder
        if folder is not None:
            where = f"called at {call_site.filename}:{call_site.line}" if call_site is not None else \
                "called by compile-time code"
            folder.comment(f"inline {fn.__qualname__} ({parsed.filename}:{parsed.node.lineno}), {where}")
            folder.inline_arguments(scope, node)
        try:
            self.visit_body(parsed.node.body)
            if folder is not None:
                folder.comment(f"end inline {fn.__qualname__}")
            if not self.dead:
                frame.returns.append(ssa.Edge(self.builder.block, {"<return>": None}))
            try:
                result = self._merge_returns(frame)
            except CompilationError as exc:  # the returns disagree: point at the function itself
                raise exc.with_location(parsed.location()) from None
        except CompilationError as exc:
            raise (exc.with_caller(call_site) if call_site is not None else exc) from None
        finally:
            self.frames.pop()
        return result

    def _merge_returns(self, frame):
        edges = frame.returns
        if not edges:
            self.dead = True
            return None
        self.dead = False
        if len(edges) == 1 and edges[0].block is self.builder.block:
            return edges[0].scope["<return>"]
        join = self.new_block(f"{frame.parsed.node.name}.ret")
        return ssa.merge_scopes(self.builder, edges, join)["<return>"]

    def make_closure(self, node):
        """Turn a nested ``def``/``lambda`` into a Python closure over the current bindings.

        The function's decorators run as ordinary Python (e.g. ``@schedule`` captures a schedule).
        """
        frame = self.frame
        self.record_references(node)  # its body runs as Python: record the globals it mentions
        names = sorted(set(frame.scope) | set(frame.parsed.closure))
        bindings = dict(frame.parsed.closure)
        bindings.update(frame.scope)
        if "range" not in bindings and frame.parsed.globals.get("range", builtins.range) is builtins.range:
            names.append("range")   # Python's range, refusing run-time bounds with the fix (a schedule's loop)
            bindings["range"] = compile_time_range
        if isinstance(node, ast.Lambda):
            inner = ast.Return(value=node)
            body = [inner]
            result_name = None
        else:
            body = [node]
            result_name = node.name
        if result_name is not None:
            body = body + [ast.Return(value=ast.Name(id=result_name, ctx=ast.Load()))]
        maker = ast.FunctionDef(
            name="__tsjit_closure_maker", args=ast.arguments(
                posonlyargs=[], args=[ast.arg(arg=n) for n in names], vararg=None, kwonlyargs=[],
                kw_defaults=[], kwarg=None, defaults=[]),
            body=body, decorator_list=[], returns=None, type_comment=None)
        if hasattr(ast.FunctionDef, "type_params") or "type_params" in ast.FunctionDef._fields:
            maker.type_params = []
        for sub in ast.walk(maker):
            if not hasattr(sub, "lineno") and "lineno" in getattr(sub, "_attributes", ()):
                sub.lineno, sub.col_offset = node.lineno, node.col_offset
                sub.end_lineno, sub.end_col_offset = node.lineno, node.col_offset
        module = ast.Module(body=[maker], type_ignores=[])
        ast.fix_missing_locations(module)
        code = compile(module, frame.parsed.filename, "exec")
        namespace: dict = {}
        exec(code, frame.parsed.globals, namespace)  # noqa: S102 - the user's own kernel source
        try:
            return namespace["__tsjit_closure_maker"](*[bindings[n] for n in names])
        except TsjitError:
            raise
        except Exception as exc:
            raise self.error(node, f"defining `{getattr(node, 'name', 'lambda')}` raised "
                                   f"{type(exc).__name__}: {exc}") from None
