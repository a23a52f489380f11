"""The cells of tutorials 9-12 (pipeline groups, ports of CUTLASS TS tutorial 07, sm_90a).

``build_notebooks.py`` writes them with the others.  Each notebook compiles and verifies its
programs on any machine and prints the barriers the group saves, counted in the PTX of the grouped
program and of the same program with separate rings; with a GPU it runs them on fresh random data
with poisoned outputs and checks them against numpy float64.
"""
from __future__ import annotations

SETUP = """import inspect
import numpy as np
import tsjit
GPU = tsjit.gpu_available()
print("GPU present:", GPU)"""

COUNTS = """counts = {module}.barrier_counts()
print(f"barriers: group {{counts['group']}}, separate rings {{counts['separate']}}, "
      f"saved {{counts['separate'] - counts['group']}} (mbarrier.init in each program's PTX)")"""

CORPUS = """import warnings
from tsjit.examples.group_mistakes import MISTAKES
from tsjit.errors import ScheduleError, VerificationError
from tsjit.ts import ScheduleWarning, TaskManager
warnings.simplefilter("ignore", ScheduleWarning)

def show(name):
    \"\"\"Build a broken group program and print the error the checker gives; verify its corrected twin.\"\"\"
    mistake, build = MISTAKES[name]
    print("The mistake:", mistake)
    try:
        tasks, graph, options = build(False)
        TaskManager(tasks, graph, verbose=False, **options)
        raise AssertionError("accepted a broken program")
    except (ScheduleError, VerificationError) as err:
        print(err)
    tasks, graph, options = build(True)
    print("The corrected program:", TaskManager(tasks, graph, verbose=False, **options).exhaustive_result.verdict)"""

