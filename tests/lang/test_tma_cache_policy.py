"""tma_load's ``cache_policy``: an L2 eviction priority becomes a ``createpolicy.fractional`` policy register and
the load's ``.L2::cache_hint`` operand (assembled by ptxas for sm_90a); a bad value is a clear compile error."""
import pytest

import tsjit
from tsjit.lang.tma import CACHE_POLICIES

LOAD = "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"


@tsjit.kernel
def load_with_policy(src_map, POLICY: tsjit.Constexpr[object], CTA_GROUP: tsjit.Constexpr[int]):
    tile = tsjit.shared_array(src_map.dtype, 128, align=1024)
    bar = tsjit.shared_array(tsjit.Int64, 1, align=8)
    tsjit.mbarrier_init(bar.ptr, 1)
    tsjit.tma_load(src_map, tile, bar.ptr, (0, 0), cache_policy=POLICY, cta_group=CTA_GROUP)


def compile_policy(policy, cta_group=1, target="sm_90a"):
    return tsjit.compile(load_with_policy, tsjit.tensormap_spec(tsjit.Float32, (8, 16)), POLICY=policy,
                         CTA_GROUP=cta_group, target=target)


def load_lines(ptx):
    return [line.strip() for line in ptx.splitlines() if LOAD in line]


@pytest.mark.parametrize("policy", CACHE_POLICIES)
def test_each_policy_is_a_createpolicy_register_passed_as_the_cache_hint(policy):
    compiled = compile_policy(policy)
    assert compiled.cubin
    created = [line.strip() for line in compiled.ptx.splitlines() if "createpolicy" in line]
    assert len(created) == 1 and created[0].startswith(f"createpolicy.fractional.L2::{policy}.b64 %rd"), created
    register = created[0].split()[1].rstrip(",")
    (load,) = load_lines(compiled.ptx)
    assert ".L2::cache_hint" in load and load.endswith(f"], {register};"), load


def test_no_policy_is_a_plain_load():
    compiled = compile_policy(None)
    (load,) = load_lines(compiled.ptx)
    assert ".L2::cache_hint" not in load and "createpolicy" not in compiled.ptx


@pytest.mark.parametrize("bad", ["evict-first", "L2::evict_first", 1, True])
def test_an_unknown_policy_is_refused_by_name(bad):
    with pytest.raises(tsjit.CompilationError, match=r"cache_policy is .*; use None or one of 'evict_first'"):
        compile_policy(bad)


def test_a_policy_with_a_pair_load_is_refused():
    with pytest.raises(tsjit.CompilationError, match=r"cache_policy is supported with cta_group=1 only"):
        compile_policy("evict_first", cta_group=2, target="sm_100a")


@tsjit.kernel
def copy_streamed(src, dst, POLICY: tsjit.Constexpr[object]):
    tile = tsjit.shared_array(tsjit.Float32, (8, 16), align=1024)
    bar = tsjit.shared_array(tsjit.Int64, 1, align=8)
    barp = tsjit.address_of(bar, 0)
    if tsjit.thread_idx().x == 0:
        tsjit.mbarrier_init(barp, 1)
        tsjit.fence_mbarrier_init()
    tsjit.syncthreads()
    if tsjit.thread_idx().x == 0:
        tsjit.mbarrier_arrive_expect_tx(barp, src.box_bytes)
        tsjit.tma_load(src, tile, barp, (tsjit.block_idx().x * 8, 0), cache_policy=POLICY)
    tsjit.mbarrier_wait(barp, 0)
    tsjit.fence_proxy_async()
    tsjit.syncthreads()
    if tsjit.thread_idx().x == 0:
        tsjit.tma_store(dst, tile, (tsjit.block_idx().x * 8, 0))
        tsjit.bulk_commit_group()
        tsjit.bulk_wait_group(0)


def test_the_interpreter_runs_hinted_loads_unchanged(monkeypatch):
    np = pytest.importorskip("numpy")
    from tsjit.runtime import driver
    if driver.gpu_available():
        pytest.skip("a GPU is present: host-array TensorMaps then need TSJIT_INTERPRET=1")
    monkeypatch.delenv("TSJIT_INTERPRET", raising=False)
    a = np.random.default_rng().standard_normal((24, 16)).astype(np.float32)
    out = np.full_like(a, np.nan)
    copy_streamed.interpret[(3,), (32,)](tsjit.TensorMap(a, (8, 16)), tsjit.TensorMap(out, (8, 16)), "evict_first")
    assert np.array_equal(out, a)
