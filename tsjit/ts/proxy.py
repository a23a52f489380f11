"""Resource proxies: what a ``@schedule`` function receives instead of each resource.

Attribute access on a proxy (rules S9, S10, S11, S13):

* ``res.acquire() / try_acquire() / commit() / wait() / try_wait() / release()`` record a
  pipeline step (``ScheduleError`` when the resource has no ``pipeline_config``);
* ``res.<label>(...)`` records a Work step of that named work method;
* ``res.consumer_work() / producer_work() / consumer_aux_work() / producer_aux_work()``
  dispatch to the single work method of that stage (error with a labelled example when
  there are several; not available on a WorkQueue, S10);
* plain data fields (tensors, sizes) read through, so trace-time code can use them;
* a TaskLocalVariable attribute raises (route the token a work call returns instead);
* a method that is not a work method returns a marker that raises when called (it can
  still be passed as ``work_tile_loop(skip_if=wq.method)``);
* anything else raises :class:`~tsjit.ts.work.WorkLabelError` (an ``AttributeError``)
  listing the available operations with close matches.

Work-call binding (:func:`bind_work_call`) sorts the call's arguments into routed
tokens and Constexpr literals and checks S13: too many positional tokens, a parameter
bound twice, ``None`` or a non-token value, a token from another schedule, a stale
token, a token given to a Constexpr, a missing required Constexpr or routed input, an
unknown keyword.
"""
from __future__ import annotations

import dataclasses
from typing import Any

from tsjit.ts.diagnostics import schedule_error
from tsjit.ts.enums import PIPELINE_OPS
from tsjit.ts.group import GroupMember
from tsjit.ts.memory_resource import MemoryResource, TaskLocalVariable
from tsjit.ts.schedule import DataFlowToken
from tsjit.ts.work import (GENERIC_WORK_CALLS, WorkLabelError, WorkSpec, did_you_mean,
                           resolve_work, work_methods)

__all__ = ["ResourceProxy", "UnrecordedMethod", "bind_work_call", "unwrap_resource"]


class UnrecordedMethod:
    """A resource method that is not a work method, read through a proxy.

    Calling it in a schedule raises (S9); passing it as ``skip_if`` is allowed.
    """

    def __init__(self, resource: MemoryResource, name: str):
        self.resource = resource
        self.name = name
        self.bound = getattr(resource, name)

    def __call__(self, *args, **kwargs):
        labels = ", ".join(repr(l) for l in sorted(work_methods(self.resource))) or "none"
        raise schedule_error(
            f"{self.resource.name}.{self.name}() is a plain method of "
            f"{type(self.resource).__name__}, not a work method, so a schedule cannot call "
            f"it. Decorate it with @consumer_work/@producer_work, or call one of the work "
            f"methods: {labels}.", "S9")


class ResourceProxy:
    """Stands in for one resource while a schedule is captured."""

    __slots__ = ("_resource", "_capture")

    def __init__(self, resource: MemoryResource, capture: Any):
        object.__setattr__(self, "_resource", resource)
        object.__setattr__(self, "_capture", capture)

    def __repr__(self) -> str:
        return f"<schedule proxy of {self._resource.name!r}>"

    def __setattr__(self, name, value):
        raise schedule_error(f"schedule code cannot assign {self._resource.name}.{name}; "
                             f"resources are configured before the schedule is captured.",
                             "S9")

    def __bool__(self):
        return True

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        resource = self._resource
        capture = self._capture
        if name in PIPELINE_OPS:
            return lambda *args, **kwargs: capture.record_pipeline_op(resource, name, args, kwargs)
        if name in GENERIC_WORK_CALLS:
            stage = GENERIC_WORK_CALLS[name]
            if resource.is_work_queue:
                labels = ", ".join(repr(l) for l in sorted(work_methods(resource)))
                raise schedule_error(
                    f"{resource.name}.{name}(): a WorkQueue has no unnamed work shorthand; "
                    f"call its work methods by name ({labels}).", "S10")

            def generic(*args, **kwargs):
                try:
                    _, spec = resolve_work(resource, stage, None)
                except WorkLabelError as exc:
                    raise schedule_error(str(exc), "N1") from None
                return capture.record_work(resource, spec, args, kwargs)
            return generic
        methods = work_methods(resource)
        if name in methods:
            spec = methods[name]
            return lambda *args, **kwargs: capture.record_work(resource, spec, args, kwargs)
        field_names = {f.name for f in dataclasses.fields(resource)} \
            if dataclasses.is_dataclass(resource) else set()
        value = getattr(resource, name, _MISSING)
        if isinstance(value, GroupMember):       # group.member inside a schedule: the member's proxy
            return capture.proxy(value.member)
        if isinstance(value, TaskLocalVariable):
            raise schedule_error(
                f"{resource.name}.{name} is a task-local variable, not an operation. Route "
                f"the token a consumer work returns instead: `{name} = {resource.name}.<work>"
                f"(...)` then pass `{name}` to the work that reads it.", "S9")
        if value is not _MISSING and (name in field_names or name in vars(resource)
                                      or not callable(value)):
            return value
        if value is not _MISSING and callable(value) and not name.startswith("_"):
            return UnrecordedMethod(resource, name)
        available = sorted(methods) + (sorted(PIPELINE_OPS) if resource.has_pipeline else [])
        available += [g for g, st in GENERIC_WORK_CALLS.items()
                      if not resource.is_work_queue
                      and any(s.stage is st for s in methods.values())]
        raise schedule_error(
            f"resource {resource.name!r} ({type(resource).__name__}) has no operation "
            f"{name!r}; available: {', '.join(repr(a) for a in available) or 'none'}."
            f"{did_you_mean(name, available)}", "S9", error_class=WorkLabelError)


