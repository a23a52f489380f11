"""The captured schedule: a tree of steps, blocks and token routes.

A schedule is **data**.  ``@schedule`` (see :mod:`tsjit.ts.capture`) runs the user's
function once with one proxy per resource and records this tree; validation and the
lowering read only the tree.

Data model (what ``tsjit/ts/lowering.py`` walks)
-------------------------------------------------
``TaskManager`` (:mod:`tsjit.ts.task_manager`)
    ``.tasks`` (tuple of Task, in declaration order), ``.resources`` (every resource, in
    first-use order), ``.resource_dependency_graph`` (``{downstream: (upstream, ...)}``),
    ``.variables`` (every TaskLocalVariable any task touches), ``.total_warps`` (CTA warp
    count = max task ``warp_end``), ``.default_registers_per_thread``,
    ``.register_request(task)`` -> ``(kind, n)`` with kind ``"inc"``/``"dec"``/None for
    ``setmaxnreg``, ``.options`` (a :class:`~tsjit.ts.options.TaskManagerOptions`), ``.smem_allocator`` (the laid-out
    :class:`~tsjit.ts.memory.SmemAllocator`: ``total_bytes`` of the dynamic block,
    ``barrier_offset(resource)`` of each pipelined resource's full[0], empty[0] at
    ``+ 8 * num_stages``; data allocations carry ``.offset``).
``Task`` (:mod:`tsjit.ts.task`)
    ``.name``, ``.warp_start``/``.warp_end`` (warps ``[warp_start, warp_end)``),
    ``.num_warps``, ``.src_resources``/``.dst_resources`` (tuples), ``.schedule``
    (:class:`Schedule`), ``.num_registers``, ``.run_only_on_cta_id``, ``.debug_print``,
    ``.local_variables`` (tuple of the TaskLocalVariables this task writes, reads or
    guards on: create one SSA slot per entry, initialised from
    ``variable.make_default()``), ``.get_domain(tile_coord)`` (call it when
    ``schedule.domain_loop.end_provider`` is set), ``.make_task_cache()`` (payload for
    ``StageInfo.task_cache``), ``.is_persistent``.
``Schedule``
    ``.body`` (tuple of nodes, in program order), ``.steps`` (every Step in program
    order = Head + Loop + Tail linear order; ``steps[i].id == i``), ``.routes``,
    ``.domain_loop`` (the single :class:`DomainLoop`), ``.work_tile_loop`` (or None).
Nodes
    :class:`Step` -- one recorded operation.  ``.resource``, ``.stage``
    (:class:`ScheduleStage`), ``.label`` (work method name; None for pipeline ops),
    ``.spec`` (:class:`~tsjit.ts.work.WorkSpec`, None for pipeline ops) and
    ``.function`` (the Python work function), ``.constexpr_kwargs`` (param -> literal,
    defaults not included), ``.inputs`` (param -> :class:`DataFlowToken`; pass the
    variable's *current* SSA value for each routed param), ``.outputs`` (variables the
    work's return values define, in order), ``.section``, ``.guards`` (outermost first),
    ``.call_index``, ``.location``.
    :class:`DomainLoop` -- ``.start``/``.end``/``.step`` (int or dynamic value),
    ``.end_provider`` (the Task subclass's ``get_domain`` function when the end is
    per-tile; then ``.end`` is None), ``.unroll``, ``.body``.
    :class:`GuardBlock` -- ``.guard`` (:class:`Guard`) and ``.body``.  FirstIter/LastIter/
    Every test the loop trip index ``i = (loop_offset - start) // step`` (``Every``: runs
    when ``i >= start and (i - start) % period == 0``); WhenTrue/WhenFalse test the
    current value of ``guard.variable`` (non-zero = true); Skippable runs the body when
    ``skip_if`` is false for the current work tile.
    :class:`WorkTileLoop` -- ``.queue`` (resource with ``is_work_queue``), ``.skip_if``
    (:class:`SkipPredicate` or None), ``.body``.

Value flow: each consumer-work output defines a new version of its variable; a routed
input reads the latest version at that point (phis at guarded joins and at the domain
loop back edge start from the variable's default).  Only params listed in
``Step.inputs`` receive values.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Union

from tsjit.errors import SourceLocation, short_path
from tsjit.ts.diagnostics import schedule_error
from tsjit.ts.enums import BlockCondition, ScheduleStage, ScheduleStageType, WorkAttr
from tsjit.ts.memory_resource import MemoryResource, TaskLocalVariable
from tsjit.ts.work import WorkSpec

__all__ = ["DataFlowToken", "Route", "Guard", "Trip", "SkipPredicate", "Step", "DomainLoop",
           "GuardBlock", "WorkTileLoop", "Schedule", "Node", "is_static", "format_value",
           "format_location"]


def is_static(value: Any) -> bool:
    """True for compile-time Python scalars (int/bool/float/str); anything else is dynamic."""
    return isinstance(value, (int, float, bool, str))


def format_value(value: Any) -> str:
    """Printable form of a bound: literals as is, dynamic values as ``<TypeName>``."""
    if value is None or is_static(value):
        return repr(value)
    if inspect.isfunction(value) or inspect.ismethod(value):
        return value.__qualname__
    return f"<{type(value).__name__}>"   # never touch a run-time value's own attributes


def format_location(location: SourceLocation | None) -> str:
    return f"{short_path(location.filename)}:{location.line}" if location else "?"


class DataFlowToken:
    """A value produced by a consumer-work call: ``(variable, producing step)``.

    Pass it to a later work call to route the value there, or to ``when_true`` /
    ``when_false``.  A single token cannot be unpacked or used as a Python bool.
    """

    __slots__ = ("variable", "step", "_owner")

    def __init__(self, variable: TaskLocalVariable, step: "Step", owner: object):
        self.variable = variable
        self.step = step
        self._owner = owner  # the capture that created it (tokens must not cross schedules)

    @property
    def step_id(self) -> int:
        return self.step.id

    @property
    def resource(self) -> MemoryResource:
        return self.variable.owner

    def belongs_to(self, capture: object) -> bool:
        return self._owner is capture

    def _describe(self) -> str:
        return (f"token {self.variable.qualified_name!r} (returned by step #{self.step.id}, "
                f"{self.step.display_call})")

    def __iter__(self):
        raise schedule_error(
            f"cannot unpack the single {self._describe()}; that work returns one variable. Use "
            f"`x = {self.step.display_call}` or add names to returns=(...).", "S13")

    def __bool__(self):
        raise schedule_error(
            f"{self._describe()} is a run-time value and has no truth value at capture time. Use "
            f"`with when_true(token):` / `with when_false(token):` instead of `if`.", "S13")

    def _no_arithmetic(self, *other):
        raise schedule_error(
            f"{self._describe()} is a schedule token, not a value: a schedule only routes it. Do the "
            f"arithmetic in a work body: pass the token to the work that reads it (e.g. `d.store(v)`) "
            f"and compute there.", "S13")

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __rtruediv__ = \
        __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = __pow__ = __rpow__ = __neg__ = __pos__ = \
        __abs__ = _no_arithmetic

    def _no_comparison(self, other):
        raise schedule_error(
            f"{self._describe()} is a run-time value: a schedule cannot compare it at capture time "
            f"(the comparison would decide nothing on the GPU). To run steps only when the value is "
            f"true (non-zero), write `with when_true(token):` (or `when_false`); for another condition, "
            f"compute it in the work that returns the token (return a Boolean TaskLocalVariable) and "
            f"guard on that.", "S13")

    __lt__ = __le__ = __gt__ = __ge__ = _no_comparison

    def __eq__(self, other):
        """``token == 0`` (a number or a string) is rule S13; tokens compare by identity."""
        if isinstance(other, (int, float, complex, str)):
            self._no_comparison(other)
        return NotImplemented

    __ne__ = __eq__
    __hash__ = object.__hash__

    def __repr__(self) -> str:
        return f"<token {self.variable.name} from [#{self.step.id}]>"


@dataclass(frozen=True, eq=False)
class Route:
    """A value edge: ``source`` step writes ``variable``; ``dest`` step reads it as ``param``."""

    source: "Step"
    variable: TaskLocalVariable
    dest: "Step"
    param: str

    def __str__(self) -> str:
        return f"[#{self.source.id}].{self.variable.name} -> [#{self.dest.id}].{self.param}"


@dataclass(frozen=True, eq=False)
class SkipPredicate:
    """A normalised ``skip_if`` predicate of a ``work_tile_loop``.

    ``takes_queue`` tells whether the function takes ``(queue, tile)`` (an unbound
    WorkQueue method or a free two-argument function) or only ``(tile)``.
    """

    function: Callable
    takes_queue: bool

    def __call__(self, queue: MemoryResource, tile: Any) -> Any:
        return self.function(queue, tile) if self.takes_queue else self.function(tile)

    def __str__(self) -> str:
        return getattr(self.function, "__qualname__", repr(self.function))


class Trip:
    """One trip of a domain loop as the loop guards read it (:meth:`Guard.holds_on`): ``index``
    (0, 1, ...), ``first`` and ``last`` (whether it is the first / last trip).  The simulations use
    :meth:`counted`; the lowering a subclass whose attributes are run-time Values."""

    def __init__(self, index, first, last):
        self.index, self.first, self.last = index, first, last

    @classmethod
    def counted(cls, iteration: int, trip_count: int) -> "Trip":
        """Trip ``iteration`` of a loop of ``trip_count`` trips."""
        return cls(iteration, iteration == 0, iteration == trip_count - 1)


@dataclass(frozen=True, eq=False)
class Guard:
    """The condition of a guard block.

    Attributes:
        condition: the :class:`BlockCondition`.
        period, start: for ``Every``.
        token: for ``WhenTrue``/``WhenFalse``, the token whose variable is tested.
        key: optional correlation key of ``when_true``/``when_false`` across tasks.
        skip_if: for ``Skippable``, the work tile loop's predicate.
    """

    condition: BlockCondition
    period: int | None = None
    start: int | None = None
    token: DataFlowToken | None = None
    key: str | None = None
    skip_if: SkipPredicate | None = None

    @property
    def variable(self) -> TaskLocalVariable | None:
        return self.token.variable if self.token is not None else None

    def holds(self, iteration: int, trip_count: int) -> bool | None:
        """Whether a loop guard runs on trip index ``iteration`` of ``trip_count``; None if
        data-dependent (:meth:`holds_on` of :meth:`Trip.counted`)."""
        return self.holds_on(Trip.counted(iteration, trip_count))

    def holds_on(self, trip: "Trip"):
        """The one reading of FirstIter / LastIter / Every: whether this guard runs on ``trip``.

        The simulations pass Python ints (the result is a bool); the lowering passes run-time
        Values (the result is a Boolean Value).  None for a data-dependent guard."""
        c = self.condition
        if c is BlockCondition.FirstIter:
            return trip.first
        if c is BlockCondition.LastIter:
            return trip.last
        if c is BlockCondition.Every:
            index = trip.index
            return (index >= self.start) & (((index - self.start) % self.period) == 0)
        return None

    def __str__(self) -> str:
        c = self.condition
        if c is BlockCondition.Every:
            return f"every({self.period}, start={self.start})"
        if c.is_data_dependent:
            key = f", key={self.key!r}" if self.key is not None else ""
            return f"{c.value}([#{self.token.step.id}].{self.token.variable.name}{key})"
        return f"{c.value}()"


@dataclass(eq=False)
class Step:
    """One recorded operation of a schedule (see the module docstring)."""

    id: int
    resource: MemoryResource
    stage: ScheduleStage
    label: str | None
    section: ScheduleStageType
    call_index: int
    location: SourceLocation | None = None
    constexpr_kwargs: dict = field(default_factory=dict)
    inputs: dict = field(default_factory=dict)
    outputs: tuple = ()
    output_tokens: tuple = ()
    work_attrs: WorkAttr = WorkAttr.NONE
    guards: tuple = ()
    spec: WorkSpec | None = None
    work_loop_slot: str | None = None
    via_group: Any = None             # a PipelineGroup: this step is the fan-out of its collapsed op
    fanout_index: int | None = None   # the member's position in that group's fan-out

    @property
    def function(self) -> Callable | None:
        return self.spec.function if self.spec is not None else None

    @property
    def is_work(self) -> bool:
        return self.stage.is_work

    @property
    def is_aux(self) -> bool:
        return self.stage.is_aux or bool(self.work_attrs & WorkAttr.AUXILIARY)

    @property
    def in_loop(self) -> bool:
        return self.section is ScheduleStageType.Loop

    @property
    def display_call(self) -> str:
        """``res.label(k=v)`` / ``res.acquire()`` as written in the schedule."""
        name = self.label or self.stage.op_name or self.stage.name
        args = ", ".join(f"{k}={v!r}" for k, v in self.constexpr_kwargs.items())
        if self.via_group is not None:
            return f"{self.via_group.name}.{name}()[{self.resource.name}]"
        return f"{self.resource.name}.{name}({args})"

    def describe(self) -> str:
        """``'src' ConsumerWork 'load' at schedule step #0 (file.py:12)`` for messages."""
        what = f"{self.stage.name} {self.label!r}" if self.label else self.stage.name
        return (f"{self.resource.name!r} {what} at schedule step #{self.id} "
                f"({format_location(self.location)})")

    def __repr__(self) -> str:
        return f"<Step #{self.id} {self.display_call} {self.stage.name} {self.section}>"


