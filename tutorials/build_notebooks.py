"""Writes the tutorial notebooks from the cell texts below (``python tutorials/build_notebooks.py``).

Each notebook compiles and verifies its kernel on any machine; on a machine with an NVIDIA GPU
it also launches it on fresh random data with a poisoned output and checks it against numpy.
Without a GPU, notebooks 01-07 run the same checks at small sizes on the CPU interpreter
(``cpu_interpreter()`` in ``INTERPRETER_SETUP``: ``TSJIT_INTERPRET=1`` around the launches).
The notebooks are executed by ``tests/test_tutorials.py`` (CPU) and by hand on the H200.
"""
from __future__ import annotations

import os

import nbformat

from notebook_source import source_cell

HERE = os.path.dirname(os.path.abspath(__file__))

SETUP = """import numpy as np
import tsjit
GPU = tsjit.gpu_available()
print("GPU present:", GPU)"""

#: SETUP for the notebooks whose launches also run on the CPU interpreter without a GPU
INTERPRETER_SETUP = """import contextlib, os
""" + SETUP + """

@contextlib.contextmanager
def cpu_interpreter():
    \"\"\"Launches inside this block run on tsjit's CPU interpreter (TSJIT_INTERPRET=1): no GPU needed.\"\"\"
    before = os.environ.get("TSJIT_INTERPRET")
    os.environ["TSJIT_INTERPRET"] = "1"
    try:
        yield
    finally:
        if before is None:
            del os.environ["TSJIT_INTERPRET"]
        else:
            os.environ["TSJIT_INTERPRET"] = before"""

#: the launch cell's ending for a machine without a GPU, after the small-size checks under cpu_interpreter()
INTERPRETED_AT_SMALL_SIZES = "no GPU: ran on the CPU interpreter (TSJIT_INTERPRET=1) at small sizes: "
INTERPRETED = f"    print('{INTERPRETED_AT_SMALL_SIZES}exact')"

#: the device of a launch cell that runs on the GPU or, without one, on the CPU interpreter at small sizes
ON_GPU_OR_INTERPRETER = "contextlib.nullcontext() if GPU else cpu_interpreter()"

CHECKER_SETUP = """import warnings
# The five programs live in tsjit.examples.checker_mistakes (shown below): build(False) gives the broken
# program, build(True) its corrected twin. They are Task Scheduling programs built on the host: the TaskManager
# checks them when it is constructed, so no kernel is compiled and no GPU is needed.
from tsjit.examples.checker_mistakes import MISTAKES
from tsjit.errors import VerificationError
from tsjit.ts import ScheduleWarning, TaskManager
warnings.simplefilter("ignore", ScheduleWarning)

def show(name):
    \"\"\"Print the broken program's schedules and the checker's message, then verify the corrected twin.\"\"\"
    mistake, build = MISTAKES[name]
    print("The mistake:", mistake)
    tasks, graph, options = build(False)
    for task in tasks:
        print(f"  {task.label}: " + "; ".join(step.display_call for step in task.schedule.steps))
    try:
        TaskManager(tasks, graph, verbose=False, **options)
        raise AssertionError("the checker accepted a broken program")
    except VerificationError as err:
        print()
        print(err)
    tasks, graph, options = build(True)
    print()
    print("The corrected program:", TaskManager(tasks, graph, verbose=False, **options).exhaustive_result.verdict)"""

