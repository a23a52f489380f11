"""Schedule capture: ``@schedule``, ``domain_loop``, guards and ``work_tile_loop``.

``@schedule`` wraps a function whose parameters are resources.  Calling the wrapper
runs the function **once** with a :class:`~tsjit.ts.proxy.ResourceProxy` per resource
and returns the recorded :class:`~tsjit.ts.schedule.Schedule`; nothing executes on the
device.  Trace-time Python ``for``/``if`` simply run, so they unroll into the recording
(each repeated call gets the next ``call_index``).  Calling a ``@schedule`` function
while another one is being captured inlines it into the outer recording.

Grammar checks (each raises ``ScheduleError`` at the user's line):

S1  at most one ``work_tile_loop``, at top level; only auxiliary or barrier-resource
    steps before/after it, and no block after it.
S2  ``domain_loop`` not nested, at most one; inside ``skippable()`` when the work tile
    loop has ``skip_if``; not inside a guard block.
S3  ``skippable()`` needs a ``work_tile_loop`` with ``skip_if``, cannot nest, and no
    WorkQueue operation may sit inside it.
S4  ``first_iter``/``last_iter``/``every`` only while their domain loop's ``with`` is open.
S5  1-3 bounds; no ``None``; step literal 0 rejected; a callable end must be a
    class-accessed ``get_domain(self, coord)`` function; ``unroll`` int >= 1 or None.
S6  a ``get_domain`` provider only for ``end``; one domain loop.
S7  scopes closed out of order, or created and never entered.
S8  schedule arguments must be resources.
S9-S13  see :mod:`tsjit.ts.proxy`.
S14 ``skip_if`` must be callable, bound to this queue / a method of its class, and take
    ``(wq, tile)`` or ``(tile)`` (wrong arity: ``TypeError``).
S15 warning (``ScheduleWarning``): an output never routed (WorkQueue outputs exempt).
"""
from __future__ import annotations

import functools
import inspect
import threading
from typing import Any, Callable

from tsjit.errors import CompilationError, SourceLocation, UsageTypeError, warn
from tsjit.ts.diagnostics import ScheduleWarning, frame_location, is_internal_file, schedule_error, user_location
from tsjit.ts.enums import PIPELINE_OPS, BlockCondition, ScheduleStageType
from tsjit.ts.group import PipelineGroup
from tsjit.ts.group_schedule import check_operation, expand_group_steps, schedule_argument
from tsjit.ts.proxy import ResourceProxy, UnrecordedMethod, bind_work_call, unwrap_resource
from tsjit.ts.memory_resource import MemoryResource
from tsjit.ts.schedule import (DataFlowToken, DomainLoop, Guard, GuardBlock, Route, Schedule,
                               SkipPredicate, Step, WorkTileLoop, format_location, is_static)
from tsjit.ts.work import WorkSpec

__all__ = ["schedule", "ScheduleFunction", "domain_loop", "when_true", "when_false",
           "work_tile_loop", "DomainLoopHandle", "WorkTileLoopHandle"]

_state = threading.local()


def _active() -> "_Capture | None":
    stack = getattr(_state, "stack", None)
    return stack[-1] if stack else None


def _require_capture(what: str) -> "_Capture":
    capture = _active()
    if capture is None:
        raise schedule_error(f"{what} can only be used inside a @schedule function while it "
                             f"is being captured.", "S7")
    return capture


class _Scope:
    """Base of the context managers a schedule opens (one node each)."""

    kind = "scope"

    def __init__(self, capture: "_Capture", node: Any):
        self._capture = capture
        self.node = node
        self.children: list = []
        self.is_open = False
        self.closed = False
        self.location = node.location
        capture.pending.append(self)

    def __enter__(self):
        if self.is_open or self.closed:
            raise schedule_error(f"this {self.kind} block was already used; create a new one.",
                                 "S7")
        self._capture.open(self)
        return self

    def __exit__(self, exc_type, exc, tb):
        self._capture.close(self, failing=exc_type is not None)
        return False


