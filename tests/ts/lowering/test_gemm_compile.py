"""The TS GEMM compiles for sm_90a without a GPU (issue 5, CPU evidence): the PTX has wgmma.mma_async,
TMA loads/stores and setmaxnreg; the default assembler reports no spills and keeps setmaxnreg (USETMAXREG, no
LDL/STL in the SASS where cuobjdump exists); the TaskManager verifies it quickly; and a
configuration that overflows shared memory is rejected by M1 with the numbers."""
import re

import pytest

import tsjit
from tsjit.examples import gemm
from blackwell.toolchain import assert_register_split_kept
from .verification_time import verification_seconds


def _specs(block_n=256, cluster_m=1):
    a = tsjit.tensormap_spec(tsjit.BFloat16, (gemm.BM, gemm.BK), swizzle="128B")
    b = tsjit.tensormap_spec(tsjit.BFloat16, (block_n // cluster_m, gemm.BK), swizzle="128B")
    c_map = tsjit.tensormap_spec(tsjit.BFloat16, (64, 64), swizzle="128B")
    return a, b, tsjit.spec((1024, 1024), tsjit.BFloat16), c_map


@pytest.fixture(scope="module")
def compiled():
    a, b, c, c_map = _specs()
    return tsjit.compile(gemm.gemm_ts, a, b, c, c_map, 1024, 1024, 1024, 256, 4, 8, 1, "tma")


def test_gemm_ptx_has_wgmma_tma_and_setmaxnreg(compiled):
    ptx = compiled.ptx
    assert "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16" in ptx
    assert "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes" in ptx
    assert "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group" in ptx
    assert re.search(r"setmaxnreg\.dec\.sync\.aligned\.u32\s+40;", ptx)
    assert re.search(r"setmaxnreg\.inc\.sync\.aligned\.u32\s+232;", ptx)
    assert "stmatrix.sync.aligned" in ptx


def test_gemm_assembles_without_spills(compiled, tmp_path):
    meta = compiled.metadata
    assert compiled.cubin[:4] == b"\x7fELF"
    assert meta["spill_stores_bytes"] == 0 and meta["spill_loads_bytes"] == 0 and meta["stack_frame_bytes"] == 0
    assert meta["registers"] <= 232
    assert meta["assembler_notes"] == [], meta["tool_version"]      # setmaxnreg kept (no C7504)
    assert_register_split_kept(compiled.cubin, tmp_path)


def test_gemm_cluster_variant_multicasts(monkeypatch):
    a, b, c, c_map = _specs(cluster_m=2)
    k = tsjit.compile(gemm.gemm_ts, a, b, c, c_map, 1024, 1024, 1024, 256, 4, 8, 2, "tma")
    assert ".multicast::cluster" in k.ptx and ".reqnctapercluster 2, 1, 1" in k.ptx
    assert k.metadata["launch_requirements"].cluster == (2, 1, 1)


def test_gemm_schedule_verifies_quickly(monkeypatch):
    """Time the whole TaskManager construction (all checks, the exhaustive one included) inside a compile."""
    a, b, c, c_map = _specs()
    durations = verification_seconds(
        monkeypatch, lambda: tsjit.compile(gemm.gemm_ts, a, b, c, c_map, 1024, 1024, 1024, 256, 3, 8, 1, "tma"))
    assert durations and max(durations) < 2.0, durations


def test_too_many_stages_is_rejected_by_m1():
    a, b, c, c_map = _specs()
    with pytest.raises(tsjit.VerificationError) as err:
        tsjit.compile(gemm.gemm_ts, a, b, c, c_map, 1024, 1024, 1024, 256, 6, 8, 1, "tma")
    assert err.value.check == "M1" and "232448" in str(err.value)