NOTEBOOKS = {
    "01_copy_grid_stride.ipynb": [
        ("md", "# Tutorial 1: the grid-stride copy as a Task Scheduling program\n\n"
               "Two resources without a pipeline: `GmemSource` (its consumer work `load` returns the task-local "
               "`item`) and `GmemDest` (its producer work `store` receives it). One task of `WARPS` warps runs "
               "`domain_loop(start, num_entries, stride)`. The TaskManager checks the program when the kernel "
               "compiles, then lowers it to a warp-range branch and one loop — the same loop a hand-written "
               "kernel has (`copy_plain`)."),
        ("code", INTERPRETER_SETUP),
        ("code", "from tsjit.examples import ts_copy"),
        ("source", "tsjit.examples.ts_copy: GmemSource, GmemDest, copy_ts.fn"),
        ("md", "Compile for sm_90a (works without a GPU: numpy arrays stand in for device arrays) and compare the "
               "loop with the plain kernel's."),
        ("code", "i16 = np.zeros(1024, np.int16)\n"
                 "ts_kernel = tsjit.compile(ts_copy.copy_ts, i16, i16, 1024, 4)\n"
                 "plain = tsjit.compile(ts_copy.copy_plain, i16, i16, 1024, 4)\n"
                 "body = lambda ptx: [l for l in ptx.splitlines() if 'ld.global' in l or 'st.global' in l]\n"
                 "print(body(ts_kernel.ptx)); print(body(plain.ptx))\n"
                 "print('registers', ts_kernel.metadata['registers'], plain.metadata['registers'])"),
        ("md", "On a GPU: 2^24 Int16 elements, several grids and warp counts, `num_entries` of 0 and not a "
               "multiple of the thread count; results must be exact. Without a GPU the same checks run at small "
               "sizes on the CPU interpreter (`cpu_interpreter()` above sets `TSJIT_INTERPRET=1`)."),
        ("code", "if GPU:\n"
                 "    for n, blocks, warps in [(1 << 24, 1056, 4), (1 << 24, 7, 1), (1_000_003, 77, 3), (0, 16, 4)]:\n"
                 "        got, expected = ts_copy.run_copy_ts(n, blocks, warps)\n"
                 "        assert np.array_equal(got, expected), (n, blocks, warps)\n"
                 "    print('all copies exact')\n"
                 "else:\n"
                 "    with cpu_interpreter():\n"
                 "        for n, blocks, warps in [(5000, 3, 4), (1001, 2, 3), (0, 2, 1)]:\n"
                 "            got, expected = ts_copy.run_copy_ts(n, blocks, warps)\n"
                 "            assert np.array_equal(got, expected), (n, blocks, warps)\n"
                 + INTERPRETED),
    ],
    "02_tma_copy.ipynb": [
        ("md", "# Tutorial 2: a 2-D copy through shared memory with TMA and a TmaAsync ring\n\n"
               "One TMA-load warp fills a ring of shared-memory tiles (`try_acquire`, `acquire`, TMA copy signalling "
               "the stage's full barrier, `commit`); four store warps `try_wait`/`wait`, write the tile out with "
               "bounds masks and `release`. Shapes need not be multiples of the tile."),
        ("code", INTERPRETER_SETUP),
        ("code", "from tsjit.examples import ts_tma_copy"),
        ("source", "tsjit.examples.ts_tma_copy: SmemTiles, GmemTiles"),
        ("md", "The kernel builds the two resources, one schedule per task, the two tasks and the TaskManager:"),
        ("source", "tsjit.examples.ts_tma_copy: tma_copy_ts.fn"),
        ("md", "Compile it for sm_90a and look at the TMA copies and the `expect_tx` that arms each stage:"),
        ("code", "spec = tsjit.tensormap_spec(tsjit.Float32, (64, 64))\n"
                 "c = tsjit.compile(ts_tma_copy.tma_copy_ts, spec, np.zeros((256, 256), np.float32), 16, 4, 64, 64, 4)\n"
                 "print('\\n'.join(l for l in c.ptx.splitlines() if 'cp.async.bulk' in l or 'expect_tx' in l))"),
        ("code", "if GPU:\n"
                 "    for shape, box, stages in [((1000, 780), (64, 64), 4), ((257, 132), (32, 32), 3), "
                 "((64, 64), (64, 64), 1)]:\n"
                 "        got, expected = ts_tma_copy.run_tma_copy_ts(*shape, box=box, stages=stages)\n"
                 "        assert np.array_equal(got, expected)\n"
                 "    print('exact')\n"
                 "else:\n"
                 "    with cpu_interpreter():\n"
                 "        for shape, box, stages in [((100, 68), (32, 32), 3), ((64, 64), (64, 64), 1)]:\n"
                 "            got, expected = ts_tma_copy.run_tma_copy_ts(*shape, box=box, stages=stages, blocks=4)\n"
                 "            assert np.array_equal(got, expected)\n"
                 + INTERPRETED),
    ],
    "03_persistent_copy.ipynb": [
        ("md", "# Tutorial 3: a static persistent copy with over-launched tiles skipped\n\n"
               "A `WorkQueue` hands each CTA the tiles `b, b + gridDim.x, ...` of a tile grid deliberately larger "
               "than the data. `skip_if` marks the tiles past the end and `wtl.skippable()` omits their copy, "
               "while the queue epilogue (`wait`, `get_and_advance_work_tile`, `release`) still runs for every "
               "tile, so every CTA terminates."),
        ("code", INTERPRETER_SETUP),
        ("code", "from tsjit.examples import ts_persistent"),
        ("source", "tsjit.examples.ts_persistent: TileSource, TileDest, persistent_copy.fn"),
        ("code", "c = tsjit.compile(ts_persistent.persistent_copy, np.zeros(64, np.float32), np.zeros(64, np.float32), "
                 "40, 64, 2048, 4)\nprint('registers', c.metadata['registers'])"),
        ("code", "if GPU:\n"
                 "    for n, extra, blocks in [(1 << 22, 37, 40), (1_000_001, 5, 132), (0, 3, 2)]:\n"
                 "        got, src, padding = ts_persistent.run_persistent_copy(n, extra_tiles=extra, blocks=blocks)\n"
                 "        assert np.array_equal(got, src)\n"
                 "    print('exact')\n"
                 "else:\n"
                 "    with cpu_interpreter():\n"
                 "        for n, extra, blocks in [(10_001, 5, 3), (0, 3, 2)]:\n"
                 "            got, src, padding = ts_persistent.run_persistent_copy(n, extra_tiles=extra, blocks=blocks)\n"
                 "            assert np.array_equal(got, src)\n"
                 + INTERPRETED),
    ],
    "04_varlen_and_pdl.ipynb": [
        ("md", "# Tutorial 4: per-tile dynamic domains, and two kernels chained with PDL\n\n"
               "Variable-length segments of a packed array are copied into the rows of a padded matrix: the domain "
               "loop of each tile (one row) ends at that row's length, given by `Task.get_domain`. Then two TS "
               "kernels are chained with programmatic dependent launch: the second waits on the first's output "
               "(`PdlWaitBarrier.wait_griddep` before its first read, check PDL1)."),
        ("code", INTERPRETER_SETUP),
        ("source", "tsjit.examples.ts_persistent: VarlenTask, varlen_copy.fn"),
        ("source", "tsjit.examples.ts_pdl: scale_producer.fn, scale_consumer.fn"),
        ("code", "from tsjit.examples import ts_persistent, ts_pdl\n"
                 "c = tsjit.compile(ts_persistent.varlen_copy, np.zeros(64, np.float32), np.zeros(9, np.int32), "
                 "np.zeros((8, 64), np.float32), 8, 4)\nprint('varlen registers', c.metadata['registers'])\n"
                 "for k in (ts_pdl.scale_producer, ts_pdl.scale_consumer):\n"
                 "    ptx = tsjit.compile(k, np.zeros(64, np.float32), np.zeros(64, np.float32), 64, 4).ptx\n"
                 "    print(k.__name__, [l.strip() for l in ptx.splitlines() if 'griddepcontrol' in l])"),
        ("code", "if GPU:\n"
                 "    got, expected = ts_persistent.run_varlen_copy(300, 1000, 64)\n"
                 "    filled = ~np.isnan(expected)\n"
                 "    assert np.array_equal(got[filled], expected[filled])\n"
                 "    got, ref = ts_pdl.run_pdl_chain()\n"
                 "    assert np.allclose(got, ref, rtol=1e-6)\n"
                 "    print('exact')\n"
                 "else:\n"
                 "    with cpu_interpreter():\n"
                 "        got, expected = ts_persistent.run_varlen_copy(6, 100, 3)\n"
                 "        filled = ~np.isnan(expected)\n"
                 "        assert np.array_equal(got[filled], expected[filled])\n"
                 "        got, ref = ts_pdl.run_pdl_chain(5000, 3, 2)\n"
                 "        assert np.allclose(got, ref, rtol=1e-6)\n"
                 + INTERPRETED),
    ],
    "05_hopper_gemm.ipynb": [
        ("md", "# Tutorial 5: a Hopper GEMM in Task Scheduling\n\n"
               "C = A @ B^T in bf16 with fp32 accumulation, 128 x 256 output tiles, K in steps of 64.\n\n"
               "* **Warps.** Warpgroup 0 holds the `load` task (warp 0: TMA loads) and the `idle` task (warps 1-3). "
               "`setmaxnreg` works per warpgroup, so all four warps of warpgroup 0 must agree on a register count "
               "(40): the idle warps exist only to complete the warpgroup (check W1 insists). Warpgroups 1 and 2 "
               "are the `mma` task, which raises its register budget with `setmaxnreg` (the compile cell below reads "
               "both counts from the PTX); each owns 64 rows of the tile.\n"
               "* **Ring.** `ABStages` is a TmaAsync pipeline of 3-4 stages of 128B-swizzled A and B tiles. The "
               "load task `acquire`s a stage, issues the two TMA copies (they signal the stage's full barrier with "
               "`expect_tx` bytes) and `commit`s.\n"
               "* **MMA.** Per K tile the mma task `wait`s, issues four `wgmma.mma_async` m64n256k16 into the "
               "register accumulator, `commit_group`s and `wait_group(1)`s: the previous stage's MMAs are then done, "
               "so `with d.every(1, start=1): s.release()` releases that stage one iteration late "
               "(`advance_on_wait` keeps the lagging release cursor). After the K loop, `retire` waits for the last "
               "group and the last stage is released.\n"
               "* **Persistent tiles.** A static `WorkQueue` walks the tiles in grouped (L2-friendly) order; every "
               "task ends each tile with the queue epilogue `q.wait()`, `q.get_and_advance_work_tile()`, "
               "`q.release()` (check Q1), so all tasks stay on the same tile.\n"
               "* **Epilogue.** `OutputC.store` converts the accumulator to bf16 with `stmatrix` into a swizzled "
               "staging buffer and issues TMA stores, which drain while the next tile's MMAs run."),
        ("code", INTERPRETER_SETUP),
        ("code", "from tsjit.examples import gemm\n"
                 "print('BM, BK =', gemm.BM, gemm.BK, '; consumer warpgroups =', gemm.CONSUMER_WARPGROUPS)"),
        ("source", "tsjit.examples.gemm: ABStages, OutputC.store, gemm_ts.fn"),
        ("code", "import re\n"
                 "a = tsjit.tensormap_spec(tsjit.BFloat16, (gemm.BM, gemm.BK), swizzle='128B')\n"
                 "b = tsjit.tensormap_spec(tsjit.BFloat16, (256, gemm.BK), swizzle='128B')\n"
                 "c_map = tsjit.tensormap_spec(tsjit.BFloat16, (64, 64), swizzle='128B')\n"
                 "k = tsjit.compile(gemm.gemm_ts, a, b, tsjit.spec((4096, 4096), tsjit.BFloat16), c_map, 4096, 4096, "
                 "4096, BN=256, STAGES=3, GROUP_M=8, CLUSTER_M=1, EPILOGUE='tma')\n"
                 "print({key: k.metadata[key] for key in ('registers', 'spill_stores_bytes', 'smem_bytes')})\n"
                 "print(sorted(set(re.findall(r'(wgmma\\.[\\w.]+|setmaxnreg\\.\\w+|stmatrix\\.[\\w.]+)', k.ptx))))\n"
                 "budgets = {kind: int(n) for kind, n in re.findall(r'setmaxnreg\\.(inc|dec)\\.sync\\.aligned\\.u32\\s+(\\d+)', k.ptx)}\n"
                 "print(f\"ptxas allocates {k.metadata['registers']} registers per thread for the whole kernel \"\n"
                 "      f\"(metadata['registers'], the count at launch); at run time setmaxnreg lowers the load \"\n"
                 "      f\"warpgroup to {budgets['dec']} and raises the mma warpgroups to {budgets['inc']}\")"),
        ("code", "shapes = [(128, 128, 128), (1000, 1000, 1000), (257, 511, 136)] if GPU else [(130, 260, 72)]\n"
                 f"with {ON_GPU_OR_INTERPRETER}:\n"
                 "    for shape in shapes:\n"
                 "        got, ref = gemm.run_gemm(*shape)\n"
                 "        err = np.linalg.norm(got - ref) / np.linalg.norm(ref)\n"
                 "        assert err < 1e-2, (shape, err)\n"
                 f"print('' if GPU else '{INTERPRETED_AT_SMALL_SIZES}', 'relative errors below 1e-2', sep='')"),
    ],
    "06_async_pipelines.ipynb": [
        ("md", "# Tutorial 6: AsyncAsync ping-pong and an interleaved ring\n\n"
               "Warpgroup 0 produces chunks into shared memory with ordinary stores, warpgroup 1 consumes them "
               "(a 2-stage ring: ping-pong). The interleaved variant shares a 4-stage ring between two warp lanes "
               "with `interleave_stride=2`: lane k uses stages k, k+2, ..."),
        ("code", INTERPRETER_SETUP),
        ("code", "from tsjit.examples import ts_async"),
        ("source", "tsjit.examples.ts_async: StagedChunks, ScaledOutput"),
        ("md", "Both kernels share one builder: the AsyncAsync ring (`create_async_async_pipeline_cfg`, its "
               "producer and consumer groups counting every thread of each side), the two schedules, the tasks "
               "and the TaskManager. `interleave_stride` is the only difference between them."),
        ("source", "tsjit.examples.ts_async: _build, pingpong_scale.fn, interleaved_scale.fn"),
        ("code", "for k in (ts_async.pingpong_scale, ts_async.interleaved_scale):\n"
                 "    c = tsjit.compile(k, np.zeros(64, np.float32), np.zeros(64, np.float32), 64, 1024)\n"
                 "    print(k.__name__, 'smem', c.metadata['smem_bytes'], 'registers', c.metadata['registers'])"),
        ("code", "if GPU:\n"
                 "    for kind in ('pingpong', 'interleaved'):\n"
                 "        got, ref = ts_async.run_async(kind, 1_000_001, 7)\n"
                 "        assert np.array_equal(got, ref.astype(np.float32)), kind\n"
                 "    print('exact')\n"
                 "else:\n"
                 "    with cpu_interpreter():\n"
                 "        for kind in ('pingpong', 'interleaved'):\n"
                 "            got, ref = ts_async.run_async(kind, 5001, 3)\n"
                 "            assert np.array_equal(got, ref.astype(np.float32)), kind\n"
                 + INTERPRETED),
    ],
    "07_library_gemm.ipynb": [
        ("md", "# Tutorial 7: from the tutorial GEMM to a library GEMM (`tsjit.ops.matmul`)\n\n"
               "Tutorial 5's program is fast on large square products and slow everywhere else: a 128 x 256 tile "
               "with no split of K leaves most of the 132 SMs idle when M x N is small. The library program "
               "(`tsjit/ops/gemm_program.py`) keeps its three schedules and MMA works (they are shared: "
               "`mainloop_schedules`, `WarpgroupMmaRing`) and generalizes the resources around them:\n\n"
               "* **Roles and layouts.** It computes `D = X @ Y`; `matmul(a, b)` passes `X = A, Y = B`, or for "
               "M <= 64 *swaps* them (`C^T = B^T A^T`), so the few rows of A become the narrow wgmma N dimension "
               "(m64n16 instead of 48 wasted rows of m64). Each operand is read in place through a K-major or an "
               "MN-major (transposed wgmma) TMA descriptor; only rows TMA cannot address are staged.\n"
               "* **Tiles.** 128 or 64 rows (two or one consumer warpgroups), 16..256 columns, 3-8 stages.\n"
               "* **Split-K, deterministic.** The queue's third tile coordinate is the split; each split's K "
               "domain comes from `SplitTask.get_domain`. Every warp writes its fp32 partial to a workspace in "
               "register order (coalesced float4), fences, and counts itself in on a per-warp counter word; then "
               "each split sums a slice of the tile's columns (in a one-wave launch it waits, bounded, for the "
               "others; the last split sums the slices of those that stopped waiting), every element in split "
               "order 0..S-1 (`tsjit.ops.gemm_splitk`): bit-identical results, no unbounded wait.\n"
               "* **Epilogue hook.** `FusedEpilogue` (bias per row/column, relu / gelu-tanh / silu, residual, "
               "alpha / beta, a user `@tsjit.func`) runs on each fp32 accumulator before the store.\n\n"
               "* **fp8.** e4m3 / e5m2 operands (torch `float8_e4m3fn` / `float8_e5m2`, or tsjit "
               "`Float8E4M3` / `Float8E5M2` arrays) with `scale_a` / `scale_b` per tensor or per row / column, bf16 "
               "or fp32 out. A stage then holds 128 K elements (still one 128-byte swizzle row) and the MMA is "
               "`m64nNk32.e4m3.e4m3`; fp8 wgmma reads only K-major operands, so pass `a` row-major and `b = w.t()`.\n\n"
               "`tsjit.ops.configs` picks the configuration per shape with a cost model fitted to H200 timings; "
               "`TSJIT_AUTOTUNE=1` measures the model's best four on the first call of each shape bucket and keeps "
               "the winner in the disk cache. `tsjit.ops.matmul.explain(a, b)` returns the choice and why as text."),
        ("code", INTERPRETER_SETUP),
        ("code", "from tsjit.ops import configs\n"
                 "for M, N, K in [(16, 4096, 4096), (512, 512, 8192), (4096, 4096, 4096)]:\n"
                 "    swapped = configs.choose_roles(M, N)\n"
                 "    P, Q = (N, M) if swapped else (M, N)\n"
                 "    problem = configs.Problem(P, Q, K, tma_output=not swapped)\n"
                 "    config, ranked = configs.choose(problem)\n"
                 "    print(f'--- {M} x {N} x {K}')\n"
                 "    print(configs.explain_choice(problem, swapped, config, ranked))"),
        ("md", "The split-K program: the partials go out as 16-byte `st.global.v4`, the counter is an `atom.add` "
               "between two `fence.sc.gpu`, and the reduction reads every split's partial."),
        ("code", "from tsjit.ops.gemm_program import compile_program\n"
                 "split = compile_program(configs.GemmConfig(128, 64, 8, 'direct', 64, 4))\n"
                 "lines = [l.strip() for l in split.ptx.splitlines()]\n"
                 "print([l for l in lines if l.startswith(('atom.', 'fence.sc'))][:3])\n"
                 "print('v4 stores', sum(l.startswith('st.global.v4.b32') for l in lines), '; v4 loads', "
                 "sum(l.startswith('ld.global.v4.b32') for l in lines))\n"
                 "print({key: split.metadata[key] for key in ('registers', 'spill_stores_bytes', 'smem_bytes')})"),
        ("md", "The epilogue hook: a `@tsjit.func` of (value, row, col) in the output's global coordinates, after "
               "a column bias and GELU; compiled without spills."),
        ("code", "from tsjit.lang.epilogue import FusedEpilogue\n\n"
                 "@tsjit.func\n"
                 "def clamp_lower_triangle(y, row, col):\n"
                 "    return tsjit.select(col <= row, tsjit.math.min(y, 4.0), y)\n\n"
                 "fused = FusedEpilogue(bias='col', activation='gelu_tanh', function=clamp_lower_triangle)\n"
                 "print(fused.describe())\n"
                 "k = compile_program(configs.GemmConfig(128, 256, 3, 'tma', 256, 1), fused=fused)\n"
                 "print({key: k.metadata[key] for key in ('registers', 'spill_stores_bytes', 'spill_loads_bytes')})"),
        ("md", "fp8: the same program with e4m3 tiles. The scales are applied in the epilogue, a per-tensor scale "
               "loaded once per tile; the stage is 128 K elements wide."),
        ("code", "e4m3 = compile_program(configs.GemmConfig(128, 256, 4, 'tma', 128, 1, block_k=128),\n"
                 "                       in_dtype=tsjit.Float8E4M3,\n"
                 "                       fused=FusedEpilogue(scale_rows='tensor', scale_cols='vector'))\n"
                 "print(sorted({l.split()[0] for l in e4m3.ptx.splitlines() if 'wgmma.mma_async' in l}))\n"
                 "print({key: e4m3.metadata[key] for key in ('registers', 'spill_stores_bytes', 'smem_bytes')})\n"
                 "print(tsjit.ops.matmul.explain(tsjit.spec((4096, 4096), tsjit.Float8E4M3),\n"
                 "                               tsjit.spec((4096, 4096), tsjit.Float8E4M3, strides=(1, 4096)),\n"
                 "                               verbose=False).splitlines()[2])"),
        ("md", "On a GPU: `tsjit.ops.matmul` on tsjit arrays (torch tensors work the same way, on torch's current "
               "stream) for a small-M, a split-K and a large shape, against numpy in float64; then fp8 inputs made "
               "of random e4m3 codes (decoded exactly in numpy) with a per-row and a per-column scale."),
        ("code", "import tsjit.ops\n"
                 "from tsjit import bfloat16_bits_to_float32, float_to_bfloat16_bits\n"
                 "rng = np.random.default_rng()\n"
                 "# small M (swapped roles), split-K, a ragged shape; without a GPU the same kinds at small sizes\n"
                 "shapes = [(16, 1024, 2048), (256, 256, 8192), (1000, 1500, 777)] if GPU else [(16, 64, 128), (64, 64, 2048), (40, 70, 77)]\n"
                 f"with {ON_GPU_OR_INTERPRETER}:\n"
                 "    for M, N, K in shapes:\n"
                 "        a_bits = float_to_bfloat16_bits(rng.standard_normal((M, K)))\n"
                 "        b_bits = float_to_bfloat16_bits(rng.standard_normal((K, N)))\n"
                 "        bias = rng.standard_normal(N).astype(np.float32)\n"
                 "        out = tsjit.ops.matmul(tsjit.to_device(a_bits, dtype=tsjit.BFloat16),\n"
                 "                               tsjit.to_device(b_bits, dtype=tsjit.BFloat16),\n"
                 "                               bias=tsjit.to_device(bias), activation='relu', out_dtype=tsjit.Float32)\n"
                 "        a64 = bfloat16_bits_to_float32(a_bits).astype(np.float64)\n"
                 "        b64 = bfloat16_bits_to_float32(b_bits).astype(np.float64)\n"
                 "        ref = np.maximum(a64 @ b64 + bias, 0.0)\n"
                 "        err = np.linalg.norm(out.numpy() - ref) / np.linalg.norm(ref)\n"
                 "        assert err < 1e-4, ((M, N, K), err)\n"
                 f"print('' if GPU else '{INTERPRETED_AT_SMALL_SIZES}', 'relative errors below 1e-4', sep='')"),
        ("code", "def e4m3_values(codes):\n"
                 "    \"\"\"float64 values of e4m3 codes (sign, 4 exponent bits with bias 7, 3 mantissa bits).\"\"\"\n"
                 "    sign = np.where(codes & 0x80, -1.0, 1.0)\n"
                 "    exponent, mantissa = (codes >> 3) & 0xF, codes & 0x7\n"
                 "    normal = (1 + mantissa / 8) * 2.0 ** (exponent.astype(np.int64) - 7)\n"
                 "    return sign * np.where(exponent == 0, mantissa / 8 * 2.0 ** -6, normal)\n\n"
                 "M, N, K = (300, 1000, 512) if GPU else (40, 64, 128)\n"
                 f"with {ON_GPU_OR_INTERPRETER}:\n"
                 "    rng = np.random.default_rng()\n"
                 "    codes = lambda *shape: rng.integers(0, 0x7F, shape, dtype=np.uint8) | (rng.integers(0, 2, shape, dtype=np.uint8) << 7)  # no NaN code\n"
                 "    a_codes, w_codes = codes(M, K), codes(N, K)          # w: an (N, K) weight, row-major\n"
                 "    sa = rng.uniform(0.5, 1.5, (M, 1)).astype(np.float32)\n"
                 "    sb = rng.uniform(0.5, 1.5, (1, N)).astype(np.float32)\n"
                 "    w = tsjit.to_device(w_codes, dtype=tsjit.Float8E4M3)\n"
                 "    b = tsjit.DeviceArray((K, N), tsjit.Float8E4M3, strides=(1, K), data_ptr=w.data_ptr, owner=w)  # w.t()\n"
                 "    out = tsjit.ops.matmul(tsjit.to_device(a_codes, dtype=tsjit.Float8E4M3), b,\n"
                 "                           scale_a=tsjit.to_device(sa), scale_b=tsjit.to_device(sb), out_dtype=tsjit.Float32)\n"
                 "    ref = (e4m3_values(a_codes) * sa) @ (e4m3_values(w_codes).T * sb)\n"
                 "    err = np.linalg.norm(out.numpy() - ref) / np.linalg.norm(ref)\n"
                 "    assert err < 2e-3, err\n"
                 f"print('' if GPU else '{INTERPRETED_AT_SMALL_SIZES}', f'fp8 e4m3 with row / column scales: relative error {{err:.1e}}', sep='')"),
    ],
    "08_when_the_checker_says_no.ipynb": [
        ("md", "# Tutorial 8: when the checker says no\n\n"
               "The TaskManager checks a Task Scheduling program before any code exists: the structural checks "
               "(brackets, roles, counts, bytes) and then an exhaustive walk of every interleaving of the tasks "
               "(deadlocks, races). Each refusal names the rule (`[C0]`, `[P2]`, ...), the task and its warps, the "
               "resource, the schedule step and what to change. Below are five broken programs, each one line away "
               "from a correct one, with the message the checker gives and the verdict on the corrected program."),
        ("code", SETUP),
        ("code", CHECKER_SETUP),
        ("md", "Programs 1, 3 and 4 share one copy program: a producer warp fills a ring of shared-memory chunks, "
               "four consumer warps write them out. Its arguments choose the mistake."),
        ("source", "tsjit.examples.checker_mistakes: Chunks, ScaledOut, _copy_program"),
        ("md", "## 1. A missing commit\n\nThe producer acquires and fills a stage but never commits it, so the "
               "consumer's `wait` blocks forever. C0 finds the deadlock, and its *Likely cause* line (found by "
               "check B1) names the step to fix: call `ring.commit()` after the fill."),
        ("source", "tsjit.examples.checker_mistakes: build_wait_with_no_commit"),
        ("code", "show('wait_with_no_commit')"),
        ("md", "## 2. A TMA byte count that is short\n\nEach stage receives an A tile and a B tile, but "
               "`num_bytes` covers only one of them: the stage's full barrier would complete while the B tile is "
               "still landing. P2 compares `num_bytes` with what the copies deliver and gives the number to set."),
        ("source", "tsjit.examples.checker_mistakes: TileLoads, build_tma_bytes_short_by_one_tile"),
        ("code", "show('tma_bytes_short_by_one_tile')"),
        ("md", "## 3. A role swapped\n\nThe producer task also calls `release()`, a consumer operation, on the "
               "ring it fills. R0 says `release()` belongs to the consumer and what the producer's own operation "
               "at that point is; this producer already commits, so the fix is to drop the release and leave it "
               "to the consumer task."),
        ("source", "tsjit.examples.checker_mistakes: build_producer_releases_its_own_ring"),
        ("code", "show('producer_releases_its_own_ring')"),
        ("md", "## 4. A ring too shallow\n\nA one-stage ring (`advance_on_acquire=True`) is acquired twice per "
               "iteration: the second acquire needs a free slot that only the consumer's release can give, and that "
               "release needs the commit after the second acquire. C0 shows both blocked tasks and the credit state "
               "(`0 of 1 slot(s) free`), and names the cause: the producer holds every stage of the ring, so give "
               "the ring at least 2 stages or commit before acquiring again. The corrected program acquires once "
               "per iteration."),
        ("source", "tsjit.examples.checker_mistakes: build_acquire_twice_one_stage"),
        ("code", "show('acquire_twice_one_stage')"),
        ("md", "## 5. A race on an aliased buffer\n\nTwo tasks write shared-memory buffers that the allocator "
               "placed on the same bytes (one alias group). No barrier orders the two writes. The exhaustive "
               "checker reports the race with the byte range, both tasks and both steps, and says to order them "
               "through a pipeline or to stop aliasing buffers that are live at the same time."),
        ("source", "tsjit.examples.checker_mistakes: Writer, build_two_tasks_write_aliased_buffers"),
        ("code", "show('two_tasks_write_aliased_buffers')"),
    ],
    "13_blackwell_gemm.ipynb": [
        ("md", "# Tutorial 13: a Blackwell GEMM with tcgen05 and tensor memory (CUTLASS TS tutorial 3)\n\n"
               "A non-persistent 128 x 256 bf16 GEMM, `C = A @ B^T`: a TMA warp fills a **TmaUmma** ring of A/B "
               "tiles, one MMA warp issues `tcgen05.mma` into a 128 x 256 fp32 accumulator in tensor memory and "
               "releases each stage with a `tcgen05.commit` (the hardware frees it when the MMAs have read it), "
               "and hands the accumulator to a store warpgroup through a one-stage **UmmaAsync** ring (another "
               "commit). The store warps read their rows with `tcgen05.ld` and write bf16. The TaskManager "
               "allocates the accumulator's TMEM columns in `setup_resources_and_tasks` and frees them after `run`.\n\n"
               "There is no Blackwell GPU here: the evidence is the checker's proof, ptxas for sm_100a and the SASS. "
               "The same source builds wgmma code for sm_90a (the MMA resources switch with "
               "`tsjit.const_expr(tsjit.tcgen05.available())`), which runs on the H200."),
        ("code", SETUP),
        ("code", "from tsjit.examples import bw_gemm"),
        ("source", "tsjit.examples.bw_gemm: TmemAccumulator, gemm_tutorial3.fn"),
        ("md", "Compile for sm_100a. The exhaustive checker runs while the kernel compiles (any deadlock or race "
               "would stop the compile); its verdict is recorded on the TaskManager. These are the tcgen05 "
               "instructions in the PTX:"),
        ("code", "import collections, re\nfrom tsjit.ts.verify import exhaustive\nverdicts = []\n"
                 "original = exhaustive.check_all_interleavings\n"
                 "def recording(*args, **kwargs):\n"
                 "    result = original(*args, **kwargs)\n    verdicts.append(result.verdict)\n    return result\n"
                 "exhaustive.check_all_interleavings = recording\n"
                 "blackwell = bw_gemm.compile_for('sm_100a')\nhopper = bw_gemm.compile_for('sm_90a')\n"
                 "exhaustive.check_all_interleavings = original\n"
                 "print('checker verdicts (sm_100a, sm_90a):', verdicts)\n"
                 "print(collections.Counter(re.findall(r'tcgen05\\.[a-z_:]+', blackwell.ptx)))\n"
                 "print('sm_100a registers', blackwell.metadata['registers'], 'spilled bytes',\n"
                 "      blackwell.metadata['spill_stores_bytes'])\n"
                 "print('sm_90a: wgmma', len(re.findall(r'wgmma\\.mma_async', hopper.ptx)), 'tcgen05',\n"
                 "      hopper.ptx.count('tcgen05'))"),
        ("md", "The SASS of the sm_100a cubin (`cuobjdump -sass`, from the `nvidia-cuda-cuobjdump` wheel): "
               "`UTCHMMA` is the UMMA, `UTCBAR` the commit, `LDTM` the TMEM load, `UTMALDG` the TMA load; no "
               "`LDL`/`STL` (local memory)."),
        ("code", "import os, shutil, subprocess, tempfile\n"
                 "tool = os.environ.get('TSJIT_CUOBJDUMP') or shutil.which('cuobjdump')\n"
                 "if not tool:   # the nvidia-cuda-cuobjdump wheel that pip install -e '.[test]' brings\n"
                 "    try:\n"
                 "        from cuda import pathfinder\n"
                 "        tool = pathfinder.find_nvidia_binary_utility('cuobjdump')\n"
                 "    except Exception:\n"
                 "        tool = None\n"
                 "if tool:\n"
                 "    path = os.path.join(tempfile.mkdtemp(), 'k.cubin')\n"
                 "    open(path, 'wb').write(blackwell.cubin)\n"
                 "    sass = subprocess.run([tool, '-sass', path], capture_output=True, text=True).stdout\n"
                 "    ops = collections.Counter(re.findall(r'/\\*[0-9a-f]{4,}\\*/\\s+(?:@!?U?P\\w+\\s+)?([A-Z][A-Z0-9]+)', sass))\n"
                 "    print({op: ops[op] for op in ('UTCHMMA', 'UTCBAR', 'LDTM', 'UTMALDG', 'LDL', 'STL')})\n"
                 "else:\n"
                 "    print('cuobjdump not found: pip install nvidia-cuda-cuobjdump, or set TSJIT_CUOBJDUMP')"),
        ("md", "On the H200 the sm_90a build of the same source runs; C is poisoned (NaN) first and compared "
               "with numpy float64."),
        ("code", "if GPU:\n"
                 "    for M, N, K in [(256, 512, 256), (1000, 1000, 1000), (257, 300, 136)]:\n"
                 "        got, ref = bw_gemm.run_tutorial3(M, N, K)\n"
                 "        err = np.linalg.norm(got - ref) / np.linalg.norm(ref)\n"
                 "        assert np.isfinite(got).all() and err < 1e-2, (M, N, K, err)\n"
                 "        print(M, N, K, 'relative error', err)\n"
                 "else:\n"
                 "    print('no GPU: skipped launching')"),
    ],
}


