"""Pipeline checks of the TaskManager (inventory §2.3): C0 credits, B1/B2 bracketing, D1 DMA
ordering, P1/P2 counts and bytes, P6 interleave, L1 layouts, SG1 split signalling, PP ping-pong;
and the tutorial schedules (a)-(d), which must verify cleanly."""
import warnings

import pytest

from tsjit.errors import VerificationError
from tsjit.ts import (SignalingThreads, Task, VerificationWarning, domain_loop, schedule)
from tsjit.ts.verify import bracketing
from ts_fakes import FakeValue
from ts_pipeline_fakes import (BOX_BYTES, GmemOut, SmemTiles, Staged, async_config, build,
                               consume_schedule, interleaved_domain_lanes, interleaved_warp_lanes,
                               ping_pong, produce_schedule, tma_config, tma_copy)

pytestmark = pytest.mark.filterwarnings("ignore::tsjit.ts.ScheduleWarning")


def fails(check, tasks, graph, **kw):
    with pytest.raises(VerificationError) as err:
        build(tasks, graph, **kw)
    assert err.value.check == check, str(err.value)
    return str(err.value)


# -- the tutorials verify cleanly ---------------------------------------------------------------
@pytest.mark.parametrize("tutorial", [tma_copy, ping_pong, interleaved_warp_lanes,
                                      interleaved_domain_lanes])
def test_tutorial_schedules_verify(tutorial):
    tasks, graph, *_ = tutorial()
    with warnings.catch_warnings():
        warnings.simplefilter("error", VerificationWarning)
        assert build(tasks, graph, exhaustive=True).findings == []


def test_tutorial_table_shows_blocked_consumer_until_first_commit():
    tasks, graph, *_ = tma_copy()
    table = build(tasks, graph).schedule_table().splitlines()
    assert "smem       ConsTrW" in table[3] and table[4].rstrip().endswith("|")
    assert "smem       ->ConsWai" in table[6]


# -- C0 ---------------------------------------------------------------------------------------------
def crossed_rings():
    a = Staged(name="a", pipeline_config=async_config(stages=1, producer=32, consumer=32))
    b = Staged(name="b", pipeline_config=async_config(stages=1, producer=32, consumer=32))

    @schedule
    def relay(inp, out):
        with domain_loop(0, 4):
            inp.wait()
            inp.take()
            out.acquire()
            out.fill()
            out.commit()
            inp.release()
    return [Task("t1", [a], [b], 0, 1, relay(a, b)), Task("t2", [b], [a], 1, 1, relay(b, a))], \
        {a: [b], b: [a]}


def test_c0_deadlock_names_every_blocked_task_and_credit_state():
    text = fails("C0", *crossed_rings())
    assert "task 't1' (warp 0): a ConsumerWait 0 is blocked!" in text
    assert "task 't2' (warp 1): b ConsumerWait 0 is blocked!" in text
    assert "stage 0 phase 0" in text and "0 committed stage(s)" in text and "1 of 1 slot(s) free" in text


def test_c0_deadlock_table_marks_blocked_cells(capsys):
    with pytest.raises(VerificationError):
        build(*crossed_rings(), verbose=True)
    out = capsys.readouterr().out
    assert " BLK | a          ->ConsWai     0 !" in out


def test_c0_unbalanced_commits_and_acquires():
    ring = Staged(name="ring", pipeline_config=async_config(stages=4, producer=32, consumer=32))
    out = GmemOut(name="out")

    @schedule
    def produce(c):
        with domain_loop(0, 4):
            c.acquire()
            c.fill()
            c.commit()

    @schedule
    def consume(c, o):
        with domain_loop(0, 2):
            c.wait()
            o.store(c.take())
            c.release()
    tasks = [Task("p", [], [ring], 0, 1, produce(ring)), Task("c", [ring], [out], 1, 1,
                                                             consume(ring, out))]
    text = fails("C0", tasks, {out: [ring]})
    assert "2x ProducerCommit from ring not consumed" in text and "4 commits, 2 waits" in text
    assert "2x ProducerAcquire on ring not matched by a ConsumerRelease" in text


