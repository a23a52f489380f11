"""Issue 9 §2: a launch that does not match the program is a LaunchError, never a hang.

Every compiled kernel carries its launch contract (``metadata["launch_requirements"]``, a
:class:`tsjit.abi.LaunchRequirements`); the launcher checks a configuration against it before
any driver call.  None of this needs a GPU: the contract is declared at compile time and the
check runs before the driver (device limits are faked here)."""
import numpy as np
import pytest

import tsjit
from tsjit.abi import LaunchRequirements
from tsjit.examples import gemm, ts_pdl, ts_tma_copy

H200_LIMIT = 232448


@pytest.fixture(scope="module")
def tma_copy():
    spec = tsjit.tensormap_spec(tsjit.Float32, (64, 64))
    return tsjit.compile(ts_tma_copy.tma_copy_ts, spec, np.zeros((256, 256), np.float32), 16, 4, 64, 64, 4)


@pytest.fixture(scope="module")
def cluster_gemm():
    a = tsjit.tensormap_spec(tsjit.BFloat16, (gemm.BM, gemm.BK), swizzle="128B")
    b = tsjit.tensormap_spec(tsjit.BFloat16, (128, gemm.BK), swizzle="128B")
    c_map = tsjit.tensormap_spec(tsjit.BFloat16, (64, 64), swizzle="128B")
    return tsjit.compile(gemm.gemm_ts, a, b, tsjit.spec((1024, 1024), tsjit.BFloat16), c_map,
                         1024, 1024, 1024, 256, 4, 8, 2, "tma")


def test_ts_program_declares_its_threads_and_shared_memory(tma_copy):
    req = tma_copy.launch_requirements
    assert isinstance(req, LaunchRequirements)
    assert req.threads == (ts_tma_copy.LOAD_WARPS + ts_tma_copy.STORE_WARPS) * 32 == 160
    assert req.min_smem_bytes == tma_copy.metadata["smem_bytes"] >= 4 * 64 * 64 * 4
    assert req.cluster is None and req.max_smem_bytes == H200_LIMIT


def test_block_of_32_threads_for_a_160_thread_program_is_refused(tma_copy):
    with pytest.raises(tsjit.LaunchError) as err:
        tma_copy.launch_requirements.check("tma_copy_ts", (16,), (32,), None, tma_copy.metadata["smem_bytes"],
                                           H200_LIMIT)
    text = str(err.value)
    assert "'tma_copy_ts'" in text and "block=(32, 1, 1)" in text and "32 threads" in text
    assert "exactly 160 threads" in text and "block=(160,)" in text


@pytest.mark.parametrize("block,says,not_says", [
    ((32,), "lacks warps 1-4: the tasks there would never run, and the tasks waiting on them would wait forever",
     "larger"),
    ((128,), "lacks warp 4:", "larger"),
    ((150,), "lacks part of warp 4:", "larger"),
    ((192,), "larger CTA's warp 5 would run no task (the tasks cover warps 0-4)", "wait forever"),
    ((32, 8), "larger CTA's warps 5-7 would run no task", "wait forever"),
])
def test_wrong_block_message_says_what_that_block_would_do(tma_copy, block, says, not_says):
    """A larger CTA does not wait forever (newcomer 7 #12): each case says what it would do."""
    with pytest.raises(tsjit.LaunchError) as err:
        tma_copy.launch_requirements.check("tma_copy_ts", (16,), block, None, tma_copy.metadata["smem_bytes"],
                                           H200_LIMIT)
    assert says in str(err.value) and not_says not in str(err.value)
    assert "exactly 160 threads" in str(err.value)


def test_block_with_the_right_thread_count_in_two_dimensions_passes(tma_copy):
    tma_copy.launch_requirements.check("tma_copy_ts", 16, (32, 5), None, tma_copy.metadata["smem_bytes"],
                                       H200_LIMIT)
    # integer scalars (numpy) are dimensions too, as for the driver
    tma_copy.launch_requirements.check("tma_copy_ts", (np.int64(16),), (np.int32(160),), None,
                                       tma_copy.metadata["smem_bytes"], H200_LIMIT)
    with pytest.raises(tsjit.LaunchError, match="launch field .block. must be an int or a tuple of 1-3 ints"):
        tma_copy.launch_requirements.check("tma_copy_ts", 16, (160, 1, 1, 1), None, 0, H200_LIMIT)


