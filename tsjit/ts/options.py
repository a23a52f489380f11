"""``TaskManagerOptions``: the TaskManager's keyword options, typed, frozen, defaults in one place.

``TaskManager(tasks, graph, skip_validation=True, max_states=10_000)`` builds
``TaskManagerOptions(skip_validation=True, max_states=10_000)`` and keeps it as
``manager.options``; the checks (``tsjit.ts.verify``) and the lowering read its attributes.
``TaskManager(tasks, graph, options=TaskManagerOptions(...))`` passes a ready-made one (keyword
options given as well override its fields).  A misspelt option name or a value of the wrong type
is a :class:`~tsjit.errors.UsageError` that names the option.
"""
from __future__ import annotations

import dataclasses
import difflib
import inspect
from dataclasses import dataclass
from typing import Any

from tsjit.errors import UsageTypeError, UsageValueError
from tsjit.ts.memory import TMEM_CAPACITY_COLUMNS

__all__ = ["TaskManagerOptions", "DEFAULTS"]


@dataclass(frozen=True, kw_only=True)
class TaskManagerOptions:
    """The TaskManager's options (every field is also a keyword of ``TaskManager``).

    Attributes:
        skip_validation: demote every verification error to a ``VerificationWarning``, also the
            lowering-time shared-memory check (M1).
        verbose: print the schedule table, register report and warnings.
        exhaustive_deadlock_race_check: run the exhaustive interleaving checker (check X,
            :mod:`tsjit.ts.verify.exhaustive`) last; its result is ``manager.exhaustive_result``.
        max_states: states the exhaustive checker explores at most (reaching the cap warns that
            nothing is proven).
        max_simulated_iterations: cap of the simulated trip count of static domains (None: the
            full count).
        dynamic_trip_count: trips simulated for run-time domains.
        smem_allocator: an :class:`~tsjit.ts.memory.SmemAllocator` (None: the manager builds one
            from every resource); the laid-out one is ``manager.smem_allocator``.
        smem_capacity_bytes: the M1 limit in bytes (None: the allocator's ``capacity_bytes``,
            232448 B by default).
        tmem_allocator: the Blackwell TMEM allocator (checked against M2), or None.
        tmem_capacity_columns: the M2 limit, TMEM columns.
        tmem_ptr_i32: the TMEM base address for the sm_100a lowering, or None.
        dma_consumer_release_labels: ``{(upstream, downstream): {labels}}``: which downstream
            producer-work labels count for D1 (resources or their names).
        assume_pdl_wait_completed: turn the PDL checks off (the kernel waits for the previous
            grid outside the schedules).
    """

    skip_validation: bool = False
    verbose: bool = True
    exhaustive_deadlock_race_check: bool = True
    max_states: int = 100_000
    max_simulated_iterations: int | None = 4
    dynamic_trip_count: int = 2
    smem_allocator: Any = None
    smem_capacity_bytes: int | None = None
    tmem_allocator: Any = None
    tmem_capacity_columns: int = TMEM_CAPACITY_COLUMNS
    tmem_ptr_i32: Any = None
    dma_consumer_release_labels: Any = None
    assume_pdl_wait_completed: bool = False

    def __post_init__(self):
        for name in ("skip_validation", "verbose", "exhaustive_deadlock_race_check",
                     "assume_pdl_wait_completed"):
            object.__setattr__(self, name, bool(getattr(self, name)))
        _check_count("max_states", self.max_states, optional=False)
        _check_count("max_simulated_iterations", self.max_simulated_iterations, optional=True)
        _check_count("dynamic_trip_count", self.dynamic_trip_count, optional=False)
        _check_count("smem_capacity_bytes", self.smem_capacity_bytes, optional=True)
        _check_count("tmem_capacity_columns", self.tmem_capacity_columns, optional=False)
        labels = self.dma_consumer_release_labels
        if labels is not None and not isinstance(labels, dict):
            raise UsageTypeError(f"TaskManager option dma_consumer_release_labels must be a dict "
                                 f"{{(upstream, downstream): {{labels}}}} or None, got {type(labels).__name__}")

    @classmethod
    def from_keywords(cls, base: "TaskManagerOptions | None" = None, **keywords) -> "TaskManagerOptions":
        """``base`` (default: all defaults) with ``keywords`` replacing its fields.

        Raises:
            UsageTypeError: ``base`` is not a TaskManagerOptions, or a keyword is not an option
                (the message suggests the closest names).
        """
        if base is None:
            base = cls()
        elif not isinstance(base, cls):
            raise UsageTypeError(f"TaskManager options= must be a TaskManagerOptions, got {type(base).__name__}")
        names = [f.name for f in dataclasses.fields(cls)]
        for key in keywords:
            if key not in names:
                close = difflib.get_close_matches(key, names, n=2, cutoff=0.7)
                hint = f"; did you mean {' or '.join(close)}?" if close else f"; the options are {', '.join(names)}"
                raise UsageTypeError(f"TaskManager got an unknown option {key!r}{hint}")
        return dataclasses.replace(base, **keywords) if keywords else base

    @classmethod
    def keyword_parameters(cls) -> list[inspect.Parameter]:
        """The options as keyword-only parameters with their defaults (for ``TaskManager``'s signature)."""
        return [inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default,
                                  annotation=f.type) for f in dataclasses.fields(cls)]


def _check_count(name: str, value: Any, optional: bool) -> None:
    if value is None and optional:
        return
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        allowed = "an int >= 1" + (" or None" if optional else "")
        raise UsageValueError(f"TaskManager option {name} must be {allowed}, got {value!r}")


#: the default options; functions usable without a TaskManager take their defaults from here.
DEFAULTS = TaskManagerOptions()
