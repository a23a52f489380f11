"""How ``tsjit.ops.matmul`` chooses a configuration of :func:`tsjit.ops.gemm_program.gemm_program`
for a problem: a deterministic cost model over a small candidate set, no measurement.

The problem arrives in D's coordinates (``D (P, Q) = X (P, K) @ Y (K, Q)``, batch ``L``); the
caller has already decided whether to swap A and B (:func:`choose_roles`: for ``M <= 64`` the
tile's wide side runs along N, ``D = C^T = B^T A^T``, so a 16-row activation block becomes the
narrow wgmma N instead of wasting 48 of 64 rows).

Candidates: ``BM`` in {128, 64} (2 or 1 consumer warpgroups), ``BN`` in {256, 224 (BM = 128, K-major Y, no split-K:
the Llama widths 14336 and 28672 are whole multiples of it, where 256 leaves a partial last wave), 192 (BM = 128
only), 128, 64, 32, 16}
(MN-major Y needs ``BN >= 64``: its TMA boxes are 64 wide; a D at most 64 wide is covered by
one tile, so X is streamed once; measured on the H200, two 32-wide tiles over a 64-wide D
cost 10-25%), split-K ``S`` in {1, 2, 3, 4, 5, 6, 7,
8, 12, 16} with at least 4 K tiles per split (5 and 7 fill 126 of 132 SMs with 18 tiles: 384 x 384 x 16384,
128 x 64 tiles, split 7 measured 0.880x cuBLAS against split 6's 0.858x, H200 2026-12-01).  The estimated
time of each is

* MMA time: ``waves * per-CTA MMA work / (per-SM peak * efficiency(BM, BN))``, ``waves =
  ceil(CTAs / SMs)``; the efficiency table reflects that narrow wgmma (small N) and 64-row tiles
  issue more instructions per FLOP and re-read more operand bytes; at least ``K_TILE_LATENCY_S``
  per K tile of a CTA (the ring's round trip bounds small tiles: 128 x 4096 x 14336 with 64 x 64
  tiles took 57 us, 224 K tiles);
* memory time: HBM bytes (every operand read once, D written once) over the HBM bandwidth, and
  the bytes all CTAs load (re-reads hit L2) over the L2 bandwidth, stretched by the idle SMs of a
  partial last wave and by too few CTAs to pull full bandwidth; the larger of MMA and memory;
* split-K, per wave: each CTA writes its fp32 partial, and the last one of a tile reads all of them back
  (one CTA's L2 bandwidth) in passes of one L2 round trip each, plus a fixed cost (fitted before the reducer's
  passes were software-pipelined, 2026-12-02; consecutive passes now overlap, 0.4-0.8 us less at 2-4 passes,
  and the constants were not refit: no measured choice would move);
* per wave: a tile prologue / epilogue cost; per launch a fixed cost.

The lowest estimate wins (ties: the smaller tile, then the earlier candidate, so the choice is
deterministic).  One measured exception, :func:`unsplit_stream`: a swapped small-M product with a
short K runs its 64 x 64 tiles without the split-K 2 the model prefers.  The constants were fitted
on 2026-12-01 to forced-configuration timings on the H200 (``benchmarks/gemm_configs_probe.py``):
the L2 sustains ~12 TB/s of tile re-reads, and the narrowest tile covering a narrow D wins the
memory-bound ties (1 x 28672 x 4096: 0.85x -> 0.98x cuBLAS with a 16-wide tile instead of a
64-wide one).
A large operand that at most two tile columns or rows read (the weights of a small-M product) streams with evict-first
TMA loads (:func:`stream_policies`), which spares the L2's dirty lines a write-back during the stream.
:func:`explain` prints the winner and the runners-up with their estimates.

Ping-pong (:mod:`tsjit.ops.gemm_pingpong`, the shared-ring program, :data:`PINGPONG_CANDIDATES`) competes
as ``(BM, BN, 1, schedule)`` for 16-bit inputs with a plain epilogue (:func:`estimate_pingpong`); fitted
to the 2026-12-01 H200 probe it estimates slower than the cooperative program on every measured shape,
as measured, so it is chosen only where the model says it wins (none of the benchmark sweep) or where
``TSJIT_AUTOTUNE`` measures it fastest.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from tsjit.errors import UsageValueError

SMEM_BUDGET = 232448 - 2048        # the opt-in shared memory of an H100/H200 CTA, less barriers and slack
PEAK_FLOPS_PER_SM = 989e12 / 132   # dense bf16 wgmma rate per SM (H100/H200 SXM datasheet)
HBM_BYTES_PER_S = 3.0e12           # what a GEMM's TMA loads sustain (the H200's copy bandwidth is ~4.2 TB/s)
L2_BYTES_PER_S = 12.0e12          # fitted to the 2026-12-01 H200 probe (11.6 TB/s reached at 1024x14336x4096)
TILE_OVERHEAD_S = 1.2e-6           # accumulator zeroing, pipeline fill and epilogue of one tile
SPLIT_FIXED_S = 1.0e-6
LAUNCH_S = 3.0e-6                  # launch, ramp-up and tail of one kernel
ACTIVE_EXPONENT = 0.7                # how strongly too few CTAs (below one per SM) slow the memory streams
SM_L2_BYTES_PER_S = 120e9          # what one SM streams to / from L2 (the split-K reducer is one CTA per tile)
REDUCTION_PASS_S = 0.8e-6          # one pass of the reducer: an L2 round trip for every split's partial
K_TILE_LATENCY_S = 0.2e-6          # least time per K tile (wait, MMAs, wait_group, release): bounds small tiles
BLOCK_MS = (128, 64)
PINGPONG_SCHEDULES = ("pingpong", "pingpong-shared")
DEFERRED_MAX_BLOCK_N = 128         # the deferred epilogue (tsjit.ops.gemm_deferred) keeps two accumulators
SHORT_K_TILES = 32                 # below this many K tiles a 128 x 256 tile stages its whole width at once
#: staged columns of the TMA epilogue of a tile whose width is not a multiple of 64 (224): seven 32-column passes
#: through two alternating 64 x 32 staging tiles per warpgroup (:func:`tsjit.ops.gemm_program.store_box`)
NARROW_STAGING = 32
#: the ping-pong choices the cost model compares (BM, BN, schedule): the shared-ring variant only (a ring per
#: warpgroup leaves each warpgroup 2-4 stages: 0.19-0.64x cuBLAS on the H200, BENCHMARKS.md 2026-12-01)
PINGPONG_CANDIDATES = ((128, 256, "pingpong-shared"), (128, 128, "pingpong-shared"), (256, 128, "pingpong-shared"))
#: fraction of the wgmma peak a ping-pong tile's K loop sustains (one warpgroup issuing at a time)
#: (fitted to the 2026-12-01 H200 probe, 2 wgmma groups in flight: 0.62 / 0.55 / 0.73 at 4096^3 and 8192^3)
PINGPONG_EFFICIENCY = {("pingpong-shared", 128, 256): 0.62, ("pingpong-shared", 128, 128): 0.55,
                       ("pingpong-shared", 256, 128): 0.73}
#: per work tile: the pass-through of the other half stalls the ring while a warpgroup stores (both must release
#: every stage), so the epilogue is not hidden; measured 4-8 us per tile at 3000x5000x1000 (2026-12-01, H200)
PINGPONG_TILE_OVERHEAD_S = 4.0e-6
BLOCK_NS = (256, 224, 192, 128, 64, 32, 16)
#: a tile width that is not a multiple of 64: 14336 and 28672 (the Llama FFN widths) are 64 and 128 tiles of it; its
#: TMA epilogue stores seven 32-column passes (the direct one measured 10% slower: 174.3 against 158.8 us at
#: 1024 x 14336 x 4096, H200 2026-12-03)
WIDE_ODD_BLOCK_N = 224
#: the 2-CTA cluster choices ``(BM, BN, 1, schedule)`` (:mod:`tsjit.ops.gemm_cluster`) -> (cluster_m, cluster_n)
CLUSTER_SCHEDULES = {"cluster_m2": (2, 1), "cluster_n2": (1, 2)}
#: the main loop's wgmma efficiency of a 2-CTA cluster tile relative to the single-CTA tile (:data:`EFFICIENCY`)
CLUSTER_EFFICIENCY = 1.0
#: per launch of a 2-CTA cluster program, beyond the single-CTA program's cost (H200, 2026-12-03, i15k job 1,
#: benchmarks/gemm_cluster_lib_probe.py: the same tile with cluster_m2 took 0.8-2.6 us longer at 2048^3 ...
#: 1024 x 14336 x 4096, and 5-7 us less at 4096 x 28672 x 4096 and 8192 x 14336 x 4096, where the halved Y
#: traffic pays)
CLUSTER_FIXED_S = 2.0e-6
#: ring depths past 8 stages that measured faster (16-bit inputs, cooperative; H200, 2026-12-01, BENCHMARKS.md):
#: 64 x 64 tiles (16 KB stages) are latency-bound with 8: 128 x 4096 x 4096 0.82-0.84x cuBLAS with 8 stages, 0.950
#: with 11, 0.978 with 13; 256 x 256 x 16384 (split-K 8) 0.87 / 0.914 / 0.902 with 8 / 11 / 14 (deeper rings for
#: 128 x 64 and 64 x 16 tiles measured no better)
DEEP_RINGS = {(64, 64): 11}
SPLITS = (1, 2, 3, 4, 5, 6, 7, 8, 12, 16)
MIN_K_TILES_PER_SPLIT = 4
BK = 64                            # K elements per stage of a 16-bit type (128 bytes; fp8: 128 elements)
FP8_SPEEDUP = 2.0                  # dense fp8 wgmma issues twice the bf16 FLOPs (1979 vs 989 TFLOP/s)
#: fraction of the wgmma peak a (BM, BN) tile sustains in the main loop.  (128, 192): the largest value that keeps
#: every ordering measured on the H200 (2026-12-02, benchmarks/gemm_session_probe.py): 128 x 192 chosen only at
#: 1000 x 3000 x 777 (32.1 us against 128 x 256's 35.2), not at 3000 x 5000 x 1000 (62.8 / 62.3), 1024 x 14336 x 4096
#: (166.5 / 160.3 with 128 x 128), 512 x 28672 x 4096 (171.8 / 164.8) or 4096^3 (197.4 / 176.3); 0.82 picks it at the
#: two 4096-K projections.  (128, 224): fitted where 256 and 224 fill their waves alike (H200, 2026-12-03, i15m job 1,
#: ``gemm_mid_probe.py --table tiles``: 2048 x 14336 x 4096 311.0 us against 304.4, 4096 x 14336 x 4096 630.4 against
#: 616.0); where 256 leaves a partial last wave it wins: 1024 x 14336 x 4096 158.8 us (128 x 128: 162.9, 128 x 256:
#: 174.6, cuBLAS 154.8), 512 x 28672 x 4096 160.1 (163.9 / 177.0 / 158.5), 512 x 14336 x 4096 82.2 (128 x 256: 91.3),
#: 256 x 28672 x 4096 91.6 (100.7), fp8 1024 x 14336 x 4096 86.5 (128 x 256: 95.5)
EFFICIENCY = {(128, 256): 0.85, (128, 224): 0.83, (128, 192): 0.80, (128, 128): 0.78, (128, 64): 0.55, (128, 32): 0.25, (128, 16): 0.17,
              (64, 256): 0.72, (64, 128): 0.62, (64, 64): 0.45, (64, 32): 0.27, (64, 16): 0.14}


@dataclass(frozen=True)
class Problem:
    """A GEMM in D's coordinates.

    Attributes:
        P, Q, K: D is P x Q, the reduction is K long (all >= 1).
        batch: independent products (bmm), >= 1.
        x_major, y_major: ``"K"`` or ``"MN"`` (which dimension of X / Y is contiguous).
        tma_output: D can be stored with TMA (row-major, 16-byte rows, 16-bit dtype).
        epilogue_loads: global loads per element of the fused epilogue (bias, residual, beta).
        in_bytes, out_bytes: element sizes of the inputs and of D.
        sms: streaming multiprocessors of the device.
        plain_epilogue: the fused epilogue is the identity (no bias, activation, residual, scaling):
            only then are ping-pong configurations candidates (a fused epilogue in a ping-pong
            warpgroup, which holds a 128-register accumulator through it, spills: 20-396 bytes).
    """

    P: int
    Q: int
    K: int
    batch: int = 1
    x_major: str = "K"
    y_major: str = "K"
    tma_output: bool = True
    epilogue_loads: int = 0
    in_bytes: int = 2
    out_bytes: int = 2
    sms: int = 132
    plain_epilogue: bool = True


@dataclass(frozen=True)
class GemmConfig:
    """One configuration of :func:`~tsjit.ops.gemm_program.gemm_program`.

    Attributes:
        block_m, block_n: the CTA tile (BM rows of D, BN columns).
        stages: TMA ring depth.
        epilogue: ``"tma"`` or ``"direct"``.
        staged_columns: columns of the tile staged in shared memory per TMA-store pass.
        splits: split-K factor (1: none).
        group_m: rows of tiles per group of the grouped (L2-friendly) tile order.
        block_k: K elements per stage (64 for 16-bit inputs, 128 for fp8).
        schedule: ``"cooperative"`` (both MMA warpgroups multiply their 64 rows of a tile together) or
            ``"pingpong"`` (:mod:`tsjit.ops.gemm_pingpong`: BM = 128, each warpgroup multiplies its 64-row
            half of a tile in turn, from a ring of its own, so one's epilogue runs under the other's MMAs;
            ``stages`` is per warpgroup's ring; no split-K), or ``"pingpong-shared"`` (the same with one
            ring shared by both warpgroups, whose domain walks half 0's K tiles, then half 1's; BM = 128,
            or 256 with BN <= 128: 128-row halves), or ``"deferred"`` (:mod:`tsjit.ops.gemm_deferred`: the
            cooperative program with each tile's epilogue run under the next tile's first MMAs; BN <= 128,
            no split-K).
        mma_lag: wgmma groups the shared-ring ping-pong keeps in flight (1 or 2).
        x_policy, y_policy: ``""`` or the L2 eviction priority of X's / Y's TMA loads (cooperative only;
            :func:`stream_policies`).
        cluster_m, cluster_n: a 2-CTA cluster of the cooperative program (:mod:`tsjit.ops.gemm_cluster`, no
            split-K): ``cluster_m = 2``, two vertically adjacent tiles share (multicast) the Y tile;
            ``cluster_n = 2``, two horizontally adjacent tiles share the X tile (BM = 128); 1 and 1: none.
        estimate_us: the cost model's estimate (microseconds).
    """

    block_m: int
    block_n: int
    stages: int
    epilogue: str
    staged_columns: int
    splits: int
    group_m: int = 8
    block_k: int = BK
    schedule: str = "cooperative"
    mma_lag: int = 1
    x_policy: str = ""
    y_policy: str = ""
    cluster_m: int = 1
    cluster_n: int = 1
    estimate_us: float = field(default=0.0, compare=False)

    @property
    def load_rows(self) -> int:
        """Rows of X one TMA load brings per stage (K-major X): the tile's (cooperative), one half (ping-pong, or
        a CTA's share of the X tile of a ``cluster_n = 2`` cluster)."""
        return self.block_m // 2 if self.schedule in PINGPONG_SCHEDULES else self.block_m // self.cluster_n

    @property
    def load_columns(self) -> int:
        """Rows of Y (columns of D) one TMA load of a K-major Y brings per stage: the tile's, or a CTA's half of
        it in a ``cluster_m = 2`` cluster."""
        return self.block_n // self.cluster_m

    def describe(self) -> str:
        split = f", split-K {self.splits}" if self.splits > 1 else ""
        if self.schedule == "pingpong":
            return (f"{self.block_m}x{self.block_n}x{self.block_k} tile, ping-pong: 2 consumer warpgroups take "
                    f"turns on its 64-row halves, {self.stages} stages per warpgroup's ring, {self.epilogue} epilogue")
        if self.schedule == "pingpong-shared":
            return (f"{self.block_m}x{self.block_n}x{self.block_k} tile, ping-pong: 2 consumer warpgroups take "
                    f"turns on its {self.block_m // 2}-row halves from one shared ring of {self.stages} stages, "
                    f"{self.mma_lag} wgmma group(s) in flight, {self.epilogue} epilogue")
        if self.schedule == "deferred":
            return (f"{self.block_m}x{self.block_n}x{self.block_k} tile, {self.block_m // 64} consumer warpgroup(s), "
                    f"{self.stages} stages, {self.epilogue} epilogue deferred under the next tile's MMAs")
        policies = "".join(f", {name} loads {policy}" for name, policy in (("X", self.x_policy), ("Y", self.y_policy))
                           if policy)
        cluster = ""
        if self.cluster_m > 1 or self.cluster_n > 1:
            shared, pair = ("Y", "vertically") if self.cluster_m > 1 else ("X", "horizontally")
            cluster = (f", 2-CTA cluster {self.cluster_m}x{self.cluster_n} ({pair} adjacent tiles; each CTA "
                       f"multicasts half of the shared {shared} tile)")
        return (f"{self.block_m}x{self.block_n}x{self.block_k} tile, {self.block_m // 64} consumer warpgroup(s), "
                f"{self.stages} stages, {self.epilogue} epilogue{split}{policies}{cluster}")


