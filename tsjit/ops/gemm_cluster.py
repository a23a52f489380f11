"""2-CTA clusters of the library GEMM (:func:`tsjit.ops.gemm_program.gemm_program` with ``CLUSTER = 2``):
the work queue over cluster tiles and the checks of a cluster configuration.

A cluster is two CTAs along x (``cta_layout_vmnk = (1, 2, 1, 1)``) computing two adjacent work tiles that
share one operand tile per K step:

* ``SHARE = "y"`` (``GemmConfig.cluster_m = 2``): tiles ``(2 m, n)`` and ``(2 m + 1, n)`` share the Y
  tile; CTA ``r`` loads its own X tile and the ``r``-th half of Y (``BN / 2`` rows of a K-major Y, or
  ``BN / 128`` of its 64-column boxes when Y is MN-major), multicast to both CTAs;
* ``SHARE = "x"`` (``cluster_n = 2``, BM = 128): tiles ``(m, 2 n)`` and ``(m, 2 n + 1)`` share the X tile;
  CTA ``r`` loads its own Y tile and the ``r``-th 64-row group of X, multicast to both.

Each CTA's full barrier of a stage still receives the whole stage (its own loads plus the peer's
multicast half), so the ring's transaction bytes are the single-CTA ones; a consumer releases a stage on
both CTAs' empty barriers (the peer's copy into it must wait for this CTA's MMAs), at CTA scope
(:mod:`tsjit.lang.cluster_release`).  The L2 -> SM traffic per tile falls from ``BM + BN`` rows per K
step to ``BM + BN / 2`` (or ``BM / 2 + BN``).  A cluster whose second tile lies past the matrix (an odd
tile count) loads zeros (TMA fills out-of-bounds boxes) and stores nothing (clipped / masked stores).
"""
from __future__ import annotations

from tsjit import lang
from tsjit.errors import CompilationError
from tsjit.ts.work_queue import TileSchedulerConfig, WorkQueue

SHARES = ("x", "y")


class ClusterWorkQueue(WorkQueue):
    """A static persistent queue over *cluster* tiles whose work tiles carry this CTA's coordinates: cluster
    ``blockIdx.x // C`` takes cluster tiles ``c, c + gridDim.x / C, ...``; cluster tile ``(m, n, l)`` is this
    CTA's tile ``(C m + rank, n, l)`` (``along = "m"``) or ``(m, C n + rank, l)`` (``"n"``), rank =
    ``%cluster_ctarank``.  ``cluster = 1``: the plain :class:`~tsjit.ts.work_queue.WorkQueue`."""

    cluster = 1
    along = "m"

    def tile_info(self, tile_idx):
        info = super().tile_info(tile_idx)
        if self.cluster == 1:
            return info
        m, n, l = info.coords
        rank = lang.builtins.cluster_ctarank()
        if self.along == "m":
            return info._replace(coords=(m * self.cluster + rank, n, l))
        return info._replace(coords=(m, n * self.cluster + rank, l))

    def initial_work_tile(self):
        return self.tile_info(lang.builtins.block_idx().x // self.cluster)

    def next_work_tile(self, tile):
        return self.tile_info(tile.tile_idx + lang.builtins.grid_dim().x // self.cluster)


def cluster_queue(tiles_m, tiles_n, tiles_l, group_m: int, cluster: int, share: str) -> ClusterWorkQueue:
    """The grouped persistent queue ``"tiles"`` over ``tiles_m x tiles_n x tiles_l`` work tiles (run-time
    counts), in clusters of ``cluster`` tiles along M (``share="y"``, groups of ``group_m / cluster`` cluster
    rows) or N (``"x"``)."""
    along_m = share == "y"
    if cluster > 1 and along_m:
        tiles_m = (tiles_m + cluster - 1) // cluster
        group_m = max(1, group_m // cluster)
    elif cluster > 1:
        tiles_n = (tiles_n + cluster - 1) // cluster
    config = TileSchedulerConfig.create_static_persistent_tile_scheduler_params(
        tiles_m, tiles_n, tiles_l, order="grouped", group_size_m=group_m)
    queue = ClusterWorkQueue(name="tiles", tile_scheduler_config=config)
    queue.cluster = cluster
    queue.along = "m" if along_m else "n"
    return queue


def check_cluster(cluster: int, share: str, block_m: int, block_n: int, splits: int, x_major: str,
                  y_major: str) -> None:
    """Raise :class:`tsjit.CompilationError` unless ``(cluster, share)`` is a cluster shape the program
    builds for this tile: 1, or 2 sharing ``"y"`` (BN / 2 a multiple of 8; MN-major Y: BN a multiple of 128)
    or ``"x"`` (BM = 128), without split-K."""
    if cluster == 1:
        return
    why = ""
    if cluster != 2 or share not in SHARES:
        why = f"CLUSTER={cluster}, SHARE={share!r}: clusters are 2 CTAs sharing 'x' or 'y'"
    elif splits != 1:
        why = f"split-K {splits} with a cluster: the clustered program has no split-K"
    elif share == "x" and block_m != 128:
        why = f"SHARE='x' needs BM = 128 (a 64-row X group per CTA); got BM={block_m}"
    elif share == "y" and (block_n % 16 if y_major == "K" else block_n % 128):
        why = (f"SHARE='y' needs BN / 2 a multiple of 8 (K-major Y) or of 64 (MN-major Y: whole 64-column "
               f"boxes per CTA); got BN={block_n}")
    if why:
        raise CompilationError(f"gemm_program: {why}")


def cluster_arguments(config) -> tuple:
    """The trailing ``(X_POLICY, Y_POLICY, CLUSTER, SHARE)`` arguments of :func:`tsjit.ops.gemm_program.gemm_program`
    for a :class:`~tsjit.ops.configs.GemmConfig` with a 2-CTA cluster (``cluster_m`` / ``cluster_n`` 2), else ``()``."""
    if config.cluster_m > 1:
        return config.x_policy, config.y_policy, config.cluster_m, "y"
    return (config.x_policy, config.y_policy, config.cluster_n, "x") if config.cluster_n > 1 else ()
