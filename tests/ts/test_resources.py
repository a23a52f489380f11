"""MemoryResource, TaskLocalVariable, StageInfo and the work decorators / label resolution."""
import dataclasses
from dataclasses import dataclass
from typing import ClassVar

import pytest

from tsjit.errors import ScheduleError
from tsjit.lang.dtypes import Int32
from tsjit.ts import (MemoryResource, ScheduleStage, StageInfo, TaskLocalVariable, WorkAttr,
                      WorkLabelError, WorkRole, consumer_work, producer_work, resolve_work,
                      work_methods)
from ts_fakes import Constexpr, FakeValue, GmemSource, MultiDest, MultiSource


# -- TaskLocalVariable --------------------------------------------------------------------
def test_task_local_variable_requires_dtype():
    with pytest.raises(ValueError, match="dtype"):
        TaskLocalVariable(None)


def test_task_local_variable_rejects_both_defaults():
    with pytest.raises(ValueError, match="not both"):
        TaskLocalVariable(Int32, default=0, default_factory=lambda: 1)


def test_default_factory_is_called_by_make_default():
    calls = []
    var = TaskLocalVariable(Int32, default_factory=lambda: calls.append(1) or 5)
    assert var.make_default() == 5 and var.make_default() == 5 and len(calls) == 2
    assert TaskLocalVariable(Int32, default=3).make_default() == 3
    assert TaskLocalVariable(Int32).make_default() is None


def test_uninitialized_slot_is_reported_with_its_field():
    @dataclass(kw_only=True)
    class Forgetful(MemoryResource):
        item: TaskLocalVariable = TaskLocalVariable.uninitialized()

    with pytest.raises(ScheduleError) as err:
        Forgetful(name="res").task_local_variables()
    assert "'res'" in str(err.value) and "'item'" in str(err.value)
    assert "__post_init__" in str(err.value)


def test_variables_are_bound_to_owner_and_name():
    res = MultiSource(name="ms")
    variables = res.task_local_variables()
    assert list(variables) == ["a", "b", "flag"]
    assert variables["a"].owner is res and variables["a"].name == "a"
    assert variables["b"].qualified_name == "ms.b" and variables["b"].slot_name == "ms_b"


def test_shared_class_default_variable_is_copied_per_resource():
    @dataclass(kw_only=True)
    class Shared(MemoryResource):
        item = TaskLocalVariable(Int32)   # class attribute shared by all instances

    one, two = Shared(name="one"), Shared(name="two")
    a, b = one.task_local_variables()["item"], two.task_local_variables()["item"]
    assert a is not b and a.owner is one and b.owner is two


# -- MemoryResource identity ------------------------------------------------------------------
def test_resources_hash_and_compare_by_identity_without_touching_fields():
    a = GmemSource(name="s", src=FakeValue("p"))
    b = GmemSource(name="s", src=FakeValue("p"))   # FakeValue == would raise in bool()
    assert a != b and a == a
    assert {a: 1, b: 2}[a] == 1
    assert repr(a) == "GmemSource(name='s')"
    assert dataclasses.is_dataclass(a) and a.pipeline_config is None


def test_resource_with_fields_but_no_dataclass_decorator_says_to_decorate_it():
    class Ring(MemoryResource):        # forgot @dataclass(kw_only=True)
        tmap: object
        stages: int = 2

    with pytest.raises(TypeError, match=r"Ring\(\.\.\., tmap=\.\.\.\): resource class Ring declares fields "
                                        r"\(tmap, stages\).*decorate Ring with @dataclass\(kw_only=True\)"):
        Ring(name="ring", tmap=None)

    @dataclass(kw_only=True)
    class Fixed(Ring):                  # a decorated subclass of it still names the undecorated base
        depth: int = 1

    with pytest.raises(TypeError, match="Fixed.*class Ring declares fields"):
        Fixed(name="ring", tmap=None)


def test_undecorated_resource_without_fields_constructs():
    class Plain(MemoryResource):
        is_barrier: ClassVar[bool] = True

        def note(self):
            return self.name

    @dataclass(kw_only=True)
    class Ring(MemoryResource):
        tmap: object

    class Subclass(Ring):               # no fields of its own: the inherited __init__ is right
        pass

    class Tuned(Ring):                  # an annotated class-level default, never passed: left alone
        depth: int = 4

    assert Plain(name="b").note() == "b" and Subclass(name="r", tmap=3).tmap == 3
    assert Tuned(name="t", tmap=1).depth == 4


def test_resource_flags_default_false():
    assert MemoryResource.is_barrier is False and MemoryResource.is_work_queue is False