def test_cluster_program_declares_its_cluster(cluster_gemm):
    req = cluster_gemm.launch_requirements
    assert req.cluster == (2, 1, 1) and req.threads == cluster_gemm.metadata["launch_requirements"].threads


def test_other_cluster_is_refused_naming_both(cluster_gemm):
    req = cluster_gemm.launch_requirements
    with pytest.raises(tsjit.LaunchError) as err:
        req.check("gemm_ts", (8,), req.threads, (4, 1, 1), req.min_smem_bytes, H200_LIMIT)
    assert "'gemm_ts'" in str(err.value) and "cluster=(4, 1, 1)" in str(err.value)
    assert "needs cluster=(2, 1, 1)" in str(err.value)
    with pytest.raises(tsjit.LaunchError, match="no cluster"):
        req.check("gemm_ts", (8,), req.threads, None, req.min_smem_bytes, H200_LIMIT)


def test_grid_that_is_not_a_whole_number_of_clusters_is_refused(cluster_gemm):
    req = cluster_gemm.launch_requirements
    with pytest.raises(tsjit.LaunchError) as err:
        req.check("gemm_ts", (7, 2), req.threads, (2, 1, 1), req.min_smem_bytes, H200_LIMIT)
    text = str(err.value)
    assert "grid=(7, 2, 1)" in text and "grid[0]=7" in text and "multiple of 2" in text and "up to 8" in text
    req.check("gemm_ts", (8, 2), req.threads, (2, 1, 1), req.min_smem_bytes, H200_LIMIT)


def test_shared_memory_below_the_program_layout_is_refused(tma_copy):
    need = tma_copy.metadata["smem_bytes"]
    with pytest.raises(tsjit.LaunchError) as err:
        tma_copy.launch_requirements.check("tma_copy_ts", 16, 160, None, need - 16, H200_LIMIT)
    assert f"smem_bytes={need - 16}" in str(err.value) and f"lays out {need} bytes" in str(err.value)


def test_program_needing_more_than_the_device_limit_is_refused(tma_copy):
    need = tma_copy.metadata["smem_bytes"]
    fake_limit = need - 1024
    with pytest.raises(tsjit.LaunchError) as err:
        tma_copy.launch_requirements.check("tma_copy_ts", 16, 160, None, need, fake_limit)
    text = str(err.value)
    assert f"its program needs {need}" in text and f"the device allows {fake_limit}" in text


def test_request_above_the_target_limit_is_refused():
    req = LaunchRequirements(min_smem_bytes=1024, max_smem_bytes=H200_LIMIT)
    with pytest.raises(tsjit.LaunchError, match=f"the target allows {H200_LIMIT}"):
        req.check("k", 1, 32, None, H200_LIMIT + 8, None)
    req.check("k", 1, 32, None, H200_LIMIT, None)


def test_launch_bound_max_threads_is_part_of_the_contract():
    @tsjit.kernel(max_threads=128)
    def bounded(n):
        if tsjit.thread_idx().x > n:
            tsjit.device_print("never")

    req = tsjit.compile(bounded, 4).launch_requirements
    assert req.max_threads == 128 and req.threads is None
    req.check("bounded", 1, 128, None, 0, H200_LIMIT)
    with pytest.raises(tsjit.LaunchError) as err:
        req.check("bounded", 1, (64, 4), None, 0, H200_LIMIT)
    assert "'bounded'" in str(err.value) and "256 threads" in str(err.value) and "at most 128" in str(err.value)


@tsjit.kernel(max_threads=64)
def scalar_only(n):
    if tsjit.thread_idx().x > n:
        tsjit.device_print("never")