def reduction_columns(block_n: int, splits: int) -> int:
    """Columns per pass of the split-K reducer's whole-tile sum, what the constants were fitted to (mirrors
    :func:`tsjit.ops.gemm_splitk.reduction_columns`; the last CTA of a tile summed every partial until
    2026-12-03, now only in launches of several waves)."""
    width = 64
    while width > 8 and width * splits > 128:
        width //= 2
    return min(width, block_n)


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def choose_roles(M: int, N: int) -> bool:
    """True when the product should be computed swapped, ``C^T = B^T A^T`` (few rows of A: the
    narrow side of C becomes the wgmma N dimension)."""
    return M <= 64 and N >= 2 * M


def k_tile(in_bytes: int) -> int:
    """K elements per stage: one 128-byte swizzle row (64 for 16-bit inputs, 128 for fp8)."""
    return BK * 2 // in_bytes


def stages_for(block_m: int, block_n: int, epilogue: str, staged: int, in_bytes: int,
               schedule: str = "cooperative") -> int:
    """The deepest ring (2..8 stages, 2..:data:`DEEP_RINGS` for the tiles listed there) that fits next to
    the epilogue's staging tile; ping-pong: the depth of each of the two warpgroups' rings (64-row X tiles)."""
    if schedule in PINGPONG_SCHEDULES:   # X tiles of half the rows; "pingpong": a ring per warpgroup
        stage = (2 if schedule == "pingpong" else 1) * (block_m // 2 + block_n) * k_tile(in_bytes) * in_bytes
    else:
        stage = (block_m + block_n) * k_tile(in_bytes) * in_bytes
    rows = 128 if schedule in PINGPONG_SCHEDULES else block_m     # ping-pong: a 64-row staging tile per warpgroup
    buffers = 2 if staged == NARROW_STAGING else 1                  # 32-column passes alternate two staging tiles
    staging = rows * staged * 2 * buffers if epilogue == "tma" else 0
    deepest = DEEP_RINGS.get((block_m, block_n), 8) if in_bytes == 2 and schedule == "cooperative" else 8
    return max(2, min(deepest, (SMEM_BUDGET - staging) // stage))


def pingpong_staging(block_n: int, epilogue: str, in_bytes: int, schedule: str = "pingpong",
                     block_m: int = 128) -> tuple[int, int]:
    """(stages, staged columns) of a ping-pong ``block_m`` x ``block_n`` tile: the deepest rings first (the
    epilogue is hidden under the other warpgroup's MMAs), then the widest staging tile that fits, at
    most 128 columns (a 256-column pass with a fused epilogue spills: 32 B with nvJitLink 13)."""
    if epilogue != "tma":
        return stages_for(block_m, block_n, epilogue, 0, in_bytes, schedule), 64
    rings = 2 if schedule == "pingpong" else 1
    options = [w for w in (128, 64) if block_n % w == 0 and w <= block_n]
    fits = [(stages_for(block_m, block_n, epilogue, w, in_bytes, schedule), w) for w in options
            if rings * 2 * (block_m // 2 + block_n) * k_tile(in_bytes) * in_bytes + 128 * w * 2 <= SMEM_BUDGET]
    return max(fits)


def _efficiency(block_m: int, block_n: int) -> float:
    return EFFICIENCY[(block_m, block_n)]


def estimate(problem: Problem, block_m: int, block_n: int, splits: int, schedule: str = "cooperative") -> float:
    """Estimated seconds of one configuration (see the module docstring)."""
    if schedule in PINGPONG_SCHEDULES:
        return estimate_pingpong(problem, block_m, block_n, schedule)
    p = problem
    bk = k_tile(p.in_bytes)
    k_tiles = ceil_div(p.K, bk)
    cm, cn = CLUSTER_SCHEDULES.get(schedule, (1, 1))
    # a cluster's tile pair is padded to whole clusters; each CTA loads its own operand and half the shared one
    tiles = ceil_div(ceil_div(p.P, block_m), cm) * cm * ceil_div(ceil_div(p.Q, block_n), cn) * cn * p.batch
    ctas = tiles * splits
    waves = ceil_div(ctas, p.sms // (cm * cn) * cm * cn)
    k_per_cta = ceil_div(k_tiles, splits) * bk
    peak = PEAK_FLOPS_PER_SM * (FP8_SPEEDUP if p.in_bytes == 1 else 1.0)
    efficiency = _efficiency(block_m, block_n) * (CLUSTER_EFFICIENCY if cm * cn > 1 else 1.0)
    mma = waves * 2.0 * block_m * block_n * k_per_cta / (peak * efficiency)
    mma = max(mma, waves * ceil_div(k_tiles, splits) * K_TILE_LATENCY_S)     # small tiles: the ring's round trip
    hbm = ((p.P + p.Q) * p.K * p.in_bytes + p.P * p.Q * p.out_bytes * (1 + p.epilogue_loads)) * p.batch
    l2 = tiles * (block_m // cn + block_n // cm) * k_tiles * bk * p.in_bytes
    # how much of the machine streams memory: few CTAs cannot pull full bandwidth
    active = min(ctas, p.sms) / p.sms
    quantization = waves * min(ctas, p.sms) / ctas          # the idle SMs of a partial last wave
    memory = max(hbm / HBM_BYTES_PER_S, l2 / L2_BYTES_PER_S) * quantization / max(active, 0.05) ** ACTIVE_EXPONENT
    split = 0.0
    if splits > 1:   # every split writes its fp32 partial; the last one reads them all back, pass by pass
        passes = ceil_div(block_n, reduction_columns(block_n, splits))
        split = waves * (SPLIT_FIXED_S + block_m * block_n * 4 * (1 + splits) / SM_L2_BYTES_PER_S
                         + passes * REDUCTION_PASS_S)
    cluster = CLUSTER_FIXED_S if cm * cn > 1 else 0.0
    return LAUNCH_S + max(mma, memory) + split + waves * TILE_OVERHEAD_S + cluster


def candidates(problem: Problem):
    """The choices the cost model compares, in tie-break order: cooperative ``(block_m, block_n,
    splits)`` and ping-pong ``(block_m, block_n, 1, schedule)`` (:data:`PINGPONG_CANDIDATES`, for
    16-bit inputs, a plain epilogue and a D at least one tile tall and wide)."""
    k_tiles = ceil_div(problem.K, k_tile(problem.in_bytes))
    widest = max(16, ceil_div(problem.Q, 16) * 16)
    for block_m in BLOCK_MS:
        for block_n in BLOCK_NS:
            if problem.y_major == "MN" and block_n < 64:
                continue
            if block_n == 192 and (block_m != 128 or problem.in_bytes != 2 or not problem.plain_epilogue):
                continue      # 192-wide: 16-bit inputs, 128-row tiles, plain epilogue (measured; bias + ReLU spills 8 B)
            if block_n == WIDE_ODD_BLOCK_N and (block_m != 128 or problem.y_major != "K"):
                continue      # 224-wide: 128-row tiles, a K-major Y (an MN-major Y's TMA boxes are 64 columns wide)
            if block_n > 2 * widest and block_n > 64:
                continue                        # a tile more than twice as wide as D
            if problem.Q <= 64 and block_n < widest:
                continue                        # a narrow D is covered by one tile: X (the weights) is read once
            for splits in SPLITS:
                if splits > 1 and (k_tiles < MIN_K_TILES_PER_SPLIT * splits or block_n == WIDE_ODD_BLOCK_N):
                    break
                yield block_m, block_n, splits
    if problem.in_bytes == 2 and problem.plain_epilogue:
        for block_m, block_n, schedule in PINGPONG_CANDIDATES:
            if problem.P >= block_m and problem.Q >= block_n:
                yield block_m, block_n, 1, schedule
    yield from cluster_candidates(problem)


def cluster_candidates(problem: Problem):
    """The 2-CTA cluster choices ``(BM, BN, 1, "cluster_m2" / "cluster_n2")`` for 16-bit inputs (what was
    measured): 128 x 256 and 128 x 128 tiles, at least two along the clustered dimension; 128 x 256 ``cluster_m2``
    with a plain epilogue only (a fused one spills 8 bytes with nvJitLink 13)."""
    if problem.in_bytes != 2:
        return
    for block_n in (256, 128):
        if block_n > 2 * max(16, ceil_div(problem.Q, 16) * 16):
            continue
        if ceil_div(problem.P, 128) >= 2 and (problem.y_major == "K" or block_n % 128 == 0) and (
                block_n != 256 or problem.plain_epilogue):
            yield 128, block_n, 1, "cluster_m2"
        if ceil_div(problem.Q, block_n) >= 2:
            yield 128, block_n, 1, "cluster_n2"


def estimate_pingpong(problem: Problem, block_m: int, block_n: int, schedule: str) -> float:
    """Estimated seconds of a ping-pong configuration: the cooperative model with the warpgroups'
    halves multiplied one after the other at :data:`PINGPONG_EFFICIENCY`, Y streamed once per half
    (twice per tile), and :data:`PINGPONG_TILE_OVERHEAD_S` per work tile of the busiest CTA."""
    p = problem
    bk = k_tile(p.in_bytes)
    k_tiles = ceil_div(p.K, bk)
    tiles = ceil_div(p.P, block_m) * ceil_div(p.Q, block_n) * p.batch
    per_cta = ceil_div(tiles, p.sms)                      # work tiles of the busiest CTA
    efficiency = PINGPONG_EFFICIENCY.get((schedule, block_m, block_n), 0.5)
    mma = per_cta * 2.0 * block_m * block_n * k_tiles * bk / (PEAK_FLOPS_PER_SM * efficiency)
    hbm = ((p.P + p.Q) * p.K * p.in_bytes + p.P * p.Q * p.out_bytes * (1 + p.epilogue_loads)) * p.batch
    l2 = tiles * (block_m + 2 * block_n) * k_tiles * bk * p.in_bytes
    active = min(tiles, p.sms) / p.sms
    quantization = per_cta * min(tiles, p.sms) / tiles
    memory = max(hbm / HBM_BYTES_PER_S, l2 / L2_BYTES_PER_S) * quantization / max(active, 0.05) ** ACTIVE_EXPONENT
    return LAUNCH_S + max(mma, memory) + per_cta * PINGPONG_TILE_OVERHEAD_S


def choose(problem: Problem) -> tuple[GemmConfig, list[tuple]]:
    """The configuration for ``problem`` and the ranked ``(seconds, *choice)`` of all candidates
    (a choice: ``(BM, BN, S)`` or, ping-pong, ``(BM, BN, 1, schedule)``)."""
    # ties (memory-bound shapes): the smaller tile (fewer idle MMA lanes, a deeper ring), then the earlier
    ranked = sorted(((estimate(problem, *choice), choice[0] * choice[1], i, choice)
                     for i, choice in enumerate(candidates(problem))))
    ranked = [(t, *c) for t, _, _, c in ranked]
    unsplit = unsplit_stream(problem, ranked[0][1:])
    if unsplit is not None:           # the measured exception: the unsplit entry goes first
        ranked.sort(key=lambda entry: entry[1:] != unsplit)
    seconds, choice = ranked[0][0], ranked[0][1:]
    config = make_config(problem, *choice, estimate_us=seconds * 1e6)
    return config, ranked


def unsplit_stream(problem: Problem, choice: tuple):
    """``(64, 64, 1)`` where the model's 64 x 64 split-K 2 winner streams X (the weights of a swapped small-M
    product: D at most 64 wide) over a short K (at most 64 K tiles) in one wave of tiles that alone fill at least
    45% of the SMs; else None (the model's choice stands).  Measured faster without the split: the 64 unsplit CTAs'
    11-stage rings pull the bandwidth and the split-K tail goes (H200, 2026-12-02, i15s, order-controlled
    benchmarks/gemm_small_probe.py: 64 x 4096 x 4096 split-K 2 18.7-19.9 us, unsplit 18.3-18.4, 13 stages alike;
    at 64 x 4096 x 14336, 224 K tiles, split-K 2 stays faster: 43.4 against 44.9)."""
    if tuple(choice) != (64, 64, 2) or problem.Q > 64:
        return None
    tiles = ceil_div(problem.P, 64) * ceil_div(problem.Q, 64) * problem.batch
    k_tiles = ceil_div(problem.K, k_tile(problem.in_bytes))
    if k_tiles <= 64 and 2 * tiles <= problem.sms and tiles >= 0.45 * problem.sms:
        return (64, 64, 1)
    return None


#: an operand at least this large that the grid reads at most :data:`STREAM_MAX_READS` times streams with evict-first
#: TMA loads (:func:`stream_policies`)
STREAM_MIN_BYTES = 4 << 20
#: work tiles that may read the same part of a streamed operand: 2 adjacent work tiles of the grouped order read it
#: at about the same time, so the second read still hits the L2 (H200, 2026-12-03, 128 x 4096 x 4096 with 64 x 64
#: tiles, two tiles tall: B evict-first 17.0 us against 19.0, cuBLAS 19.3)
STREAM_MAX_READS = 2
#: up to this many tile rows may read a streamed Y (the grouped order's group_m: they run side by side) where Y is at
#: least :data:`STREAM_DOMINANT` times X's size (H200, 2026-12-03: M = 384-1024 x the four Llama (N, K), 128-row
#: tiles, 3-8 rows: 0.957-1.017x -> 0.973-1.024x cuBLAS, none slower)
STREAM_MAX_ROW_READS = 8
STREAM_DOMINANT = 4


def stream_policies(problem: Problem, block_m: int, block_n: int) -> tuple[str, str]:
    """``(x_policy, y_policy)``: ``"evict_first"`` for an operand of at least :data:`STREAM_MIN_BYTES` that at most
    :data:`STREAM_MAX_READS` work tiles read each part of (X: ``ceil(Q / BN)`` tiles across D's width, Y:
    ``ceil(P / BM)`` down its height; Y: up to :data:`STREAM_MAX_ROW_READS` where it is :data:`STREAM_DOMINANT` times
    X's size), else ``""``.  Its lines then leave the L2 before the other lines of their
    sets: the dirty lines that earlier kernels left (writes not yet written back to HBM) are not written back during
    the stream to make room for lines read once, and the other operand's lines stay.  Measured on the H200
    (2026-12-03, benchmarks/gemm_stream_probe.py, the L2 flushed by a 256 MiB write as in benchmarks/gemm.py): the 16
    small-M shapes M in {1, 16, 64, 128} x (N, K) in {(4096, 4096), (14336, 4096), (4096, 14336), (28672, 4096)}
    0.94-1.02x cuBLAS without, 1.02-1.14x with (M = 256: 0.94-1.02x -> 1.01-1.06x); after a read flush (a clean
    L2) both within 2%."""
    p = problem
    x_reads, y_reads = ceil_div(p.Q, block_n), ceil_div(p.P, block_m)
    x_bytes, y_bytes = p.P * p.K * p.in_bytes * p.batch, p.Q * p.K * p.in_bytes * p.batch
    x = x_reads <= STREAM_MAX_READS and x_bytes >= STREAM_MIN_BYTES
    y = y_bytes >= STREAM_MIN_BYTES and (y_reads <= STREAM_MAX_READS or (
        y_reads <= STREAM_MAX_ROW_READS and y_bytes >= STREAM_DOMINANT * x_bytes))
    return ("evict_first" if x else "", "evict_first" if y else "")


def choice_of(config: GemmConfig) -> tuple:
    """The candidate tuple of ``config``: ``(BM, BN, S)``, or ``(BM, BN, 1, schedule)`` for ping-pong (and
    the deferred epilogue)."""
    if config.schedule != "cooperative":
        return config.block_m, config.block_n, 1, config.schedule
    if config.cluster_m > 1 or config.cluster_n > 1:
        return config.block_m, config.block_n, 1, "cluster_m2" if config.cluster_m > 1 else "cluster_n2"
    return config.block_m, config.block_n, config.splits


def describe_choice(choice) -> str:
    """``"128x256 S1"`` / ``"128x256 pingpong-shared"``: a choice as explain and autotune print it."""
    bm, bn, s = choice[:3]
    return f"{bm}x{bn} {choice[3]}" if len(choice) > 3 else f"{bm}x{bn} S{s}"


def make_config(problem: Problem, block_m: int, block_n: int, splits: int, schedule: str = "cooperative", *,
                group_m: int = 8, estimate_us: float = 0.0) -> GemmConfig:
    """The full :class:`GemmConfig` of a (BM, BN, split-K) choice for ``problem``: the epilogue (TMA
    when D allows it and there is no split), the staged columns and the deepest ring that fits.
    ``schedule="pingpong"`` needs BM = 128 and no split-K (:mod:`tsjit.ops.gemm_pingpong`)."""
    if schedule in PINGPONG_SCHEDULES:
        halves = (128, 256) if schedule == "pingpong-shared" else (128,)
        if (block_m not in halves or (block_m == 256 and block_n > 128) or splits != 1 or block_n < 64
                or block_n % 64):
            raise UsageValueError(f"a {schedule} configuration needs BM in {halves} (256: BN <= 128), BN a multiple of "
                             f"64 and no split-K; got BM={block_m}, BN={block_n}, split-K {splits}")
        tma = problem.tma_output and problem.out_bytes == 2
        epilogue = "tma" if tma else "direct"
        if epilogue == "direct" and problem.epilogue_loads and block_n > 128:
            block_n = 128                       # a 256-wide direct epilogue with loads spills (as cooperative)
        stages, staged = pingpong_staging(block_n, epilogue, problem.in_bytes, schedule, block_m)
        lag = 2 if schedule == "pingpong-shared" else 1      # 2 groups in flight: 0.70 -> 0.89x cuBLAS at 4096^3
        return GemmConfig(block_m, block_n, stages, epilogue, staged, 1, group_m=group_m,
                          block_k=k_tile(problem.in_bytes), schedule=schedule, mma_lag=lag, estimate_us=estimate_us)
    cluster_m, cluster_n = CLUSTER_SCHEDULES.get(schedule, (1, 1))
    if problem.y_major == "MN" and block_n > 64 and block_n % 64:
        raise UsageValueError(f"a {block_n}-wide tile needs a K-major Y (an MN-major Y loads 64-column boxes); got "
                              f"an MN-major Y: pass B's transpose contiguous, or choose BN a multiple of 64")
    if schedule in CLUSTER_SCHEDULES:
        if splits != 1 or (cluster_n > 1 and block_m != 128) or block_n % 16:
            raise UsageValueError(f"a {schedule} configuration needs no split-K, BN a multiple of 16 and (cluster_n2) "
                                  f"BM = 128; got BM={block_m}, BN={block_n}, split-K {splits}")
        schedule = "cooperative"
    if schedule == "deferred" and (block_n > DEFERRED_MAX_BLOCK_N or splits != 1):
        raise UsageValueError(f"a deferred-epilogue configuration keeps two accumulators: it needs BN <= "
                              f"{DEFERRED_MAX_BLOCK_N} and no split-K; got BN={block_n}, split-K {splits}")
    tma = (problem.tma_output and splits == 1 and (block_n % 64 == 0 or block_n == WIDE_ODD_BLOCK_N)
           and problem.out_bytes == 2)
    epilogue = "tma" if tma else "direct"
    if epilogue == "direct" and problem.epilogue_loads and block_n > 128 and splits == 1:
        block_n = 128                           # a 256-wide direct epilogue with loads spills
    staged = block_n if (tma and block_m * block_n * 2 <= 64 * 1024 and block_n <= 256) else min(block_n, 128)
    if tma and block_n % 64:
        staged = NARROW_STAGING                 # 32-column passes (a 64-column box would cross the tile's edge)
    if tma and block_m == 128 and block_n == 256:
        # a short K loop: one 256-column staging pass (3 stages); from 32 K tiles on (16-bit inputs) the 4th
        # stage pays (H200, 2026-12-01: 2048^3 0.991-0.994x cuBLAS with 4 stages against 0.970-0.983 with 3;
        # 3000 x 5000 x 1000 0.782 against 0.790-0.797); fp8 keeps 64 (4096^3 fp8 measured with 3 stages)
        short = SHORT_K_TILES if problem.in_bytes == 2 else 64
        staged = 256 if ceil_div(problem.K, k_tile(problem.in_bytes)) < short else 128
    stages = stages_for(block_m, block_n, epilogue, staged if tma else 0, problem.in_bytes)
    x_policy, y_policy = stream_policies(problem, block_m, block_n) if schedule == "cooperative" else ("", "")
    return GemmConfig(block_m, block_n, stages, epilogue, staged if tma else 64, splits, group_m=group_m,
                      block_k=k_tile(problem.in_bytes), schedule=schedule, x_policy=x_policy, y_policy=y_policy,
                      cluster_m=cluster_m, cluster_n=cluster_n,
                      estimate_us=estimate_us)


def pingpong_verdict(problem: Problem, choice: tuple, config: GemmConfig) -> str:
    """Why a ping-pong ``choice`` ``(BM, BN, 1, schedule)`` loses to the cooperative program, as explain prints it:
    with at most one work tile per CTA there is no next tile to hide an epilogue under; otherwise its warpgroups
    take turns on the tensor cores (:data:`PINGPONG_EFFICIENCY`) and the shared ring stalls while one stores
    (:data:`PINGPONG_TILE_OVERHEAD_S` per tile)."""
    block_m, block_n, _, schedule = choice
    tiles = ceil_div(problem.P, block_m) * ceil_div(problem.Q, block_n) * problem.batch
    if tiles <= problem.sms:
        return (f"{tiles} work tiles on {problem.sms} SMs: one per CTA, so no epilogue hides under a next tile's "
                f"MMAs")
    efficiency = PINGPONG_EFFICIENCY.get((schedule, block_m, block_n), 0.5)
    chosen = EFFICIENCY.get((config.block_m, config.block_n))
    against = f", the chosen {config.block_m}x{config.block_n} at {chosen:.2f}" if chosen else ""
    return (f"{ceil_div(tiles, problem.sms)} work tiles per CTA, but one warpgroup issues at a time (main loop at "
            f"{efficiency:.2f} of peak{against}) and the shared ring stalls {PINGPONG_TILE_OVERHEAD_S * 1e6:.0f} us "
            f"per tile while a warpgroup stores")


def explain_choice(problem: Problem, swapped: bool, config: GemmConfig, ranked) -> str:
    """The text ``tsjit.ops.matmul.explain`` prints."""
    lines = [f"problem: D ({problem.P} x {problem.Q}) = X ({problem.P} x {problem.K}) @ Y ({problem.K} x "
             f"{problem.Q}), batch {problem.batch}; X {problem.x_major}-major, Y {problem.y_major}-major"]
    if swapped:
        lines.append("roles: swapped (M <= 64 and N >= 2M): computes C^T = B^T A^T so that M is the narrow "
                     "wgmma N dimension")
    else:
        lines.append("roles: X = A, Y = B")
    lines.append(f"config: {config.describe()} (estimate {config.estimate_us:.1f} us, "
                 f"{ceil_div(problem.P, config.block_m) * ceil_div(problem.Q, config.block_n) * problem.batch * config.splits} CTAs' work on {problem.sms} SMs)")
    if config.block_n == WIDE_ODD_BLOCK_N:
        tiles, wide = (ceil_div(problem.P, config.block_m) * ceil_div(problem.Q, n) * problem.batch for n in (224, 256))
        lines.append(f"tile width: 224, {tiles} tiles ({tiles / problem.sms:.2f} waves on {problem.sms} SMs), against "
                     f"128x256's {wide} ({wide / problem.sms:.2f}): the last wave is fuller")
    if config.epilogue == "direct":
        why = ("split-K reduces in registers" if config.splits > 1 else
               "D is not a row-major 16-byte-aligned 16-bit matrix" if not problem.tma_output else
               "the tile width is not a multiple of 64")
        lines.append(f"epilogue: direct stores ({why})")
    if config.schedule in PINGPONG_SCHEDULES:
        lines.append("schedule: ping-pong (tsjit.ops.gemm_pingpong): the two MMA warpgroups take turns on the "
                     "tile's halves (named barriers), one's epilogue under the other's MMAs")
    else:
        pingpong = next((entry for entry in ranked if len(entry) > 4 and entry[4] in PINGPONG_SCHEDULES), None)
        if pingpong is not None:
            lines.append(f"schedule: cooperative; best ping-pong {describe_choice(pingpong[1:])} estimated "
                         f"{pingpong[0] * 1e6:.1f} us ({pingpong_verdict(problem, pingpong[1:], config)})")
        else:
            why = ("fp8 inputs" if problem.in_bytes == 1 else "a fused epilogue" if not problem.plain_epilogue else
                   "D smaller than a ping-pong tile")
            lines.append(f"schedule: cooperative; ping-pong not a candidate ({why})")
    cluster = next((entry for entry in ranked if len(entry) > 4 and entry[4] in CLUSTER_SCHEDULES), None)
    if config.cluster_m > 1 or config.cluster_n > 1:
        lines.append("cluster: 2 CTAs (tsjit.ops.gemm_cluster), each loading half of the shared operand tile into "
                     "both by TMA multicast: less L2 -> SM traffic per tile")
    elif cluster is not None:
        lines.append(f"cluster: none; best 2-CTA cluster {describe_choice(cluster[1:])} estimated "
                     f"{cluster[0] * 1e6:.1f} us")
    else:
        lines.append("cluster: none (not a candidate: " + ("fp8 inputs" if problem.in_bytes != 2 else
                                                          "fewer than two 128-row or 128-wide tiles") + ")")
    lines.append("runners-up (us, BM x BN, split-K or schedule): " + ", ".join(
        f"{entry[0] * 1e6:.1f} {describe_choice(entry[1:])}" for entry in ranked[1:6]))
    return "\n".join(lines)