class _GuardScope(_Scope):
    kind = "guard"

    def __init__(self, capture, guard: Guard, loop: "DomainLoopHandle | None" = None):
        super().__init__(capture, GuardBlock(guard=guard, location=user_location()))
        self.loop = loop


class DomainLoopHandle(_Scope):
    """Returned by ``domain_loop(...)``; ``with`` it to record the loop body."""

    kind = "domain_loop"

    def _loop_guard(self, guard: Guard, what: str) -> _GuardScope:
        if not self.is_open:
            raise schedule_error(
                f"d.{what}() on a domain loop whose `with` block is "
                f"{'already closed (stale handle)' if self.closed else 'not open'}; use it "
                f"inside `with domain_loop(...) as d:`.", "S4")
        return _GuardScope(self._capture, guard, loop=self)

    def first_iter(self) -> _GuardScope:
        """Guard: run the block on the first domain iteration only."""
        return self._loop_guard(Guard(BlockCondition.FirstIter), "first_iter")

    def last_iter(self) -> _GuardScope:
        """Guard: run the block on the last domain iteration only."""
        return self._loop_guard(Guard(BlockCondition.LastIter), "last_iter")

    def every(self, period: int, start: int = 0) -> _GuardScope:
        """Guard: run on trip indices ``start, start+period, ...`` (``i >= start``)."""
        for name, value, low in (("period", period, 1), ("start", start, 0)):
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise schedule_error(f"d.every(): {name} must be an int >= {low}, got "
                                     f"{value!r}.", "S4")
        return self._loop_guard(Guard(BlockCondition.Every, period=period, start=start), "every")


class WorkTileLoopHandle(_Scope):
    """Returned by ``work_tile_loop(wq, skip_if=...)``."""

    kind = "work_tile_loop"

    def skippable(self) -> _GuardScope:
        """Block omitted on tiles where ``skip_if`` is true (rule S3)."""
        node: WorkTileLoop = self.node
        if node.skip_if is None:
            raise schedule_error("wtl.skippable() needs work_tile_loop(wq, skip_if=...) with a "
                                 "predicate.", "S3")
        if not self.is_open:
            raise schedule_error("wtl.skippable() must be used inside the `with "
                                 "work_tile_loop(...)` block.", "S3")
        return _GuardScope(self._capture, Guard(BlockCondition.Skippable, skip_if=node.skip_if))


