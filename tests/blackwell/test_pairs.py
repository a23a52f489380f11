"""2-CTA UMMA pairs (``cta_layout_vmnk`` V = 2) lowered from the protocol table, with the MMA task pinned to the
pair leader by ``run_only_on_cta_id=0`` instead of ``SignalingThreads.CtaLeader`` (tutorial 6 uses the latter):
the TmaUmma ring's copies complete on the leader's full barrier (armed there only, both CTAs' bytes), its
release is a ``cta_group::2`` commit multicast to both CTAs, the accumulator's commit reaches both CTAs'
full barriers, the epilogues release to the leader (remote arrives), TMEM is allocated ``cta_group::2`` by
both CTAs and freed after a cluster barrier.  The protocol table's pair rows, and the checks that refuse a
pair program's mistakes, are tested here too."""
import re

import pytest

import tsjit
from tsjit import ts
from tsjit.examples import bw_persistent_gemm as t6
from tsjit.ts import protocol, tx_bytes
from tsjit.ts.protocol import ArmTx, CommitUmma, Ctas, Gate, WaitParity
from tsjit.ts.enums import ScheduleStage as S
from tsjit.ts.verify import exhaustive
from tsjit.ts.work_queue import TileSchedulerConfig, WorkQueue

PAIR = (2, 1, 1, 1)


@tsjit.kernel
def pair_gemm(a_map, b_map, c, bias, K_TILES: tsjit.Constexpr[int]):
    """One 256 x 256 tile per pair, static queue; the MMA task runs on CTA 0 (the pair leader) only."""
    M, N = c.shape[0], c.shape[1]
    one = ts.CooperativeGroup(ts.Agent.Thread, 1)
    ab_cfg = ts.PipelineConfig.create_tma_umma_pipeline_cfg(
        t6.STAGES, t6.STAGE_BYTES_PER_WARP * 2, ts.CooperativeGroup(ts.Agent.Thread, 2), one, PAIR,
        num_bytes_per_warp_per_cta=t6.STAGE_BYTES_PER_WARP)
    acc_cfg = ts.PipelineConfig.create_umma_async_pipeline_cfg(1, one, ts.CooperativeGroup(ts.Agent.Thread, 256), PAIR)
    queue = WorkQueue(name="tiles", tile_scheduler_config=TileSchedulerConfig.
                      create_static_persistent_tile_scheduler_params(t6.tile_count(M, N, PAIR)))
    ab = t6.ABStages(name="ab", pipeline_config=ab_cfg, a_map=a_map, b_map=b_map, M=M, layout=PAIR)
    acc = t6.Accumulators(name="acc", pipeline_config=acc_cfg, ab=ab, c=c, bias=bias, M=M, N=N, layout=PAIR)

    def load(which):
        @ts.schedule
        def body(q: WorkQueue, s: t6.ABStages):
            with ts.work_tile_loop(q):
                with ts.domain_loop(0, K_TILES, 1):
                    s.acquire()
                    if tsjit.const_expr(which == "a"):
                        s.load_a()
                    else:
                        s.load_b()
                    s.commit()
                q.wait()
                q.get_and_advance_work_tile()
                q.release()
        return body(queue, ab)

    @ts.schedule
    def mma_schedule(q: WorkQueue, s: t6.ABStages, t: t6.Accumulators):
        with ts.work_tile_loop(q):
            t.acquire()
            with ts.domain_loop(0, K_TILES, 1):
                s.wait()
                stage = s.operands()
                t.mma(stage)
                s.release()
            t.commit()
            q.wait()
            q.get_and_advance_work_tile()
            q.release()

    @ts.schedule
    def epilogue_schedule(q: WorkQueue, t: t6.Accumulators):
        with ts.work_tile_loop(q):
            with ts.domain_loop(0, 0, 1):
                pass
            t.wait()
            t.store()
            t.release()
            q.wait()
            q.get_and_advance_work_tile()
            q.release()

    @ts.schedule
    def idle_schedule(q: WorkQueue):
        with ts.work_tile_loop(q):
            with ts.domain_loop(0, 0, 1):
                pass
            q.wait()
            q.get_and_advance_work_tile()
            q.release()

    tasks = [ts.Task("load_a", [queue], [ab], warp_idx=0, num_warps=1, schedule=load("a")),
             ts.Task("load_b", [queue], [ab], warp_idx=1, num_warps=1, schedule=load("b")),
             ts.Task("mma", [queue, ab], [acc], warp_idx=2, num_warps=1, schedule=mma_schedule(queue, ab, acc),
                     run_only_on_cta_id=0),
             ts.Task("idle", [queue], [], warp_idx=3, num_warps=1, schedule=idle_schedule(queue)),
             ts.Task("epilogue", [queue, acc], [], warp_idx=4, num_warps=4, schedule=epilogue_schedule(queue, acc))]
    manager = ts.TaskManager(tasks, {ab: [queue], acc: [ab, queue]}, verbose=False)
    manager.setup_resources_and_tasks()
    manager.run()


