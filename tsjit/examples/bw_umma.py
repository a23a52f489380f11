"""The UMMA accumulator of the ported Blackwell tutorials (8, 9, 11, 12, 13): a TMEM resource whose
producer work issues one K tile's ``tcgen05.mma`` from the operand ring stage the MMA warp waited on.

:class:`UmmaAccumulator` holds ``num_stages`` accumulators of ``128 x block_n`` fp32 in tensor
memory (``block_n`` columns each: a one-stage ring for a non-persistent kernel, two stages to let
the epilogue of one tile overlap the MMAs of the next).  Its producer is the MMA warp (UmmaAsync:
``acc.commit`` is a ``tcgen05.commit`` to the stage's full barrier), its consumer an epilogue
warpgroup that reads the accumulator with ``tcgen05.ld`` (:meth:`UmmaAccumulator.view`).

The operands come from ``operands.umma_tiles(stage)``: the 128 x 64 A tile and the ``block_n`` x 64
B tile of ring stage ``stage`` (bf16, K-major, 128-byte swizzled: what a TMA box with
``SWIZZLE_128B`` writes), so one accumulator serves a single TMA ring, a Merge group of two rings,
or the primary member of a Fork.  Each K tile is four MMAs of K = 16 (PTX ISA 9.1 §9.7.16.10.9.1,
kind::f16, M = 128, ``enable_input_d`` false on the first of a tile's K loop).
"""
from __future__ import annotations

from dataclasses import dataclass

import tsjit
from tsjit import tcgen05, ts

BM, BK, MMA_K = 128, 64, 16


@dataclass(kw_only=True)
class UmmaAccumulator(ts.MemoryResource):
    """``num_stages`` 128 x ``block_n`` fp32 UMMA accumulators in TMEM (``block_n x num_stages``
    columns, at most 512).

    Args:
        operands: the resource whose ``umma_tiles(stage)`` returns ``(a_tile, b_tile)`` of a ring
            stage (shared-memory tensors, 128B-swizzled, K-major bf16).
        block_n: N of the MMA (a multiple of 16, 16..256).
    """

    operands: object
    block_n: int
    tmem: object = None
    stage: ts.TaskLocalVariable = ts.TaskLocalVariable.uninitialized()

    def __post_init__(self):
        self.tmem = ts.TmemAllocation(self.name, self.block_n * self.pipeline_config.num_stages)
        self.stage = ts.TaskLocalVariable(tsjit.Int32, default=0, docs="the accumulator stage the epilogue reads")

    def get_tmem_requirements(self):
        return [self.tmem]

    def address(self, stage_info, stage):
        """The TMEM address of accumulator ``stage`` (lane 0, its first column)."""
        return stage_info.context.tmem_ptr_i32 + self.tmem.offset + stage * self.block_n

    def view(self, stage_info, stage=0):
        """Accumulator ``stage`` as a :class:`tsjit.tcgen05.AccumulatorView` (one row per epilogue thread)."""
        return tcgen05.accumulator(self.address(stage_info, stage), columns=self.block_n)

    @ts.consumer_work(returns="stage")
    def read(self, stage_info):
        """The accumulator stage the epilogue waited on (routed to the work that reads it)."""
        return stage_info.stage_idx

    @ts.producer_work()
    def mma(self, stage_info, stage):
        """One thread issues the K tile's four MMAs (the operands of ring stage ``stage``) into this
        accumulator stage; the tile's first K tile overwrites it."""
        d = self.address(stage_info, stage_info.stage_idx)
        if tsjit.elect_one():
            a_tile, b_tile = self.operands.umma_tiles(stage)
            a_desc = tcgen05.make_smem_descriptor(a_tile)
            b_desc = tcgen05.make_smem_descriptor(b_tile)
            for kk in tsjit.range_constexpr(BK // MMA_K):
                tcgen05.mma(d, a_desc.k_step(kk), b_desc.k_step(kk), m=BM, n=self.block_n,
                            accumulate=(stage_info.loop_offset > 0) | (kk > 0))


@dataclass(kw_only=True)
class StoredAccumulator(UmmaAccumulator):
    """An :class:`UmmaAccumulator` whose consumer (the epilogue warpgroup) writes the accumulator stage
    it waited on to ``c`` at the current work tile (persistent kernels: ``stage_info.work_tile``),
    through ``fn(value, row, col)`` when given (ReLU, ...), bounds-masked, converted to C's dtype."""

    c: object
    fn: object = None

    @ts.consumer_work()
    def store(self, stage_info):
        m, n, _ = stage_info.work_tile.coords
        self.view(stage_info, stage_info.stage_idx).store_global(self.c, m * BM, n * self.block_n, chunk=32,
                                                                 fn=self.fn)


def relu(value, row, col):
    """``max(value, 0)``: the tutorials' activation, as an epilogue ``fn(value, row, col)``."""
    return tsjit.math.max(value, 0.0)
