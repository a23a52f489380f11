"""The cluster shape of a pipeline's ``cta_layout_vmnk`` and where TMA multicast releases go.

Pure functions of a PipelineConfig (ints in, ints out; :func:`multicast_peer_rank` also takes
run-time Values), read by the protocol table (:mod:`tsjit.ts.protocol`), the count checks and the
lowering.  ``cta_layout_vmnk`` is (V, M, N, K): V CTAs per UMMA pair, an M x N grid of pairs, K
(cluster x = V * M, y = N, z = K).
"""
from __future__ import annotations

__all__ = ["cluster_size", "pair_size", "mcast_lanes", "multicast_peers", "multicast_peer_rank"]


def cluster_size(config) -> int:
    """CTAs per cluster: the product of a tuple ``cta_layout_vmnk`` (1 when None or opaque)."""
    layout = getattr(config, "cta_layout_vmnk", None)
    if isinstance(layout, tuple) and all(isinstance(x, int) for x in layout):
        size = 1
        for extent in layout:
            size *= extent
        return size
    return 1


def pair_size(config) -> int:
    """V of ``cta_layout_vmnk`` (V, M, N, K): the CTAs of one UMMA pair (1 without a layout)."""
    layout = getattr(config, "cta_layout_vmnk", None)
    return layout[0] if isinstance(layout, tuple) and layout and isinstance(layout[0], int) else 1


def mcast_lanes(config) -> tuple[int, str]:
    """Lanes per consumer warp of a CUTLASS TmaAsync release: CTAs it reaches under multicast."""
    layout = config.cta_layout_vmnk
    mode = tuple(config.mcast_mode_mn) if config.mcast_mode_mn is not None else None
    if not isinstance(layout, tuple) or cluster_size(config) == 1 or mode is None:
        return 1, "1 lane (single CTA, no multicast)"
    _, m, n, _ = layout
    lanes = {(1, 0): m, (0, 1): n, (1, 1): m + n - 1}[mode]
    return lanes, f"{lanes} lanes (multicast {mode} over cluster M={m}, N={n})"


def multicast_peers(config, rank: int) -> tuple:
    """The cluster ranks a TmaAsync consumer warp on CTA ``rank`` releases to under TMA multicast
    (``Ctas.MulticastPeers`` of :mod:`tsjit.ts.protocol`): lane ``j`` arrives on ``multicast_peers(config, rank)[j]``.

    With ``cta_layout_vmnk`` (V, M, N, K) the CTA at rank ``r`` sits at ``v = r % V``, ``m = (r % VM) // V``,
    ``n = (r // VM) % N`` (cluster x = V*M, y = N, z = K).  Its stage is filled by the copies of the CTAs
    sharing its N coordinate (``mcast_mode_mn`` (1, 0): M lanes, m' = 0..M-1), its M coordinate ((0, 1):
    N lanes) or either ((1, 1): M + N - 1 lanes, the M column first, then the other N - 1 of its row).
    Computed with :func:`multicast_peer_rank` (the lowering emits the same arithmetic on Values)."""
    lanes, _ = mcast_lanes(config)
    return tuple(multicast_peer_rank(config, lane, rank, lambda c, a, b: a if c else b) for lane in range(lanes))


def multicast_peer_rank(config, lane, rank, select):
    """Rank of the CTA lane ``lane`` of a warp on CTA ``rank`` releases to (:func:`multicast_peers`).
    ``lane`` / ``rank`` may be ints or run-time integer Values; ``select(cond, a, b)`` picks between two
    of them (the lowering passes the device ``select``)."""
    v, m, n, _ = config.cta_layout_vmnk
    x = v * m
    mi = (rank % x) // v
    ni = (rank // x) % n
    base = rank - mi * v - ni * x
    mode = tuple(config.mcast_mode_mn)
    along_m = base + lane * v + ni * x
    if mode == (1, 0):
        return along_m
    if mode == (0, 1):
        return base + mi * v + lane * x
    other_n = (ni + 1 + lane + m * n - m) % n     # (ni + 1 + lane - m) mod n, kept non-negative
    return select(lane < m, along_m, base + mi * v + other_n * x)
