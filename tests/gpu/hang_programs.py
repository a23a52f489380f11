"""Programs that really hang the GPU, for the TSJIT_DEBUG=1 hang reports (issue 9 §3).

* ``missing_commit``: an AsyncAsync ring whose producer never commits (compiled with
  ``skip_validation=True``, which demotes the checker's deadlock finding to a warning): the
  consumer waits on ``chunks.full[0]`` forever, and the producer on ``chunks.empty[0]`` once the
  ring is full.
* ``short_tma_bytes``: a TmaAsync ring armed for two tiles per stage while the producer's TMA
  copy delivers one: the transaction count of ``smem.full[0]`` never reaches zero.
* ``wrong_block``: the TS TMA copy tutorial (160 threads) launched with 32 threads and
  ``check_launch=False``: the store warps do not exist, so nobody releases a stage.
* ``named_barrier_short``: a plain kernel of 2 warps where only warp 0 reaches
  ``named_barrier_sync(1, 64)``.

Run one in its own process (a trap leaves the CUDA context unusable)::

    TSJIT_DEBUG=1 python tests/gpu/hang_programs.py missing_commit

It prints one JSON line: ``{"case", "error", "message", "seconds"}`` where ``seconds`` is the
time from the launch to the LaunchError.  :func:`compile_case` compiles a case without a GPU.
"""
from __future__ import annotations

import json
import os
import sys
import time

if __name__ == "__main__":  # run as a script: make the repository importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import numpy as np  # noqa: E402

import tsjit  # noqa: E402
from tsjit import ts  # noqa: E402
from tsjit.examples import interpret_bugs, ts_tma_copy  # noqa: E402

CHUNK = 256
BOX = (64, 64)
STAGES = 2


@tsjit.kernel
def missing_commit(x, y, n, CHUNK: tsjit.Constexpr[int]):
    """One producer warp fills a 2-stage ring and never commits; one consumer warp waits (64 threads)."""
    interpret_bugs.build_ring_scale(x, y, n, CHUNK, commit=False)   # no commit: the consumer waits forever


@tsjit.kernel
def short_tma_bytes(src_map, dst, num_tiles, tiles_n, BOX_M: tsjit.Constexpr[int], BOX_N: tsjit.Constexpr[int]):
    """The TS TMA copy, but each stage is armed for two tiles' bytes and receives one (160 threads)."""
    tile_bytes = BOX_M * BOX_N * src_map.dtype.itemsize
    cfg = ts.PipelineConfig.create_tma_async_pipeline_cfg(
        STAGES, 2 * tile_bytes, ts.CooperativeGroup(ts.Agent.Thread, 1),
        ts.CooperativeGroup(ts.Agent.Thread, ts_tma_copy.STORE_WARPS * 32))
    smem = ts_tma_copy.SmemTiles(name="smem", pipeline_config=cfg, src_map=src_map, box_m=BOX_M, box_n=BOX_N,
                                 tiles_n=tiles_n)
    gmem = ts_tma_copy.GmemTiles(name="gmem", dst=dst, smem=smem, first_thread=32)

    @ts.schedule
    def load_schedule(s: ts_tma_copy.SmemTiles):
        with ts.domain_loop(tsjit.block_idx().x, num_tiles, tsjit.grid_dim().x):
            s.acquire()
            s.tma_load()
            s.commit()

    @ts.schedule
    def store_schedule(s: ts_tma_copy.SmemTiles, g: ts_tma_copy.GmemTiles):
        with ts.domain_loop(tsjit.block_idx().x, num_tiles, tsjit.grid_dim().x):
            s.wait()
            stage = s.read()
            g.store(stage)
            s.release()

    load = ts.Task("load", [], [smem], warp_idx=0, num_warps=1, schedule=load_schedule(smem))
    store = ts.Task("store", [smem], [gmem], warp_idx=1, num_warps=ts_tma_copy.STORE_WARPS,
                    schedule=store_schedule(smem, gmem))
    manager = ts.TaskManager([load, store], {gmem: [smem]}, verbose=False, skip_validation=True)
    manager.setup_resources_and_tasks()
    manager.run()


