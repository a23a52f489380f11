"""Blackwell (sm_100a) tests compile and assemble on a machine without a GPU; each kernel is compiled
afresh.  They skip, with the reason, when the assembler cannot build for sm_100a."""
import pytest

from tsjit.ts.verify import exhaustive

from blackwell.toolchain import sm100_unavailable_reason


@pytest.fixture(scope="module", autouse=True)
def _fresh_compiles():
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TSJIT_DISABLE_CACHE", "1")
        patch.delenv("TSJIT_DUMP_DIR", raising=False)
        yield


@pytest.fixture(autouse=True)
def _needs_sm100():
    reason = sm100_unavailable_reason()
    if reason:
        pytest.skip(reason)


@pytest.fixture
def verdicts(monkeypatch):
    """The exhaustive checker's verdict of every TaskManager built while compiling (a list, in order)."""
    seen = []
    original = exhaustive.check_all_interleavings

    def recording(*args, **kwargs):
        result = original(*args, **kwargs)
        seen.append(result)
        return result

    monkeypatch.setattr(exhaustive, "check_all_interleavings", recording)
    return seen