class _Capture:
    """The recording state of one schedule capture."""

    def __init__(self, name: str):
        self.name = name
        self.root: list = []
        self.stack: list[_Scope] = []
        self.pending: list[_Scope] = []
        self.steps: list[Step] = []
        self.routes: list[Route] = []
        self.latest: dict[int, Step] = {}
        self.counters: dict[tuple, int] = {}
        self.used: set[tuple[int, int]] = set()   # (step id, variable id) routed or tested
        self.domain: DomainLoopHandle | None = None
        self.wtl: WorkTileLoopHandle | None = None
        self.proxies: dict[int, ResourceProxy] = {}

    # -- helpers -------------------------------------------------------------------
    def proxy(self, resource: MemoryResource) -> ResourceProxy:
        if id(resource) not in self.proxies:
            resource.task_local_variables()  # binds owners; raises for uninitialized slots
            self.proxies[id(resource)] = ResourceProxy(resource, self)
        return self.proxies[id(resource)]

    def latest_writer(self, variable) -> Step | None:
        return self.latest.get(id(variable))

    def _children(self) -> list:
        return self.stack[-1].children if self.stack else self.root

    def _section(self) -> ScheduleStageType:
        if self.domain is not None and self.domain.is_open:
            return ScheduleStageType.Loop
        if self.domain is not None and self.domain.closed:
            return ScheduleStageType.Tail
        return ScheduleStageType.Head

    def _guards(self) -> tuple:
        return tuple(s.node.guard for s in self.stack if isinstance(s, _GuardScope))

    # -- scopes ----------------------------------------------------------------------
    def open(self, scope: _Scope) -> None:
        if scope._capture is not self or scope not in self.pending:
            raise schedule_error(f"this {scope.kind} block belongs to another schedule "
                                 f"capture.", "S7")
        if self.wtl is not None and self.wtl.closed:
            raise schedule_error(f"{scope.kind} block after work_tile_loop: only auxiliary or "
                                 f"barrier-resource steps may follow the work tile loop.", "S1")
        if isinstance(scope, DomainLoopHandle):
            self._check_domain_placement()
            self.domain = scope
        elif isinstance(scope, WorkTileLoopHandle):
            self._check_wtl_placement(scope)
            self.wtl = scope
        elif scope.node.guard.condition is BlockCondition.Skippable:
            if not (self.wtl is not None and self.wtl.is_open):
                raise schedule_error("skippable() block entered outside its work_tile_loop.",
                                     "S3")
            if self._inside_skippable():
                raise schedule_error("skippable() blocks cannot nest.", "S3")
        elif scope.loop is not None and not scope.loop.is_open:
            raise schedule_error("first_iter/last_iter/every block entered after its domain "
                                 "loop closed (stale handle).", "S4")
        self.pending.remove(scope)
        self._children().append(scope.node)
        self.stack.append(scope)
        scope.is_open = True

    def close(self, scope: _Scope, failing: bool = False) -> None:
        if not self.stack or self.stack[-1] is not scope:
            if failing:
                return
            top = self.stack[-1].kind if self.stack else "none"
            raise schedule_error(f"{scope.kind} block closed while the inner {top} block is "
                                 f"still open; close scopes in reverse order.", "S7")
        self.stack.pop()
        scope.node.body = tuple(scope.children)
        scope.is_open, scope.closed = False, True

    def _check_domain_placement(self) -> None:
        if self.domain is not None:
            rule = "nested domain_loop" if self.domain.is_open else "a second domain_loop"
            raise schedule_error(
                f"{rule}: a schedule has exactly one domain_loop (first at "
                f"{format_location(self.domain.location)}). Put all per-index steps in it.",
                "S2" if self.domain.is_open else "S6")
        guards = [s for s in self.stack if isinstance(s, _GuardScope)
                  and s.node.guard.condition is not BlockCondition.Skippable]
        if guards:
            raise schedule_error(f"domain_loop inside a {guards[-1].node.guard} block; guards "
                                 f"go inside the domain loop.", "S2")
        wtl = self.wtl
        if wtl is not None and wtl.node.skip_if is not None and not self._inside_skippable():
            raise schedule_error("domain_loop must sit inside `with wtl.skippable():` when the "
                                 "work_tile_loop has skip_if (skipped tiles must not run "
                                 "it).", "S2")

    def _inside_skippable(self) -> bool:
        return any(isinstance(s, _GuardScope)
                   and s.node.guard.condition is BlockCondition.Skippable for s in self.stack)

    def _check_wtl_placement(self, scope: WorkTileLoopHandle) -> None:
        if self.wtl is not None:
            raise schedule_error("a second work_tile_loop: a schedule has at most one.", "S1")
        if self.stack:
            raise schedule_error(f"work_tile_loop inside a {self.stack[-1].kind} block; it "
                                 f"must be at the top level of the schedule.", "S1")
        for node in self.root:
            if not isinstance(node, Step):
                raise schedule_error("work_tile_loop after a block: only auxiliary or "
                                     "barrier-resource steps may precede it.", "S1")
            if not (node.is_aux or node.resource.is_barrier):
                raise schedule_error(
                    f"step #{node.id} {node.display_call} ({node.stage.name}) before "
                    f"work_tile_loop would run once per CTA instead of once per tile. Move "
                    f"it inside the work tile loop (only auxiliary or barrier-resource steps "
                    f"may stay outside).", "S1")

    # -- steps -----------------------------------------------------------------------
    def _new_step(self, resource: MemoryResource, stage, label: str | None, **fields) -> Step:
        location = user_location()
        if self.wtl is not None and self.wtl.closed and not (
                stage.is_aux or resource.is_barrier):
            raise schedule_error(
                f"{resource.name} {stage.name} after work_tile_loop would run once per CTA. "
                f"Move it inside the work tile loop (only auxiliary or barrier-resource steps "
                f"may follow it).", "S1", location)
        if resource.is_work_queue and self._inside_skippable():
            raise schedule_error(
                f"WorkQueue operation {resource.name} {stage.name} inside skippable(): skipped "
                f"tiles must still advance the queue. Move it after the skippable block.",
                "S3", location)
        section = self._section()
        key = (id(resource), stage, section)
        call_index = self.counters.get(key, 0)
        self.counters[key] = call_index + 1
        step = Step(id=len(self.steps), resource=resource, stage=stage, label=label,
                    section=section, call_index=call_index, location=location,
                    guards=self._guards(), **fields)
        self.steps.append(step)
        self._children().append(step)
        return step

    def record_pipeline_op(self, resource: MemoryResource, op: str, args, kwargs):
        if args or kwargs:
            raise schedule_error(f"{resource.name}.{op}() takes no arguments.", "S13")
        check_operation(resource, op)   # pipeline groups: the collapsed operation is the group's
        if resource.pipeline_config is None and not isinstance(resource, PipelineGroup) \
                and not getattr(resource, "is_work_queue", False):
            # (a static WorkQueue's wait/release are the queue epilogue: bookkeeping, no barrier)
            raise schedule_error(
                f"resource {resource.name!r} has no pipeline_config; {op}() needs a pipeline. "
                f"Give it a pipeline_config, or drop the {op}() call (resources without a "
                f"pipeline only have work steps).", "S9")
        self._new_step(resource, PIPELINE_OPS[op], None)
        return None

    def record_work(self, resource: MemoryResource, spec: WorkSpec, args, kwargs):
        inputs, constexprs = bind_work_call(self, resource, spec, args, kwargs)
        variables = resource.task_local_variables()
        outputs = []
        for name in spec.returns:
            if name not in variables:
                raise schedule_error(
                    f"{resource.name}.{spec.label}: returns= names {name!r}, which is not a "
                    f"TaskLocalVariable of {type(resource).__name__}; available: "
                    f"{', '.join(repr(v) for v in variables) or 'none'}.", "S12")
            outputs.append(variables[name])
        step = self._new_step(resource, spec.stage, spec.label, constexpr_kwargs=constexprs,
                              inputs=inputs, outputs=tuple(outputs), work_attrs=spec.work_attrs,
                              spec=spec)
        for param, token in inputs.items():
            self.routes.append(Route(token.step, token.variable, step, param))
            self.used.add((token.step.id, id(token.variable)))
        tokens = tuple(DataFlowToken(var, step, self) for var in outputs)
        step.output_tokens = tokens
        for var in outputs:
            self.latest[id(var)] = step
        if not tokens:
            return None
        return tokens[0] if len(tokens) == 1 else tokens

    def use_token(self, token: Any, what: str) -> DataFlowToken:
        if not isinstance(token, DataFlowToken):
            raise schedule_error(f"{what} takes a token returned by a consumer work, got "
                                 f"{'None' if token is None else type(token).__name__}.", "S13")
        if not token.belongs_to(self):
            raise schedule_error(f"{what}: token {token.variable.qualified_name!r} comes from "
                                 f"another schedule.", "S13")
        latest = self.latest_writer(token.variable)
        if latest is not token.step:
            raise schedule_error(f"{what}: stale token for {token.variable.qualified_name!r} "
                                 f"(written by step #{token.step.id}, re-written by step "
                                 f"#{latest.id}). Pass the newer token.", "S13")
        self.used.add((token.step.id, id(token.variable)))
        return token

    # -- end ---------------------------------------------------------------------------
    def finish(self, parameters: tuple, resources: tuple, location) -> Schedule:
        if self.stack:
            raise schedule_error(f"the {self.stack[-1].kind} block opened at "
                                 f"{format_location(self.stack[-1].location)} is never closed.",
                                 "S7", self.stack[-1].location)
        if self.pending:
            scope = self.pending[0]
            raise schedule_error(f"a {scope.kind} block was created but never entered; use it "
                                 f"as `with ...:`.", "S7", scope.location)
        if self.wtl is not None:
            slot = "pre"
            for node in self.root:
                if node is self.wtl.node:
                    slot = "post"
                elif isinstance(node, Step):
                    node.work_loop_slot = slot
        for step in self.steps:
            if step.resource.is_work_queue:
                continue
            for var in step.outputs:
                if (step.id, id(var)) not in self.used:
                    warn(
                        f"{format_location(step.location)}: schedule {self.name!r} step "
                        f"#{step.id} {step.display_call} writes {var.qualified_name!r} but no "
                        f"later call reads the token. Route it (pass it to the work that "
                        f"reads it) or drop it from returns=.  [S15]", ScheduleWarning,
                        step.location)
        # pipeline groups: each collapsed operation becomes one step per member (renumbers the steps)
        self.root, self.steps = expand_group_steps(self.root, self.steps, self.name)
        return Schedule(name=self.name, parameters=parameters, resources=resources,
                        body=tuple(self.root), steps=tuple(self.steps),
                        routes=tuple(self.routes), location=location)


