"""Work methods: ``@consumer_work`` / ``@producer_work``, their specs and label resolution.

A resource class declares any number of named work methods::

    @consumer_work(returns="item")               # reader: writes task-local `item`
    def load(self, stage_info, *, slot: tsjit.Constexpr[int] = 0): ...

    @producer_work                               # writer: reads routed `item`
    def store(self, stage_info, item): ...

A work method's signature is ``(self, stage_info, *routed_inputs, **constexpr_kwargs)``:

* ``self`` and ``stage_info`` (any names) come first and are positional;
* every other parameter that is not a Constexpr is a **routed input**: the schedule
  passes it a token (positional-or-keyword parameters by position or keyword,
  keyword-only ones by keyword); a routed input with a default may be left out;
* keyword-only parameters annotated ``tsjit.Constexpr[...]`` (the annotation object has
  ``__tsjit_constexpr__ = True``, or its text contains ``Constexpr``) take compile-time
  literals from the schedule call site; one without a default must be given there.

The decorators only attach a :class:`WorkSpec` to the function; :func:`work_methods`
collects a class's specs (most derived wins) and :func:`resolve_work` maps a recorded
``(resource, stage, label)`` to ``(function, spec)`` for the lowering.  Label rules
(rule N1): a typo raises with up to three close matches (difflib, cutoff 0.4); an
unlabelled call dispatches to the single method of that stage and raises with a
labelled example when there are several.
"""
from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass, replace
from typing import Any, Callable

from tsjit.errors import ScheduleError, UsageTypeError, UsageValueError, did_you_mean
from tsjit.ts.enums import PIPELINE_OPS, ScheduleStage, WorkAttr, WorkRole
from tsjit.ts.memory_resource import MemoryResource, TaskLocalVariable, is_task_local_field

__all__ = ["consumer_work", "producer_work", "WorkSpec", "ConstexprParam", "WorkLabelError",
           "work_methods", "resolve_work", "GENERIC_WORK_CALLS", "RESERVED_WORK_NAMES",
           "did_you_mean"]

#: generic proxy calls -> the stage they dispatch on (to the single method of that stage).
GENERIC_WORK_CALLS: dict[str, ScheduleStage] = {
    "consumer_work": ScheduleStage.ConsumerWork,
    "producer_work": ScheduleStage.ProducerWork,
    "consumer_aux_work": ScheduleStage.ConsumerAuxWork,
    "producer_aux_work": ScheduleStage.ProducerAuxWork,
}
#: names a work method may not take (rule S11): proxy operations and base-class members.
RESERVED_WORK_NAMES = frozenset(PIPELINE_OPS) | frozenset(GENERIC_WORK_CALLS) | frozenset(
    {"name", "pipeline_config", "has_pipeline", "task_local_variables", "is_barrier",
     "is_work_queue"})


class WorkLabelError(ScheduleError, AttributeError):
    """A work label or proxy attribute does not resolve (rules S9, N1)."""


@dataclass(frozen=True)
class ConstexprParam:
    """A keyword-only Constexpr parameter of a work method."""

    name: str
    has_default: bool
    default: Any = None


@dataclass(frozen=True)
class WorkSpec:
    """What the schedule and the lowering need to know about one work method.

    Attributes:
        label: the method's attribute name on its class (the step label).
        role: consumer or producer.
        stage: ConsumerWork/ConsumerAuxWork/ProducerWork/ProducerAuxWork.
        function: the undecorated Python function (``function(resource, stage_info,
            *inputs, **constexprs)``; the frontend compiles it from its source).
        input_params: routed input parameter names, in declaration order.
        positional_inputs: the prefix of ``input_params`` that may be given by position.
        optional_inputs: routed inputs with a Python default (may stay unrouted).
        returns: names of the task-local variables a consumer work writes, in order (as
            returned by :func:`work_methods`; the decorator also records field references).
        constexpr_params: the keyword-only Constexpr parameters by name.
        work_attrs: :class:`WorkAttr` flags.
    """

    label: str
    role: WorkRole
    stage: ScheduleStage
    function: Callable
    input_params: tuple[str, ...]
    positional_inputs: tuple[str, ...]
    optional_inputs: frozenset
    returns: tuple[str, ...]
    constexpr_params: dict
    work_attrs: WorkAttr

    @property
    def is_aux(self) -> bool:
        return bool(self.work_attrs & WorkAttr.AUXILIARY)

    @property
    def required_constexprs(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.constexpr_params.values() if not p.has_default)

    @property
    def where(self) -> str:
        """``file:line`` of the method definition, for messages."""
        code = getattr(self.function, "__code__", None)
        return f"{code.co_filename}:{code.co_firstlineno}" if code else "?"


