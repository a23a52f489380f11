"""``Task``: one captured schedule bound to a warp range.

``Task(src_resources, dst_resources, warp_idx, num_warps, *, schedule, num_registers, name,
debug_print, run_only_on_cta_id)`` (the reference's order) or tsjit's name-first
``Task(name, src_resources, dst_resources, warp_idx, num_warps, schedule, ...)`` runs
``schedule`` on warps ``[warp_idx, warp_idx + num_warps)``.  ``src_resources`` are the
resources the task consumes (consumer stages), ``dst_resources`` those it produces
(producer stages); a resource may be in both.

Subclasses may override ``get_domain(self, tile_coord)`` (a per-tile domain-loop end,
passed to ``domain_loop`` as ``MyTask.get_domain``) and ``make_task_cache(self)`` (a
payload the lowering exposes as ``StageInfo.task_cache``).

Construction checks (``VerificationError`` with the rule id, or ``UsageTypeError`` for an
argument of the wrong type):

T1  a schedule is required (a captured :class:`Schedule`), and it has a domain loop with
    an end (int, run-time value or ``get_domain`` provider).
T2  a provider end must be this task class's own ``get_domain`` override taking
    ``(self, tile_coord)``; ``Task.get_domain`` itself or another class's is rejected.
T3  ``warp_idx >= 0``, ``num_warps >= 1`` (at most 32 warps per CTA), ``unroll`` int or
    None, ``run_only_on_cta_id`` a non-negative int, ``num_registers`` in [8, 256] and a
    multiple of 8; no resource listed twice in one list.
T4  a persistent task (``work_tile_loop``) has exactly one WorkQueue in ``src_resources``
    and it is the loop's queue; a WorkQueue in ``src_resources`` needs a
    ``work_tile_loop``.
T5  raw schedule lists are normalised by :func:`tsjit.ts.raw_schedule.schedule_from_entries`.

Errors here are raised even with ``TaskManager(skip_validation=True)`` (the task exists
before the manager).
"""
from __future__ import annotations

import inspect
from typing import Any

from tsjit.errors import UsageTypeError, VerificationError
from tsjit.ts.group import PipelineGroup
from tsjit.ts.memory_resource import MemoryResource
from tsjit.ts.schedule import Schedule, format_location

__all__ = ["Task", "MAX_WARPS_PER_CTA"]

MAX_WARPS_PER_CTA = 32


def _resource_list(task_name: str, which: str, value: Any) -> tuple:
    if isinstance(value, MemoryResource):
        raise UsageTypeError(f"task {task_name!r}: {which} must be a list of resources; wrap the "
                             f"single resource: {which}=[{value.name}]")
    try:
        items = tuple(value)
    except TypeError:
        raise UsageTypeError(f"task {task_name!r}: {which} must be a list of resources, got "
                             f"{type(value).__name__}") from None
    for i, item in enumerate(items):
        if not isinstance(item, MemoryResource):
            raise UsageTypeError(f"task {task_name!r}: {which}[{i}] is a {type(item).__name__}, not "
                                 f"a MemoryResource")
        if isinstance(item, PipelineGroup):
            members = ", ".join(m.name for m in item.members)
            raise VerificationError(f"task {task_name!r}: {which}[{i}] is pipeline group {item.name!r}, which "
                                    f"only shares barriers; list the members the task uses instead ({members}), "
                                    f"and pass the group to the schedule for its collapsed operation.", check="PG")
    for i, item in enumerate(items):
        if any(other is item for other in items[:i]):
            raise VerificationError(f"task {task_name!r}: resource {item.name!r} is listed "
                                    f"twice in {which}; list it once.", check="T3")
    return items


#: positional parameters of each call form (the rest are keyword-only / defaulted).
_REFERENCE_ORDER = ("src_resources", "dst_resources", "warp_idx", "num_warps")
_NAME_FIRST_ORDER = ("name", "src_resources", "dst_resources", "warp_idx", "num_warps", "schedule",
                     "num_registers", "run_only_on_cta_id", "debug_print")
