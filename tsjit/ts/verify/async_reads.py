"""Shared-memory reads a work body leaves in flight: wgmma operands and TMA store sources.

A work step's accesses normally end with the step.  Two asynchronous operations keep reading
shared memory after the issuing instruction:

* ``wgmma.mma_async`` reads its shared-memory A/B operands until a ``wgmma.wait_group(N)``
  retires the wgmma-group it belongs to (PTX ISA 8.0 §9.7.15.6 "wgmma.commit_group",
  "wgmma.wait_group": at most ``N`` of the most recent committed groups stay pending; MMAs
  not yet committed to a group are not waited for);
* ``tma_store`` (``cp.async.bulk.tensor`` shared -> global) reads its source until a
  ``bulk_wait_group(N)`` retires its bulk async-group (§9.7.9.27).

This module finds those calls in a work method's body, statically: :func:`work_events`
walks the function's syntax tree in source order and returns what each call does
(:class:`Event`: issue, commit or wait), following calls of the resource's own methods and of
plain module functions.  Only calls made unconditionally retire or commit (a wait inside an
``if`` may not run, so it retires nothing; the body of an ``if elect_one():`` without ``else``
is unconditional for the one lane that runs it; a guarded branch that retires its own groups,
followed by a CTA barrier, retires them, and so does a branch that commits them followed by an
unconditional wait and a CTA barrier: ``_Walker._guarded``); an issue anywhere counts.  A ``wait_group``
argument that is not a literal, a Constexpr parameter of the work, an int field of the
resource or a conditional expression of those retires nothing.  Each of these choices keeps a read in flight longer, never shorter.

:class:`InFlight` replays the events of one process's work steps in program order: the
accesses of the steps that issued a group stay active (the exhaustive model adds them to every
following segment) until the wait that retires the group.

The asynchronous operations are recognised by the module and name of the called object
(:data:`FAMILIES`), so an alias (``from tsjit import wgmma as wg``) is found too; this module
imports neither of them.
"""
from __future__ import annotations

import ast
import inspect
import textwrap
import types
import weakref
from dataclasses import dataclass, field, replace

from tsjit.errors import short_path

__all__ = ["Family", "FAMILIES", "Event", "work_events", "InFlight", "body_statements"]


@dataclass(frozen=True)
class Family:
    """One kind of asynchronous shared-memory reader and its group instructions.

    ``carries``: ``"reads"`` -- the issuing step's read accesses stay active (wgmma reads its
    operands); ``"all"`` -- every access of the step stays active, as a read (a TMA store
    reads the buffer the step wrote).
    """

    name: str
    module: str
    issue: str
    commit: str
    wait: str
    carries: str

    def call(self, name: str) -> str:
        return f"{self.name}.{name}" if self.name == "wgmma" else name


FAMILIES = (
    Family("wgmma", "tsjit.lang.wgmma", "mma_async", "commit_group", "wait_group", "reads"),
    Family("bulk", "tsjit.lang.tma", "tma_store", "bulk_commit_group", "bulk_wait_group", "all"),
)


@dataclass(frozen=True)
class Event:
    """One asynchronous-read call of a work body: ``kind`` is ``"issue"``, ``"commit"`` or
    ``"wait"``; ``pending`` the groups a wait leaves in flight (None: not known, it retires
    nothing); ``where`` is ``file:line``."""

    family: Family
    kind: str
    pending: int | None
    where: str


_MAX_DEPTH = 3
_parsed: dict = {}             # code object -> its body statements (body_statements)


def _resolve(node, scope: dict, resource):
    """The object an expression names (``a.b.c`` through ``scope`` and module dicts), or None;
    ``self.x`` resolves on the resource's class."""
    if isinstance(node, ast.Name):
        return scope.get(node.id, _MISSING)
    if isinstance(node, ast.Attribute):
        if isinstance(node.value, ast.Name) and node.value.id == "self":
            return inspect.getattr_static(type(resource), node.attr, _MISSING)
        base = _resolve(node.value, scope, resource)
        if isinstance(base, types.ModuleType):
            found = vars(base).get(node.attr, _MISSING)
            if found is _MISSING and base.__name__ == "tsjit" and node.attr in ("wgmma",):
                return _ModuleName(f"tsjit.lang.{node.attr}")
            if found is _MISSING and "__getattr__" in vars(base):
                # a PEP 562 lazy name (``tsjit.tma_store``): resolve it as the kernel will, not by
                # whether an earlier compile of this process happened to load it already
                found = getattr(base, node.attr, _MISSING)
            return found
        if isinstance(base, _ModuleName):
            return _Named(base.name, node.attr)
        return _MISSING
    return _MISSING


