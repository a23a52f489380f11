"""The Hopper GEMM tutorial (tsjit/examples/gemm.py) with a planted consumer bug, for the interpreter's
sensitivity tests: the consumer's MMA work releases its stage before the MMAs that read it retired."""
import numpy as np

import tsjit
from tsjit import ts, wgmma
from tsjit.examples import gemm
from tsjit.ops import gemm_program
from tsjit.runtime.arrays import bfloat16_bits_to_float32
from tsjit.ts import task_manager


def plant_early_release(monkeypatch, keep):
    """Patch the GEMM's consumer ``mma`` work: ``keep=None`` drops its ``wgmma.wait_group(1)``; an int
    waits with ``wait_group(keep)`` (2: one group too many may be in flight when the ring releases the
    previous stage).  The TaskManager's checker would refuse the program: ``skip_validation=True``."""
    @ts.consumer_work(returns="acc")
    def planted_mma(self, stage_info, acc):
        x_tile, x_major, y_tile, y_major = self.operand_tiles(stage_info.stage_idx, tsjit.warp_idx() // 4 - 1)
        x_desc = wgmma.make_descriptor(x_tile, major=x_major, swizzle="128B")
        y_desc = wgmma.make_descriptor(y_tile, major=y_major, swizzle="128B")
        wgmma.fence()
        for k in tsjit.range_constexpr(gemm_program.K_STEPS):
            acc = wgmma.mma_async(acc, x_desc.k_step(k), y_desc.k_step(k), n=self.block_n)
        wgmma.commit_group()
        if tsjit.const_expr(keep is not None):
            wgmma.wait_group(keep)   # the planted bug: the stage released next may still be read
        return acc

    original_init = task_manager.TaskManager.__init__

    def unchecked(self, *args, **keywords):
        original_init(self, *args, **{**keywords, "skip_validation": True})
    monkeypatch.setattr(gemm.ABStages, "mma", planted_mma)
    monkeypatch.setattr(task_manager.TaskManager, "__init__", unchecked)


def gemm_error(group_m: int) -> float:
    """Relative Frobenius error of C (128 x 256) = A (128 x 512) B^T by ``gemm.gemm_ts`` (3 stages, one CTA) on
    fresh bf16 inputs, NaNs counted as 1e6; ``group_m`` only separates specializations."""
    rng = np.random.default_rng()
    a = gemm.bf16_round(rng.standard_normal((128, 512)).astype(np.float32))
    b = gemm.bf16_round(rng.standard_normal((256, 512)).astype(np.float32))
    c = tsjit.empty((128, 256), tsjit.BFloat16).fill_bytes(0xFF)
    a_map = tsjit.TensorMap(tsjit.to_device(a, tsjit.BFloat16), (gemm.BM, gemm.BK), swizzle="128B")
    b_map = tsjit.TensorMap(tsjit.to_device(b, tsjit.BFloat16), (256, gemm.BK), swizzle="128B")
    c_map = tsjit.TensorMap(c, (64, 64), swizzle="128B")
    gemm.gemm_ts[(1,), (gemm.THREADS,)](a_map, b_map, c, c_map, 128, 256, 512, 256, 3, group_m, 1, "tma", "K")
    ref = a.astype(np.float64) @ b.astype(np.float64).T
    got = bfloat16_bits_to_float32(c.numpy()).astype(np.float64)
    return float(np.linalg.norm(np.nan_to_num(got, nan=1e6) - ref) / np.linalg.norm(ref))
