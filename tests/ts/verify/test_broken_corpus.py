"""Every schedule of ``tests/ts/verify/broken`` is rejected, naming task, resource and stage;
its corrected twin is accepted by every check, the exhaustive one included."""
import warnings

import pytest

from broken import CASES
from tsjit.errors import VerificationError
from tsjit.ts import TaskManager
from tsjit.ts.verify.exhaustive import check_all_interleavings

pytestmark = pytest.mark.filterwarnings("ignore::tsjit.ts.ScheduleWarning")


def manager(tasks, graph, options):
    return TaskManager(tasks, graph, verbose=False, **options)


def test_corpus_has_forty_distinct_mistakes():
    assert len(CASES) >= 40
    assert len({c.mistake for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=str)
def test_broken_schedule_is_rejected_with_names(case):
    tasks, graph, options = case.build(False)
    with pytest.raises(VerificationError) as err:
        manager(tasks, graph, options)
    text = str(err.value)
    assert err.value.check in case.expect, text
    for name in case.expect[err.value.check]:
        assert name in text, f"{name!r} missing from:\n{text}"


@pytest.mark.parametrize("case", CASES, ids=str)
def test_corrected_twin_is_accepted(case):
    tasks, graph, options = case.build(True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        warnings.filterwarnings("ignore", category=Warning, module="tsjit.ts.capture")
        m = manager(tasks, graph, options)
    assert [f for f in m.findings if not f.is_warning] == []
    assert m.exhaustive_result.verdict == "SAFE"


@pytest.mark.parametrize("case", [c for c in CASES if c.exhaustive], ids=str)
def test_exhaustive_checker_alone_rejects_broken(case):
    tasks, graph, options = case.build(False)
    result = check_all_interleavings(tasks, graph,
                                     smem_allocator=options.get("smem_allocator"))
    assert result.verdict == "UNSAFE", result.format()
    text = "\n".join(r.message for r in result.reports)
    for name in case.expect["X"]:
        assert name in text, f"{name!r} missing from:\n{text}"