def test_c0_balance_is_not_judged_on_stand_in_trip_counts():
    ring = Staged(name="ring", pipeline_config=async_config(stages=4, producer=32, consumer=32))
    out = GmemOut(name="out")

    @schedule
    def consume(c, o):
        with domain_loop(0, FakeValue("n")):     # run-time end: simulated with 2 trips
            c.wait()
            o.store(c.take())
            c.release()
    tasks = [Task("p", [], [ring], 0, 1, produce_schedule_static(ring)),
             Task("c", [ring], [out], 1, 1, consume(ring, out))]
    assert build(tasks, {out: [ring]}).findings == []


def test_c0_ring_depth_lets_producer_run_ahead():
    tasks, graph, ring = ping_pong(async_config(stages=2, producer=128, consumer=128))
    rows = build(tasks, graph).simulation.rows
    producer_cells = [row.get(id(tasks[0])) for row in rows]
    acquires = [i for i, e in enumerate(producer_cells) if e and e.step.stage.name == "ProducerAcquire"]
    assert len(acquires) == 2 and acquires[0] == 0


# -- B1 ----------------------------------------------------------------------------------------------
def ring_tasks(consume_fn, produce_fn=produce_schedule, **config):
    ring = Staged(name="ring", pipeline_config=async_config(**config) if config else
                  async_config(stages=2, producer=128, consumer=128))
    out = GmemOut(name="out")
    tasks = [Task("prod", [], [ring], 0, 4, produce_fn(ring)),
             Task("cons", [ring], [out], 4, 4, consume_fn(ring, out))]
    return tasks, {out: [ring]}


def test_b1_work_before_wait():
    @schedule
    def early(c, o):
        with domain_loop(FakeValue("b"), FakeValue("n"), FakeValue("g")):
            stage = c.take()
            c.wait()
            o.store(stage)
            c.release()
    text = fails("B1", *ring_tasks(early))
    assert "'cons'" in text and "'ring'" in text and "schedule step #0" in text
    assert "ring.wait()" in text


def test_b1_split_consumer_needs_a_downstream_open():
    ring = Staged(name="ring", pipeline_config=async_config(stages=2, producer=32, consumer=32))
    mid = Staged(name="mid", pipeline_config=async_config(stages=2, producer=32, consumer=32))
    out = GmemOut(name="out")

    @schedule
    def peek(c, m):          # waits on ring, reads it, hands a token on through mid
        with domain_loop(0, 4):
            c.wait()
            c.take()
            m.acquire()
            m.fill()
            m.commit()

    def finisher(with_proxy):
        @schedule
        def finish(c, m, o):  # releases ring for the first task
            with domain_loop(0, 4):
                if with_proxy:
                    m.wait()          # mid is downstream of ring: proves ring's stage is full
                stage = c.take()
                o.store(stage)
                if not with_proxy:
                    m.wait()          # too late to prove anything about ring
                m.release()
                c.release()
        return finish

    def tasks(with_proxy):
        return [Task("prod", [], [ring], 0, 1, produce_schedule_static(ring)),
                Task("peek", [ring], [mid], 1, 1, peek(ring, mid)),
                Task("finish", [ring, mid], [out], 2, 1, finisher(with_proxy)(ring, mid, out))], \
            {mid: [ring], out: [ring, mid]}
    manager = build(*tasks(True))
    assert manager.findings == [] and ring.pipeline_config.advance_on_wait   # derived
    text = fails("B1", *tasks(False))
    assert "'finish'" in text and "outside a wait/release bracket" in text


@schedule
def produce_schedule_static(c):
    with domain_loop(0, 4):
        c.acquire()
        c.fill()
        c.commit()


# -- B2 ----------------------------------------------------------------------------------------------
def test_b2_dangling_try_wait():
    @schedule
    def probe_last(c, o):
        with domain_loop(FakeValue("b"), FakeValue("n"), FakeValue("g")):
            c.wait()
            o.store(c.take())
            c.release()
            c.try_wait()      # next iteration's wait follows it, the last one has none
    text = fails("B2", *ring_tasks(probe_last))
    assert "'cons'" in text and "ring.try_wait()" in text and "never followed" in text


