"""Operands whose rows are 16- but not 128-byte aligned (K = 1000 bf16: 2000-byte rows), for
:mod:`tsjit.ops.matmul_plan`: whether to copy them into 128-byte aligned rows first (:func:`realign_choice`),
or to run the 2-CTA ``cluster_m2`` tile on them as given (:func:`misaligned_choice`), and the ring of a
tile on realigned rows (:func:`realigned_config`).

A TMA box row that starts off a 128-byte line spans two lines, so each K step of such an operand costs
the L2 more than its bytes; the gains below were measured on the H200 at 3000 x 5000 x 1000 and are
fractions of the cost model's estimate (:func:`tsjit.ops.configs.estimate`).
"""
from __future__ import annotations

import dataclasses

from tsjit.ops.configs import GemmConfig, Problem, ceil_div, estimate, make_config, stages_for

#: TMA box rows that start off a 128-byte line span two lines.  What 128-byte aligned operand rows save, as a
#: fraction of the cost model's estimate of a compute-heavy GEMM, when X's / Y's / both operands' rows are 16-
#: but not 128-byte aligned (H200, 2026-12-01, 3000 x 5000 x 1000 with 2000-byte rows, 128 x 256 tiles,
#: estimate 50 us: 65.2 us as given; X's rows padded 58.9, Y's 54.8, both 54.0; cuBLAS 51.4-51.6 either way)
REALIGN_GAIN = {"x": 0.126, "y": 0.208, "both": 0.224}
LINE_BYTES = 128
COPY_BYTES_PER_S = 3.2e12          # what a staging copy moves (read + write) per second
COPY_LAUNCH_S = 2.0e-6             # one more kernel on the stream


#: What a 2-CTA ``cluster_m2`` 128 x 256 tile with the realigned rows' ring (4 stages, 128 staged columns) saves, as
#: a fraction of the single-CTA tile's estimate, over that tile on operands as given, when Y's rows (and X's) are
#: 16- but not 128-byte aligned: its multicast halves the TMA loads of Y's rows that span two lines, and no copy
#: runs.  Fitted with the cluster's ``tsjit.ops.configs.CLUSTER_FIXED_S`` (estimate 52.0 us) counted apart (H200,
#: 2026-12-03, helper i15r job 1, ``benchmarks/gemm_misaligned_probe.py``, 3000 x 5000 x 1000, 2000-byte rows,
#: estimate 50.0 us: single CTA as given 66.3 us, Y realigned (the call, copy included) 61.9, the cluster 55.1
#: with 4 stages and 56.6 with 3, the cluster with Y / X / both realigned 61.5 / 59.8 / 66.7, cuBLAS 51.8)
MISALIGNED_CLUSTER_GAIN = 0.264


def _realign_margins(problem: Problem, config: GemmConfig, x_rows: int, y_rows: int, x_misaligned: bool,
                     y_misaligned: bool) -> dict:
    """``{option: seconds saved}`` of each realigning copy (``"x"``, ``"y"``, ``"both"``) that applies: its
    estimated gain (:data:`REALIGN_GAIN` of the configuration's estimate) less its copies (both ways over
    :data:`COPY_BYTES_PER_S`, plus a launch each); empty where no copy is a candidate (see
    :func:`realign_choice`)."""
    if (problem.in_bytes != 2 or config.block_m != 128 or config.block_n < 128 or config.splits != 1
            or config.schedule != "cooperative" or config.cluster_m * config.cluster_n > 1
            or not (x_misaligned or y_misaligned)):
        return {}
    seconds = config.estimate_us * 1e-6
    options = {"x": (x_rows,) if x_misaligned else None, "y": (y_rows,) if y_misaligned else None,
               "both": (x_rows, y_rows) if x_misaligned and y_misaligned else None}
    return {name: REALIGN_GAIN[name] * seconds - sum(2 * n * problem.in_bytes / COPY_BYTES_PER_S + COPY_LAUNCH_S
                                                     for n in copies)
            for name, copies in options.items() if copies is not None}


def realign_choice(problem: Problem, config: GemmConfig, x_rows: int, y_rows: int, x_misaligned: bool,
                   y_misaligned: bool) -> str:
    """Which operands to copy into 128-byte aligned rows before the GEMM: ``""``, ``"x"``, ``"y"`` or
    ``"both"``; the option whose estimated gain (:data:`REALIGN_GAIN` of the configuration's estimate)
    beats its copy (both ways over :data:`COPY_BYTES_PER_S`, plus a launch) by the most.  Only 16-bit inputs
    on full 128-row single-CTA tiles of at least 128 columns without split-K (the compute-heavy configurations
    the gain was measured with; a 2-CTA cluster's copies measured slower than none, see
    :data:`MISALIGNED_CLUSTER_GAIN`); ``x_rows`` / ``y_rows``: elements of each operand (batch included)."""
    best, margin = "", 0.0
    for name, saved in _realign_margins(problem, config, x_rows, y_rows, x_misaligned, y_misaligned).items():
        if saved > margin:
            best, margin = name, saved
    return best


