"""The library GEMM as a Task Scheduling program: ``D (P, Q) = X (P, K) @ Y (K, Q)`` with every
operand layout, 64- or 128-row tiles, any legal tile width, optional batching, a deterministic
split-K and a fused epilogue.  ``tsjit.ops.matmul`` (:mod:`tsjit.ops.matmul`) picks the
configuration and the operand roles (``X = A, Y = B`` or, swapped, ``X = B^T, Y = A^T``).

Program (one CTA = ``1 + BM / 64`` warpgroups):

* ``load`` (warp 0; warps 1-3 ``idle``; both at 40 registers): for each work tile of a static
  persistent WorkQueue over ``tiles_m x tiles_n x (batch * SPLITS)``, walk the tile's K tiles:
  ``acquire`` a ring stage, TMA-load the X tile (BM x BK) and the Y tile (BN x BK), both
  128-byte swizzled, ``commit`` (``expect_tx`` = the stage's bytes).
  ``X_MAJOR`` / ``Y_MAJOR`` "K": the operand's K is contiguous; "MN": its rows (X) / columns (Y)
  are, and the TMA boxes are 64-wide along M / N, read by wgmma with the transpose bit (bf16/fp16).
* ``mma`` (warpgroups 1..BM/64, 232 registers): each warpgroup owns 64 rows; per K tile
  ``wait``, BK / 16 ``wgmma.mma_async`` m64nBNk16, ``commit_group``, ``wait_group(1)``, release
  the previous stage.  After the loop ``wait_group(0)``, release the last stage, then the
  ``out.store`` epilogue:

  - ``EPILOGUE="tma"``: the fused epilogue applied per element, converted with ``stmatrix`` into a
    128B-swizzled staging tile, stored by TMA (clipped at the edges);
  - ``"direct"``: bounds-masked stores from registers (any strides, any output dtype);
  - ``SPLITS > 1`` (split-K, deterministic): split ``s`` of a tile covers K tiles
    ``[s * kt // S, (s + 1) * kt // S)``.  Every warp writes its raw fp32 partial to the workspace
    in the accumulator's own register order (``ws[tile][split][register / 4][thread]`` as float4:
    fully coalesced) and the S splits then share the sums out, each element summed *in split
    order 0..S-1* whoever sums it (bit-identical run to run), no wait unbounded (no deadlock
    whatever the residency): :mod:`tsjit.ops.gemm_splitk`.  The sums go through the epilogue and
    are stored directly.

The epilogue is a :class:`tsjit.lang.epilogue.FusedEpilogue` given as the ``FUSED`` constexpr: bias
per row or column, activation, residual, alpha / beta, a user ``@tsjit.func``.
"""
from __future__ import annotations

from dataclasses import dataclass

import tsjit
from tsjit import ts
from tsjit import wgmma
from tsjit.errors import UsageValueError
from tsjit.lang.epilogue import FusedEpilogue, store_fragment_global, store_fragment_shared
from tsjit.lang.fragment import Fragment
from tsjit.ops.configs import NARROW_STAGING
from tsjit.ops.gemm_cluster import check_cluster, cluster_arguments, cluster_queue
from tsjit.ops.gemm_splitk import reduce_split_k
from tsjit.ts.work_queue import WorkQueue

BK = 64                 # K elements per stage of a 16-bit type: one 128-byte swizzle row
SWIZZLE_BYTES = 128     # bytes of K per stage and tile row, whatever the element size (128 fp8, 64 bf16)
K_STEPS = SWIZZLE_BYTES // 32   # wgmma.mma_async per stage: each consumes 32 bytes of K per row
BOX = 64                # TMA box edge along M / N for MN-major operands and the C staging tile
WARPGROUP = 128
LOAD_REGISTERS = 40
MMA_REGISTERS = 232


def k_tile_elements(dtype) -> int:
    """K elements per stage for operands of ``dtype``: one 128-byte swizzle row (64 bf16/fp16, 128 fp8)."""
    return SWIZZLE_BYTES // dtype.itemsize


def split_bounds(split, k_tiles, splits):
    """K tiles ``[begin, end)`` of split ``split`` out of ``splits`` (every split gets
    ``>= k_tiles // splits >= 1`` tiles when ``splits <= k_tiles``)."""
    return split * k_tiles // splits, (split + 1) * k_tiles // splits


