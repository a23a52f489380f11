"""The split-K reducer of the library GEMM (:mod:`tsjit.ops.gemm_program`): after its K loop, every split
of a work tile publishes its fp32 partial, and the tile's sums are shared out among the splits, each element
summed in split order 0..S-1 whoever sums it (deterministic: bit-identical run to run), without an unbounded
wait (no deadlock whatever the residency).

Per (tile, warp) of the MMA warpgroups: the warp stores its partial to the workspace in the accumulator's own
register order (``ws[tile][split][register / 4][thread]`` as float4: fully coalesced), fences
(``fence.sc.gpu``) and adds 1 to its counter word (relaxed atomics, GPU scope; the word layout:
:data:`ARRIVALS`, :data:`RESIGNED`, :data:`FINISHED`).  Split ``s`` owns the slice of 8-column chunks
``[s C / S, (s + 1) C / S)`` of the ``C = BN / 8`` (a chunk is registers ``4c .. 4c + 3`` of the wgmma
accumulator, PTX ISA 9.7.15.5.1.1.1).  With fewer than :data:`MIN_SLICED_SPLITS` splits the last split to
arrive sums the whole tile (:func:`sum_tile`) and resets the word; with more:

* the last split to arrive (its add returned ``S - 1`` arrivals) fences and sums its own slice and the slices
  of the splits that its arrival saw resigned (all of them resigned, as in a launch of several waves: the whole
  tile in software-pipelined passes, :func:`sum_tile`);
* another split polls the word (atomic adds of 0: reads at the L2 that the compiler keeps in the loop) for at
  most :data:`SPLIT_WAIT_CYCLES` SM cycles when the launch is one wave (a CTA per work unit, so its siblings
  are running), then fences and sums its slice; if the count is not complete by then (or the launch has
  several waves: no wait), it resigns with an atomic add of its bit, whose old value says whether the last
  split had arrived meanwhile (then it sums its slice after all: the last one did not see the bit);
* every split then adds :data:`FINISHED` once; the one completing that count resets the word to 0 for the next
  launch (all others are done with it).

Why (H200, 2026-12-02/03, BENCHMARKS.md, helpers i15s and i15f): one CTA reading all S partials runs at about
the ~115 GB/s one SM streams from L2 (384 x 384 x 16384, 128 x 64 tiles, split 7: 229 KB, 2 us of a 20.4 us
call); shared out, each of the S SMs reads one S-th.
"""
from __future__ import annotations

import tsjit
from tsjit import wgmma
from tsjit.lang.epilogue import store_fragment_global
from tsjit.lang.fragment import Fragment

WARPGROUP = 128          # threads of a warpgroup; the MMA warpgroups start at thread 128 (after the load warps)

#: The counter word of a (tile, warp): bits 0-4 count the splits that published their partial (mask
#: ``ARRIVALS``), bit ``RESIGNED + s`` says split ``s`` left its slice to the last split, the bits from
#: ``FINISHED`` count the splits done with the word; hence at most ``MAX_SLICED_SPLITS`` splits.
ARRIVALS = 31
RESIGNED = 8
FINISHED = 24
MAX_SLICED_SPLITS = 16
#: fewer splits than this: the last split sums the whole tile, nobody waits (H200, 2026-12-03: split-K 2 at 64 /
#: 256 x 4096 x 14336 and 16 / 1 x 4096 x 14336 0.9-1.8 us slower shared out; split-K 4, 7, 8 0.5-3.1 us faster)
MIN_SLICED_SPLITS = 4
#: SM clock cycles (~10 us at 1.98 GHz) a split that is not the last of its tile polls for the others
#: before it leaves its slice to the last one; only when every work unit has its own CTA (one wave)
SPLIT_WAIT_CYCLES = 20000
SLICE_LOADS = 28         # float4 partials a slice pass keeps in flight per thread (112 registers)
#: probes only (compile-time; tsjit module globals are not in the disk-cache key, so a probe that sets it compiles
#: with ``TSJIT_DISABLE_CACHE=1``): a counter word index ``T`` (the workspace has ``1 << 14`` words); each warp that
#: resigns adds 1 to word ``T``, each last split that sums the whole tile (nobody waited) adds 1 to word ``T - 1``
TALLY_WORD = None
#: the fences of the reducer (``tsjit.threadfence(order=)``): ``"sc"`` (``fence.sc.gpu``) or ``"acq_rel"``
#: (``fence.acq_rel.gpu``: a release before the arrival, an acquire after observing the count, all the protocol needs)
FENCE = "sc"
#: each split adds its :data:`FINISHED` count right after its last use of the counter word (its arrival, or its
#: wait and resignation), before summing, instead of after: the atomic's L2 round trip overlaps the sums
FINISH_EARLY = False


def poll_word(word):
    """The counter word, read at the L2 by an atomic add of 0 (a read the compiler keeps in a wait loop);
    Python run while the kernel compiles."""
    return tsjit.atomic_add(word, 0)