_MISSING = object()


@dataclass(frozen=True)
class _ModuleName:
    name: str                   # a lazily imported module, not loaded here


@dataclass(frozen=True)
class _Named:
    module: str
    name: str


def _identify(obj) -> tuple[str, str] | None:
    if isinstance(obj, _Named):
        return obj.module, obj.name
    module, name = getattr(obj, "__module__", None), getattr(obj, "__name__", None)
    return (module, name) if isinstance(module, str) and isinstance(name, str) else None


def _int(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _constant(node, names: dict, resource):
    """The compile-time value of a ``wait_group`` argument: a literal, a Constexpr parameter
    of the work (the step's keyword or the parameter's default), an attribute of the resource,
    or ``a if cond else b`` of those; ``_MISSING`` otherwise."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return names.get(node.id, _MISSING)
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return getattr(resource, node.attr, _MISSING)
    if isinstance(node, ast.IfExp):
        test = _constant(node.test, names, resource)
        if isinstance(test, (bool, int)):
            return _constant(node.body if test else node.orelse, names, resource)
    return _MISSING


def _constexpr_names(step) -> dict:
    spec = getattr(step, "spec", None)
    names = {p.name: p.default for p in getattr(spec, "constexpr_params", {}).values()
             if p.has_default}
    names.update(getattr(step, "constexpr_kwargs", None) or {})
    return names


class _Walker(ast.NodeVisitor):
    def __init__(self, function, step, resource, depth: int, seen: set, barriers):
        self.scope = dict(getattr(function, "__globals__", {}))
        closure = getattr(function, "__closure__", None) or ()
        for name, cell in zip(function.__code__.co_freevars, closure):
            try:
                self.scope[name] = cell.cell_contents
            except ValueError:
                pass
        self.filename = function.__code__.co_filename
        self.offset = function.__code__.co_firstlineno - 1
        self.step, self.resource, self.depth, self.seen = step, resource, depth, seen
        self.barriers = barriers
        self.conditional = 0
        self.events: list = []
        self.guarded: list = []         # issues retired in a guarded branch, not yet ordered
        self.committed: list = []       # [family, issues, later commits]: committed in a guarded branch

    def _where(self, node) -> str:
        return f"{short_path(self.filename)}:{node.lineno + self.offset}"

    def _conditional(self, node):
        self.conditional += 1
        self.generic_visit(node)
        self.conditional -= 1

    visit_While = visit_Try = visit_IfExp = _conditional

    def visit_If(self, node):
        known = self._const_expr(node.test)
        if known is not _MISSING:           # decided at compile time: only that branch exists
            for statement in (node.body if known else node.orelse):
                self.visit(statement)
            return
        if node.orelse or not self._elects_one(node.test):
            self.conditional += 1
            self.visit(node.test)
            self.conditional -= 1
            for branch in (node.body, node.orelse):
                self._guarded(branch)
            return
        self.visit(node.test)
        for statement in node.body:         # the same lane runs it every time: unconditional for it
            self.visit(statement)

    def _guarded(self, branch) -> None:
        """A branch that may not run: its issues count; its commits and waits retire nothing,
        except that a branch which itself retires every group it issues (``if tid == 0:
        tma_store; commit; wait(0)``) retires them for the threads that ran it, and a later
        unconditional CTA barrier (:data:`_BARRIERS`; ``syncwarp`` in a one-warp task) orders every other thread after that
        wait: its issues are then dropped (kept, as in flight, when no such barrier follows)."""
        saved = self.events, self.conditional, self.guarded, self.committed
        self.events, self.conditional, self.guarded, self.committed = [], 0, [], []
        for statement in branch:
            self.visit(statement)
        self._flush(final=True)
        events = self.events
        self.events, self.conditional, self.guarded, self.committed = saved
        issues = [e for e in events if e.kind == "issue"]
        if issues and not self.conditional and _retires_all(events):
            self.guarded += issues
        elif issues and not self.conditional and _commits_all(events):
            # ``if tid == 0: tma_store; commit`` then ``wait(0)`` after the ``if``: the issuing
            # thread's groups are closed; a later unconditional wait retires them (_retire)
            for name in dict.fromkeys(e.family.name for e in issues):
                self.committed.append([name, [e for e in issues if e.family.name == name], 0])
        else:
            self.events += issues

    def _add(self, event) -> None:
        if event.kind != "issue":
            self._flush()           # a guarded issue not yet ordered stays in flight from here
        self.events.append(event)
        if event.kind == "commit":
            for entry in self.committed:
                entry[2] += entry[0] == event.family.name
        elif event.kind == "wait" and event.pending is not None:
            self._retire(event)

    def _retire(self, wait) -> None:
        """An unconditional ``wait(N)`` also runs on the thread that committed groups in a
        guarded branch: a group older than the last ``N`` commits is retired for it, and, as in
        :meth:`_guarded`, a later CTA barrier orders the task's other threads after that wait."""
        kept = []
        for entry in self.committed:
            if entry[0] == wait.family.name and entry[2] >= wait.pending:
                self.guarded += entry[1]
            else:
                kept.append(entry)
        self.committed = kept

    def _flush(self, final: bool = False) -> None:
        self.events += self.guarded
        self.guarded = []
        if final:                   # committed in a guarded branch and never waited for: in flight
            self.events += [e for entry in self.committed for e in entry[1]]
            self.committed = []

    def _const_expr(self, test):
        """The value of ``if tsjit.const_expr(e):`` evaluated as the compiler does (module
        globals, closure, the step's Constexpr values), or ``_MISSING`` when not such a test
        or when ``e`` cannot be evaluated here."""
        if not (isinstance(test, ast.Call) and len(test.args) == 1 and not test.keywords):
            return _MISSING
        target = _resolve(test.func, self.scope, self.resource)
        if target is _MISSING or _identify(target) != ("tsjit.lang.constexpr", "const_expr"):
            return _MISSING
        names = dict(self.scope)
        if self.depth == 0:
            names.update(_constexpr_names(self.step))
        try:
            code = compile(ast.Expression(test.args[0]), self.filename, "eval")
            return bool(eval(code, names))
        except Exception:           # anything not known before the launch: both branches may run
            return _MISSING

    def _elects_one(self, test) -> bool:
        """``elect_one()`` with the default (full) mask: PTX ISA "elect.sync" elects the
        same leader lane for the same membermask every time, so the lane that issues a group in
        such a branch is the one that commits and waits for it in every such branch."""
        if not (isinstance(test, ast.Call) and not test.args and not test.keywords):
            return False
        target = _resolve(test.func, self.scope, self.resource)
        return target is not _MISSING and _identify(target) == ("tsjit.lang.sync", "elect_one")

    def visit_FunctionDef(self, node):
        pass                    # a nested def runs only when called

    visit_AsyncFunctionDef = visit_Lambda = visit_FunctionDef

    def visit_Call(self, node):
        self.generic_visit(node)
        target = _resolve(node.func, self.scope, self.resource)
        ident = _identify(target) if target is not _MISSING else None
        if ident is None:
            return
        if ident in self.barriers and not self.conditional:
            self.guarded = []
            return
        for family in FAMILIES:
            if ident[0] != family.module:
                continue
            if ident[1] == family.issue:
                self._add(Event(family, "issue", None, self._where(node)))
            elif ident[1] == family.commit and not self.conditional:
                self._add(Event(family, "commit", None, self._where(node)))
            elif ident[1] == family.wait and not self.conditional:
                arg = node.args[0] if node.args else next(
                    (k.value for k in node.keywords if k.arg == "pending"), None)
                names = _constexpr_names(self.step) if self.depth == 0 else {}
                pending = 0 if arg is None else _int(_constant(arg, names, self.resource))
                self._add(Event(family, "wait", pending, self._where(node)))
            return
        if isinstance(target, staticmethod):
            target = target.__func__
        if inspect.isfunction(target) and not (target.__module__ or "").startswith("tsjit.lang") \
                and self.depth < _MAX_DEPTH and target not in self.seen:
            for event in _function_events(target, self.step, self.resource, self.depth + 1,
                                          self.seen | {target}, self.barriers):
                if self.conditional and event.kind != "issue":
                    continue
                self._add(event)


def body_statements(function) -> list:
    """The body statements of ``function``'s source, parsed once per code object (the syntax is
    all that is cached: what the names mean is resolved again for every step); ``[]`` when its
    source is not available."""
    code = function.__code__
    if code not in _parsed:
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
        except (OSError, TypeError, SyntaxError, IndentationError):
            tree = None                 # no source (built at run time): nothing is known
        body = tree.body[0] if tree is not None and tree.body and \
            isinstance(tree.body[0], (ast.FunctionDef, ast.AsyncFunctionDef)) else tree
        _parsed[code] = list(getattr(body, "body", []))
    return _parsed[code]


def _function_events(function, step, resource, depth: int, seen: set, barriers) -> list:
    walker = _Walker(function, step, resource, depth, seen, barriers)
    for statement in body_statements(function):
        walker.visit(statement)
    walker._flush(final=True)
    return walker.events


#: CTA-wide barriers that order every thread of the task after a guarded branch's wait
_BARRIERS = frozenset({("tsjit.lang.builtins", "named_barrier_sync"),
                       ("tsjit.lang.builtins", "syncthreads")})
_SYNCWARP = ("tsjit.lang.builtins", "syncwarp")


def _retires_all(events) -> bool:
    """Whether ``events``, replayed alone, leave no group of theirs open or pending."""
    open_, groups = {}, {}
    for event in events:
        name = event.family.name
        if event.kind == "issue":
            open_[name] = True
        elif event.kind == "commit":
            if open_.pop(name, False):
                groups[name] = groups.get(name, 0) + 1
        elif event.pending is not None:
            groups[name] = min(groups.get(name, 0), event.pending)
        else:
            return False
    return not any(open_.values()) and not any(groups.values())


def _commits_all(events) -> bool:
    """Whether every issue of ``events`` is followed by a commit of its family (no group left open)."""
    open_ = {}
    for event in events:
        if event.kind in ("issue", "commit"):
            open_[event.family.name] = event.kind == "issue"
    return not any(open_.values())


def work_events(step, num_warps: int | None = None) -> tuple:
    """The asynchronous-read :class:`Event` list of one work step's method, in source order
    (empty when the method issues none or its source is unavailable).  ``num_warps``: the
    task's warps; with one, ``syncwarp()`` orders the whole task as a CTA barrier does."""
    function = getattr(step, "function", None)
    if function is None or not inspect.isfunction(function):
        return ()
    barriers = _BARRIERS | ({_SYNCWARP} if num_warps == 1 else set())
    # The events depend on the method, its resource (through its class) and the step's Constexpr values
    # only, so the steps of one work in a schedule (a GEMM's prologue, main loop and tail) share them.
    resource = step.resource
    try:
        key = (function, tuple(sorted(_constexpr_names(step).items())), num_warps == 1)
        hash(key)
        memo = _resource_memo(resource)
    except TypeError:           # an unhashable Constexpr value, or a resource without weak references
        return tuple(_function_events(function, step, resource, 0, {function}, barriers))
    events = memo.get(key)
    if events is None:
        events = memo[key] = tuple(_function_events(function, step, resource, 0, {function}, barriers))
    return events


_events_memo: dict[int, tuple] = {}     # id(resource) -> (weak reference to it, {key: events})


def _resource_memo(resource) -> dict:
    """The work-events memo of ``resource``; it goes when the resource does."""
    entry = _events_memo.get(id(resource))
    if entry is not None and entry[0]() is resource:
        return entry[1]
    identity = id(resource)

    def forget(ref):
        if _events_memo.get(identity, (None,))[0] is ref:
            del _events_memo[identity]
    entry = _events_memo[identity] = (weakref.ref(resource, forget), {})
    return entry[1]


@dataclass
class InFlight:
    """Asynchronous groups of one process, replayed in program order (module docstring).

    Per family: ``open`` -- accesses issued since the last commit; ``groups`` -- committed
    groups, oldest first, each a list of accesses.
    """

    open: dict = field(default_factory=dict)
    groups: dict = field(default_factory=dict)

    def apply(self, step, events, accesses) -> None:
        """Replay ``events`` of ``step``, whose own accesses are ``accesses``."""
        for event in events:
            family = event.family
            if event.kind == "issue":
                carried = [a for a in accesses if family.carries == "all" or a.mode == "read"]
                note = (f" (its {family.call(family.issue)} at {event.where} still reads it until "
                        f"a {family.call(family.wait)} retires the group)")
                pending = self.open.setdefault(family.name, [])
                for access in carried:
                    held = replace(access, mode="read", in_flight=note)
                    if held not in pending:
                        pending.append(held)
            elif event.kind == "commit":
                opened = self.open.pop(family.name, [])
                self.groups.setdefault(family.name, []).append(opened)
            elif event.pending is not None:
                groups = self.groups.get(family.name, [])
                del groups[:max(0, len(groups) - event.pending)]

    def active(self) -> list:
        """Every access still in flight (issued and not retired)."""
        out = []
        for name, opened in self.open.items():
            out += opened
        for groups in self.groups.values():
            for group in groups:
                out += group
        return out
