"""A corpus of small schedules, each with ONE real mistake, and its corrected twin.

Each :class:`BrokenCase` is data: ``build(fixed)`` returns ``(tasks, graph, options)`` for
the broken (``fixed=False``) or corrected (``fixed=True``) program; ``expect`` maps each
check id allowed to reject it (the structural checks run before the exhaustive one, X,
and may catch a mistake first) to the names its error must contain (task, resource,
stage or the config field at fault).  When ``"X"`` is in ``expect`` the interleaving
checker run on its own must reject the broken program too, naming those; it is absent
for mistakes no interleaving can show (a token routed before it is written, a read of
the previous grid's output before griddepcontrol.wait, a queue advanced per iteration).

Modules: ``rings`` (bracket, order and trip-count mistakes on one ring), ``counts``
(arrival / TMA byte counts, two consumers), ``programs`` (persistent kernels, skip_if,
aliasing, PDL, interleave lanes, routing), ``blackwell`` (UMMA rings, TMEM accumulators and split-K
staging of the ported Blackwell tutorials), ``leaders`` (leader signalling in a cluster), ``pairs`` (2-CTA
UMMA pairs and CLC over a cluster).
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
    expect: dict

    @property
    def exhaustive(self) -> bool:
        return "X" in self.expect

    def __str__(self) -> str:
        return self.name


def _collect() -> list:
    from broken import blackwell, counts, leaders, pairs, programs, rings
    cases = rings.CASES + counts.CASES + programs.CASES + blackwell.CASES + leaders.CASES + pairs.CASES
    names = [c.name for c in cases]
    duplicates = {n for n in names if names.count(n) > 1}
    if duplicates:
        raise AssertionError(f"duplicate broken-case names: {sorted(duplicates)}")
    return cases


CASES = _collect()