def _specs():
    a_map = tsjit.tensormap_spec(tsjit.BFloat16, (t6.ROWS, t6.BK), swizzle="128B")
    b_map = tsjit.tensormap_spec(tsjit.BFloat16, t6.b_box(PAIR), swizzle="128B")
    return a_map, b_map, tsjit.spec((512, 512), tsjit.BFloat16), tsjit.spec((512,), tsjit.Float32)


@pytest.fixture(scope="module")
def built():
    seen = []
    original = exhaustive.check_all_interleavings
    exhaustive.check_all_interleavings = lambda *a, **k: seen.append(original(*a, **k)) or seen[-1]
    try:
        compiled = tsjit.compile(pair_gemm, *_specs(), 1, target="sm_100a")
    finally:
        exhaustive.check_all_interleavings = original
    return compiled, seen


def test_a_pair_with_the_mma_task_on_cta_0_verifies_safe_with_both_ctas_modelled(built):
    _, verdicts = built
    assert [v.verdict for v in verdicts] == ["SAFE"], verdicts[0].format()
    assert any("every CTA of the 2-CTA cluster is modelled" in note for note in verdicts[0].notes)


def test_every_tcgen05_instruction_is_cta_group_2(built):
    ptx = built[0].ptx
    groups = set(re.findall(r"tcgen05\.(?:mma|commit|alloc|dealloc|relinquish_alloc_permit)\.cta_group::(\d)", ptx))
    assert groups == {"2"}
    assert "tcgen05.mma.cta_group::2.kind::f16" in ptx


def test_tmem_is_freed_after_a_cluster_barrier(built):
    ptx = built[0].ptx
    dealloc = ptx.index("tcgen05.dealloc.cta_group::2")
    assert "barrier.cluster.wait" in ptx[ptx.rindex("tcgen05.fence::before_thread_sync", 0, dealloc):dealloc]


def test_the_leader_arms_and_both_ctas_complete_on_its_barrier(built):
    ptx = built[0].ptx
    assert ptx.count(".cta_group::2 [") >= 2                      # load_a and load_b, leader-routed
    assert "mbarrier.arrive.expect_tx" in ptx
    assert "mapa.shared::cluster" in ptx


def test_the_mma_task_runs_on_cta_0_only(built):
    assert "%cluster_ctarank" in built[0].ptx


