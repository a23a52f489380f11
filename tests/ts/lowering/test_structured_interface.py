"""Issue 12 §1: the TS lowering builds code only through :mod:`tsjit.frontend.structured`.

* no llvmlite builder, no back-end module and no generator internals in the lowering's source, and
  no results parked on unrelated objects (``manager.lowering_state``, ``km.launch_requirements``);
* the frontend's ``for`` / ``while`` and the TS domain and work-tile loops are one routine
  (:func:`tsjit.frontend.structured.loop`), observed while compiling;
* FirstIter / LastIter / Every have one reading (:meth:`Guard.holds_on`), used by the simulation,
  the exhaustive expander and the lowering alike;
* no pipeline-kind string dispatch outside the protocol table.
"""
import pathlib
import re

import numpy as np
import pytest

import tsjit
from tsjit.examples import ts_copy, ts_persistent
from tsjit.frontend import structured
from tsjit.ts.enums import BlockCondition
from tsjit.ts.schedule import Guard, Trip

TS = pathlib.Path(tsjit.__file__).parent / "ts"
#: every lowering module (``lowering.py`` and each ``lower_*.py``), found rather than listed: a fixed list
#: missed lower_tmem.py's ``km.builder.if_then``
LOWERING = sorted(TS.glob("lower*.py"))
assert TS / "lower_tmem.py" in LOWERING and TS / "lowering.py" in LOWERING


@pytest.mark.parametrize("path", LOWERING, ids=lambda p: p.name)
def test_the_lowering_holds_no_builder_and_parks_nothing(path):
    text = path.read_text()
    for forbidden in ("builder", "tsjit.backend", "emit.", "current_generator", "lowering_state",
                      "launch_requirements", "loop_unroll_hints", ".dead", "new_block", "append_basic_block"):
        assert forbidden not in text, f"{path.name} uses {forbidden!r}"


def test_no_pipeline_kind_string_dispatch_outside_the_protocol_table():
    kinds = re.compile(r"""producer_kind|consumer_kind|["'](tma|async|umma|clc)["']|&\s*4\b""")
    hits = [f"{p.relative_to(TS.parent)}:{n}" for p in TS.rglob("*.py") if p.name != "protocol.py"
            for n, line in enumerate(p.read_text().splitlines(), 1) if kinds.search(line)]
    assert not hits, hits


def _loops_while_compiling(monkeypatch, kernel, *args):
    labels = []
    real = structured.loop

    def spy(gen, scope, carried, *, label, **kw):
        labels.append(label)
        return real(gen, scope, carried, label=label, **kw)
    monkeypatch.setattr(structured, "loop", spy)
    monkeypatch.setenv("TSJIT_DISABLE_CACHE", "1")
    tsjit.compile(tsjit.kernel(kernel.fn), *args, target="sm_90a")
    return labels


def test_frontend_and_ts_loops_are_one_routine(monkeypatch):
    x = np.zeros(64, np.float32)
    # a grid-stride TS copy: the domain loop; the plain copy: a frontend `for ... in range`
    assert _loops_while_compiling(monkeypatch, ts_copy.copy_ts, x, x, 64, 2) == ["domain"]
    assert _loops_while_compiling(monkeypatch, ts_copy.copy_plain, x, x, 64, 2) == ["loop"]
    # the persistent copy: a work-tile (while) loop around the domain loop
    labels = _loops_while_compiling(monkeypatch, ts_persistent.persistent_copy, x, x, 8, 64, 2048, 4)
    assert labels[:2] == ["worktile", "domain"]


@pytest.mark.parametrize("trips", [1, 2, 5, 8])
def test_loop_guards_have_one_reading(trips):
    guards = {"first": Guard(BlockCondition.FirstIter), "last": Guard(BlockCondition.LastIter),
              "every(3, 1)": Guard(BlockCondition.Every, period=3, start=1)}
    expected = {"first": {0}, "last": {trips - 1}, "every(3, 1)": set(range(1, trips, 3))}
    for name, guard in guards.items():
        runs = {i for i in range(trips) if guard.holds_on(Trip.counted(i, trips))}
        assert runs == expected[name], name
        assert runs == {i for i in range(trips) if guard.holds(i, trips)}
    assert Guard(BlockCondition.WhenTrue).holds_on(Trip.counted(0, trips)) is None


def test_the_three_readers_call_the_one_reading():
    for module in ("simulate.py", "verify/exhaustive_expand.py", "lowering.py"):
        text = (TS / module).read_text()
        assert re.search(r"\.holds(_on)?\(", text), module
        assert not re.search(r"\.period\b|trip_count - 1|iteration == 0", text), module
