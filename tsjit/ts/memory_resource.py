"""Resources, task-local variables and the per-step ``StageInfo``.

A :class:`MemoryResource` is one named communication object between tasks: a
global-memory tensor pair, an SMEM ring with a pipeline, a barrier.  Users subclass it
with ``@dataclass(kw_only=True)`` and add fields (tensors, run-time scalars, Constexpr
values, :class:`TaskLocalVariable` slots) and named work methods
(:func:`tsjit.ts.work.consumer_work` / :func:`~tsjit.ts.work.producer_work`).

Resources compare and hash **by identity** even though their subclasses are generated
dataclasses: ``__init_subclass__`` installs ``object.__eq__``/``object.__hash__`` (and a
short ``repr``) before ``@dataclass`` runs, which then keeps them.  So resources can key the
``resource_dependency_graph`` dict, and comparing two resources never compares their
fields (which may be device values whose ``==`` would build IR).

A :class:`TaskLocalVariable` is the identity of one register value owned by a resource
(``item`` of a GMEM source).  Consumer work writes it, producer work reads it; the
lowering turns each write into a new SSA version.  Variables are discovered on the
resource instance by :meth:`MemoryResource.task_local_variables`, which binds each one
to its owner and attribute name (a variable object shared by two resources, e.g. a
class-level default, is copied so each resource owns its own).
"""
from __future__ import annotations

import copy
import dataclasses
from dataclasses import MISSING, dataclass
from typing import Any, Callable, ClassVar

from tsjit.errors import ScheduleError, UsageTypeError, UsageValueError

__all__ = ["MemoryResource", "TaskLocalVariable", "StageInfo", "ResourceContext", "TASK_LOCAL_FIELD_METADATA",
           "is_task_local_field"]

#: ``dataclasses.Field.metadata`` key of fields declared with ``TaskLocalVariable.uninitialized()``.
TASK_LOCAL_FIELD_METADATA = "ts"


def is_task_local_field(value: Any) -> bool:
    """True for a ``dataclasses.Field`` made by :meth:`TaskLocalVariable.uninitialized`."""
    return isinstance(value, dataclasses.Field) and bool(
        (value.metadata.get(TASK_LOCAL_FIELD_METADATA) or {}).get("task_local_variable"))