_TASK_DEFAULTS = dict(schedule=None, num_registers=None, name=None, debug_print=False,
                      run_only_on_cta_id=None, emit_ptx_comments=None)
_TASK_PARAMETERS = frozenset(_NAME_FIRST_ORDER) | {"emit_ptx_comments"}


def _bind_task_arguments(order: tuple, args: tuple, keywords: dict) -> dict:
    """Bind ``Task(...)``'s positional ``args`` by ``order`` and merge the keywords (a keyword
    left at its default does not clash with a positional value)."""
    form = "Task(name, src_resources, dst_resources, warp_idx, num_warps, schedule, ...)" \
        if order is _NAME_FIRST_ORDER else \
        "Task(src_resources, dst_resources, warp_idx, num_warps, *, schedule=..., name=...)"
    unknown = sorted(set(keywords) - _TASK_PARAMETERS)
    if unknown:
        raise UsageTypeError(f"Task got unexpected keyword argument(s) {unknown}; the call form is {form}")
    if len(args) > len(order):
        raise UsageTypeError(f"Task takes at most {len(order)} positional arguments in the form {form}, "
                             f"got {len(args)}; pass the rest by keyword")
    values = dict(zip(order, args))
    for key, value in keywords.items():
        if key in values and not (key in _TASK_DEFAULTS and value is _TASK_DEFAULTS[key]):
            raise UsageTypeError(f"Task got {key!r} both by position and by keyword ({form})")
        values.setdefault(key, value)
    missing = [key for key in ("src_resources", "dst_resources", "warp_idx", "num_warps") if key not in values]
    if missing:
        raise UsageTypeError(f"Task is missing {', '.join(missing)}; the call form is {form}")
    for key, value in _TASK_DEFAULTS.items():
        values.setdefault(key, value)
    return values


def _check_int(task_name: str, what: str, value: Any, low: int, high: int | None = None,
               check: str = "T3") -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise UsageTypeError(f"task {task_name!r}: {what} must be an int, got {value!r}")
    if value < low or (high is not None and value > high):
        bound = f"in [{low}, {high}]" if high is not None else f">= {low}"
        raise VerificationError(f"task {task_name!r}: {what} must be {bound}, got {value}.",
                                check=check)


