"""Reference section ``TaskLocalVariable`` (and the ``@consumer_work(returns=item)`` field form).

The example of ``TaskLocalVariable.uninitialized()`` and the typical method declarations of
``consumer_work`` / ``producer_work`` are pasted from the reference (``dtype=..., default=...``
filled in) and compiled for sm_90a.
"""
import dataclasses
from dataclasses import dataclass

import numpy as np
import pytest

import tsjit
from tsjit import ts
from tsjit.errors import ScheduleError
from tsjit.lang.dtypes import Int32
from tsjit.ts import MemoryResource, TaskLocalVariable, consumer_work, producer_work, work_methods
from reference_names import cute

conformance = pytest.mark.conformance


@dataclass(kw_only=True)
class GmemSource(MemoryResource):
    tensor: object
    # -- pasted: TaskLocalVariable.uninitialized() / consumer_work Notes ----------------
    item: TaskLocalVariable = TaskLocalVariable.uninitialized()

    def __post_init__(self) -> None:
        self.item = TaskLocalVariable(dtype=Int32, default=0)

    @consumer_work(returns=item)
    @cute.jit
    def load(self, stage_info):
        return self.tensor[stage_info.loop_offset]


@dataclass(kw_only=True)
class GmemSink(MemoryResource):
    tensor: object

    # -- pasted: producer_work Notes ---------------------------------------------------------
    @producer_work
    @cute.jit
    def store(self, stage_info, *, item):
        self.tensor[stage_info.loop_offset] = item


@dataclass(kw_only=True)
class PairSource(MemoryResource):
    tensor: object
    lo: TaskLocalVariable = TaskLocalVariable.uninitialized()
    hi: TaskLocalVariable = TaskLocalVariable.uninitialized()

    def __post_init__(self) -> None:
        self.lo = TaskLocalVariable(dtype=Int32, default=0)
        self.hi = TaskLocalVariable(dtype=Int32, default=0)

    @consumer_work(returns=(lo, hi))
    def load_pair(self, stage_info):
        value = self.tensor[stage_info.loop_offset]
        return value & 0xFFFF, value >> 16


@dataclass(kw_only=True)
class PairSink(MemoryResource):
    tensor: object

    @producer_work
    def store_pair(self, stage_info, *, lo, hi):
        self.tensor[stage_info.loop_offset] = (hi << 16) | lo


@tsjit.kernel
def copy_field_ref(src, dst, n):
    source = GmemSource(name="source", tensor=src)
    sink = GmemSink(name="sink", tensor=dst)

    @ts.schedule
    def copy_schedule(s: GmemSource, d: GmemSink):
        with ts.domain_loop(tsjit.thread_idx().x, n, 32):
            item = s.load()
            d.store(item=item)

    task = ts.Task("copy", [source], [sink], warp_idx=0, num_warps=1,
                   schedule=copy_schedule(source, sink))
    manager = ts.TaskManager([task], {sink: [source]}, verbose=False)
    manager.setup_resources_and_tasks()
    manager.run()


@tsjit.kernel
def copy_tuple_ref(src, dst, n):
    source = PairSource(name="source", tensor=src)
    sink = PairSink(name="sink", tensor=dst)

    @ts.schedule
    def pair_schedule(s: PairSource, d: PairSink):
        with ts.domain_loop(tsjit.thread_idx().x, n, 32):
            lo, hi = s.load_pair()
            d.store_pair(lo=lo, hi=hi)

    task = ts.Task("pair", [source], [sink], warp_idx=0, num_warps=1,
                   schedule=pair_schedule(source, sink))
    manager = ts.TaskManager([task], {sink: [source]}, verbose=False)
    manager.setup_resources_and_tasks()
    manager.run()


def _arrays():
    return np.zeros(256, np.int32), np.zeros(256, np.int32)


@conformance("A5", "returns= Field reference")
def test_field_reference_example_compiles_for_sm90a():
    src, dst = _arrays()
    kernel = tsjit.compile(copy_field_ref, src, dst, 256, target="sm_90a")
    assert kernel.cubin[:4] == b"\x7fELF"
    assert "ld.global" in kernel.ptx and "st.global" in kernel.ptx


@conformance("A5", "returns= tuple of Field references")
def test_tuple_of_field_references_compiles_for_sm90a():
    src, dst = _arrays()
    kernel = tsjit.compile(copy_tuple_ref, src, dst, 256, target="sm_90a")
    assert kernel.cubin[:4] == b"\x7fELF"
    assert "ld.global" in kernel.ptx and "st.global" in kernel.ptx


@pytest.mark.gpu_or_interpret
@pytest.mark.parametrize("kernel", [copy_field_ref, copy_tuple_ref], ids=["field", "tuple"])
def test_field_reference_copies_run(kernel):
    n = 200
    src = np.random.default_rng().integers(-2**31, 2**31 - 1, size=256, dtype=np.int32)
    dst = tsjit.empty(256, tsjit.Int32).fill_bytes(0x5A)
    kernel[(1,), (32,)](tsjit.to_device(src), dst, n)
    out = dst.numpy()
    np.testing.assert_array_equal(out[:n], src[:n])
    assert (out[n:].view(np.uint8) == 0x5A).all()


def test_field_references_resolve_to_the_field_names():
    assert work_methods(GmemSource)["load"].returns == ("item",)
    assert work_methods(PairSource)["load_pair"].returns == ("lo", "hi")