def test_stage_info_is_frozen_with_all_fields():
    info = StageInfo(loop_offset=1, label="load")
    assert [f.name for f in dataclasses.fields(StageInfo)] == [
        "loop_offset", "loop_start", "loop_end", "loop_step", "stage_idx", "label", "barrier",
        "work_tile", "num_active_stages", "context", "task_cache"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        info.label = "x"


# -- work decorators --------------------------------------------------------------------------
def test_work_specs_describe_inputs_outputs_and_constexprs():
    specs = work_methods(MultiSource)
    assert set(specs) == {"tma_load", "load_pair", "probe", "init"}
    tma = specs["tma_load"]
    assert (tma.role, tma.stage, tma.returns, tma.input_params) == (
        WorkRole.Consumer, ScheduleStage.ConsumerWork, ("a",), ())
    assert tma.constexpr_params["slot"].has_default and tma.required_constexprs == ()
    assert specs["init"].stage is ScheduleStage.ConsumerAuxWork and specs["init"].is_aux
    store = work_methods(MultiDest)["store"]
    assert store.input_params == ("a", "b") and store.positional_inputs == ("a", "b")
    assert store.optional_inputs == frozenset({"b"})
    assert store.required_constexprs == ("index",)   # detected from the string annotation
    assert work_methods(MultiDest)["fence"].stage is ScheduleStage.ProducerAuxWork


def test_decorators_work_bare_and_with_arguments():
    class R(MemoryResource):
        @consumer_work
        def bare(self, stage_info):
            pass

        @producer_work(work_attrs=WorkAttr.AUXILIARY)
        def aux(self, stage_info):
            pass

    specs = work_methods(R)
    assert specs["bare"].returns == () and specs["bare"].stage is ScheduleStage.ConsumerWork
    assert specs["aux"].stage is ScheduleStage.ProducerAuxWork


def test_subclass_plain_method_hides_base_work():
    class Child(MultiDest):
        def store(self):
            pass

    assert "store" not in work_methods(Child) and "store_one" in work_methods(Child)


@pytest.mark.parametrize("name", ["acquire", "release", "consumer_work", "name"])
def test_reserved_work_name_is_rejected(name):
    def method(self, stage_info):
        pass
    method.__name__ = method.__qualname__ = name
    with pytest.raises(ScheduleError) as err:
        consumer_work(method)
    assert repr(name) in str(err.value) and "S11" in str(err.value)


def test_double_decoration_is_rejected():
    with pytest.raises(ScheduleError, match="S11") as err:
        @consumer_work
        @producer_work
        def both(self, stage_info):
            pass
    assert "producer" in str(err.value) and "consumer" in str(err.value)


def test_positional_constexpr_parameter_is_rejected():
    with pytest.raises(TypeError, match=r"\*, slot"):
        @consumer_work
        def load(self, stage_info, slot: Constexpr[int]):
            pass


def test_var_args_and_short_signature_are_rejected():
    with pytest.raises(TypeError, match=r"\*args"):
        @producer_work
        def store(self, stage_info, *args):
            pass
    with pytest.raises(TypeError, match="stage_info"):
        @producer_work
        def store2(self):
            pass


def test_bad_returns_and_work_attrs_are_rejected():
    with pytest.raises(TypeError, match="returns"):
        consumer_work(returns=3)(lambda self, s: None)
    with pytest.raises(TypeError, match="work_attrs"):
        def f(self, stage_info):
            pass
        producer_work(work_attrs=1)(f)


# -- resolve_work (N1) ---------------------------------------------------------------------------
def test_resolve_named_label():
    function, spec = resolve_work(MultiSource(name="ms"), ScheduleStage.ConsumerWork, "probe")
    assert function is MultiSource.probe and spec.returns == ("flag",)


def test_resolve_typo_suggests_close_label():
    with pytest.raises(WorkLabelError) as err:
        resolve_work(MultiSource(name="ms"), ScheduleStage.ConsumerWork, "tma_laod")
    text = str(err.value)
    assert "'tma_laod'" in text and "Did you mean 'tma_load'" in text and "'ms'" in text
    assert isinstance(err.value, AttributeError) and isinstance(err.value, ValueError)


def test_resolve_unlabelled_with_several_methods_shows_labelled_example():
    with pytest.raises(WorkLabelError) as err:
        resolve_work(MultiDest(name="out"), ScheduleStage.ProducerWork, None)
    assert "out.store(...)" in str(err.value) and "out.store_one(...)" in str(err.value)


def test_resolve_unlabelled_single_method():
    function, spec = resolve_work(MultiDest, ScheduleStage.ProducerAuxWork, None)
    assert spec.label == "fence"


def test_resolve_wrong_stage_names_both_stages():
    with pytest.raises(WorkLabelError) as err:
        resolve_work(MultiDest(name="out"), ScheduleStage.ConsumerWork, "store")
    assert "ProducerWork" in str(err.value) and "ConsumerWork" in str(err.value)


def test_resolve_without_any_method_of_stage():
    with pytest.raises(WorkLabelError, match="@producer_work"):
        resolve_work(MultiSource(name="ms"), ScheduleStage.ProducerWork, None)