@tsjit.kernel
def named_barrier_short(out):
    """Warp 0 waits at named barrier 1 for 64 threads; warp 1 never arrives (64 threads)."""
    tid = tsjit.thread_idx().x
    out[tid] = 1.0
    if tid < 32:
        tsjit.named_barrier_sync(1, 64)
    out[tid] = 2.0


def kernel_of(case: str):
    """The ``@tsjit.kernel`` that ``case`` launches."""
    kernels = {"missing_commit": missing_commit, "short_tma_bytes": short_tma_bytes,
               "wrong_block": ts_tma_copy.tma_copy_ts, "named_barrier_short": named_barrier_short}
    if case not in kernels:
        raise ValueError(f"unknown case {case!r}; known: {sorted(kernels)}")
    return kernels[case]


def compile_case(case: str, kernel=None, target: str | None = None):
    """Compile ``case`` (or ``kernel``, a fresh Kernel of the same function) without a GPU, with
    stand-in arguments of the launch's shapes; returns the CompiledKernel."""
    kernel = kernel or kernel_of(case)
    if case == "missing_commit":
        args = (np.zeros(4096, np.float32), np.zeros(4096, np.float32), 4096, CHUNK)
    elif case == "named_barrier_short":
        args = (np.zeros(64, np.float32),)
    else:
        spec = tsjit.tensormap_spec(tsjit.Float32, BOX)
        args = (spec, np.zeros((256, 256), np.float32), 16, 4, *BOX) + ((STAGES,) if case == "wrong_block" else ())
    return kernel.compile(*args, target=target)


def _prepare(case: str):
    """(kernel, arguments, launch callable) of ``case`` on the GPU, inputs fresh and random."""
    rng = np.random.default_rng()
    if case == "missing_commit":
        n = 4096
        x = tsjit.to_device(rng.standard_normal(n).astype(np.float32))
        y = tsjit.empty((n,), tsjit.Float32)
        args = (x, y, n, CHUNK)
        return missing_commit, args, lambda: missing_commit[(1,), (64,)](*args)
    if case == "named_barrier_short":
        out = tsjit.empty((64,), tsjit.Float32)
        return named_barrier_short, (out,), lambda: named_barrier_short[(2,), (64,)](out)
    src = tsjit.to_device(rng.standard_normal((256, 256)).astype(np.float32))
    dst = tsjit.empty((256, 256), tsjit.Float32)
    src_map = tsjit.TensorMap(src, BOX)
    if case == "short_tma_bytes":
        args = (src_map, dst, 16, 4, *BOX)
        return short_tma_bytes, args, lambda: short_tma_bytes[(4,), (160,)](*args)
    if case == "wrong_block":
        args = (src_map, dst, 16, 4, *BOX, STAGES)
        kernel = ts_tma_copy.tma_copy_ts
        return kernel, args, lambda: kernel[(4,), (32,)](*args, check_launch=False)
    raise ValueError(f"unknown case {case!r}")


def run_case(case: str) -> dict:
    """Compile ``case`` (not timed), launch it and wait for the error; returns the JSON fields.

    ``seconds`` runs from the launch call to the LaunchError (raised by the synchronization that
    follows the trap); under ``TSJIT_INTERPRET=1`` to the interpreter's InterpretError (its compile,
    in the launch, included)."""
    from tsjit import env
    from tsjit.runtime import driver
    kernel, args, launch = _prepare(case)
    if not env.interpret():
        kernel.compile(*args)  # the launch below finds this build in memory
    start = time.perf_counter()
    try:
        launch()
        if not env.interpret():
            driver.synchronize()
    except (tsjit.LaunchError, tsjit.InterpretError) as exc:   # the GPU's watchdog / the interpreter's report
        return {"case": case, "error": type(exc).__name__, "message": str(exc), "seconds": time.perf_counter() - start}
    return {"case": case, "error": None, "message": "", "seconds": time.perf_counter() - start}


if __name__ == "__main__":
    print(json.dumps(run_case(sys.argv[1])), flush=True)