EPILOGUE_COLUMNS = 64    # columns a direct epilogue converts and stores per pass (register pressure)


def store_box(staged_columns: int) -> tuple[int, str]:
    """(columns, swizzle) of D's TMA store box for a TMA epilogue staging ``staged_columns`` columns per pass:
    64 columns, 128-byte swizzled; or, for :data:`NARROW_STAGING` (a 224-wide tile: seven passes through two
    alternating staging buffers), 32 columns, 64-byte swizzled (PTX ISA 5.5.6, the swizzle span is the box
    row: 64 bytes here)."""
    return (NARROW_STAGING, "64B") if staged_columns == NARROW_STAGING else (BOX, "128B")


@tsjit.func
def store_direct(values, out, fused, operands, batch, row0, col0, rows, cols, tid, BN: tsjit.Constexpr[int]):
    """Bounds-masked stores of a 64 x BN accumulator tile (``values``: its BN / 2 registers), through the
    fused epilogue, ``EPILOGUE_COLUMNS`` columns at a time (32 where BN is not a multiple of that: 224)."""
    width = min(BN, EPILOGUE_COLUMNS)
    if tsjit.const_expr(BN % width != 0):
        width = 32                          # a 224-wide tile: seven 32-column passes
    for part in tsjit.range_constexpr(BN // width):
        fn = fused.bind(operands, batch, row0, col0 + part * width, rows, cols)
        store_fragment_global(Fragment(values[part * width // 2:(part + 1) * width // 2]), out, row0,
                              col0 + part * width, rows, cols, fn=fn, tid=tid)


@dataclass(kw_only=True)
class WarpgroupMmaRing(ts.MemoryResource):
    """The consumer works of a TMA ring whose stages feed warpgroup MMAs into a 64 x ``block_n``
    fp32 accumulator per warpgroup (the MMA warpgroups start at warp 4).  A subclass stores the
    tiles and says where a stage's operands are: ``operand_tiles(stage, warpgroup)`` returns
    ``(x_tile, x_major, y_tile, y_major)`` (the 64 x BK tile of this warpgroup's rows, and the
    BN x BK tile), both 128-byte swizzled."""

    block_n: int

    @ts.consumer_work(returns="acc", work_attrs=ts.WorkAttr.AUXILIARY)
    def zero_accumulator(self, stage_info):
        return Fragment.zeros(self.block_n // 2)

    @ts.consumer_work(returns="acc")
    def mma(self, stage_info, acc):
        warpgroup = tsjit.warp_idx() // 4 - 1
        x_tile, x_major, y_tile, y_major = self.operand_tiles(stage_info.stage_idx, warpgroup)
        x_desc = wgmma.make_descriptor(x_tile, major=x_major, swizzle="128B")
        y_desc = wgmma.make_descriptor(y_tile, major=y_major, swizzle="128B")
        wgmma.fence()
        for k in tsjit.range_constexpr(K_STEPS):
            acc = wgmma.mma_async(acc, x_desc.k_step(k), y_desc.k_step(k), n=self.block_n)
        wgmma.commit_group()
        wgmma.wait_group(1)
        return acc

    @ts.consumer_work(returns="acc")
    def retire(self, stage_info, acc):
        wgmma.wait_group(0)
        return wgmma.fence_operand(acc)   # keep accumulator reads below the wait (no wgmma serialization)


@dataclass(kw_only=True)
class OperandRing(WarpgroupMmaRing):
    """The TMA ring of X and Y tiles; its consumer works run the warpgroup MMAs.  A work tile has
    ``lanes * block_m`` rows; the ring loads the ``block_m`` rows of lane ``lane`` (cooperative: the
    one lane; ping-pong, :mod:`tsjit.ops.gemm_pingpong`: one 64-row ring per MMA warpgroup), or, with
    ``sequential_lanes``, of every lane in turn: K tiles ``0 .. k_tiles - 1`` of lane 0, then of lane 1, ...
    (the shared-ring ping-pong, whose domain is ``lanes * k_tiles`` long)."""

    x_map: object
    y_map: object
    block_m: int
    x_major: str = "K"
    y_major: str = "K"
    batched: bool = False
    split_k: bool = False
    splits: object = 1
    k_tiles: object = 1
    lane: int = 0
    lanes: int = 1
    sequential_lanes: bool = False
    cluster: int = 1
    share: str = "y"
    bk: int = BK
    x_tiles: object = None
    y_tiles: object = None
    x_policy: object = None
    y_policy: object = None
    y_parts: object = None
    x_mask: object = None
    y_mask: object = None
    x_groups: int = 1
    acc: ts.TaskLocalVariable = ts.TaskLocalVariable.uninitialized()

    def __post_init__(self):
        stages = self.pipeline_config.num_stages
        groups = self.block_m // 64
        x_dtype, y_dtype = self.x_map.dtype, self.y_map.dtype
        self.bk = bk = k_tile_elements(x_dtype)
        if x_dtype.itemsize != y_dtype.itemsize:
            raise tsjit.CompilationError(f"gemm_program: X is {x_dtype.name} and Y is {y_dtype.name}; both operands "
                                         f"must have the same element size (two fp8 types may mix)")
        for name, dtype, major in (("X", x_dtype, self.x_major), ("Y", y_dtype, self.y_major)):
            if dtype.itemsize == 1 and major != "K":
                raise tsjit.CompilationError(f"gemm_program: {name} is {dtype.name} and {major}-major; fp8 wgmma "
                                             f"reads only K-major operands (PTX ISA 9.7.15.5.1: no transpose for "
                                             f"fp8): pass it with K contiguous")
        if self.x_major == "K":
            self.x_tiles = tsjit.shared_array(x_dtype, (stages, groups, 64, bk), align=1024)     # [wg][m][k]
        else:
            self.x_tiles = tsjit.shared_array(x_dtype, (stages, groups, bk, BOX), align=1024)    # [wg][k][m]
        if self.y_major == "K" and self.cluster > 1 and self.share == "y":   # [part][n][k]: a part per CTA
            c = self.cluster
            self.y_parts = tsjit.shared_array(y_dtype, (stages, c, self.block_n // c, bk), align=1024)
            self.y_tiles = self.y_parts.reshape((stages, self.block_n, bk))
        elif self.y_major == "K":
            self.y_tiles = tsjit.shared_array(y_dtype, (stages, self.block_n, bk), align=1024)   # [n][k]
        else:
            self.y_tiles = tsjit.shared_array(y_dtype, (stages, self.block_n // BOX, bk, BOX), align=1024)
        mask = (1 << self.cluster) - 1     # 2-CTA cluster: the shared operand's multicast mask (else None)
        self.x_mask = mask if self.cluster > 1 and self.share == "x" else None
        self.y_mask = mask if self.cluster > 1 and self.share == "y" else None
        self.x_groups = groups // (self.cluster if self.x_mask else 1)    # 64-row X groups this CTA loads
        n = self.block_n
        self.acc = ts.TaskLocalVariable(Fragment, default_factory=lambda: Fragment.zeros(n // 2),
                                        docs="the warpgroup's 64 x BN fp32 accumulator")

    @ts.producer_work()
    def tma_load(self, stage_info):
        m, n, l = stage_info.work_tile.coords
        kt = stage_info.loop_offset
        batch = l
        lane = self.lane
        if tsjit.const_expr(self.split_k):
            batch = l // self.splits
            kt = kt + (l % self.splits) * self.k_tiles // self.splits
        if tsjit.const_expr(self.sequential_lanes):       # the domain walks lane 0's K tiles, then lane 1's, ...
            lane = kt // self.k_tiles
            kt = kt - lane * self.k_tiles
        k = kt * self.bk
        if tsjit.elect_one():
            stage = stage_info.stage_idx
            bar = stage_info.barrier
            row0 = (m * self.lanes + lane) * self.block_m   # ping-pong: the lane's rows of the work tile
            col0 = n * self.block_n
            # a 2-CTA cluster (tsjit.ops.gemm_cluster): this CTA loads its part of the shared operand into both
            share_x, share_y = self.x_mask is not None, self.y_mask is not None
            x_rank = 0
            y_rank = 0
            if tsjit.const_expr(share_x or share_y):
                x_rank = tsjit.cluster_ctarank() if share_x else 0
                y_rank = tsjit.cluster_ctarank() if share_y else 0
            x_mask, y_mask, x_groups, c = self.x_mask, self.y_mask, self.x_groups, self.cluster
            if tsjit.const_expr(self.x_major == "K"):
                x_dst = self.x_tiles[stage, x_rank] if share_x else self.x_tiles[stage]
                x_row = row0 + x_rank * BOX
                if tsjit.const_expr(self.batched):
                    tsjit.tma_load(self.x_map, x_dst, bar, (batch, x_row, k), multicast_mask=x_mask,
                                   cache_policy=self.x_policy)
                else:
                    tsjit.tma_load(self.x_map, x_dst, bar, (x_row, k), multicast_mask=x_mask, cache_policy=self.x_policy)
            else:
                for j in tsjit.range_constexpr(x_groups):
                    g = x_rank * x_groups + j
                    if tsjit.const_expr(self.batched):
                        tsjit.tma_load(self.x_map, self.x_tiles[stage, g], bar, (batch, k, row0 + g * BOX),
                                       multicast_mask=x_mask, cache_policy=self.x_policy)
                    else:
                        tsjit.tma_load(self.x_map, self.x_tiles[stage, g], bar, (k, row0 + g * BOX),
                                       multicast_mask=x_mask, cache_policy=self.x_policy)
            y_boxes = self.block_n // BOX // (c if share_y else 1)     # 64-column Y boxes this CTA loads (MN)
            if tsjit.const_expr(self.y_major == "K"):
                y_dst = self.y_parts[stage, y_rank] if share_y else self.y_tiles[stage]
                y_col = col0 + y_rank * (self.block_n // c)
                if tsjit.const_expr(self.batched):
                    tsjit.tma_load(self.y_map, y_dst, bar, (batch, y_col, k), multicast_mask=y_mask,
                                   cache_policy=self.y_policy)
                else:
                    tsjit.tma_load(self.y_map, y_dst, bar, (y_col, k), multicast_mask=y_mask, cache_policy=self.y_policy)
            else:
                for i in tsjit.range_constexpr(y_boxes):
                    j = y_rank * y_boxes + i
                    if tsjit.const_expr(self.batched):
                        tsjit.tma_load(self.y_map, self.y_tiles[stage, j], bar, (batch, k, col0 + j * BOX),
                                       multicast_mask=y_mask, cache_policy=self.y_policy)
                    else:
                        tsjit.tma_load(self.y_map, self.y_tiles[stage, j], bar, (k, col0 + j * BOX),
                                       multicast_mask=y_mask, cache_policy=self.y_policy)

    def operand_tiles(self, stage, warpgroup):
        """This warpgroup's X tile and the Y tile of ``stage``, with their majors."""
        return self.x_tiles[stage, warpgroup], self.x_major, self.y_tiles[stage], self.y_major


@tsjit.func
def write_tile(tile_out, acc, m, n, l):
    """Store this MMA warpgroup's rows of work tile ``(m, n, l)`` of the :class:`OutputTile` ``tile_out`` from
    ``acc`` (its fragments), as the module docstring says for each mode; called by ``OutputTile.store`` and by
    the deferred-epilogue program (:mod:`tsjit.ops.gemm_deferred`)."""
    warpgroup = tsjit.warp_idx() // 4 - 1
    tid = tsjit.thread_idx().x % WARPGROUP
    row0 = m * tile_out.block_m + warpgroup * tile_out.warpgroup_rows
    col0 = n * tile_out.block_n
    batch = l
    if tsjit.const_expr(tile_out.split_k):
        batch = l // tile_out.splits
        out = tile_out.c
        if tsjit.const_expr(tile_out.batched):
            out = tile_out.c[batch]
        tile = (batch * tile_out.tiles_m + m) * tile_out.tiles_n + n
        reduce_split_k(acc, out, tile_out.workspace, tile_out.counters, tile, l % tile_out.splits, tile_out.splits,
                       tile_out.work_units, tile_out.fused, tile_out.operands, batch, row0, col0, tile_out.rows, tile_out.cols,
                       tile_out.block_m, tile_out.block_n)
        return
    fragment = tile_out.block_n // 2                    # accumulator registers per 64-row fragment
    if tsjit.const_expr(tile_out.mode == "direct"):
        out = tile_out.c
        if tsjit.const_expr(tile_out.batched):
            out = tile_out.c[batch]
        for sub in tsjit.range_constexpr(tile_out.warpgroup_rows // 64):
            store_direct(list(acc[sub * fragment:(sub + 1) * fragment]), out, tile_out.fused, tile_out.operands, batch,
                         row0 + sub * 64, col0, tile_out.rows, tile_out.cols, tid, tile_out.block_n)
        return
    buffer = tile_out.staging[warpgroup]
    columns = tile_out.staged_columns
    width, swizzle = store_box(columns)
    narrow = columns == NARROW_STAGING              # two staging buffers in turn, one pass in flight
    per_pass = columns // 2                         # accumulator registers per staged pass
    for sub in tsjit.range_constexpr(tile_out.warpgroup_rows // 64):
        row = row0 + sub * 64
        for part in tsjit.range_constexpr(tile_out.block_n // columns):
            if tsjit.const_expr(narrow):
                buffer = tile_out.staging[warpgroup, part % 2]
            if tid == 0:
                if tsjit.const_expr(narrow and (sub > 0 or part > 0)):
                    tsjit.bulk_wait_group(1, read=True)     # the pass before last has left this buffer
                else:
                    tsjit.bulk_wait_group(0, read=True)     # the previous pass has left the staging buffer
            tsjit.named_barrier_sync(1 + warpgroup, WARPGROUP)
            fn = tile_out.fused.bind(tile_out.operands, batch, row, col0 + part * columns, tile_out.rows, tile_out.cols)
            first = sub * fragment + part * per_pass
            store_fragment_shared(Fragment(acc[first:first + per_pass]), buffer, swizzle=swizzle, tid=tid, fn=fn)
            tsjit.fence_proxy_async()
            tsjit.named_barrier_sync(1 + warpgroup, WARPGROUP)
            if tid == 0:
                for box in tsjit.range_constexpr(columns // width):
                    if tsjit.const_expr(tile_out.batched):
                        tsjit.tma_store(tile_out.c_map, buffer[box], (batch, row, col0 + part * columns + box * width))
                    else:
                        tsjit.tma_store(tile_out.c_map, buffer[box], (row, col0 + part * columns + box * width))
                tsjit.bulk_commit_group()


@dataclass(kw_only=True)
class OutputTile(ts.MemoryResource):
    """D in global memory, written by the MMA warpgroups (see the module docstring for the modes).

    Each MMA warpgroup stores ``warpgroup_rows`` rows of the tile (64: its fragment; 128 in the
    shared-ring ping-pong with 128-row halves: two fragments, one after the other).
    ``c`` is the output viewed in D's coordinates (rank 2, or rank 3 with a leading batch);
    ``fused`` the :class:`~tsjit.lang.epilogue.FusedEpilogue`, ``operands`` its run-time tensors
    and scalars."""

    c: object
    c_map: object
    block_m: int
    block_n: int
    rows: object
    cols: object
    fused: object
    operands: object
    mode: str = "tma"
    batched: bool = False
    staged_columns: int = 128
    split_k: bool = False
    splits: object = 1
    tiles_m: object = 1
    tiles_n: object = 1
    workspace: object = None
    counters: object = None
    work_units: object = 1
    warpgroup_rows: int = 64
    staging: object = None

    def __post_init__(self):
        if self.mode == "tma" and self.staged_columns == NARROW_STAGING:   # two 64 x 32 tiles per MMA warpgroup
            self.staging = tsjit.shared_array(self.c_map.dtype, (self.block_m // self.warpgroup_rows, 2, 1, 64,
                                                                 NARROW_STAGING), align=1024)
        elif self.mode == "tma":   # one 64-row staging tile per MMA warpgroup
            self.staging = tsjit.shared_array(self.c_map.dtype, (self.block_m // self.warpgroup_rows,
                                                                 self.staged_columns // BOX, 64, BOX), align=1024)

    @ts.producer_work()
    def store(self, stage_info, acc):
        m, n, l = stage_info.work_tile.coords
        write_tile(self, acc, m, n, l)

    @ts.producer_work(work_attrs=ts.WorkAttr.AUXILIARY)
    def flush(self, stage_info):
        """Before the CTA exits: TMA stores still reading the staging buffer must finish."""
        if tsjit.const_expr(self.mode == "tma"):
            if tsjit.thread_idx().x % WARPGROUP == 0:
                tsjit.bulk_wait_group(0)


class SplitTask(ts.Task):
    """A task whose K domain is the K tiles of its work tile's split (``l % splits``)."""

    splits = 1
    k_tiles = 1

    def get_domain(self, tile_coord):
        split = tile_coord[2] % self.splits
        return (split + 1) * self.k_tiles // self.splits - split * self.k_tiles // self.splits


def mainloop_schedules(k_domain, turns: str = "none", lag: int = 1, deferred: bool = False):
    """The three schedules of the TMA -> wgmma GEMM, for a K domain ending at ``k_domain`` (a
    count, or a Task subclass's ``get_domain`` for a per-tile end): ``load`` (acquire, TMA, commit
    per K tile), ``idle`` (padding warps: only the queue epilogue) and ``mma`` (wait, MMAs, release
    the previous stage, then retire, release the last stage and store the tile).  Shared by
    :func:`gemm_program`, the ping-pong programs (:mod:`tsjit.ops.gemm_pingpong`) and the tutorial
    GEMM (``tsjit/examples/gemm.py``).

    ``turns`` (ping-pong, the ring's works of :mod:`tsjit.lang.turns`): ``"none"``; ``"tile"``: the
    ring's ``start_turns`` once before the work tile loop and every tile's K loop between its
    ``take_turn`` and ``pass_turn``; ``"mma"``: only ``start_turns`` (the ring's ``mma`` takes and
    passes the turns itself).

    ``lag``: how many stages behind the wait cursor the ``mma`` task releases (the ring's ``mma``
    work keeps ``lag`` wgmma groups in flight: ``wait_group(lag)``); the K domain must have at least
    ``lag`` K tiles (1 always does).

    ``deferred`` (:mod:`tsjit.ops.gemm_deferred`): the ``mma`` task keeps the retired accumulator as
    ``prev`` (the ring's ``init_previous`` before the loop, ``keep`` after ``retire``) instead of storing it;
    the ring's ``mma`` stores it during the next tile and the output's ``store_last`` after the loop."""
    if turns not in ("none", "tile", "mma"):
        raise UsageValueError(f"mainloop_schedules: turns must be 'none', 'tile' or 'mma'; got {turns!r}")

    @ts.schedule
    def load_schedule(q: WorkQueue, s: ts.MemoryResource):
        with ts.work_tile_loop(q):
            with ts.domain_loop(0, k_domain, 1):
                s.acquire()
                s.tma_load()
                s.commit()
            q.wait()
            q.get_and_advance_work_tile()
            q.release()

    @ts.schedule
    def idle_schedule(q: WorkQueue):
        with ts.work_tile_loop(q):
            with ts.domain_loop(0, 0, 1):
                pass
            q.wait()
            q.get_and_advance_work_tile()
            q.release()

    @ts.schedule
    def mma_schedule(q: WorkQueue, s: ts.MemoryResource, o: ts.MemoryResource):
        if turns != "none":
            s.start_turns()
        if deferred:
            prev = s.init_previous()
        with ts.work_tile_loop(q):
            acc = s.zero_accumulator()
            if turns == "tile":
                s.take_turn()
            with ts.domain_loop(0, k_domain, 1) as d:
                s.wait()
                if deferred:
                    acc = s.mma(acc, prev)   # stores prev under this tile's second K step's MMAs
                else:
                    acc = s.mma(acc)
                with d.every(1, start=lag):
                    s.release()          # the stage `lag` back: its MMAs retired in wait_group(lag)
            if turns == "tile":
                s.pass_turn()            # the last MMA group is still in flight
            acc = s.retire(acc)
            if deferred:
                prev = s.keep(acc)
            for _ in range(lag):
                s.release()              # the last `lag` stages
            if not deferred:
                o.store(acc)
            q.wait()
            q.get_and_advance_work_tile()
            q.release()
        if deferred:
            o.store_last(prev)
        o.flush()

    return load_schedule, idle_schedule, mma_schedule


@tsjit.kernel
def gemm_program(x_map, y_map, c, c_map, bias, residual, workspace, counters, scale_x, scale_y, M, N, K, batch,
                 alpha: tsjit.Float32, beta: tsjit.Float32,
                 BM: tsjit.Constexpr[int], BN: tsjit.Constexpr[int], STAGES: tsjit.Constexpr[int],
                 X_MAJOR: tsjit.Constexpr[str], Y_MAJOR: tsjit.Constexpr[str], EPILOGUE: tsjit.Constexpr[str],
                 STAGED: tsjit.Constexpr[int], SPLITS: tsjit.Constexpr[int], BATCHED: tsjit.Constexpr[bool],
                 GROUP_M: tsjit.Constexpr[int], FUSED: tsjit.Constexpr[object], X_POLICY: tsjit.Constexpr[str] = "",
                 Y_POLICY: tsjit.Constexpr[str] = "", CLUSTER: tsjit.Constexpr[int] = 1, SHARE: tsjit.Constexpr[str] = "y"):
    """D (M, N) = X (M, K) @ Y (K, N) (per batch when BATCHED), with the fused epilogue FUSED.

    X and Y are BFloat16 / Float16 (K- or MN-major) or Float8E4M3 / Float8E5M2 (K-major only, the
    two fp8 types may mix); a stage then holds 128 K elements instead of 64.  ``scale_x`` /
    ``scale_y``: Float32 dequantization scales read by the epilogue when FUSED says so (one
    element per tensor, or one per row of D / per column of D).

    Launch with ``block = 128 * (1 + BM // 64)`` threads and a persistent grid of at most
    ``ceil(M / BM) * ceil(N / BN) * batch * SPLITS`` CTAs.  ``SPLITS`` (split-K) must be in
    ``1..ceil(K / 64)``; when it is > 1, ``workspace`` holds ``tiles * SPLITS * BM * BN`` Float32
    and ``counters`` ``tiles * BM / 32`` zeroed Int32.  ``X_POLICY`` / ``Y_POLICY``: ``""`` or the L2 eviction
    priority of the operand's TMA loads (``tsjit.tma_load``'s ``cache_policy``: ``"evict_first"`` for an
    operand every CTA reads a different part of, once).

    ``CLUSTER`` 2 (:mod:`tsjit.ops.gemm_cluster`; no split-K): 2-CTA clusters sharing the ``SHARE`` operand
    ("y": vertically adjacent tiles; "x": horizontally adjacent ones, BM = 128), each CTA multicasting its half
    of it; the grid is then a multiple of 2 and the X / Y TensorMap box has ``BM / 2`` / ``BN / 2`` rows.
    """
    groups = BM // 64
    tiles_m = (M + BM - 1) // BM
    tiles_n = (N + BN - 1) // BN
    bk = k_tile_elements(x_map.dtype)
    k_tiles = (K + bk - 1) // bk
    split_count = SPLITS
    SPLIT = SPLITS > 1
    check_cluster(CLUSTER, SHARE, BM, BN, SPLITS, X_MAJOR, Y_MAJOR)
    wq = cluster_queue(tiles_m, tiles_n, batch * split_count, GROUP_M, CLUSTER, SHARE)
    stage_bytes = (BM + BN) * SWIZZLE_BYTES
    cfg = ts.PipelineConfig.create_tma_async_pipeline_cfg(
        STAGES, stage_bytes, ts.CooperativeGroup(ts.Agent.Thread, 1),
        ts.CooperativeGroup(ts.Agent.Thread, groups * 4), advance_on_wait=True,
        cta_layout_vmnk=(1, CLUSTER, 1, 1) if CLUSTER > 1 else None)
    ring = OperandRing(name="xy", pipeline_config=cfg, x_map=x_map, y_map=y_map, block_m=BM, block_n=BN,
                       x_major=X_MAJOR, y_major=Y_MAJOR, batched=BATCHED, split_k=SPLIT, splits=split_count,
                       k_tiles=k_tiles, x_policy=X_POLICY or None, y_policy=Y_POLICY or None, cluster=CLUSTER, share=SHARE)
    out = OutputTile(name="d", c=c, c_map=c_map, block_m=BM, block_n=BN, rows=M, cols=N, fused=FUSED,
                     operands=(bias, residual, c, alpha, beta, scale_x, scale_y), mode=EPILOGUE, batched=BATCHED,
                     staged_columns=STAGED, split_k=SPLIT, splits=split_count, tiles_m=tiles_m, tiles_n=tiles_n,
                     workspace=workspace, counters=counters, work_units=tiles_m * tiles_n * batch * split_count)

    run_cooperative(wq, ring, out, groups, SplitTask.get_domain, SplitTask, splits=split_count, k_tiles=k_tiles)


def run_cooperative(wq, ring, out, groups, k_domain, task_class=ts.Task, deferred=False, **task_attributes):
    """Build and run (at compile time, inside a kernel) the verified TaskManager of the cooperative program:
    ``load`` (warp 0), ``idle`` (warps 1-3) and ``mma`` (``groups`` warpgroups from warp 4) over the queue
    ``wq``, the ring and the output (:func:`mainloop_schedules` with ``deferred``); ``task_class`` and
    ``task_attributes`` (set on ``load`` and ``mma``) give the K domain per tile (:class:`SplitTask`).
    Shared by :func:`gemm_program` and :func:`tsjit.ops.gemm_deferred.gemm_deferred`."""
    load_schedule, idle_schedule, mma_schedule = mainloop_schedules(k_domain, deferred=deferred)
    load = task_class("load", [wq], [ring], warp_idx=0, num_warps=1, schedule=load_schedule(wq, ring),
                      num_registers=LOAD_REGISTERS)
    idle = ts.Task("idle", [wq], [], warp_idx=1, num_warps=3, schedule=idle_schedule(wq),
                   num_registers=LOAD_REGISTERS)
    mma = task_class("mma", [wq, ring], [out], warp_idx=4, num_warps=4 * groups,
                     schedule=mma_schedule(wq, ring, out), num_registers=MMA_REGISTERS)
    for name, value in task_attributes.items():
        setattr(load, name, value)
        setattr(mma, name, value)
    manager = ts.TaskManager([load, idle, mma], {ring: [wq], out: [ring]}, verbose=False)
    manager.setup_resources_and_tasks()
    manager.run()


def threads_per_cta(block_m: int) -> int:
    """Threads per CTA of :func:`gemm_program` for a ``block_m``-row tile."""
    return WARPGROUP * (1 + block_m // 64)


def compile_program(config, *, x_major: str = "K", y_major: str = "K", batched: bool = False, fused=None,
                    in_dtype=tsjit.BFloat16, out_dtype=tsjit.BFloat16, y_dtype=None, target: str = "sm_90a",
                    kernel=None, extra=()):
    """Compile :func:`gemm_program` (or ``kernel``, a kernel with its arguments: the ping-pong
    :func:`tsjit.ops.gemm_pingpong.gemm_pingpong`, with its ``extra`` trailing arguments) for a
    :class:`~tsjit.ops.configs.GemmConfig`
    without a GPU (spec stand-ins for every array), as ``tsjit.ops.matmul`` would launch it; returns
    the :class:`~tsjit.CompiledKernel` (``metadata`` has registers and spill bytes)."""
    lead = (1,) if batched else ()
    y_dtype = in_dtype if y_dtype is None else y_dtype
    bk = k_tile_elements(in_dtype)
    x_box = lead + ((config.load_rows, bk) if x_major == "K" else (bk, BOX))
    y_box = lead + ((config.load_columns, bk) if y_major == "K" else (bk, BOX))
    x = tsjit.tensormap_spec(in_dtype, x_box, swizzle="128B")
    y = tsjit.tensormap_spec(y_dtype, y_box, swizzle="128B")
    box, swizzle = store_box(config.staged_columns)
    c_map = tsjit.tensormap_spec(out_dtype, lead + (64, box), swizzle=swizzle) if config.epilogue == "tma" else x
    c = tsjit.spec(lead + (1024, 1024), out_dtype)
    vector = tsjit.spec((1024,), tsjit.Float32)
    fused = fused if fused is not None else FusedEpilogue()
    residual = tsjit.spec(lead + (1024, 1024), tsjit.BFloat16) if fused.residual else tsjit.spec((1,) * len(c.shape),
                                                                                                 tsjit.Float32)
    bias = tsjit.spec((1024,), tsjit.BFloat16) if fused.bias != "none" else tsjit.spec((1,), tsjit.Float32)
    workspace = vector if config.splits > 1 else tsjit.spec((1,), tsjit.Float32)
    counters = tsjit.spec((1024,), tsjit.Int32) if config.splits > 1 else tsjit.spec((1,), tsjit.Float32)
    scale_x = tsjit.spec((1024,) if fused.scale_rows == "vector" else (1,), tsjit.Float32)
    scale_y = tsjit.spec((1024,) if fused.scale_cols == "vector" else (1,), tsjit.Float32)
    return tsjit.compile(gemm_program if kernel is None else kernel, x, y, c, c_map, bias, residual, workspace, counters, scale_x, scale_y,
                         1, 1, 1, 1,
                         1.0, 0.0, config.block_m, config.block_n, config.stages, x_major, y_major,
                         config.epilogue, config.staged_columns, config.splits, batched, config.group_m, fused,
                         *(extra or cluster_arguments(config)), target=target)