class TaskLocalVariable:
    """One task-local register value owned by a resource.

    Args:
        dtype: the device type of the value (a ``tsjit`` dtype or another device type
            such as a work-tile record).  Required.
        default: the value the variable holds before its first write (also the start
            value of the phis the lowering creates at guarded joins and loop back edges).
        default_factory: zero-argument callable producing the default; called by the
            lowering (at compile time, inside the kernel) so it may build device values.
            At most one of ``default`` / ``default_factory``.  With neither, the lowering
            uses the zero of ``dtype``.
        docs: free text shown in printouts.
        runtime_slot_name: name of the generated register/SSA value (defaults to
            ``<resource>_<attribute>``).

    Attributes set when the owning resource is scanned: ``owner`` (the resource) and
    ``name`` (its attribute name).

    Raises:
        ValueError: ``dtype`` is None, or both defaults are given.
    """

    def __init__(self, dtype: Any = MISSING, default: Any = MISSING,
                 default_factory: Callable[[], Any] | Any = MISSING, docs: str = "",
                 runtime_slot_name: str | None = None, *, _uninitialized: bool = False):
        if not _uninitialized:
            if dtype is None or dtype is MISSING:
                raise UsageValueError("TaskLocalVariable needs a dtype, e.g. "
                                      "TaskLocalVariable(tsjit.Int32, default=0)")
            if default is not MISSING and default_factory is not MISSING:
                raise UsageValueError("TaskLocalVariable takes default or default_factory, not both")
            if default_factory is not MISSING and not callable(default_factory):
                raise UsageTypeError("TaskLocalVariable default_factory must be callable, "
                                     f"got {type(default_factory).__name__}")
            if runtime_slot_name is not None and not isinstance(runtime_slot_name, str):
                raise UsageTypeError("TaskLocalVariable runtime_slot_name must be a str")
        self.dtype = dtype
        self.default = default
        self.default_factory = default_factory
        self.docs = docs
        self.runtime_slot_name = runtime_slot_name
        self.is_uninitialized = _uninitialized
        self.owner: MemoryResource | None = None
        self.name: str | None = None

    @staticmethod
    def uninitialized() -> dataclasses.Field:
        """Declare a dataclass field that backs a task-local variable slot.

        ``item: TaskLocalVariable = TaskLocalVariable.uninitialized()`` followed by
        ``self.item = TaskLocalVariable(Int16)`` in ``__post_init__``.  The returned
        ``dataclasses.Field`` carries ``metadata["ts"]`` so ``@consumer_work(returns=item)``
        can check that a field reference names a task-local slot; its default is a
        placeholder, and scanning a resource that still holds it (or anything but a
        ``TaskLocalVariable`` in such a field) raises ``ScheduleError`` (a ``ValueError``).
        """
        return dataclasses.field(default=TaskLocalVariable(None, _uninitialized=True),
                                 metadata={TASK_LOCAL_FIELD_METADATA: {"task_local_variable": True}})

    @property
    def field_name(self) -> str | None:
        """The resource attribute (dataclass field) holding this variable, once bound."""
        return self.name

    @property
    def has_default(self) -> bool:
        return self.default is not MISSING or self.default_factory is not MISSING

    def make_default(self) -> Any:
        """The initial value: ``default``, ``default_factory()``, or None (zero of dtype).

        The lowering calls this once per task, inside the kernel, so a factory may build
        device values.
        """
        if self.default_factory is not MISSING:
            return self.default_factory()
        if self.default is not MISSING:
            return self.default
        return None

    @property
    def qualified_name(self) -> str:
        """``<resource name>.<attribute>`` for messages (``?`` parts when unbound)."""
        owner = getattr(self.owner, "name", None) or "?"
        return f"{owner}.{self.name or '?'}"

    @property
    def slot_name(self) -> str | None:
        """Name for the generated value: ``runtime_slot_name`` or ``<resource>_<attr>``
        (None while the variable is not bound to a resource and has no override)."""
        if self.runtime_slot_name:
            return self.runtime_slot_name
        if self.owner is None or self.name is None:
            return None
        return self.qualified_name.replace(".", "_")

    def __tsjit_not_a_value__(self) -> str:
        """The message when a work body uses the variable object itself as a value (hidden state)."""
        name = self.name or "item"
        return (f"{self.qualified_name} is a task-local variable (the identity of a value that flows "
                f"through the schedule), not its value; a work body must not read it from self. Take "
                f"the value as a routed parameter, `def store(self, stage_info, *, {name})`, and pass "
                f"it in the schedule: `{name} = src.load(); dst.store({name}={name})`.")

    def __repr__(self) -> str:
        if self.is_uninitialized:
            return "TaskLocalVariable.uninitialized()"
        dtype = getattr(self.dtype, "name", None) or getattr(self.dtype, "__name__", None) \
            or type(self.dtype).__name__
        where = f" {self.qualified_name}" if self.owner is not None else ""
        return f"<TaskLocalVariable{where}: {dtype}>"


_CAPTURED_EQUIVALENT = (
    "declare the variable as a field, `{name}: TaskLocalVariable = TaskLocalVariable.uninitialized()` "
    "(assigned in __post_init__), return it from `@consumer_work(returns={name})`, and take it as a "
    "parameter of the work that reads it: `def store(self, stage_info, *, {name})`; the schedule routes "
    "it: `{name} = src.load(); dst.store({name}={name})`")
_ROUTE_EQUIVALENT = (
    "tsjit routes values by the schedule's tokens: `item = src.load()` then `dst.store(item=item)` "
    "(consumer -> producer) or `other.scale(item=item)` for a consumer work of another src resource "
    "(consumer -> consumer)")


def _legacy_error(resource, what: str, equivalent: str) -> ScheduleError:
    """The error for a legacy (dict-based) Task Scheduling form, showing the captured-schedule form."""
    name = getattr(resource, "name", "?")
    return ScheduleError(f"resource {name!r} ({type(resource).__name__}): {what} is the legacy, "
                         f"dict-based Task Scheduling form, which tsjit does not run; {equivalent}.")