from group_notebooks import NOTEBOOKS as GROUP_NOTEBOOKS  # noqa: E402  tutorials 9-12 (pipeline groups)

from interpreter_notebook import NOTEBOOKS as INTERPRETER_NOTEBOOKS  # noqa: E402  tutorial 14 (issue 13)

from blackwell_notebooks import NOTEBOOKS as BLACKWELL_NOTEBOOKS  # noqa: E402  tutorials 15-18 (issue 14)

from persistent_gemm_notebook import NOTEBOOKS as PERSISTENT_GEMM_NOTEBOOKS  # noqa: E402  tutorial 19 (issue 14)

NOTEBOOKS.update(GROUP_NOTEBOOKS)
NOTEBOOKS.update(INTERPRETER_NOTEBOOKS)
NOTEBOOKS.update(BLACKWELL_NOTEBOOKS)
NOTEBOOKS.update(PERSISTENT_GEMM_NOTEBOOKS)


def build() -> list[str]:
    written = []
    for name, cells in NOTEBOOKS.items():
        nb = nbformat.v4.new_notebook()
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        nb.cells = [nbformat.v4.new_markdown_cell(text) if kind == "md" else source_cell(text) if kind == "source"
                    else nbformat.v4.new_code_cell(text) for kind, text in cells]
        path = os.path.join(HERE, name)
        nbformat.write(nb, path)
        written.append(path)
    return written


if __name__ == "__main__":
    for path in build():
        print("wrote", path)