def is_constexpr_annotation(annotation: Any) -> bool:
    """True for ``tsjit.Constexpr[...]``-style annotations (object flag or annotation text)."""
    if annotation is inspect.Parameter.empty:
        return False
    for obj in (annotation, getattr(annotation, "__origin__", None)):
        if obj is not None and getattr(obj, "__tsjit_constexpr__", False) is True:
            return True
    text = annotation if isinstance(annotation, str) else repr(annotation)
    return "Constexpr" in text


def _normalise_returns(returns: Any, fn_name: str) -> tuple:
    """``returns=`` as a tuple of entries: names (str), field references
    (``dataclasses.Field`` from ``TaskLocalVariable.uninitialized()``) or class-level
    ``TaskLocalVariable`` objects; :func:`work_methods` turns the last two into names."""
    if returns is None:
        return ()
    entries = tuple(returns) if isinstance(returns, (tuple, list)) else (returns,)
    for entry in entries:
        if isinstance(entry, dataclasses.Field) and not is_task_local_field(entry):
            raise UsageTypeError(f"@consumer_work on {fn_name!r}: returns= names a dataclass field "
                                 f"that is not a task-local slot; declare it as `name: "
                                 f"TaskLocalVariable = TaskLocalVariable.uninitialized()`")
        if not isinstance(entry, (str, dataclasses.Field, TaskLocalVariable)):
            raise UsageTypeError(f"@consumer_work on {fn_name!r}: returns= must be None, a "
                                 f"variable name, a TaskLocalVariable field (item = "
                                 f"TaskLocalVariable.uninitialized()) or a tuple of them, got "
                                 f"{returns!r}")
    if not entries or len(set(map(id, entries))) != len(entries) or len(
            {e for e in entries if isinstance(e, str)}) != sum(isinstance(e, str) for e in entries):
        raise UsageTypeError(f"@consumer_work on {fn_name!r}: returns={returns!r} must name "
                             f"distinct task-local variables")
    return entries


def _resolve_returns(klass: type, spec: WorkSpec) -> WorkSpec:
    """``spec`` with every field reference / variable object of ``returns`` replaced by its
    attribute name on ``klass`` (field names are known only once ``@dataclass`` ran)."""
    if all(isinstance(entry, str) for entry in spec.returns):
        return spec
    names = []
    for entry in spec.returns:
        if isinstance(entry, str):
            names.append(entry)
            continue
        if isinstance(entry, dataclasses.Field):
            fields = dataclasses.fields(klass) if dataclasses.is_dataclass(klass) else ()
            name = entry.name if any(f is entry for f in fields) else None
        else:
            name = next((attr for base in klass.__mro__ for attr, value in vars(base).items()
                         if value is entry), None)
        if name is None:
            raise ScheduleError(
                f"{klass.__name__}.{spec.label}: returns= refers to a task-local slot that is not "
                f"a field of {klass.__name__} (decorate the class with @dataclass(kw_only=True) "
                f"and declare the slot in its body: `item: TaskLocalVariable = "
                f"TaskLocalVariable.uninitialized()`), or pass the name: returns=\"item\".  [S13]")
        names.append(name)
    if len(set(names)) != len(names):
        raise ScheduleError(f"{klass.__name__}.{spec.label}: returns= names {names}; each "
                            f"task-local variable may appear once.  [S13]")
    return replace(spec, returns=tuple(names))