def test_b2_try_acquire_followed_by_work():
    @schedule
    def probe_then_fill(c):
        with domain_loop(FakeValue("b"), FakeValue("n"), FakeValue("g")):
            c.acquire()
            c.try_acquire()
            c.fill()
            c.commit()
    with pytest.warns(VerificationWarning, match=r"\[B2\]"):
        manager = build(*ring_tasks(consume_schedule, probe_then_fill), skip_validation=True)
    found = [f.message for f in bracketing.check_try_ops(manager)]
    assert len(found) == 1 and "ProducerWork 'fill'" in found[0] and "ring.acquire()" in found[0]


# -- D1 ----------------------------------------------------------------------------------------------
def dma_chain(release_first: bool, labels=None):
    staged = Staged(name="staged", pipeline_config=async_config(stages=2, producer=32, consumer=32))
    smem = SmemTiles(name="smem", pipeline_config=tma_config(stages=2, consumer=32, num_bytes=BOX_BYTES))
    out = GmemOut(name="out")

    @schedule
    def relay(a, b):
        with domain_loop(0, 4):
            a.wait()
            a.take()
            if release_first:
                a.release()
            b.acquire()
            b.tma_load()
            b.commit()
            if not release_first:
                a.release()

    @schedule
    def drain(b, o):
        with domain_loop(0, 4):
            b.wait()
            o.store(b.read())
            b.release()
    tasks = [Task("fill", [], [staged], 0, 1, produce_schedule_static(staged)),
             Task("relay", [staged], [smem], 1, 1, relay(staged, smem)),
             Task("drain", [smem], [out], 2, 1, drain(smem, out))]
    options = {"dma_consumer_release_labels": labels} if labels else {}
    return tasks, {smem: [staged], out: [smem]}, options


def test_d1_release_after_dma_passes():
    tasks, graph, options = dma_chain(False, labels={("staged", "smem"): {"tma_load"}})
    assert build(tasks, graph, **options).findings == []


def test_d1_release_before_dma():
    tasks, graph, options = dma_chain(True)
    text = fails("D1", tasks, graph, **options)
    assert "'relay'" in text and "'staged'" in text and "'smem'" in text and "TmaAsync" in text


def test_d1_unknown_label():
    tasks, graph, options = dma_chain(False, labels={("staged", "smem"): {"tma_laod"}})
    text = fails("D1", tasks, graph, **options)
    assert "'tma_laod'" in text and "'tma_load'" in text


# -- P1 ----------------------------------------------------------------------------------------------
def test_p1_consumer_count_gives_both_modes():
    tasks, graph, *_ = tma_copy(tma_config(consumer=64))
    text = fails("P1", tasks, graph)
    assert "'smem' (TmaAsync) consumer side" in text and "is 64" in text
    assert "128 (all-thread mode" in text and "4 (warps x 1 lane" in text and "'store'" in text


def test_p1_one_lane_per_warp_release_passes():
    tasks, graph, *_ = tma_copy(tma_config(consumer=4))
    assert build(tasks, graph).findings == []


def test_p1_tma_producer_counts_warps():
    tasks, graph, *_ = tma_copy(tma_config(producer=2))
    text = fails("P1", tasks, graph)
    assert "producer_group.size is 2" in text and "1 (one elected lane per producer warp" in text


def test_p1_async_producer_threads():
    tasks, graph, _ = ping_pong(async_config(stages=2, producer=96, consumer=128))
    text = fails("P1", tasks, graph)
    assert "is 96" in text and "128 (every thread: warps x 32)" in text and "4 (one lane per" in text


def test_p1_interleaved_warp_lane_counts_one_warp():
    tasks, graph, _ = interleaved_warp_lanes(
        async_config(stages=4, producer=64, consumer=32, interleave_stride=2))
    text = fails("P1", tasks, graph)
    assert "is 64" in text and "32 (every thread" in text


