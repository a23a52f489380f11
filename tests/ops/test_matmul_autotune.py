"""TSJIT_AUTOTUNE=1 in tsjit.ops.matmul without a GPU (the fake driver of test_matmul_host; the
timings are given): the first call of a shape bucket measures the cost model's shortlist and keeps
the fastest, the winner persists in TSJIT_CACHE_DIR and serves later calls and processes without
measuring, explain says so, and calls that read their output are never measured."""
import json
import sys
import types

import pytest

import tsjit
import tsjit.ops
from tsjit.ops import autotune, configs
from tsjit.runtime import driver

from tests.ops.test_matmul_host import FakeCai, fake_gpu  # noqa: F401  (the fixture)

mm = sys.modules["tsjit.ops.matmul"]


@pytest.fixture
def tuning(fake_gpu, monkeypatch, tmp_path):  # noqa: F811
    monkeypatch.setenv("TSJIT_AUTOTUNE", "1")
    monkeypatch.setenv("TSJIT_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(driver, "device_properties", lambda: types.SimpleNamespace(
        name="NVIDIA H200", sm_count=132, max_dynamic_smem_optin=232448, capability=(9, 0)))
    monkeypatch.setattr(autotune, "_LOADED", [])
    monkeypatch.setattr(autotune, "_STORE", {})
    measured = []

    def fake_measure(launches, stream):       # the second shortlisted config is the fastest
        measured.append(list(launches))
        return {choice: (5.0 if i == 1 else 9.0) for i, choice in enumerate(launches)}

    monkeypatch.setattr(autotune, "measure", fake_measure)
    return types.SimpleNamespace(measured=measured, path=tmp_path / autotune.FILE_NAME, launches=fake_gpu)


def _new_process():
    autotune._LOADED.clear()
    autotune._STORE.clear()
    mm._PLANS.clear()


def test_first_call_measures_the_shortlist_and_keeps_the_fastest(tuning):
    a, b, out = FakeCai((3000, 1000)), FakeCai((1000, 5000)), FakeCai((3000, 5000))
    tsjit.ops.matmul(a, b, out=out)
    (shortlist,) = tuning.measured
    assert len(shortlist) == autotune.SHORTLIST and len(set(shortlist)) == len(shortlist)
    plan = next(iter(mm._PLANS.values()))
    assert configs.choice_of(plan.config) == shortlist[1]
    assert "measured fastest" in plan.explain()
    stored = json.loads(tuning.path.read_text())
    (key,) = stored
    assert key.startswith("P4096-Q8192-K1024-") and "NVIDIA_H200x132" in key
    assert tuple(stored[key]["choice"]) == shortlist[1]


def test_the_stored_winner_serves_the_bucket_without_measuring(tuning, monkeypatch):
    tsjit.ops.matmul(FakeCai((3000, 1000)), FakeCai((1000, 5000)))
    winner = tuple(json.loads(tuning.path.read_text()).popitem()[1]["choice"])
    _new_process()
    tsjit.ops.matmul(FakeCai((2560, 1000)), FakeCai((1000, 4608)))       # the same bucket
    assert len(tuning.measured) == 1
    plan = next(iter(mm._PLANS.values()))
    assert configs.choice_of(plan.config) == winner
    monkeypatch.setattr(driver, "gpu_available", lambda: True)     # explain plans for "this" device
    text = tsjit.ops.matmul.explain(FakeCai((2560, 1000)), FakeCai((1000, 4608)), verbose=False)
    assert "stored winner" in text and configs.describe_choice(winner) in text


def test_a_stored_winner_that_is_the_models_own_choice_is_not_measured_again(tuning, monkeypatch):
    monkeypatch.setattr(autotune, "measure", lambda launches, stream: tuning.measured.append(list(launches)) or {
        choice: (5.0 if i == 0 else 9.0) for i, choice in enumerate(launches)})      # the model's choice wins
    tsjit.ops.matmul(FakeCai((3000, 1000)), FakeCai((1000, 5000)))
    _new_process()
    tsjit.ops.matmul(FakeCai((2560, 1000)), FakeCai((1000, 4608)))
    assert len(tuning.measured) == 1
    assert "stored winner" in next(iter(mm._PLANS.values())).explain()


def test_calls_that_read_their_output_are_not_measured(tuning):
    out = FakeCai((512, 768))
    tsjit.ops.matmul(FakeCai((512, 256)), FakeCai((256, 768)), out=out, beta=1.0)
    tsjit.ops.matmul(FakeCai((512, 256)), FakeCai((256, 768)), out=out, residual=out)
    assert tuning.measured == []


def test_without_the_variable_nothing_is_measured(tuning, monkeypatch):
    monkeypatch.setenv("TSJIT_AUTOTUNE", "0")
    tsjit.ops.matmul(FakeCai((3000, 1000)), FakeCai((1000, 5000)))
    assert tuning.measured == [] and not tuning.path.exists()


def test_a_stored_winner_illegal_for_the_problem_is_ignored(tuning):
    tsjit.ops.matmul(FakeCai((300, 4096)), FakeCai((4096, 300)))
    key = next(iter(json.loads(tuning.path.read_text())))
    autotune._STORE[key]["choice"] = [128, 128, 32]       # 32 K splits: not a candidate of any problem
    mm._PLANS.clear()
    tsjit.ops.matmul(FakeCai((300, 4096)), FakeCai((4096, 300)))
    assert len(tuning.measured) == 2                      # measured again


def test_measure_times_each_launch_and_pick_breaks_ties_by_order():
    assert autotune.pick({(128, 256, 1): 3.0, (128, 128, 1): 3.0, (64, 64, 2): 4.0}) == (128, 256, 1)
    assert autotune.shortlist([(1.0, 128, 256, 1), (1.0, 128, 256, 1), (2.0, 64, 64, 1)]) == [(128, 256, 1),
                                                                                            (64, 64, 1)]