def _build_spec(fn: Any, role: WorkRole, returns: Any, work_attrs: Any, monolithic: bool = False) -> WorkSpec:
    decorator = f"@{role.value}_work"
    if not inspect.isfunction(fn):
        raise UsageTypeError(f"{decorator} decorates a function defined in a resource class, "
                             f"got {type(fn).__name__}")
    name = fn.__name__
    if name in RESERVED_WORK_NAMES and not monolithic:
        raise ScheduleError(
            f"{decorator} method {fn.__qualname__!r} (at {fn.__code__.co_filename}:"
            f"{fn.__code__.co_firstlineno}) uses the reserved name {name!r}. Rename it, "
            f"e.g. '{name}_step'; res.{role.value}_work() still dispatches to it when it "
            f"is the only {role.value} work.  [S11]")
    previous = getattr(fn, "__tsjit_work__", None)
    if previous is not None:
        raise ScheduleError(
            f"{fn.__qualname__!r} is decorated twice ({previous.role.value} and "
            f"{role.value} work); a label names one method of one role. Split it into "
            f"two methods with different names.  [S11]")
    if not isinstance(work_attrs, WorkAttr):
        raise UsageTypeError(f"{decorator} on {name!r}: work_attrs must be a WorkAttr "
                             f"(WorkAttr.NONE or WorkAttr.AUXILIARY), got {work_attrs!r}")
    if int(work_attrs) & ~int(WorkAttr.AUXILIARY):
        raise UsageValueError(f"{decorator} on {name!r}: only WorkAttr.NONE and "
                              f"WorkAttr.AUXILIARY are legal, got {work_attrs!r}")
    params = list(inspect.signature(fn).parameters.values())
    head = [p for p in params[:2] if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(head) < 2:
        raise UsageTypeError(f"{decorator} method {name!r} must take (self, stage_info, ...); "
                             f"got ({', '.join(p.name for p in params)})")
    inputs: list[str] = []
    positional: list[str] = []
    optional: set[str] = set()
    constexprs: dict[str, ConstexprParam] = {}
    for p in params[2:]:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise UsageTypeError(f"{decorator} method {name!r}: *{p.name} / **{p.name} are not "
                                 f"supported; name every routed input and Constexpr parameter")
        if is_constexpr_annotation(p.annotation):
            if p.kind is not p.KEYWORD_ONLY:
                raise UsageTypeError(
                    f"{decorator} method {name!r}: Constexpr parameter {p.name!r} must be "
                    f"keyword-only: def {name}(self, stage_info, ..., *, {p.name}: "
                    f"Constexpr[...])")
            has_default = p.default is not p.empty
            constexprs[p.name] = ConstexprParam(p.name, has_default,
                                                p.default if has_default else None)
            continue
        inputs.append(p.name)
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            positional.append(p.name)
        if p.default is not p.empty:
            optional.add(p.name)
    return WorkSpec(label=name, role=role, stage=ScheduleStage.for_work(role, work_attrs),
                    function=fn, input_params=tuple(inputs),
                    positional_inputs=tuple(positional), optional_inputs=frozenset(optional),
                    returns=_normalise_returns(returns, name) if role is WorkRole.Consumer
                    else (), constexpr_params=constexprs, work_attrs=work_attrs)


def _attach(fn, role, returns, work_attrs):
    fn.__tsjit_work__ = _build_spec(fn, role, returns, work_attrs)
    return fn


def consumer_work(method: Callable | None = None, *, work_attrs: WorkAttr = WorkAttr.NONE,
                  returns: Any = None):
    """Register a consumer (reader) work method: ``@consumer_work`` or
    ``@consumer_work(returns=..., work_attrs=...)`` (the reference's signature).

    Args:
        method: the decorated function (bare form).  tsjit's shorthand
            ``@consumer_work("item")`` (a non-function first argument) means ``returns=``.
        returns: None, one task-local variable of the resource -- its name (``"item"``) or
            its field reference (``item`` declared ``item: TaskLocalVariable =
            TaskLocalVariable.uninitialized()`` earlier in the class body) -- or a tuple /
            list of them.  The schedule call returns one token (one variable) or a tuple of
            tokens; the work body returns the value(s) in that order.
        work_attrs: ``WorkAttr.AUXILIARY`` for helper work with no payload access.

    Raises:
        ScheduleError: reserved name or double decoration (S11); a field reference that
            is not a field of the class (when the class's work methods are collected).
        TypeError: malformed signature, non-keyword-only Constexpr, bad ``returns``.
    """
    if method is not None and not inspect.isfunction(method):
        if returns is not None:
            raise UsageTypeError("@consumer_work: give the returned variables once, as returns=...")
        method, returns = None, method
    if method is not None:
        return _attach(method, WorkRole.Consumer, returns, work_attrs)
    return lambda fn: _attach(fn, WorkRole.Consumer, returns, work_attrs)


def producer_work(method: Callable | None = None, *, work_attrs: WorkAttr = WorkAttr.NONE):
    """Register a producer (writer) work method: ``@producer_work`` or
    ``@producer_work(work_attrs=...)``; tsjit's shorthand ``@producer_work(WorkAttr.AUXILIARY)``
    is kept.

    Routed inputs arrive as the method's parameters after ``stage_info`` (positional or
    keyword-only, e.g. ``def store(self, stage_info, *, item)``).
    """
    if isinstance(method, WorkAttr):
        method, work_attrs = None, method
    if method is not None:
        return _attach(method, WorkRole.Producer, None, work_attrs)
    return lambda fn: _attach(fn, WorkRole.Producer, None, work_attrs)


def _monolithic_spec(fn: Any, name: str) -> WorkSpec:
    """The spec of a monolithic ``consumer_work(self, stage_info)``-style override (label = the
    hook's name; no routed inputs, no returns), cached on the function."""
    spec = fn.__dict__.get("__tsjit_monolithic__")
    if spec is None:
        stage = GENERIC_WORK_CALLS[name]
        role = WorkRole.Consumer if stage.is_consumer else WorkRole.Producer
        spec = _build_spec(fn, role, None, WorkAttr.AUXILIARY if stage.is_aux else WorkAttr.NONE,
                           monolithic=True)
        fn.__tsjit_monolithic__ = spec
    return spec


def work_methods(resource_or_class: Any) -> dict[str, WorkSpec]:
    """Every work method of a resource (or resource class) by label, most derived first.

    A subclass attribute that is not a work method hides the base class's work method.  A
    plain method overriding one of the reference's monolithic hooks (``consumer_work``,
    ``producer_work``, ``consumer_aux_work``, ``producer_aux_work``, each ``(self,
    stage_info)``) is the work method of that stage, labelled with the hook's name.
    """
    klass = resource_or_class if isinstance(resource_or_class, type) else type(resource_or_class)
    found: dict[str, WorkSpec] = {}
    for base in reversed(klass.__mro__):
        if base is MemoryResource:
            continue
        for attr, value in vars(base).items():
            spec = getattr(value, "__tsjit_work__", None) if inspect.isfunction(value) else None
            if spec is None and attr in GENERIC_WORK_CALLS and inspect.isfunction(value):
                spec = _monolithic_spec(value, attr)
            if isinstance(spec, WorkSpec):
                spec = _resolve_returns(klass, spec)
                found[attr] = spec if spec.label == attr else replace(spec, label=attr)
            elif attr in found:
                del found[attr]
    return found


def _labelled_example(resource_name: str, specs: list[WorkSpec]) -> str:
    return ", ".join(f"{resource_name}.{s.label}(...)" for s in specs)


def resolve_work(resource: Any, stage: ScheduleStage, label: str | None) -> tuple[Callable, WorkSpec]:
    """The work method a recorded ``(resource, stage, label)`` step runs (rule N1).

    Args:
        resource: the resource instance (or class).
        stage: one of the four work stages.
        label: the method name, or None for an unlabelled (generic) call.

    Returns:
        ``(function, spec)``: the plain function to compile with ``self`` bound to the
        resource, and its :class:`WorkSpec`.

    Raises:
        WorkLabelError: unknown label (with close matches), label of the wrong stage, no
            method of that stage, or several methods and no label.
    """
    if not isinstance(stage, ScheduleStage) or not stage.is_work:
        raise UsageValueError(f"resolve_work needs a work stage (ScheduleStage.ConsumerWork or "
                              f"ScheduleStage.ProducerWork), got {stage!r}")
    klass = resource if isinstance(resource, type) else type(resource)
    rname = getattr(resource, "name", None) or klass.__name__
    methods = work_methods(klass)
    same_stage = [s for s in methods.values() if s.stage is stage]
    what = f"resource {rname!r} ({klass.__name__})"
    if label is None:
        if len(same_stage) == 1:
            return same_stage[0].function, same_stage[0]
        if not same_stage:
            decorator = ("@consumer_work" if stage.is_consumer else "@producer_work") + (
                "(work_attrs=WorkAttr.AUXILIARY)" if stage.is_aux else "")
            raise WorkLabelError(f"{what} has no {stage.name} method. Decorate one with "
                                 f"{decorator}.")
        raise WorkLabelError(
            f"{what} has {len(same_stage)} {stage.name} methods "
            f"({', '.join(repr(s.label) for s in same_stage)}); an unlabelled call is "
            f"ambiguous. Call one by name, e.g. {_labelled_example(rname, same_stage)}.")
    spec = methods.get(label)
    if spec is None:
        labels = sorted(methods)
        listed = ", ".join(repr(l) for l in labels) or "none"
        raise WorkLabelError(f"{what} has no work method {label!r}; registered labels: "
                             f"{listed}.{did_you_mean(label, labels)}")
    if spec.stage is not stage:
        raise WorkLabelError(f"{what}: work method {label!r} is a {spec.stage.name}, but the "
                             f"step records {stage.name}. Use the matching decorator or "
                             f"call the right method.")
    return spec.function, spec