class ScheduleFunction:
    """A ``@schedule`` function; call it with its resources to capture a Schedule."""

    def __init__(self, fn: Callable):
        if not callable(fn):
            raise UsageTypeError(f"@schedule decorates a function, got {type(fn).__name__}")
        self.fn = fn
        functools.update_wrapper(self, fn)

    def __repr__(self) -> str:
        return f"<schedule {getattr(self.fn, '__qualname__', self.fn)}>"

    def __call__(self, *args, **kwargs) -> Schedule | None:
        outer = _active()
        if outer is not None:  # a schedule called from a schedule: inline it

            def as_proxy(value):
                resource = unwrap_resource(value)
                return outer.proxy(resource) if isinstance(resource, MemoryResource) else value
            self.fn(*map(as_proxy, args), **{k: as_proxy(v) for k, v in kwargs.items()})
            return None
        return self.capture(*args, **kwargs)

    def capture(self, *args, **kwargs) -> Schedule:
        """Run the function once with proxies and return the recorded Schedule."""
        signature = inspect.signature(self.fn)
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        name = getattr(self.fn, "__name__", "schedule")
        capture = _Capture(name)
        resources: list[MemoryResource] = []
        call_args: list[Any] = []
        call_kwargs: dict[str, Any] = {}

        def convert(param: str, value: Any) -> ResourceProxy:
            value = schedule_argument(name, param, value)   # group.member, never a bare grouped member
            value = unwrap_resource(value)
            if not isinstance(value, MemoryResource):
                raise schedule_error(
                    f"@schedule {name}: argument {param!r} is a {type(value).__name__}; "
                    f"schedule arguments must be resources (MemoryResource instances). Read "
                    f"other values from the enclosing scope.", "S8")
            if all(r is not value for r in resources):
                resources.append(value)
            return capture.proxy(value)

        for pname, value in bound.arguments.items():
            kind = signature.parameters[pname].kind
            if kind is inspect.Parameter.VAR_POSITIONAL:
                call_args.extend(convert(f"{pname}[{i}]", v) for i, v in enumerate(value))
            elif kind is inspect.Parameter.VAR_KEYWORD:
                call_kwargs.update({k: convert(k, v) for k, v in value.items()})
            elif kind is inspect.Parameter.KEYWORD_ONLY:
                call_kwargs[pname] = convert(pname, value)
            else:
                call_args.append(convert(pname, value))
        stack = getattr(_state, "stack", None)
        if stack is None:
            stack = _state.stack = []
        stack.append(capture)
        try:
            self.fn(*call_args, **call_kwargs)
        except CompilationError as error:
            if error.location is not None:
                raise
            raise _located_in_schedule(name, error) from None
        finally:
            stack.pop()
        code = getattr(self.fn, "__code__", None)
        location = SourceLocation(code.co_filename, code.co_firstlineno, 0, name) if code else None
        return capture.finish(tuple(signature.parameters), tuple(resources), location)