def test_launcher_checks_before_any_driver_call(monkeypatch):
    """kernel[grid, block](...) raises the contract's LaunchError on a machine without a GPU: the
    check ran before the driver was touched."""
    monkeypatch.setenv("TSJIT_TARGET", "sm_90a")
    with pytest.raises(tsjit.LaunchError) as err:
        scalar_only[(1,), (128,)](5)
    assert "'scalar_only'" in str(err.value) and "at most 64" in str(err.value)
    with pytest.raises(tsjit.LaunchError) as again:  # the refusal is not cached as a pass
        scalar_only.launch(5, grid=1, block=128)
    assert "at most 64" in str(again.value)


def test_check_launch_false_skips_the_contract(monkeypatch):
    from tsjit.runtime import driver
    if driver.gpu_available():
        pytest.skip("needs a machine without a GPU: the launch would otherwise run")
    monkeypatch.setenv("TSJIT_TARGET", "sm_90a")
    with pytest.raises(tsjit.LaunchError) as err:
        scalar_only[(1,), (128,)](5, check_launch=False)
    assert "at most 64" not in str(err.value)  # the driver (absent here) refused, not the contract


def test_pdl_program_declares_pdl():
    compiled = tsjit.compile(ts_pdl.scale_consumer, np.zeros(64, np.float32), np.zeros(64, np.float32), 64, 2)
    assert compiled.launch_requirements.pdl
    # a non-PDL launch is merely serialized: the check accepts it
    compiled.launch_requirements.check("scale_consumer", 4, 64, None, compiled.metadata["smem_bytes"], H200_LIMIT)


def test_contract_survives_the_disk_cache(tma_copy):
    fresh = tsjit.kernel(ts_tma_copy.tma_copy_ts.fn)
    spec = tsjit.tensormap_spec(tsjit.Float32, (64, 64))
    again = tsjit.compile(fresh, spec, np.zeros((256, 256), np.float32), 16, 4, 64, 64, 4)
    assert again.metadata["from_cache"]
    assert again.launch_requirements == tma_copy.launch_requirements


def test_json_round_trip_and_malformed_records():
    req = LaunchRequirements(threads=160, cluster=(2, 1, 1), min_smem_bytes=66560, max_smem_bytes=H200_LIMIT,
                             pdl=True)
    assert LaunchRequirements.from_json(req.to_json()) == req
    assert LaunchRequirements.from_json(None) == LaunchRequirements()
    assert LaunchRequirements.from_json({"threads": 64, "unknown": 1}).threads == 64


def test_two_different_cta_shapes_in_one_kernel_are_a_compilation_error():
    req = LaunchRequirements().merged(threads=160)
    assert req.merged(threads=160).threads == 160
    with pytest.raises(tsjit.CompilationError, match="'threads': 160 and 64"):
        req.merged(threads=64)


def test_shared_array_larger_than_the_target_is_a_compilation_error():
    @tsjit.kernel
    def too_big(out):
        tile = tsjit.shared_array(tsjit.Float32, (240, 256))
        tile[0, 0] = 1.0
        out[0] = tile[0, 0]

    with pytest.raises(tsjit.CompilationError) as err:
        tsjit.compile(too_big, np.zeros(4, np.float32))
    text = str(err.value)
    assert "shared_array(Float32, 240x256)" in text and "245760 bytes" in text and "232448" in text
    assert "sm_90a" in text and "test_launch_contract.py" in text and "tsjit.shared_array" in text  # the line


def test_shared_arrays_too_large_together_are_a_compilation_error():
    @tsjit.kernel
    def two_halves(out):
        first = tsjit.shared_array(tsjit.Float32, (200, 256))
        second = tsjit.shared_array(tsjit.Float32, (40, 256))
        first[0, 0] = 1.0
        second[0, 0] = 2.0
        out[0] = first[0, 0] + second[0, 0]

    with pytest.raises(tsjit.CompilationError) as err:
        tsjit.compile(two_halves, np.zeros(4, np.float32))
    text = str(err.value)
    assert "'two_halves'" in text and "245760 bytes" in text and "232448" in text
    assert "shared_array(Float32, 40x256)" in text and "from 204800" in text