NOTEBOOKS = {
    "09_merge_copy.ipynb": [
        ("md", "# Tutorial 9: a Merge group (two producers, one consumer that releases once)\n\n"
               "`z = x + y` through shared memory. `load_x` copies tiles of `x` with ordinary stores (an "
               "AsyncAsync ring), `load_y` loads tiles of `y` by TMA (a TmaAsync ring). The `store` task needs "
               "both stages at once, so the two rings form a `PipelineGroup(\"xy\", [smem_x, smem_y], "
               "PipelineGroupMode.Merge)`: each member keeps its own full barrier (the store task waits on "
               "`xy.smem_x` and `xy.smem_y`), and the members share **one** empty barrier, so the store task "
               "releases once, `xy.release()`, and both producers see the stage free. A grouped member is "
               "passed to a schedule as `xy.smem_x`, never bare."),
        ("code", SETUP),
        ("code", "from tsjit.examples import ts_merge_copy"),
        ("source", "tsjit.examples.ts_merge_copy: ThreadTiles, merge_copy.fn"),
        ("md", "A group of N members over S stages has N full arrays and one empty array: (N + 1) x S "
               "mbarriers where separate rings have 2 x N x S. The count below is read from the PTX of the "
               "kernel compiled both ways (`GROUPED=True` / `False`)."),
        ("code", COUNTS.format(module="ts_merge_copy")),
        ("md", "The checker knows the group: a member released on its own, a release that never waited on a "
               "member, a consumer count that differs between the members all fail before any code exists. "
               "The programs below are small host-side Merge programs (`tsjit.examples.group_mistakes`, on the "
               "resources of tutorial 8), each with one mistake and a corrected twin."),
        ("source", "tsjit.examples.group_mistakes: merge_program"),
        ("code", CORPUS),
        ("code", "show('merge_member_release')\nprint()\nshow('merge_release_without_wait')"),
        ("code", "if GPU:\n"
                 "    for grouped in (True, False):\n"
                 "        got, ref = ts_merge_copy.run_merge_copy(1000, 780, grouped=grouped)\n"
                 "        assert np.array_equal(got, ref.astype(np.float32)), grouped\n"
                 "    print('exact (grouped and separate rings)')\n"
                 "else:\n"
                 "    print('no GPU: skipped launching')"),
    ],
    "10_merge_gemm.ipynb": [
        ("md", "# Tutorial 10: a Merge GEMM — A by cp.async, B by TMA, one release\n\n"
               "`C = relu(A @ B^T)` with tutorial 5's wgmma warpgroups. The operands arrive through two different "
               "mechanisms, both from one producer warpgroup (4 warps at 40 registers): its 128 threads copy A "
               "with `cp.async` (an AsyncAsync ring with `producer_op=AsyncLoad`: each thread's arrival on the "
               "full barrier lands when *its* copies have), writing straight into the 128-byte swizzled layout a "
               "TMA would produce (chunk `c` of row `r` at `c ^ (r % 8)`), and an elected thread of its first "
               "warp loads B by TMA (`SignalingThreads.TaskWarpLeader`). Each thread owns one 16-byte column "
               "chunk of 8 rows, so every address is fixed up to compile-time offsets and a stage costs a thread "
               "8 copies of a few instructions each. The Merge group `ab` lets the MMA warpgroups wait on both "
               "and release the previous stage once, `ab.release()`. Since the A stage was written through the "
               "generic proxy, the MMA work fences (`fence.proxy.async`) before wgmma reads it."),
        ("code", SETUP),
        ("code", "from tsjit.examples import ts_merge_gemm"),
        ("source", "tsjit.examples.ts_merge_gemm: CpAsyncTiles, operand_load_schedule, mainloop_schedules"),
        ("code", COUNTS.format(module="ts_merge_gemm")),
        ("code", "c = tsjit.compile(ts_merge_gemm.merge_gemm, *ts_merge_gemm.compile_args())\n"
                 "print('registers', c.metadata.registers, 'spills', c.metadata.spill_stores_bytes, "
                 "'dynamic smem', c.metadata.smem_bytes, 'B')\n"
                 "print('cp.async copies in the PTX:', c.ptx.count('cp.async.cg.shared.global'), "
                 "'| arrivals on completion:', c.ptx.count('cp.async.mbarrier.arrive.noinc'))"),
        ("code", "if GPU:\n"
                 "    for shape in ((1000, 1000, 1000), (257, 512, 136), (4096, 4096, 4096)):\n"
                 "        got, ref = ts_merge_gemm.run_merge_gemm(*shape)\n"
                 "        err = np.linalg.norm(got - ref) / np.linalg.norm(ref)\n"
                 "        assert np.isfinite(got).all() and err < 1e-2, (shape, err)\n"
                 "        print(shape, 'relative error', f'{err:.2e}')\n"
                 "else:\n"
                 "    print('no GPU: skipped launching')"),
        ("md", "`benchmarks/groups.py` times this kernel against the plain TS GEMM (A and B by TMA in one ring) "
               "and cuBLAS, interleaved with CUDA events."),
    ],
    "11_merge_gemm_residual.ipynb": [
        ("md", "# Tutorial 11: two Merge groups — the accumulator stage meets a TMA-loaded residual\n\n"
               "`D = relu(A @ B^T) + R`. The main loop is tutorial 10's (group `ab`). On Hopper the accumulator "
               "lives in the MMA warpgroups' registers, so here it is handed to a separate epilogue warpgroup "
               "through an explicit shared-memory ring `acc` (AsyncAsync: the MMA warpgroups write `relu(acc)` "
               "with `stmatrix` and commit). A fourth warp TMA-loads the tile of R into `res`. The second Merge "
               "group `epi` joins `acc` and `res`: the epilogue waits on both, stores `acc + res`, and releases "
               "once — freeing the accumulator stage for the next tile's MMAs and the residual stage for the next "
               "TMA load."),
        ("code", SETUP),
        ("code", "from tsjit.examples import ts_merge_resadd"),
        ("source", "tsjit.examples.ts_merge_resadd: AccumulatorStage, merge_gemm_resadd.fn"),
        ("code", COUNTS.format(module="ts_merge_resadd")),
        ("code", "if GPU:\n"
                 "    for shape in ((1000, 1000, 1000), (257, 520, 136), (2048, 2048, 2048)):\n"
                 "        got, ref = ts_merge_resadd.run_resadd(*shape)\n"
                 "        err = np.linalg.norm(got - ref) / np.linalg.norm(ref)\n"
                 "        assert np.isfinite(got).all() and err < 1e-2, (shape, err)\n"
                 "        print(shape, 'relative error', f'{err:.2e}')\n"
                 "else:\n"
                 "    print('no GPU: skipped launching')"),
    ],
    "12_fork.ipynb": [
        ("md", "# Tutorial 12: a Fork — one TMA load, two consumers\n\n"
               "`C = A @ B^T` and `R = relu(A)` from the same A tiles. The Fork group `fork` has two members over "
               "the same stages: `a_mma` (read by the MMA warpgroups) and `a_act` (read by an activation task). "
               "They share **one** full barrier: the load warp acquires both (the primary's acquire arms the "
               "barrier with the tile's bytes, the secondary only waits its own empty barrier), issues one TMA "
               "copy and commits once, `fork.commit()`. Each consumer waits on the shared full barrier and "
               "releases its own member. Without the group the tile is loaded twice."),
        ("code", SETUP),
        ("code", "from tsjit.examples import ts_fork"),
        ("source", "tsjit.examples.ts_fork: ReluOutput, fork_gemm_act.fn"),
        ("code", COUNTS.format(module="ts_fork")),
        ("md", "The checker knows the Fork too: a member committed on its own, or members that expect "
               "different bytes from the one copy that fills their stage, fail before any code exists. The "
               "program below is a small host-side Fork (`tsjit.examples.group_mistakes`), built broken and "
               "corrected."),
        ("source", "tsjit.examples.group_mistakes: fork_program"),
        ("code", CORPUS),
        ("code", "show('fork_member_commit')\nprint()\nshow('fork_bytes_mismatch')"),
        ("code", "if GPU:\n"
                 "    for shape in ((1000, 1000, 1000), (257, 512, 136)):\n"
                 "        c, c_ref, r, r_ref = ts_fork.run_fork(*shape)\n"
                 "        err = np.linalg.norm(c - c_ref) / np.linalg.norm(c_ref)\n"
                 "        assert np.isfinite(c).all() and err < 1e-2 and np.array_equal(r, r_ref), (shape, err)\n"
                 "        print(shape, 'C relative error', f'{err:.2e}', '| R = relu(A) exact')\n"
                 "else:\n"
                 "    print('no GPU: skipped launching')"),
    ],
}
