"""Mutation test: delete or swap one synchronisation step of each tutorial program at every
position; every mutant that could hang or race on the GPU must be rejected.

The table (program, mutants, rejected, rejected by the exhaustive checker alone, accepted
but harmless, ms) is printed (``pytest -s``) and written to
``benchmarks/checker_results.md`` by ``benchmarks/checker.py``.
"""
import pytest

from mutations import mutation_table

pytestmark = pytest.mark.filterwarnings("ignore::tsjit.ts.ScheduleWarning")


@pytest.fixture(scope="module")
def table():
    rows, mutants = mutation_table()
    print("\nprogram             mutants  rejected  rejected by X alone  harmless accepted  ms")
    for name, count, rejected, by_x, harmless, ms in rows:
        print(f"{name:18} {count:8} {rejected:9} {by_x:20} {harmless:18} {ms:6.0f}")
    return rows, mutants


def test_every_tutorial_yields_mutants(table):
    rows, _ = table
    counts = {name: count for name, count, *_ in rows}
    assert counts["TMA copy"] >= 10 and counts["persistent copy"] >= 15 and counts["GEMM"] >= 30


def test_every_accepted_mutant_is_harmless(table):
    _, mutants = table
    unexplained = [m.label for m in mutants if m.verdict == "accepted" and not m.harmless_reason]
    assert unexplained == []


def test_exhaustive_checker_alone_rejects_every_harmful_mutant(table):
    _, mutants = table
    missed = [f"{m.program}: {m.label} ({m.exhaustive})" for m in mutants
              if m.exhaustive != "UNSAFE" and not m.harmless_reason]
    assert missed == []


def test_harmless_mutants_are_proven_safe_not_just_accepted(table):
    _, mutants = table
    assert all(m.exhaustive == "SAFE" for m in mutants if m.harmless_reason)