def misaligned_choice(problem: Problem, config: GemmConfig, x_rows: int, y_rows: int, x_misaligned: bool,
                      y_misaligned: bool) -> tuple[GemmConfig, str, str]:
    """``(config, realign, why)`` for operands whose rows are 16- but not 128-byte aligned: the cost model's
    ``config`` with the copy :func:`realign_choice` picks, or, where Y's rows are misaligned and the choice is
    the single-CTA 128 x 256 tile, its 2-CTA ``cluster_m2`` twin with no copy and the realigned rows' ring
    (:func:`realigned_config`) when that saves more: :data:`MISALIGNED_CLUSTER_GAIN` of the estimate less the
    cluster's extra estimate, against the best copy's margin.  Measured with K-major X and Y, a plain
    epilogue (a fused one on this cluster tile spills) and at least two tile rows; ``why`` says what was
    compared (``""`` when nothing is misaligned or no cluster is a candidate)."""
    margins = _realign_margins(problem, config, x_rows, y_rows, x_misaligned, y_misaligned)
    realign = realign_choice(problem, config, x_rows, y_rows, x_misaligned, y_misaligned)
    if (not margins or not y_misaligned or (config.block_m, config.block_n) != (128, 256) or config.epilogue != "tma"
            or problem.x_major != "K" or problem.y_major != "K" or not problem.plain_epilogue
            or ceil_div(problem.P, 128) < 2):
        return config, realign, ""
    single = estimate(problem, 128, 256, 1)
    clustered = estimate(problem, 128, 256, 1, "cluster_m2")
    misaligned = "both" if x_misaligned else "y"
    saved = MISALIGNED_CLUSTER_GAIN * REALIGN_GAIN[misaligned] / REALIGN_GAIN["both"] * single - (clustered - single)
    copy = margins.get(realign, 0.0)
    name = {"x": "X's copy", "y": "Y's copy", "both": "both copies"}.get(realign, "")
    if saved <= copy:
        return config, realign, (f"{name or 'no copy'} (saves {copy * 1e6:.1f} us) beats the 2-CTA cluster_m2 tile "
                                 f"without copies (saves {saved * 1e6:.1f} us)")
    against = f"{name} would save {copy * 1e6:.1f} us" if name else "no copy pays"
    cluster = make_config(problem, 128, 256, 1, "cluster_m2", group_m=config.group_m, estimate_us=clustered * 1e6)
    why = (f"the 2-CTA cluster_m2 tile, as given (no copy) with the realigned rows' 4-stage ring: each CTA loads "
           f"half of the Y tile, multicast to both, so half the box rows that span two lines (estimated to save "
           f"{saved * 1e6:.1f} us over the tile as given; {against})")
    return _realigned_ring(problem, cluster), "", why


def realigned_config(problem: Problem, config: GemmConfig, realign: str) -> GemmConfig:
    """``config`` for operands that :func:`realign_choice` copies into 128-byte aligned rows (``realign`` not
    ``""``): a short-K 128 x 256 TMA tile then takes the long-K staging (128 columns, a 4th stage) that its
    unaligned rows did not pay for (H200, 2026-12-01, 3000 x 5000 x 1000 with both operands' rows padded: 52.4 us
    with 4 stages against 54.1 with 3; as given 66.0 against 64.8).  Other configurations are returned as they are."""
    if not realign or config.schedule != "cooperative" or config.splits != 1:
        return config
    return _realigned_ring(problem, config)


def _realigned_ring(problem: Problem, config: GemmConfig) -> GemmConfig:
    """A short-K 128 x 256 TMA tile with the long-K staging (128 columns, 4 stages); others as they are (a
    2-CTA cluster_m2 tile on misaligned rows: 55.1 us with 4 stages against 56.6 with 3, i15r job 1)."""
    if config.epilogue != "tma" or (config.block_m, config.block_n, config.staged_columns) != (128, 256, 256):
        return config
    stages = stages_for(128, 256, "tma", 128, problem.in_bytes)
    return dataclasses.replace(config, stages=stages, staged_columns=128)