def _located_in_schedule(name: str, error: CompilationError) -> CompilationError:
    """``error`` (a device value misused by schedule code, raised without a location) located at the
    schedule's own line; a device value used as a Python bool (``if cta == 0:``) gets the schedule's
    alternatives instead of the kernel's (a schedule has no run-time ``if``)."""
    tb, location, last = error.__traceback__, None, None
    while tb is not None:
        if not is_internal_file(tb.tb_frame.f_code.co_filename):
            location = frame_location(tb.tb_frame)
        last, tb = tb, tb.tb_next
    message = error.message
    if last is not None and last.tb_frame.f_code.co_name == "__bool__":
        message = (f"@schedule {name}: {message.split(';')[0]}. A schedule runs once at compile time and "
                   f"records its steps, so a run-time condition cannot decide which steps it has. Guard the "
                   f"steps on a token a consumer work returns (`with ts.when_true(token):`), use a "
                   f"compile-time condition (`if tsjit.const_expr(...)` or a Constexpr), or test the value "
                   f"inside a work body")
    return CompilationError(message, location, error.call_chain)


def schedule(fn: Callable) -> ScheduleFunction:
    """Decorator: make ``fn`` a schedule; ``fn(resources...)`` returns a captured Schedule."""
    return ScheduleFunction(fn)