class Task:
    """A schedule bound to warps ``[warp_idx, warp_idx + num_warps)`` (see module docs)."""

    #: emit ``// <resource>_<op>`` and ``Name warp: [a, b)`` comments in the PTX (also the
    #: keyword ``Task(..., emit_ptx_comments=False)``; see :mod:`tsjit.ts.lower_debug`).
    emit_ptx_comments: bool = True

    def __init__(self, *args, schedule: Schedule | None = None, num_registers: int | None = None,
                 name: str | None = None, debug_print: bool = False,
                 run_only_on_cta_id: int | None = None, **named):
        """Two call forms:

        * the reference's: ``Task(src_resources, dst_resources, warp_idx, num_warps, *,
          schedule, num_registers=None, name=None, debug_print=False, run_only_on_cta_id=None)``
          (``name`` defaults to ``"<class>_w<warp_idx>"``);  ``debug_print=True`` prints every
          step at run time and ``emit_ptx_comments=False`` drops the PTX comments
          (:mod:`tsjit.ts.lower_debug`);
        * tsjit's name-first shorthand: ``Task(name, src_resources, dst_resources, warp_idx,
          num_warps, schedule, num_registers=None, run_only_on_cta_id=None, debug_print=False)``.

        Raises:
            UsageTypeError: a parameter given twice, an unknown keyword, a bad type.
            VerificationError: rules T1-T4 (see the module docstring).
        """
        keywords = dict(schedule=schedule, num_registers=num_registers, name=name,
                        debug_print=debug_print, run_only_on_cta_id=run_only_on_cta_id, **named)
        order = _NAME_FIRST_ORDER if args and isinstance(args[0], str) else _REFERENCE_ORDER
        values = _bind_task_arguments(order, args, keywords)
        name, src_resources, dst_resources = values["name"], values["src_resources"], values["dst_resources"]
        warp_idx, num_warps, schedule = values["warp_idx"], values["num_warps"], values["schedule"]
        num_registers, run_only_on_cta_id = values["num_registers"], values["run_only_on_cta_id"]
        debug_print = values["debug_print"]
        if values["emit_ptx_comments"] is not None:
            if not isinstance(values["emit_ptx_comments"], bool):
                raise UsageTypeError(f"Task emit_ptx_comments must be True or False, got "
                                     f"{values['emit_ptx_comments']!r}")
            self.emit_ptx_comments = values["emit_ptx_comments"]
        if name is None and isinstance(warp_idx, int):
            name = f"{type(self).__name__.lower()}_w{warp_idx}"
        if not isinstance(name, str) or not name:
            raise UsageTypeError(f"Task name must be a non-empty str, got {name!r}")
        self.name = name
        self.src_resources = _resource_list(name, "src_resources", src_resources)
        self.dst_resources = _resource_list(name, "dst_resources", dst_resources)
        _check_int(name, "warp_idx", warp_idx, 0, MAX_WARPS_PER_CTA - 1)
        _check_int(name, "num_warps", num_warps, 1, MAX_WARPS_PER_CTA)
        if warp_idx + num_warps > MAX_WARPS_PER_CTA:
            raise VerificationError(
                f"task {name!r}: warps [{warp_idx}, {warp_idx + num_warps}) exceed the "
                f"{MAX_WARPS_PER_CTA} warps of a CTA (1024 threads).", check="T3")
        self.warp_idx = warp_idx
        self.num_warps = num_warps
        if num_registers is not None:
            _check_int(name, "num_registers", num_registers, 8, 256)
            if num_registers % 8:
                raise VerificationError(
                    f"task {name!r}: num_registers={num_registers} must be a multiple of 8 "
                    f"(setmaxnreg granularity); use {num_registers // 8 * 8} or "
                    f"{(num_registers // 8 + 1) * 8}.", check="T3")
        self.num_registers = num_registers
        if run_only_on_cta_id is not None:
            _check_int(name, "run_only_on_cta_id", run_only_on_cta_id, 0)
        self.run_only_on_cta_id = run_only_on_cta_id
        if not isinstance(debug_print, bool):
            raise UsageTypeError(f"task {name!r}: debug_print must be True or False, got {debug_print!r}")
        self.debug_print = debug_print
        self.schedule = self._check_schedule(schedule)

    # -- construction checks ---------------------------------------------------------
    def _check_schedule(self, schedule: Any) -> Schedule:
        name = self.name
        if schedule is None:
            raise VerificationError(f"task {name!r} has no schedule; pass schedule="
                                    f"my_schedule(resources...) (a @schedule function called "
                                    f"with its resources).", check="T1")
        if isinstance(schedule, (list, tuple)):
            raise VerificationError(f"task {name!r}: a raw schedule list must be normalised first: "
                                    f"schedule=schedule_from_entries(entries, end=...).", check="T5")
        if not isinstance(schedule, Schedule):
            hint = (" (call the @schedule function with its resources: "
                    "schedule=my_schedule(src, dst))" if callable(schedule) else "")
            raise UsageTypeError(f"task {name!r}: schedule must be a captured Schedule, got "
                                 f"{type(schedule).__name__}{hint}")
        loop = schedule.domain_loop
        where = format_location(schedule.location)
        if loop is None:
            raise VerificationError(
                f"task {name!r}: schedule {schedule.name!r} ({where}) has no domain_loop; every "
                f"task schedule needs one (an empty `with domain_loop(0, 0, 1): pass` for tasks "
                f"without per-index work).", check="T1")
        if loop.end is None and loop.end_provider is None:
            raise VerificationError(f"task {name!r}: the domain loop of {schedule.name!r} has no "
                                    f"end.", check="T1")
        if loop.end_provider is not None:
            self._check_provider(loop.end_provider, schedule)
        if loop.unroll is not None and (not isinstance(loop.unroll, int) or loop.unroll < 1):
            raise VerificationError(f"task {name!r}: domain_loop unroll must be an int >= 1 or "
                                    f"None, got {loop.unroll!r}.", check="T3")
        self._check_persistent(schedule)
        return schedule

    def _check_provider(self, provider: Any, schedule: Schedule) -> None:
        own = inspect.getattr_static(type(self), "get_domain", None)
        cls = type(self).__name__
        if getattr(provider, "__name__", "") != "get_domain" or provider is Task.get_domain \
                or own is not provider:
            given = getattr(provider, "__qualname__", repr(provider))
            raise VerificationError(
                f"task {self.name!r}: schedule {schedule.name!r} takes its domain end from "
                f"{given}, but a dynamic end must be this task class's own get_domain override. "
                f"Define `def get_domain(self, tile_coord)` on {cls} and pass "
                f"domain_loop(start, {cls}.get_domain, step).", check="T2")
        params = [p for p in inspect.signature(provider).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        if len(params) != 2:
            raise VerificationError(f"task {self.name!r}: {cls}.get_domain must take (self, "
                                    f"tile_coord), it takes {len(params)} parameter(s).",
                                    check="T2")

    def _check_persistent(self, schedule: Schedule) -> None:
        queues = [r for r in self.src_resources if r.is_work_queue]
        wtl = schedule.work_tile_loop
        if len(queues) > 1:
            raise VerificationError(
                f"task {self.name!r} lists {len(queues)} WorkQueues in src_resources "
                f"({', '.join(q.name for q in queues)}); a persistent task has exactly one.",
                check="T4")
        if wtl is not None and (not queues or queues[0] is not wtl.queue):
            raise VerificationError(
                f"task {self.name!r}: schedule {schedule.name!r} loops over work tiles of "
                f"{wtl.queue.name!r}; add it to the task's src_resources.", check="T4")
        if queues and wtl is None:
            raise VerificationError(
                f"task {self.name!r} lists WorkQueue {queues[0].name!r} in src_resources but "
                f"schedule {schedule.name!r} has no work_tile_loop; wrap the per-tile steps in "
                f"`with work_tile_loop({queues[0].name}):` or drop the queue.", check="T4")

    # -- overridable hooks -------------------------------------------------------------
    def get_domain(self, tile_coord):
        """Per-tile domain-loop end; override in a subclass and pass ``MyTask.get_domain``."""
        raise VerificationError(f"task {self.name!r}: override get_domain(self, tile_coord) in a Task "
                                f"subclass to use a per-tile domain end.", check="T2")

    def make_task_cache(self) -> Any:
        """Payload exposed to work bodies as ``stage_info.task_cache`` (default None)."""
        return None

    # -- derived ---------------------------------------------------------------------------
    @property
    def warp_start(self) -> int:
        return self.warp_idx

    @property
    def warp_end(self) -> int:
        return self.warp_idx + self.num_warps

    @property
    def label(self) -> str:
        """``name[warp_start:warp_end)`` as the printouts show it."""
        return f"{self.name}[{self.warp_start}:{self.warp_end})"

    @property
    def warps_text(self) -> str:
        """``warps 0-3`` for messages."""
        last = self.warp_end - 1
        return f"warps {self.warp_start}-{last}" if last != self.warp_start \
            else f"warp {self.warp_start}"

    @property
    def resources(self) -> tuple:
        """src then dst resources, each once."""
        out: list = []
        for r in (*self.src_resources, *self.dst_resources):
            if all(o is not r for o in out):
                out.append(r)
        return tuple(out)

    @property
    def is_persistent(self) -> bool:
        return any(r.is_work_queue for r in self.src_resources)

    @property
    def work_queue(self) -> MemoryResource | None:
        return next((r for r in self.src_resources if r.is_work_queue), None)

    @property
    def local_variables(self) -> tuple:
        """The TaskLocalVariables this task writes, reads or tests (one SSA slot each)."""
        return self.schedule.variables()

    def describe(self) -> str:
        """``task 'copy' (warps 0-3)`` for messages."""
        return f"task {self.name!r} ({self.warps_text})"

    def __repr__(self) -> str:
        return f"<Task {self.label}>"
