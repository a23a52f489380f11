"""Device-language tests (fragments, wgmma, epilogues) compile on a machine without a GPU; every
kernel is compiled afresh (the on-disk cache has its own tests in ``tests/runtime``)."""
import pytest


@pytest.fixture(scope="module", autouse=True)
def _fresh_compiles():
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TSJIT_DISABLE_CACHE", "1")
        patch.delenv("TSJIT_DUMP_DIR", raising=False)
        yield
