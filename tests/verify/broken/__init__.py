"""A corpus of small schedules, each with ONE real mistake, and its corrected twin.

Each :class:`BrokenCase` is data: ``build(fixed)`` returns ``(tasks, graph, options)`` for
the broken (``fixed=False``) or corrected (``fixed=True``) program; ``checks`` are the
check ids allowed to reject it (the structural checks run before the exhaustive one, X,
and may catch a mistake first); ``names`` must all appear in the error (task, resource,
stage); ``exhaustive`` says whether the interleaving checker run on its own rejects the
broken program too (False for mistakes that are structural only, e.g. a token routed
before it is written, which no interleaving can show).

Modules: ``rings`` (bracket, order and trip-count mistakes on one ring), ``counts``
(arrival / TMA byte counts, two consumers), ``programs`` (persistent kernels, skip_if,
aliasing, PDL, interleave lanes, routing).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

__all__ = ["BrokenCase", "CASES"]


@dataclass(frozen=True)
class BrokenCase:
    name: str
    mistake: str
    build: Callable
    checks: tuple
    names: tuple
    exhaustive: bool = True

    def __str__(self) -> str:
        return self.name


def _collect() -> list:
    from broken import counts, programs, rings
    cases = rings.CASES + counts.CASES + programs.CASES
    names = [c.name for c in cases]
    duplicates = {n for n in names if names.count(n) > 1}
    if duplicates:
        raise AssertionError(f"duplicate broken-case names: {sorted(duplicates)}")
    return cases


CASES = _collect()