@dataclass(eq=False)
class GuardBlock:
    """Steps that run only when ``guard`` holds."""

    guard: Guard
    body: tuple = ()
    location: SourceLocation | None = None


@dataclass(eq=False)
class DomainLoop:
    """The per-tile domain loop (exactly one per schedule).

    ``start``/``end``/``step`` are ints or dynamic values; ``end`` is None and
    ``end_provider`` the Task subclass's ``get_domain`` function for per-tile ends.
    """

    start: Any
    end: Any
    step: Any
    unroll: int | None = None
    end_provider: Callable | None = None
    body: tuple = ()
    location: SourceLocation | None = None

    @property
    def static_trip_count(self) -> int | None:
        """``len(range(start, end, step))`` when all three are ints, else None."""
        bounds = (self.start, self.end, self.step)
        if all(isinstance(b, int) for b in bounds) and self.step != 0:
            return len(range(self.start, self.end, self.step))
        return None

    def __str__(self) -> str:
        end = format_value(self.end_provider) if self.end_provider else format_value(self.end)
        unroll = f", unroll={self.unroll}" if self.unroll is not None else ""
        return (f"domain_loop(start={format_value(self.start)}, end={end}, "
                f"step={format_value(self.step)}{unroll})")


@dataclass(eq=False)
class WorkTileLoop:
    """The persistent loop over work tiles of ``queue`` (at most one, top level)."""

    queue: MemoryResource
    skip_if: SkipPredicate | None = None
    body: tuple = ()
    location: SourceLocation | None = None