def split_order_sum(partials) -> list:
    """The four element-wise sums of ``partials`` (float4 tuples of splits 0..S-1), added in split order
    (deterministic); Python run while the kernel compiles."""
    total = list(partials[0])
    for values in partials[1:]:
        total = [t + v for t, v in zip(total, values)]
    return total


@tsjit.func
def sum_slice(workspace, first, part, splits, out, fused, operands, batch, row0, col0, rows, cols, tid,
              BM: tsjit.Constexpr[int], BN: tsjit.Constexpr[int]):
    """Sum the partials of slice ``part`` of this warp's rows (8-column chunks ``[part * C // S,
    (part + 1) * C // S)`` of the ``C = BN / 8``) in split order 0..S-1 and store them through the
    fused epilogue."""
    threads = WARPGROUP * (BM // 64)
    chunks = BN // 8
    slots = -(-chunks // splits)                               # the most chunks a slice has
    group = max(1, min(slots, SLICE_LOADS // splits))
    lo = part * chunks // splits
    hi = (part + 1) * chunks // splits
    if lo < hi:                                                # an empty slice when BN / 8 < S
        for g in tsjit.range_constexpr(0, slots, group):
            count = min(group, slots - g)
            loaded = []                                        # [slot * splits + split]: float4 partials
            for k in tsjit.range_constexpr(count):
                c = tsjit.math.min(lo + (g + k), chunks - 1)   # past the slice: re-read the last (not stored)
                for s in tsjit.range_constexpr(splits):
                    loaded.append(workspace.load_vector((first + (s * chunks + c) * threads) * 4, 4))
            for k in tsjit.range_constexpr(count):
                total = wgmma.fence_operand(Fragment(split_order_sum(loaded[k * splits:(k + 1) * splits])))
                column = col0 + (lo + (g + k)) * 8
                if lo + (g + k) < hi:
                    fn = fused.bind(operands, batch, row0, column, rows, cols)
                    store_fragment_global(total, out, row0, column, rows, cols, fn=fn, tid=tid)


def reduction_columns(block_n: int, splits: int) -> int:
    """Columns :func:`sum_tile` sums and stores per pass: the loads of every split of a pass are in flight
    together, so a pass holds ``columns / 2 * splits`` loaded floats per thread (<= 64)."""
    width = 64
    while width > 8 and width * splits > 128:
        width //= 2
    return min(width, block_n)


@tsjit.func
def sum_tile(workspace, first, splits, out, fused, operands, batch, row0, col0, rows, cols, tid,
             BM: tsjit.Constexpr[int], BN: tsjit.Constexpr[int]):
    """Sum every partial of this warp's rows in split order and store them through the fused epilogue,
    :func:`reduction_columns` columns per pass, software-pipelined: pass p + 1's loads are issued before pass p's
    masked stores (whose branches the assembler does not schedule loads across), so the L2 round trips overlap;
    two passes' loads in flight stay within the L1 left beside the ring (H200, 2026-12-02: 256 x 256 x 16384
    15.7 -> 14.9 us; all passes at once measured slower, 17.8).  What the last split does when no other waited."""
    threads = WARPGROUP * (BM // 64)
    chunks = BN // 8
    width = reduction_columns(BN, splits)
    passes = BN // width
    pending = []                                               # [chunk * splits + split]: float4 partials
    for c in tsjit.range_constexpr(width // 8):
        for s in tsjit.range_constexpr(splits):
            pending.append(workspace.load_vector((first + (s * chunks + c) * threads) * 4, 4))
    for part in tsjit.range_constexpr(passes):
        upcoming = []
        if tsjit.const_expr(part + 1 < passes):
            for c in tsjit.range_constexpr((part + 1) * width // 8, (part + 2) * width // 8):
                for s in tsjit.range_constexpr(splits):
                    upcoming.append(workspace.load_vector((first + (s * chunks + c) * threads) * 4, 4))
        total = []
        for c in tsjit.range_constexpr(width // 8):
            total.extend(split_order_sum(pending[c * splits:(c + 1) * splits]))
        total = wgmma.fence_operand(Fragment(total))
        fn = fused.bind(operands, batch, row0, col0 + part * width, rows, cols)
        store_fragment_global(total, out, row0, col0 + part * width, rows, cols, fn=fn, tid=tid)
        pending = upcoming


@tsjit.func
def publish_partial(acc, workspace, tile, split, splits, BM: tsjit.Constexpr[int], BN: tsjit.Constexpr[int]):
    """Store this warp's fp32 partial of split ``split`` of ``tile`` (``ws[tile][split][register / 4][thread]``
    as float4), then fence (``fence.sc.gpu``) and converge the warp."""
    threads = WARPGROUP * (BM // 64)
    thread = tsjit.thread_idx().x - WARPGROUP
    chunks = BN // 8
    own = ((tile * splits + split) * chunks) * threads + thread
    for c in tsjit.range_constexpr(chunks):
        workspace.store_vector((own + c * threads) * 4, (acc[4 * c], acc[4 * c + 1], acc[4 * c + 2], acc[4 * c + 3]))
    tsjit.threadfence(FENCE)
    tsjit.syncwarp()


@tsjit.func
def reduce_split_k(acc, out, workspace, counters, tile, split, splits, units, fused, operands, batch, row0, col0,
                   rows, cols, BM: tsjit.Constexpr[int], BN: tsjit.Constexpr[int]):
    """Split-K: publish this split's partial; the S splits of a tile's warp then sum S slices of its
    columns, each in split order 0..S-1, or the last to arrive sums those of the splits that could not
    wait for it (module docstring).  ``units``: the work units of the launch (one wave when the grid
    has as many CTAs: only then do splits wait)."""
    threads = WARPGROUP * (BM // 64)
    thread = tsjit.thread_idx().x - WARPGROUP                  # 0 .. threads - 1 over the MMA warpgroups
    tid = thread % WARPGROUP
    chunks = BN // 8                                           # float4 chunks per thread
    publish_partial(acc, workspace, tile, split, splits, BM, BN)
    if tsjit.const_expr(splits > MAX_SLICED_SPLITS):
        raise tsjit.CompilationError(f"gemm_program: split-K {splits} is more than {MAX_SLICED_SPLITS} (the "
                                     f"reducer's counter word has {MAX_SLICED_SPLITS} split bits): use fewer splits")
    word = counters.ptr + (tile * (threads // 32) + thread // 32)
    first = (tile * splits * chunks) * threads + thread
    arrived = 0
    if tsjit.lane_idx() == 0:
        arrived = tsjit.atomic_add(word, 1)
    arrived = tsjit.shuffle(arrived, 0)
    if tsjit.const_expr(splits < MIN_SLICED_SPLITS):       # the last split sums the whole tile (measured faster)
        if arrived == splits - 1:
            tsjit.threadfence()
            if tsjit.lane_idx() == 0:
                word.store(0)                                  # ready for the next launch
            sum_tile(workspace, first, splits, out, fused, operands, batch, row0, col0, rows, cols, tid, BM, BN)
    else:
        finished = 0
        if (arrived & ARRIVALS) == splits - 1:
            tsjit.threadfence(FENCE)
            if tsjit.const_expr(FINISH_EARLY):                     # done with the word already
                if tsjit.lane_idx() == 0:
                    finished = tsjit.atomic_add(word, 1 << FINISHED)
            everyone = (1 << splits) - 1
            if ((arrived >> RESIGNED) & everyone) == (everyone ^ (1 << split)):   # no split waited: the whole tile
                if tsjit.const_expr(TALLY_WORD is not None):
                    if tsjit.lane_idx() == 0:
                        tsjit.atomic_add(counters.ptr + (TALLY_WORD - 1), 1)
                sum_tile(workspace, first, splits, out, fused, operands, batch, row0, col0, rows, cols, tid, BM, BN)
            else:
                for part in range(splits):                         # its own slice and those of splits that left
                    if (part == split) | (((arrived >> (RESIGNED + part)) & 1) == 1):
                        sum_slice(workspace, first, part, splits, out, fused, operands, batch, row0, col0, rows, cols,
                                  tid, BM, BN)
        else:
            seen = 0
            if tsjit.lane_idx() == 0:
                value = arrived + 1                                # the count with this split's arrival
                if tsjit.const_expr(SPLIT_WAIT_CYCLES > 0):
                    if (tsjit.grid_dim().x >= units) & (split * chunks // splits < (split + 1) * chunks // splits):
                        start = tsjit.clock64()
                        waiting = (value & ARRIVALS) < splits
                        while waiting:
                            value = poll_word(word)
                            waiting = ((value & ARRIVALS) < splits) & (tsjit.clock64() - start < SPLIT_WAIT_CYCLES)
                seen = value & ARRIVALS
                if seen < splits:                                  # leave the slice to the last split, unless it
                    seen = tsjit.atomic_add(word, 1 << (RESIGNED + split)) & ARRIVALS   # has arrived meanwhile
                    if tsjit.const_expr(TALLY_WORD is not None):
                        tsjit.atomic_add(counters.ptr + TALLY_WORD, 1)
                if tsjit.const_expr(FINISH_EARLY):                 # done with the word: its last access
                    finished = tsjit.atomic_add(word, 1 << FINISHED)
            seen = tsjit.shuffle(seen, 0)
            if seen == splits:
                tsjit.threadfence(FENCE)
                sum_slice(workspace, first, split, splits, out, fused, operands, batch, row0, col0, rows, cols, tid,
                          BM, BN)
        if tsjit.lane_idx() == 0:                                  # done with the word; the last one resets it
            if tsjit.const_expr(not FINISH_EARLY):
                finished = tsjit.atomic_add(word, 1 << FINISHED)
            if (finished >> FINISHED) == splits - 1:
                word.store(0)

