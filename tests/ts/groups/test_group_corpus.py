"""Every pipeline-group mistake of ``tests/ts/verify/broken/groups.py`` is rejected, naming the group,
member, task or field at fault; its corrected twin passes every check, the exhaustive one included."""
import warnings

import pytest

from broken.groups import CASES
from tsjit.errors import ScheduleError, VerificationError
from tsjit.ts import TaskManager
from tsjit.ts.verify.exhaustive import check_all_interleavings

pytestmark = pytest.mark.filterwarnings("ignore::tsjit.ts.ScheduleWarning")


def test_corpus_has_at_least_twelve_distinct_group_mistakes():
    assert len(CASES) >= 12
    assert len({c.mistake for c in CASES}) == len(CASES) == len({c.name for c in CASES})


@pytest.mark.parametrize("case", CASES, ids=str)
def test_broken_group_program_is_rejected_with_names(case):
    with pytest.raises((VerificationError, ScheduleError)) as err:
        tasks, graph, options = case.build(False)
        TaskManager(tasks, graph, verbose=False, **options)
    check = getattr(err.value, "check", None) or getattr(err.value, "rule", None)
    text = str(err.value)
    assert check in case.expect, text
    for name in case.expect[check]:
        assert name in text, f"{name!r} missing from:\n{text}"


@pytest.mark.parametrize("case", CASES, ids=str)
def test_corrected_group_twin_is_accepted(case):
    tasks, graph, options = case.build(True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        warnings.filterwarnings("ignore", category=Warning, module="tsjit.ts.capture")
        manager = TaskManager(tasks, graph, verbose=False, **options)
    assert [f for f in manager.findings if not f.is_warning] == []
    assert manager.exhaustive_result.verdict == "SAFE"


@pytest.mark.parametrize("case", [c for c in CASES if c.exhaustive], ids=str)
def test_exhaustive_checker_alone_rejects_broken_group_program(case):
    tasks, graph, options = case.build(False)
    result = check_all_interleavings(tasks, graph, smem_allocator=options.get("smem_allocator"))
    assert result.verdict == "UNSAFE", result.format()
    text = "\n".join(r.message for r in result.reports)
    for name in case.expect["X"]:
        assert name in text, f"{name!r} missing from:\n{text}"