Node = Union[Step, DomainLoop, GuardBlock, WorkTileLoop]


@dataclass(eq=False)
class Schedule:
    """A captured schedule (see the module docstring for the data model)."""

    name: str
    parameters: tuple
    resources: tuple
    body: tuple
    steps: tuple
    routes: tuple
    location: SourceLocation | None = None

    def walk(self) -> Iterator[Node]:
        """Every node, depth first in program order."""
        def visit(nodes):
            for node in nodes:
                yield node
                if not isinstance(node, Step):
                    yield from visit(node.body)
        yield from visit(self.body)

    @property
    def domain_loop(self) -> DomainLoop | None:
        return next((n for n in self.walk() if isinstance(n, DomainLoop)), None)

    @property
    def work_tile_loop(self) -> WorkTileLoop | None:
        return next((n for n in self.body if isinstance(n, WorkTileLoop)), None)

    def steps_in(self, section: ScheduleStageType) -> tuple:
        return tuple(s for s in self.steps if s.section is section)

    def variables(self) -> tuple:
        """Task-local variables written, read or guarded on, in first-use order."""
        seen: dict[int, TaskLocalVariable] = {}
        for step in self.steps:
            for var in (*(t.variable for t in step.inputs.values()),
                        *(g.variable for g in step.guards if g.variable is not None),
                        *step.outputs):
                seen.setdefault(id(var), var)
        return tuple(seen.values())

    def __str__(self) -> str:
        lines = [f"schedule {self.name}({', '.join(self.parameters)})"]
        readers: dict[int, list[tuple]] = {}
        for route in self.routes:
            readers.setdefault(id(route.source), []).append(
                (route.variable, f"[#{route.dest.id}].{route.param}"))
        for node in self.walk():
            if isinstance(node, GuardBlock) and node.guard.token is not None:
                token = node.guard.token
                entry = (token.variable, node.guard.condition.value)
                users = readers.setdefault(id(token.step), [])
                if entry not in users:
                    users.append(entry)
        self._format(self.body, 1, lines, readers)
        return "\n".join(lines)

    def _format(self, nodes, depth, lines, readers) -> None:
        pad = "  " * depth
        for node in nodes:
            if isinstance(node, Step):
                lines.append(f"{pad}#{node.id} {node.display_call}  {node.stage.name}"
                             f"  [{node.section}] call {node.call_index}")
                for param, token in node.inputs.items():
                    lines.append(f"{pad}     {param} <- [#{token.step.id}].{token.variable.name}")
                for variable, reader in readers.get(id(node), ()):
                    lines.append(f"{pad}     {variable.name} -> {reader}")
                unread = [v.name for v in node.outputs
                          if not any(var is v for var, _ in readers.get(id(node), ()))]
                for name in unread:
                    lines.append(f"{pad}     {name} -> (not routed)")
                continue
            if isinstance(node, DomainLoop):
                header = str(node)
            elif isinstance(node, WorkTileLoop):
                skip = f", skip_if={node.skip_if}" if node.skip_if else ""
                header = f"work_tile_loop({node.queue.name}{skip})"
            else:
                header = str(node.guard)
            lines.append(f"{pad}{header}:")
            if not node.body:
                lines.append(f"{pad}  pass")
            self._format(node.body, depth + 1, lines, readers)