def _check_bound(which: str, value: Any) -> Any:
    if value is None:
        raise schedule_error(f"domain_loop {which} is None; pass an int or a run-time value.",
                             "S5")
    if isinstance(value, bool) or (is_static(value) and not isinstance(value, int)):
        raise schedule_error(f"domain_loop {which} must be an int or a run-time integer value, "
                             f"got {value!r}.", "S5")
    if inspect.isfunction(value) or inspect.ismethod(value):
        if which != "end":
            raise schedule_error(f"domain_loop {which} cannot come from a provider function; "
                                 f"only the end may be per-tile (get_domain).", "S6")
        if inspect.ismethod(value):
            raise schedule_error(
                f"domain_loop end is the bound method {value.__qualname__}; pass the function "
                f"through the class, e.g. {value.__qualname__}, accessed as "
                f"MyTask.get_domain (the task is bound when it is lowered).", "S5")
        params = [p for p in inspect.signature(value).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        if len(params) != 2:
            raise schedule_error(f"domain_loop end provider {value.__qualname__} must take "
                                 f"(self, tile_coord), got {len(params)} positional "
                                 f"parameter(s).", "S5")
    return value


def domain_loop(*bounds: Any, unroll: int | None = None) -> DomainLoopHandle:
    """The per-tile domain loop: ``domain_loop(end)``, ``(start, end)``, ``(start, end, step)``.

    Bounds are ints or run-time values; ``end`` may be a Task subclass's ``get_domain``
    accessed through the class (per-tile end).  ``with domain_loop(...) as d:`` records
    the body; ``d.first_iter()``, ``d.last_iter()``, ``d.every(period, start=0)`` open guards.
    """
    capture = _require_capture("domain_loop()")
    if not 1 <= len(bounds) <= 3:
        raise schedule_error(f"domain_loop takes 1 to 3 bounds (end | start, end | start, end, "
                             f"step), got {len(bounds)}.", "S5")
    start, end, step = {1: (0, bounds[0], 1), 2: (*bounds, 1), 3: bounds}[len(bounds)]
    start, end, step = (_check_bound("start", start), _check_bound("end", end),
                        _check_bound("step", step))
    if isinstance(step, int) and step == 0:
        raise schedule_error("domain_loop step is 0; the loop would never advance.", "S5")
    if unroll is not None and (not isinstance(unroll, int) or isinstance(unroll, bool)
                               or unroll < 1):
        raise schedule_error(f"domain_loop unroll must be an int >= 1 or None, got {unroll!r}.",
                             "S5")
    provider = end if inspect.isfunction(end) else None
    node = DomainLoop(start=start, end=None if provider else end, step=step, unroll=unroll,
                      end_provider=provider, location=user_location())
    return DomainLoopHandle(capture, node)


def when_true(token: DataFlowToken, key: str | None = None) -> _GuardScope:
    """Guard: run the block when the token's variable is non-zero at run time."""
    return _when(BlockCondition.WhenTrue, token, key)


def when_false(token: DataFlowToken, key: str | None = None) -> _GuardScope:
    """Guard: run the block when the token's variable is zero at run time."""
    return _when(BlockCondition.WhenFalse, token, key)


def _when(condition: BlockCondition, token: Any, key: Any) -> _GuardScope:
    capture = _require_capture(f"{condition.value}()")
    if key is not None and not isinstance(key, str):
        raise UsageTypeError(f"{condition.value}(key=...) must be a str or None, got "
                             f"{type(key).__name__}")
    token = capture.use_token(token, f"{condition.value}()")
    return _GuardScope(capture, Guard(condition, token=token, key=key))


def _normalise_skip_if(queue: MemoryResource, skip_if: Any) -> SkipPredicate | None:
    if skip_if is None:
        return None
    if isinstance(skip_if, UnrecordedMethod):
        if skip_if.resource is not queue:
            raise schedule_error(f"skip_if is a method of {skip_if.resource.name!r}, not of "
                                 f"the work tile loop's queue {queue.name!r}.", "S14")
        skip_if = skip_if.bound
    if not callable(skip_if):
        raise schedule_error(f"skip_if must be callable, got {type(skip_if).__name__}.", "S14")
    if inspect.ismethod(skip_if):
        if skip_if.__self__ is not queue:
            raise schedule_error(f"skip_if {skip_if.__qualname__} is bound to "
                                 f"{getattr(skip_if.__self__, 'name', skip_if.__self__)!r}, not "
                                 f"to the queue {queue.name!r}.", "S14")
        expected, takes_queue = 1, False
    else:
        parts = getattr(skip_if, "__qualname__", "").split(".")
        in_class = len(parts) >= 2 and parts[-2] != "<locals>"
        if in_class and not any(vars(k).get(skip_if.__name__) is skip_if
                                for k in type(queue).__mro__):
            raise schedule_error(f"skip_if {skip_if.__qualname__} is a method of another class "
                                 f"than the queue's {type(queue).__name__}.", "S14")
        expected, takes_queue = None, True
    params = [p for p in inspect.signature(skip_if).parameters.values()
              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty]
    if expected is None and len(params) in (1, 2):
        takes_queue = len(params) == 2
    elif len(params) != (expected or 0):
        raise schedule_error(f"skip_if {getattr(skip_if, '__qualname__', skip_if)} must accept "
                             f"(wq, tile) or (tile); it takes {len(params)} argument(s).", "S14")
    return SkipPredicate(skip_if, takes_queue)


def work_tile_loop(queue: Any, skip_if: Callable | None = None) -> WorkTileLoopHandle:
    """The persistent loop over the work tiles of a WorkQueue (rules S1, S3, S14).

    ``with work_tile_loop(wq, skip_if=pred) as wtl:`` records the per-tile body;
    ``with wtl.skippable():`` marks the part omitted on tiles where ``pred`` is true.
    """
    capture = _require_capture("work_tile_loop()")
    resource = unwrap_resource(queue)
    if not isinstance(resource, MemoryResource) or not resource.is_work_queue:
        raise schedule_error(f"work_tile_loop needs a WorkQueue resource (is_work_queue), got "
                             f"{getattr(resource, 'name', type(resource).__name__)!r}.", "S1")
    node = WorkTileLoop(queue=resource, skip_if=_normalise_skip_if(resource, skip_if),
                        location=user_location())
    return WorkTileLoopHandle(capture, node)

