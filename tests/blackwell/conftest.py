"""Blackwell (sm_100a) tests compile and assemble on a machine without a GPU; each kernel is compiled
afresh.  They skip, with the reason, when the assembler cannot build for sm_100a."""
import pytest

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
