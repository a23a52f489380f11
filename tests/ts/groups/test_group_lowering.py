"""Pipeline groups lowered for sm_90a (no GPU): the barriers each program initialises and the arrivals
its collapsed operations make, read back from the PTX."""
import re

import tsjit
from tsjit.examples import ts_merge_copy


def _task_ptx(ptx: str, task: str) -> str:
    """The PTX of one task's warp branch: from its ``// <task> warp`` comment to the next task's."""
    start = ptx.index(f"// {task} warp")
    following = [m.start() for m in re.finditer(r"// \w+ warp: \[", ptx) if m.start() > start]
    return ptx[start:min(following) if following else len(ptx)]


def test_merge_copy_initialises_n_plus_one_arrays_and_separate_rings_two_per_member():
    counts = ts_merge_copy.barrier_counts(stages=4)
    assert counts == {"group": (2 + 1) * 4, "separate": 2 * 2 * 4}


def test_merge_copy_store_task_arrives_once_per_stage():
    grouped = tsjit.compile(ts_merge_copy.merge_copy, *ts_merge_copy.compile_args(grouped=True)).ptx
    separate = tsjit.compile(ts_merge_copy.merge_copy, *ts_merge_copy.compile_args(grouped=False)).ptx
    assert _task_ptx(grouped, "store").count("mbarrier.arrive") == 1
    assert _task_ptx(separate, "store").count("mbarrier.arrive") == 2
    # both producers wait on the one shared empty barrier array: the same base address
    assert grouped.count("mbarrier.init") == 12


def test_merge_gemm_compiles_with_cp_async_a_and_one_release_per_stage():
    from tsjit.examples import ts_merge_gemm
    compiled = tsjit.compile(ts_merge_gemm.merge_gemm, *ts_merge_gemm.compile_args(stages=4))
    ptx = compiled.ptx
    assert ptx.count("mbarrier.init") == (2 + 1) * 4
    load = _task_ptx(ptx, "load")        # the producer warpgroup: A by cp.async, B by one TMA of warp 0
    assert "cp.async.cg.shared.global" in load and "cp.async.mbarrier.arrive.noinc" in load
    assert load.count("cp.async.bulk.tensor") == 1 and load.count("mbarrier.arrive.expect_tx") == 1
    mma = _task_ptx(ptx, "mma")
    assert "fence.proxy.async" in mma and "wgmma.mma_async" in mma
    # the lagging release in the loop and the last one after it: one arrival each, on the shared empty barrier
    assert mma.count("mbarrier.arrive.shared") == 2
    assert compiled.metadata.spill_stores_bytes == 0


def test_fork_commits_once_and_each_consumer_releases_its_own_member():
    from tsjit.examples import ts_fork
    ptx = tsjit.compile(ts_fork.fork_gemm_act, *ts_fork.compile_args(stages=3)).ptx
    assert ptx.count("mbarrier.init") == (1 + 2) * 3 + 2 * 3        # the fork's arrays and the B ring
    load_a = _task_ptx(ptx, "load_a")
    assert load_a.count("mbarrier.arrive.expect_tx") == 1            # only the primary member arms
    assert load_a.count("cp.async.bulk.tensor") == 1                 # A is loaded once for both consumers
    assert _task_ptx(ptx, "act").count("mbarrier.arrive") == 1


def test_resadd_merges_the_accumulator_stage_with_the_residual():
    from tsjit.examples import ts_merge_resadd
    ptx = tsjit.compile(ts_merge_resadd.merge_gemm_resadd, *ts_merge_resadd.compile_args()).ptx
    assert ptx.count("mbarrier.init") == (2 + 1) * 3 + (2 + 1) * 2
    epilogue = _task_ptx(ptx, "epilogue")
    assert epilogue.count("mbarrier.arrive") == 1 and epilogue.count("mbarrier.try_wait") >= 2


def test_fused_merge_copy_initialises_two_arrays_and_waits_once():
    compiled = tsjit.compile(ts_merge_copy.merge_copy, *ts_merge_copy.compile_args(fused=True))
    ptx = compiled.ptx
    assert ptx.count("mbarrier.init") == 2 * 4
    store = _task_ptx(ptx, "store")
    assert store.count("mbarrier.arrive") == 1 and store.count("mbarrier.try_wait") == 1
    # the shared full barrier expects both producers: 32 threads and one TMA arming lane
    assert re.search(r"mov\.b32\s+(%r\d+), 33;\s+mbarrier\.init\.shared\.b64\s+\[[^\]]+\], \1;", ptx)
