"""Turns at the tensor cores for two consumer warpgroups (ping-pong), through named barriers.

Two warpgroups ``0`` and ``1`` of one CTA alternate: warpgroup ``w`` waits for its turn on named
barrier ``first + w`` (``bar.sync``, both warpgroups' threads counted: 256), issues its wgmmas, then
passes the turn to the other on ``first + 1 - w`` (``bar.arrive``, no wait), so the other's wgmmas can
start while its own still drain and while it runs its non-MMA code (a softmax, an epilogue).
Warpgroup 1 gives warpgroup 0 the first turn once, before either takes one.

The turns alternate strictly: warpgroup ``w`` can only arrive a second time on the other's barrier
after it took a turn in between, which needs the other's arrival, so no generation of a barrier
ever sees two arrivals of one warpgroup.  A warpgroup that takes ``n`` turns needs ``n`` arrivals
of the other (the first one included); one arrival left over at exit (the other warpgroup took one
turn fewer, or as many) is harmless.  Named barriers 1 and 2 stay free for the warpgroups' own
128-thread epilogue barriers.

Three warpgroups (``warpgroups=3``) take turns round-robin: ``w`` passes the turn to ``(w + 1) % 3`` on
barrier ``first + (w + 1) % 3``, and warpgroup 2 gives the first turn.  Each barrier still has two
parties (its owner waits, its predecessor arrives: 256 threads), and the same argument holds: ``w``
arrives again on its successor's barrier only after taking a turn, which needs the whole round.

PTX ISA 8.x §9.7.13.1 (``bar.sync`` / ``bar.arrive``: a barrier completes when ``count`` threads
have arrived; ``bar.arrive`` does not wait).  Used by the attention kernel
(:mod:`tsjit.examples.attention`) and the ping-pong GEMM (:mod:`tsjit.ops.gemm_pingpong`).
"""
from __future__ import annotations

from tsjit.lang.builtins import named_barrier_arrive, named_barrier_sync

TURN_BARRIER = 3        # named barriers 3 and 4: the turn of warpgroup 0 / 1
TURN_THREADS = 256      # both warpgroups' threads take part in each turn barrier


def take_turn(warpgroup, first: int = TURN_BARRIER) -> None:
    """Wait until it is ``warpgroup``'s (0, 1 (, 2); may be a run-time value) turn (``bar.sync``)."""
    named_barrier_sync(first + warpgroup, TURN_THREADS)


def pass_turn(warpgroup, first: int = TURN_BARRIER, warpgroups: int = 2) -> None:
    """``warpgroup`` (0 .. warpgroups - 1) gives the turn to the next one (``bar.arrive``, no wait)."""
    if warpgroups == 2:
        named_barrier_arrive(first + 1 - warpgroup, TURN_THREADS)
    else:
        named_barrier_arrive(first + (warpgroup + 1) % warpgroups, TURN_THREADS)


def give_first_turn(first: int = TURN_BARRIER) -> None:
    """Called by the last warpgroup only, once before any turn: warpgroup 0 goes first."""
    named_barrier_arrive(first, TURN_THREADS)