def test_the_pair_rows_of_the_protocol_table():
    one = ts.CooperativeGroup(ts.Agent.Thread, 1)
    leader = ts.SignalingThreads.CtaLeader
    ab = ts.PipelineConfig.create_tma_umma_pipeline_cfg(2, 32768, ts.CooperativeGroup(ts.Agent.Thread, 2), one, PAIR,
                                                        consumer_signaling_threads=leader,
                                                        num_bytes_per_warp_per_cta=16384)
    arm = next(a for a in protocol.actions(ab, S.ProducerAcquire) if isinstance(a, ArmTx))
    assert arm.gate is Gate.PairLeader and arm.ctas is Ctas.Local
    wait = next(a for a in protocol.actions(ab, S.ConsumerWait) if isinstance(a, WaitParity))
    assert wait.gate is Gate.PairLeader
    release = protocol.actions(ab, S.ConsumerRelease)[0]
    assert isinstance(release, CommitUmma) and release.gate is Gate.PairLeader and release.ctas is Ctas.AllInCluster
    assert tx_bytes.tx_cta_factor(ab) == 2 and tx_bytes.stage_copy_bytes(ab, 1) == (32768, 1)
    acc = ts.PipelineConfig.create_umma_async_pipeline_cfg(1, one, ts.CooperativeGroup(ts.Agent.Thread, 256), PAIR,
                                                           producer_signaling_threads=leader)
    commit = protocol.actions(acc, S.ProducerCommit)[0]
    assert isinstance(commit, CommitUmma) and commit.gate is Gate.PairLeader and commit.ctas is Ctas.Local
    release = protocol.actions(acc, S.ConsumerRelease, 4)[0]
    assert release.ctas is Ctas.PairLeader and release.landing(acc) == 2


@tsjit.kernel
def leader_routed_copy(src_map, out):
    """A 2-CTA cluster: CTA r TMA-loads rows [16 r, 16 r + 16) of src into its own shared memory with
    ``cta_group=2``; both copies complete on CTA 0's barrier (armed there for both); after CTA 0's wait and a
    cluster barrier each CTA writes its tile to out[r]."""
    tile = tsjit.shared_array(tsjit.Float32, (16, 32), align=1024)
    bar = tsjit.shared_array(tsjit.Int64, (1,), align=8).ptr
    rank = tsjit.cluster_ctarank()
    tx = tsjit.thread_idx().x
    if tx == 0:
        if rank == 0:
            tsjit.mbarrier_init(bar, 1)
        tsjit.fence_mbarrier_init()
    tsjit.cluster_sync()
    if tx == 0:
        if rank == 0:
            tsjit.mbarrier_arrive_expect_tx(bar, 2 * 16 * 32 * 4)
        tsjit.tma_load(src_map, tile, bar, (rank * 16, 0), cta_group=2)
        if rank == 0:
            tsjit.mbarrier_wait(bar, 0)
    tsjit.cluster_sync()
    for i in tsjit.range_constexpr(4):
        out[rank, (tx * 4 + i) // 32, (tx * 4 + i) % 32] = tile[(tx * 4 + i) // 32, (tx * 4 + i) % 32]


def test_the_leader_routed_tma_load_runs_under_the_interpreter(monkeypatch):
    """Each CTA's box lands in its own shared memory, both complete CTA 0's barrier (tsjit/interpret/tma_pair.py)."""
    import numpy as np
    monkeypatch.setenv("TSJIT_INTERPRET", "1")
    monkeypatch.setenv("TSJIT_TARGET", "sm_100a")
    src = np.random.default_rng().standard_normal((32, 32)).astype(np.float32)
    out = tsjit.empty((2, 16, 32), tsjit.Float32).fill_bytes(0xFF)
    src_map = tsjit.TensorMap(tsjit.to_device(src), (16, 32))
    leader_routed_copy[(2,), (128,)](src_map, out, cluster=(2, 1, 1))
    np.testing.assert_array_equal(out.numpy(), src.reshape(2, 16, 32))


def test_the_leader_routed_tma_load_assembles():
    compiled = tsjit.compile(leader_routed_copy, tsjit.tensormap_spec(tsjit.Float32, (16, 32)),
                             tsjit.spec((2, 16, 32), tsjit.Float32), target="sm_100a")
    assert re.search(r"cp\.async\.bulk\.tensor\.2d\.shared::cluster\.global\.tile\.mbarrier::complete_tx::bytes"
                     r"\.cta_group::2 \[%r\d+\], \[%rd\d+, \{%r\d+, %r\d+\}\], \[%r\d+\];", compiled.ptx)