@conformance("A4", "uninitialized()")
def test_uninitialized_returns_a_dataclass_field_with_ts_metadata():
    placeholder = TaskLocalVariable.uninitialized()
    assert isinstance(placeholder, dataclasses.Field)
    assert "ts" in placeholder.metadata
    field = next(f for f in dataclasses.fields(GmemSource) if f.name == "item")
    assert "ts" in field.metadata


@conformance("A4", "property owner")
@conformance("A4", "property field_name")
@conformance("A4", "property slot_name")
def test_owner_field_name_and_slot_name_once_bound():
    unbound = TaskLocalVariable(dtype=Int32, default=0)
    assert unbound.owner is None and unbound.field_name is None and unbound.slot_name is None
    source = GmemSource(name="source", tensor=object())
    item = source.task_local_variables()["item"]
    assert item is source.item
    assert item.owner is source and item.field_name == "item" and item.slot_name == "source_item"
    named = TaskLocalVariable(dtype=Int32, runtime_slot_name="custom")
    assert named.slot_name == "custom"


@conformance("A4", "forgotten __post_init__ assignment")
def test_forgetting_the_post_init_assignment_is_a_value_error_naming_the_field():
    @dataclass(kw_only=True)
    class Forgetful(MemoryResource):
        item: TaskLocalVariable = TaskLocalVariable.uninitialized()

        @consumer_work(returns=item)
        def load(self, stage_info):
            return 0

    with pytest.raises(ValueError) as err:
        Forgetful(name="res").task_local_variables()
    assert isinstance(err.value, ScheduleError)
    assert "'res'" in str(err.value) and "'item'" in str(err.value)
    assert "__post_init__" in str(err.value)


def test_a_non_variable_assigned_to_a_declared_slot_is_reported():
    @dataclass(kw_only=True)
    class Wrong(MemoryResource):
        item: TaskLocalVariable = TaskLocalVariable.uninitialized()

        def __post_init__(self) -> None:
            self.item = 0

    with pytest.raises(ScheduleError, match="'item'.*holds a int"):
        Wrong(name="w").task_local_variables()


def test_returns_rejects_a_plain_dataclass_field():
    with pytest.raises(TypeError, match="not a task-local slot"):
        @dataclass(kw_only=True)
        class Bad(MemoryResource):
            other: int = dataclasses.field(default=0)

            @consumer_work(returns=other)
            def load(self, stage_info):
                return 0


def test_field_reference_of_another_class_is_reported_when_methods_are_collected():
    @dataclass(kw_only=True)
    class Borrowing(MemoryResource):
        @consumer_work(returns=dataclasses.fields(GmemSource)[-1])
        def load(self, stage_info):
            return 0

    with pytest.raises(ScheduleError, match="not a field of Borrowing"):
        work_methods(Borrowing)


@conformance("A4", "dtype")
def test_dtype_is_needed_by_the_register_slot():
    with pytest.raises(ValueError, match="dtype"):
        TaskLocalVariable()


@dataclass(kw_only=True)
class Peek(MemoryResource):
    """Reads the source's variable object from self instead of taking the routed value."""

    dst: object
    src: object

    @producer_work
    def store(self, stage_info, *, item):
        self.dst[stage_info.loop_offset] = self.src.item


@dataclass(kw_only=True)
class WideSource(MemoryResource):
    tensor: object
    item: TaskLocalVariable = TaskLocalVariable.uninitialized()

    def __post_init__(self) -> None:
        self.item = TaskLocalVariable(dtype=tsjit.Int16, default=0)

    @consumer_work(returns=item)
    def load(self, stage_info):
        return self.tensor[stage_info.loop_offset]      # an Int32 element into an Int16 slot


def _copy_kernel(source_class, sink_class):
    @tsjit.kernel
    def copy(src, dst, n):
        source = source_class(name="source", tensor=src)
        sink = sink_class(name="sink", dst=dst, src=source) if sink_class is Peek else sink_class(name="sink",
                                                                                                 tensor=dst)

        @ts.schedule
        def copy_schedule(s, d):
            with ts.domain_loop(tsjit.thread_idx().x, n, 32):
                item = s.load()
                d.store(item=item)

        task = ts.Task([source], [sink], 0, 1, schedule=copy_schedule(source, sink), name="copy")
        manager = ts.TaskManager([task], {sink: [source]}, verbose=False)
        manager.setup_resources_and_tasks()
        manager.run()
    return copy


@conformance("§1.3", "hidden-state guard")
def test_reading_a_variable_object_in_a_work_body_names_the_routed_form():
    src, dst = _arrays()
    with pytest.raises(tsjit.CompilationError) as err:
        tsjit.compile(_copy_kernel(GmemSource, Peek), src, dst, 256, target="sm_90a")
    text = str(err.value)
    assert "source.item is a task-local variable" in text and "def store(self, stage_info, *, item)" in text
    assert "self.src.item" in text                      # the excerpt points at the read


@conformance("§1.3", "returned dtype check")
def test_a_wider_integer_returned_into_a_narrow_slot_is_refused():
    src, dst = _arrays()
    with pytest.raises(tsjit.CompilationError) as err:
        tsjit.compile(_copy_kernel(WideSource, GmemSink), src, dst, 256, target="sm_90a")
    text = str(err.value)
    assert "returns a Int32 for 'item', declared Int16" in text and "tsjit.Int16(value)" in text