def test_p1_task_warp_leader_hint():
    config = tma_config(producer=2, num_bytes=BOX_BYTES // 2)
    tasks, graph, *_ = tma_copy(config, load_warps=2)
    assert build(tasks, graph).findings == []        # two warps arm half a box each
    config = tma_config(producer=1, num_bytes=2 * BOX_BYTES)
    tasks, graph, *_ = tma_copy(config, load_warps=2)
    text = fails("P1", tasks, graph)
    assert "TaskWarpLeader" in text


# -- P2 ----------------------------------------------------------------------------------------------
def test_p2_num_bytes_against_tensor_map_box():
    tasks, graph, *_ = tma_copy(tma_config(num_bytes=8192))
    text = fails("P2", tasks, graph)
    assert "num_bytes is 8192" in text and f"{BOX_BYTES} B" in text and f"num_bytes={BOX_BYTES}" in text


def test_p2_task_warp_leader_needs_per_warp_bytes():
    leader = SignalingThreads.TaskWarpLeader
    config = tma_config(producer=1, num_bytes=4096, producer_signaling_threads=leader)
    tasks, graph, smem, _ = tma_copy(config, load_warps=2)
    smem.src_map = None                                   # no TensorMap: fall back to per-warp bytes
    assert "num_bytes_per_warp_per_cta is required" in fails("P2", tasks, graph)
    config = tma_config(producer=1, num_bytes=4096, producer_signaling_threads=leader,
                        num_bytes_per_warp_per_cta=4096)
    tasks, graph, smem, _ = tma_copy(config, load_warps=2)
    smem.src_map = None
    text = fails("P2", tasks, graph)
    assert "4096 x CTAs 1 x warps per arming 2 = 8192" in text
    config = tma_config(producer=1, num_bytes=8192, producer_signaling_threads=leader,
                        num_bytes_per_warp_per_cta=4096)
    tasks, graph, smem, _ = tma_copy(config, load_warps=2)
    smem.src_map = None
    assert build(tasks, graph).findings == []


# -- P6 ----------------------------------------------------------------------------------------------
def test_p6_task_that_is_no_lane():
    ring = Staged(name="ring", pipeline_config=async_config(stages=4, producer=32, consumer=32,
                                                            interleave_stride=2))
    out = GmemOut(name="out")
    tasks = [Task("producer", [], [ring], 0, 3, produce_schedule(ring)),
             Task("consumer", [ring], [out], 3, 2, consume_schedule(ring, out))]
    with pytest.warns(VerificationWarning) as record:
        build(tasks, {out: [ring]}, skip_validation=True)
    text = "\n".join(str(r.message) for r in record if "[P6]" in str(r.message))
    assert "'producer'" in text and "3 warp(s) (not 2)" in text and "run-time value" in text


def test_p6_colliding_domain_lanes():
    tasks, graph, _ = interleaved_domain_lanes(lanes=(0, 0))
    with pytest.warns(VerificationWarning) as record:
        build(tasks, graph, skip_validation=True)
    text = "\n".join(str(r.message) for r in record if "[P6]" in str(r.message))
    assert "lane(s) [1]" in text and "stages [1, 3]" in text and "'lane0'" in text


def test_p6_type_does_not_allow_interleave():
    from tsjit.ts import PipelineConfig
    from ts_pipeline_fakes import group
    config = PipelineConfig.create_umma_async_pipeline_cfg(4, group(1), group(64),
                                                           interleave_stride=2)
    tasks, graph, _ = interleaved_warp_lanes(config)
    with pytest.warns(VerificationWarning) as record:
        build(tasks, graph, skip_validation=True)
    assert any("[P6]" in str(r.message) and "UmmaAsync" in str(r.message) for r in record)


# -- L1 ----------------------------------------------------------------------------------------------
def test_l1_layouts_disagree():
    tasks, graph, smem, _ = tma_copy(tma_config(cta_layout_vmnk=(1, 2, 1, 1)), registers=False)
    extra = SmemTiles(name="extra", pipeline_config=tma_config(cta_layout_vmnk=(1, 1, 2, 1)))
    out = GmemOut(name="out2")
    tasks += [Task("load2", [], [extra], 8, 1, produce_tma(extra)),
              Task("store2", [extra], [out], 9, 4, store_tma(extra, out))]
    graph[out] = [extra]
    text = fails("L1", tasks, graph)
    assert "(1, 2, 1, 1)" in text and "(1, 1, 2, 1)" in text and "'extra'" in text


def test_l1_note_for_unset_layout(capsys):
    tasks, graph, smem, _ = tma_copy(tma_config(cta_layout_vmnk=(1, 1, 1, 1)), registers=False)
    extra = Staged(name="extra", pipeline_config=async_config(stages=2, producer=32, consumer=128))
    out = GmemOut(name="out2")
    tasks += [Task("fill2", [], [extra], 8, 1, produce_schedule(extra)),
              Task("drain2", [extra], [out], 9, 4, consume_schedule(extra, out))]
    graph[out] = [extra]
    build(tasks, graph, verbose=True)
    assert "[cta-layout-check] NOTE: extra" in capsys.readouterr().out


@schedule
def produce_tma(s):
    with domain_loop(FakeValue("b"), FakeValue("n"), FakeValue("g")):
        s.acquire()
        s.tma_load()
        s.commit()


@schedule
def store_tma(s, g):
    with domain_loop(FakeValue("b"), FakeValue("n"), FakeValue("g")):
        s.wait()
        g.store(s.read())
        s.release()


# -- SG1 ---------------------------------------------------------------------------------------------
def test_sg1_wait_signalling_without_split_consumer():
    config = async_config(stages=2, producer=128, consumer=128,
                          consumer_wait_signaling_threads=SignalingThreads.All)
    tasks, graph, _ = ping_pong(config)
    text = fails("SG1", tasks, graph)
    assert "'ring'" in text and "split consumer" in text


# -- PP ----------------------------------------------------------------------------------------------
def test_pp_self_edge_on_pipelined_ring_passes():
    tasks, graph, ring = ping_pong()
    graph[ring] = [ring]
    assert build(tasks, graph).findings == []


def test_pp_self_edge_without_pipeline():
    from ts_pipeline_fakes import GmemIn
    src, mid = GmemIn(name="src"), GmemIn(name="mid")

    @schedule
    def loop_back(s, m):
        with domain_loop(0, 4):
            s.load()
            m.load()
    task = Task("t", [src, mid], [mid], 0, 1, loop_back(src, mid))
    text = fails("PP", [task], {mid: [src, mid]})
    assert "{mid: [mid]}" in text and "no pipeline_config" in text and "no task's schedule produces" in text


# -- skip_validation and multi-task sides ---------------------------------------------------------
def test_skip_validation_demotes_c0_and_p1_to_warnings():
    with pytest.warns(VerificationWarning) as record:
        build(*crossed_rings(), skip_validation=True)
    assert any("[C0]" in str(r.message) and "is blocked!" in str(r.message) for r in record)
    tasks, graph, *_ = tma_copy(tma_config(consumer=64))
    with pytest.warns(VerificationWarning, match=r"\[P1\].*is 64"):
        build(tasks, graph, skip_validation=True)


def test_p1_sums_the_warps_of_every_consumer_task():
    def two_readers(consumer):
        smem = SmemTiles(name="smem", pipeline_config=tma_config(consumer=consumer))
        a, b = GmemOut(name="a"), GmemOut(name="b")
        tasks = [Task("load", [], [smem], 0, 1, produce_tma(smem)),
                 Task("read_a", [smem], [a], 1, 4, store_tma(smem, a)),
                 Task("read_b", [smem], [b], 5, 2, store_tma(smem, b))]
        return tasks, {a: [smem], b: [smem]}
    assert build(*two_readers(6 * 32)).findings == []
    text = fails("P1", *two_readers(128))
    assert "192 (all-thread mode" in text and "6 (warps x 1 lane" in text
    assert "'read_a'" in text and "'read_b'" in text