_MISSING = object()


def unwrap_resource(value: Any) -> Any:
    """The resource behind a proxy or a ``group.member`` reference, or ``value`` unchanged."""
    if isinstance(value, GroupMember):
        return value.member
    if isinstance(value, ResourceProxy):
        return object.__getattribute__(value, "_resource")
    return value


def _check_token(capture, resource, spec: WorkSpec, param: str, value: Any) -> DataFlowToken:
    call = f"{resource.name}.{spec.label}"
    if value is None:
        raise schedule_error(
            f"{call}(): input {param!r} got None. Pass the token a consumer work returned "
            f"(pipeline operations and producer work return nothing).", "S13")
    if not isinstance(value, DataFlowToken):
        shown = repr(unwrap_resource(value)) if isinstance(value, ResourceProxy) \
            else f"a {type(value).__name__}"
        raise schedule_error(
            f"{call}(): input {param!r} got {shown}, not a token. Routed inputs take the "
            f"token a consumer work returned; compile-time values go to keyword-only "
            f"Constexpr parameters.", "S13")
    if not value.belongs_to(capture):
        raise schedule_error(
            f"{call}(): input {param!r} got token {value.variable.qualified_name!r} from "
            f"another schedule. Tokens only route within the schedule that created them.",
            "S13")
    latest = capture.latest_writer(value.variable)
    if latest is not value.step:
        raise schedule_error(
            f"{call}(): input {param!r} got a stale token for {value.variable.qualified_name!r}"
            f": it was written by step #{value.step.id} ({value.step.display_call}) but "
            f"re-written by step #{latest.id} ({latest.display_call}). Pass the newer token.",
            "S13")
    return value


def bind_work_call(capture, resource: MemoryResource, spec: WorkSpec, args: tuple,
                   kwargs: dict) -> tuple[dict, dict]:
    """Sort a work call's arguments into ``(inputs, constexpr_kwargs)`` (rule S13)."""
    call = f"{resource.name}.{spec.label}"
    if len(args) > len(spec.positional_inputs):
        names = ", ".join(spec.positional_inputs) or "none"
        raise schedule_error(
            f"{call}() takes {len(spec.positional_inputs)} routed input(s) by position "
            f"({names}), got {len(args)}. Pass keyword-only inputs as name=token.", "S13")
    bound: dict[str, Any] = dict(zip(spec.positional_inputs, args))
    constexprs: dict[str, Any] = {}
    for key, value in kwargs.items():
        if key in bound:
            raise schedule_error(f"{call}(): input {key!r} is bound twice (by position and "
                                 f"by keyword).", "S13")
        if key in spec.constexpr_params:
            if isinstance(value, (DataFlowToken, ResourceProxy)):
                raise schedule_error(
                    f"{call}(): Constexpr parameter {key!r} got a "
                    f"{'token' if isinstance(value, DataFlowToken) else 'resource'}; it takes "
                    f"a compile-time literal, e.g. {key}=0.", "S13")
            constexprs[key] = value
        elif key in spec.input_params:
            bound[key] = value
        else:
            declared = list(spec.input_params) + list(spec.constexpr_params)
            raise schedule_error(
                f"{call}() has no parameter {key!r}; declared: "
                f"{', '.join(repr(d) for d in declared) or 'none'}."
                f"{did_you_mean(key, declared)}", "S13")
    missing_constexprs = [c for c in spec.required_constexprs if c not in constexprs]
    if missing_constexprs:
        example = ", ".join(f"{c}=..." for c in missing_constexprs)
        raise schedule_error(f"{call}() is missing required Constexpr parameter(s) "
                             f"{', '.join(repr(c) for c in missing_constexprs)}. Pass them at "
                             f"the call: {call}({example}).", "S13")
    missing_inputs = [p for p in spec.input_params
                      if p not in bound and p not in spec.optional_inputs]
    if missing_inputs:
        raise schedule_error(
            f"{call}() is missing routed input(s) {', '.join(repr(p) for p in missing_inputs)}"
            f". Pass the token(s) a consumer work returned, e.g. "
            f"{call}({', '.join(missing_inputs)}).", "S13")
    inputs = {param: _check_token(capture, resource, spec, param, value)
              for param, value in bound.items()}
    return inputs, constexprs