#: the reference's MemoryResource keywords that are not fields in tsjit -> what to write instead.
_REFERENCE_KEYWORDS = {
    "is_barrier": "is_barrier is a class attribute in tsjit: set `is_barrier: ClassVar[bool] = True` in the "
                  "subclass (or use PdlWaitBarrier / PdlLaunchBarrier)",
    "consumer_vars": "tsjit has no variable dicts: " + _CAPTURED_EQUIVALENT.format(name="item"),
    "producer_vars": "tsjit has no variable dicts: " + _CAPTURED_EQUIVALENT.format(name="item"),
    "pipeline": "tsjit builds the pipeline from pipeline_config in TaskManager.setup_resources_and_tasks(); "
                "pass pipeline_config=PipelineConfig.create_...(...) and no pipeline object",
    "consumer_wait_signaling_threads": "it is a field of the pipeline in tsjit: "
                                      "PipelineConfig(..., consumer_wait_signaling_threads=...)",
}


def _reference_keyword_error(cls, kwargs) -> UsageTypeError | None:
    """The error for a reference-only keyword of MemoryResource's constructor, or None."""
    fields = {f.name for f in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else set()
    for key, instead in _REFERENCE_KEYWORDS.items():
        if key in kwargs and key not in fields:
            return UsageTypeError(f"{cls.__name__}(..., {key}=...): {cls.__name__} takes no {key!r} keyword; "
                                  f"{instead}.")
    return None


def _undecorated_fields_error(cls, kwargs) -> UsageTypeError | None:
    """The error for constructor keywords that name fields a resource class (or a base of it) annotates
    without ``@dataclass``, or None.

    Such a class inherits a generated ``__init__`` that does not know those fields: the keywords would
    fail as "unexpected keyword argument".  (An annotated class attribute that is never passed, such as a
    class-level default, is left alone.)"""
    fields = {f.name for f in dataclasses.fields(cls)}
    for klass in cls.__mro__:
        if klass is MemoryResource or not issubclass(klass, MemoryResource) or "__dataclass_fields__" in klass.__dict__:
            continue
        if "__init__" in klass.__dict__:       # a hand-written constructor takes its own keywords
            return None
        annotated = [name for name, annotation in klass.__dict__.get("__annotations__", {}).items()
                     if "ClassVar" not in str(annotation) and name not in fields]
        passed = [name for name in annotated if name in kwargs]
        if passed:
            return UsageTypeError(
                f"{cls.__name__}(..., {passed[0]}=...): resource class {klass.__name__} declares fields "
                f"({', '.join(annotated)}) but is not a dataclass, so its constructor takes only the fields of "
                f"its dataclass bases ({', '.join(sorted(fields))}): decorate {klass.__name__} with "
                f"@dataclass(kw_only=True) (from dataclasses import dataclass), as every MemoryResource subclass "
                f"with fields.")
    return None


def _identity_repr(self) -> str:
    return f"{type(self).__name__}(name={getattr(self, 'name', '?')!r})"


@dataclass(kw_only=True, eq=False, repr=False)
class MemoryResource:
    """Base class of every Task Scheduling resource.

    Subclass with ``@dataclass(kw_only=True)``::

        @dataclass(kw_only=True)
        class GmemSource(MemoryResource):
            src: tsjit.Tensor
            item: TaskLocalVariable = TaskLocalVariable.uninitialized()

            def __post_init__(self):
                self.item = TaskLocalVariable(tsjit.Int16)

            @consumer_work(returns=item)          # the field reference (or "item")
            def load(self, stage_info):
                return self.src[stage_info.loop_offset]

    The reference's hooks exist with their defaults: ``get_smem_requirements`` /
    ``get_tmem_requirements`` (allocations), ``get_producer_requirements`` /
    ``get_consumer_requirements`` (what each role touches, for the race checker),
    ``physical_ranges`` (extra aliasing), the monolithic ``consumer_work(self, stage_info)``
    style overrides; the legacy dict-based forms raise with their captured-schedule equivalent.

    Fields:
        name: label used in errors, printouts and PTX comments.  Must be unique among
            the resources of one TaskManager.
        pipeline_config: a :class:`tsjit.ts.pipeline.PipelineConfig`, or None for a
            resource without a pipeline (no acquire/commit/wait/release).

    Class attributes:
        is_barrier: data-less ordering resource (dependency edges touching it only need
            a task that mentions both ends, in any role).
        is_work_queue: the resource is a persistent tile queue usable in
            ``work_tile_loop``; set by ``WorkQueue``.
    """

    name: str
    pipeline_config: Any = None

    is_barrier: ClassVar[bool] = False
    is_work_queue: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        # Installed before @dataclass processes the subclass; dataclass keeps methods
        # that the class body already defines, so resources stay identity-hashed.
        for attr, value in (("__eq__", object.__eq__), ("__hash__", object.__hash__),
                            ("__repr__", _identity_repr)):
            if attr not in cls.__dict__:
                setattr(cls, attr, value)

    __eq__ = object.__eq__
    __hash__ = object.__hash__
    __repr__ = _identity_repr

    def __new__(cls, *args, **kwargs):
        # runs before the dataclass __init__ sees the keywords: a class that forgot @dataclass, and the
        # reference's constructor keywords that tsjit has elsewhere, get the fix instead of a bare TypeError
        error = (_undecorated_fields_error(cls, kwargs) or _reference_keyword_error(cls, kwargs)) if kwargs else None
        if error is not None:
            raise error
        return super().__new__(cls)

    def create_pipeline(self, pipeline_config=None):
        """Reference lifecycle step; raises: TaskManager.setup_resources_and_tasks() builds every pipeline."""
        raise UsageTypeError(
            f"resource {self.name!r}: create_pipeline() is the reference's per-resource setup; in tsjit "
            f"TaskManager.setup_resources_and_tasks() places and initializes every resource's barriers from its "
            f"pipeline_config at once (pass pipeline_config= when you construct the resource).")

    @property
    def has_pipeline(self) -> bool:
        return self.pipeline_config is not None

    @property
    def state_src(self) -> "MemoryResource":
        """The owner of this resource's consumer cursor: the group for a member of a Merge /
        FusedMerge :class:`~tsjit.ts.group.PipelineGroup` (its consumer drives one shared cursor),
        else the resource itself.  Producer cursors are never shared."""
        group = getattr(self, "pipeline_group", None)
        return group if group is not None and group.shares_consumer_state else self

    def get_smem_requirements(self) -> list:
        """The shared-memory data this resource needs, as a list of
        :class:`tsjit.ts.memory.SmemAllocation` (default: none).

        ``SmemAllocator.add_resource`` adds them (and the resource's pipeline barriers);
        override to declare tiles, e.g.
        ``return [SmemAllocation("a", dtype=Float16, count=stages * 128 * 64, alignment=1024)]``.
        """
        return []

    def get_tmem_requirements(self) -> list:
        """The tensor-memory columns this resource needs, as a list of
        :class:`tsjit.ts.memory.TmemAllocation` (default: none); the TaskManager lays them out
        (check M2) and sets each allocation's ``owner`` and ``column``."""
        return []

    def get_producer_requirements(self) -> list | None:
        """The allocations (SMEM and TMEM) producer work touches, for the race checker; None
        (default) means every allocation of the resource."""
        return None

    def get_consumer_requirements(self) -> list | None:
        """The allocations consumer work touches, for the race checker; None (default) means
        every allocation of the resource."""
        return None

    def physical_ranges(self) -> list:
        """Physical memory this resource occupies beyond its allocations, as
        ``(memory_space, start, end)`` tuples (e.g. ``("tmem", 0, 128)`` columns); the race
        checker treats two resources whose ranges in one space overlap as aliases.  Default:
        none."""
        return []

    # -- the reference's monolithic hooks and legacy variable dicts ---------------------------
    # A subclass may override consumer_work / producer_work / consumer_aux_work /
    # producer_aux_work with a plain ``(self, stage_info)`` method: it is then the work method of
    # that stage (tsjit.ts.work.work_methods).  The base versions are never scheduled.
    def consumer_work(self, stage_info) -> None:
        """Monolithic consumer hook: override it, or decorate named methods with @consumer_work."""
        raise _legacy_error(self, "consumer_work", "override consumer_work(self, stage_info) or decorate "
                                                   "a method with @consumer_work")

    def producer_work(self, stage_info) -> None:
        """Monolithic producer hook: override it, or decorate named methods with @producer_work."""
        raise _legacy_error(self, "producer_work", "override producer_work(self, stage_info) or decorate "
                                                   "a method with @producer_work")

    def consumer_aux_work(self, stage_info) -> None:
        """Monolithic auxiliary consumer hook (ScheduleStage.ConsumerAuxWork)."""
        raise _legacy_error(self, "consumer_aux_work", "override consumer_aux_work(self, stage_info) or use "
                                                       "@consumer_work(work_attrs=WorkAttr.AUXILIARY)")

    def producer_aux_work(self, stage_info) -> None:
        """Monolithic auxiliary producer hook (ScheduleStage.ProducerAuxWork)."""
        raise _legacy_error(self, "producer_aux_work", "override producer_aux_work(self, stage_info) or use "
                                                       "@producer_work(work_attrs=WorkAttr.AUXILIARY)")

    def create_consumer_variables(self) -> dict:
        """Legacy variable dict; tsjit uses captured schedules only, so an override is an error
        (raised when the resource is scanned) that shows the TaskLocalVariable equivalent."""
        return {}

    def create_producer_variables(self) -> dict:
        """Legacy variable dict (see :meth:`create_consumer_variables`)."""
        return {}

    def set_consumer_var(self, name, value) -> None:
        """Legacy: raises, showing the captured-schedule equivalent (return the value)."""
        raise _legacy_error(self, f"set_consumer_var({name!r}, ...)", _CAPTURED_EQUIVALENT.format(name=name))

    def get_consumer_var(self, name) -> Any:
        """Legacy: raises, showing the captured-schedule equivalent (a routed parameter)."""
        raise _legacy_error(self, f"get_consumer_var({name!r})", _CAPTURED_EQUIVALENT.format(name=name))

    def get_producer_var(self, name) -> Any:
        """Legacy: raises, showing the captured-schedule equivalent (a routed parameter)."""
        raise _legacy_error(self, f"get_producer_var({name!r})", _CAPTURED_EQUIVALENT.format(name=name))

    def copy_consumer_vars_to(self, dst_resource, var_names=None) -> None:
        """Legacy: the schedule's tokens route consumer values to producers; raises with the form."""
        raise _legacy_error(self, "copy_consumer_vars_to(...)", _ROUTE_EQUIVALENT)

    def copy_consumer_vars_to_consumer_of(self, dst_resource, var_names=None) -> None:
        """Legacy: consumer-to-consumer routes are tokens passed to a consumer work; raises with the form."""
        raise _legacy_error(self, "copy_consumer_vars_to_consumer_of(...)", _ROUTE_EQUIVALENT)

    def tma_bytes_per_stage(self) -> int | None:
        """Bytes all TMA copies of one stage deliver into this CTA, or None when unknown.

        Check P2 compares it with the pipeline's ``num_bytes`` (times the arming warps).
        The default returns the ``box_bytes`` of the resource's only TensorMap field (an
        object with an int ``box_bytes``), or None when it has none or several; override
        it when a stage loads several boxes.
        """
        boxes = self.tensor_map_fields()
        return boxes[0].box_bytes if len(boxes) == 1 else None

    def tensor_map_fields(self) -> list:
        """The values of this resource's dataclass fields that are TensorMaps (objects with an int
        ``box_bytes``), in field order; empty for a resource that is not a dataclass.  The default
        :meth:`tma_bytes_per_stage` and check P2's note on unchecked stage bytes both count these."""
        values = [getattr(self, f.name) for f in dataclasses.fields(self)] if dataclasses.is_dataclass(self) else []
        return [v for v in values if isinstance(getattr(v, "box_bytes", None), int)]

    def task_local_variables(self) -> dict[str, TaskLocalVariable]:
        """The task-local variables of this resource by attribute name, in field order.

        Binds each variable's ``owner``/``name``.  A variable object already owned by
        another resource is replaced by a copy on this one.

        Raises:
            ScheduleError: a field still holds ``TaskLocalVariable.uninitialized()``, or
                one variable object is stored under two attribute names.
        """
        for hook in ("create_consumer_variables", "create_producer_variables"):
            if getattr(type(self), hook) is not getattr(MemoryResource, hook):
                raise _legacy_error(self, f"overriding {hook}()", _CAPTURED_EQUIVALENT.format(name="item"))
        names: list[str] = []
        if dataclasses.is_dataclass(self):
            names.extend(f.name for f in dataclasses.fields(self))
        names.extend(n for n in vars(self) if n not in names)
        for klass in type(self).__mro__:
            names.extend(n for n, v in vars(klass).items()
                         if isinstance(v, TaskLocalVariable) and n not in names)
        found: dict[str, TaskLocalVariable] = {}
        declared = {f.name for f in dataclasses.fields(self) if is_task_local_field(f)} \
            if dataclasses.is_dataclass(self) else set()
        for attr in names:
            var = getattr(self, attr, None)
            if attr in declared and not isinstance(var, TaskLocalVariable):
                raise ScheduleError(
                    f"resource {self.name!r} ({type(self).__name__}): field {attr!r} is declared "
                    f"with TaskLocalVariable.uninitialized() but holds a {type(var).__name__}. "
                    f"Assign it in __post_init__, e.g. self.{attr} = TaskLocalVariable(tsjit.Int32).")
            if not isinstance(var, TaskLocalVariable):
                continue
            if var.is_uninitialized:
                raise ScheduleError(
                    f"resource {self.name!r} ({type(self).__name__}): field {attr!r} is still "
                    f"TaskLocalVariable.uninitialized(). Assign it in __post_init__, e.g. "
                    f"self.{attr} = TaskLocalVariable(tsjit.Int32).")
            if var.owner is None:
                var.owner, var.name = self, attr
            elif var.owner is self and var.name != attr:
                raise ScheduleError(
                    f"resource {self.name!r}: the same TaskLocalVariable is stored as "
                    f"{var.name!r} and {attr!r}. Give each attribute its own "
                    f"TaskLocalVariable(...).")
            elif var.owner is not self:
                var = copy.copy(var)
                var.owner, var.name = self, attr
                object.__setattr__(self, attr, var)
            found[attr] = var
        return found


@dataclass(frozen=True)
class ResourceContext:
    """Framework state a work body may need, passed as ``StageInfo.context``.

    Attributes:
        smem_base: ``Pointer[Uint8, shared]`` to the start of the TaskManager's shared-memory
            allocator region (where every :class:`~tsjit.ts.memory.SmemAllocation` lives, at
            its ``offset``), or None when no resource declared shared memory.
        tmem_ptr_i32: the TMEM base address the kernel passed as
            ``TaskManager(tmem_ptr_i32=...)`` (sm_100a), or None.
    """

    smem_base: Any = None
    tmem_ptr_i32: Any = None


@dataclass(frozen=True)
class StageInfo:
    """Read-only snapshot passed as the second argument of every work method.

    The lowering builds one per recorded step; positional order is the reference's.

    Attributes:
        loop_offset: current domain index (Head: the loop start; Tail: the last index).
        loop_start, loop_end, loop_step: the domain loop bounds of this task, in every phase
            (Head, Loop, Tail); loop_end is the per-tile value of ``get_domain`` for dynamic
            domains.
        stage_idx: pipeline stage index of the step (Int32), or None for a resource without
            a pipeline.
        label: the work method's label (compile-time string; ``if stage_info.label ==``
            folds at compile time).
        barrier: full-barrier pointer for producer work, empty-barrier pointer for
            consumer work; None without a pipeline.
        work_tile: the current work tile inside a ``work_tile_loop`` (a
            :class:`~tsjit.ts.work_queue.WorkTileInfo`: ``tile_idx``, ``coords`` (m, n, l),
            ``is_valid``), else None.
        num_active_stages: producer work of an ``advance_on_acquire`` (delayed-commit)
            pipeline: the stages acquired and not yet committed, this one included (Int32);
            0 for immediate-commit producers and for consumer work.
        context: a :class:`ResourceContext` (shared-memory base, TMEM pointer), or None
            when no allocator is in use.
        task_cache: the task's ``make_task_cache()`` payload.
    """

    loop_offset: Any = None
    loop_start: Any = None
    loop_end: Any = None
    loop_step: Any = None
    stage_idx: Any = None
    label: str | None = None
    barrier: Any = None
    work_tile: Any = None
    num_active_stages: Any = 0
    context: Any = None
    task_cache: Any = None
