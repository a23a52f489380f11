"""The PTX of the TS example programs is pinned (:mod:`.ptx_corpus`): a refactoring of the TS
lowering (issue 12 §1: the structured interface, one loop builder, one guard reading) leaves it
byte-identical, so no GPU rerun is needed.  Skipped when the LLVM that records differs from the
one that runs (its code generation, not tsjit, would change the PTX)."""
import json
import os

import pytest

from . import ptx_corpus


def _golden():
    if os.environ.get("UPDATE_PTX_GOLDEN") == "1":
        return ptx_corpus.record()
    with open(ptx_corpus.GOLDEN) as fh:
        return json.load(fh)


GOLDEN = _golden()
PROGRAMS = ptx_corpus.programs()


@pytest.fixture(scope="module")
def digests():
    """Every program's PTX digest, each compiled in its own process (:func:`ptx_corpus.digests`)."""
    return ptx_corpus.digests(sorted(PROGRAMS))


def test_every_pinned_program_is_recorded():
    assert sorted(GOLDEN["ptx_sha256"]) == sorted(PROGRAMS)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_example_ptx_is_unchanged(name, digests):
    if GOLDEN["llvm"] != ptx_corpus.llvm_version():
        pytest.skip(f"recorded with {GOLDEN['llvm']}, running {ptx_corpus.llvm_version()}")
    assert digests[name] == GOLDEN["ptx_sha256"][name], (
        f"the PTX of {name} changed; if intended, re-record: UPDATE_PTX_GOLDEN=1 python -m pytest "
        f"tests/ts/lowering/test_ptx_golden.py")
