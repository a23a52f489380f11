"""when_true / when_false correlation keys in the exhaustive checker (issue 12 §2): guards with one
key take the same value in every task; guards with different keys are independent, so a producer
and a consumer guarded by different keys can disagree (and here deadlock); so can unkeyed guards of
different tasks, while unkeyed guards on one token see one value."""
import pytest

from tsjit.ts import Task, domain_loop, schedule, when_false, when_true
from tsjit.ts.verify.exhaustive import check_all_interleavings
from tsjit.ts.verify.exhaustive_expand import program_variants
from verify_schedules import FakeValue, GmemDest, GmemSource, Ring, async_config

pytestmark = pytest.mark.filterwarnings("ignore::tsjit.ts.ScheduleWarning")


def _program(producer_key, consumer_key, consumer_guard=when_true):
    ring = Ring(name="ring", pipeline_config=async_config(2, producers=32, consumers=128))
    flags_p, flags_c = GmemSource(name="flags_p", src=FakeValue("fp")), GmemSource(name="flags_c", src=FakeValue("fc"))
    out = GmemDest(name="out", dst=FakeValue("o"), smem=ring)

    @schedule
    def produce(f: GmemSource, r: Ring):
        flag = f.load()
        with domain_loop(0, 6, 1):
            with when_true(flag, key=producer_key):
                r.acquire()
                r.fill()
                r.commit()

    @schedule
    def consume(f: GmemSource, r: Ring, o: GmemDest):
        flag = f.load()
        with domain_loop(0, 6, 1):
            with consumer_guard(flag, key=consumer_key):
                r.wait()
                o.store(r.read())
                r.release()

    tasks = [Task("producer", [flags_p], [ring], 0, 1, produce(flags_p, ring)),
             Task("consumer", [flags_c, ring], [out], 1, 4, consume(flags_c, ring, out))]
    return tasks, {ring: [flags_p], out: [ring, flags_c]}


def test_guards_with_one_key_agree_across_tasks():
    tasks, graph = _program("tile_valid", "tile_valid")
    assert [v.name for v in program_variants(tasks)] == ["all tiles run", "when_true blocks not taken"]
    assert check_all_interleavings(tasks, graph).verdict == "SAFE"


def test_guards_with_different_keys_are_independent():
    tasks, graph = _program("a", "b")
    names = [v.name for v in program_variants(tasks)]
    assert len(names) == 4 and "when_true key 'a' taken, key 'b' not taken" in names
    result = check_all_interleavings(tasks, graph)
    assert result.verdict == "UNSAFE" and result.deadlocks > 0, result.format()


def test_when_false_with_the_same_key_is_the_complement():
    """Producer under when_true(key k), consumer under when_false(key k): they never both run."""
    tasks, graph = _program("k", "k", consumer_guard=when_false)
    result = check_all_interleavings(tasks, graph)
    assert result.verdict == "UNSAFE" and result.deadlocks > 0, result.format()


def test_unkeyed_guards_of_different_tasks_are_independent():
    """Without a key nothing says the two tasks' flags agree: the producer may skip a fill the
    consumer waits for (the checker used to give every unkeyed guard one shared value)."""
    tasks, graph = _program(None, None)
    names = [v.name for v in program_variants(tasks)]
    assert len(names) == 4 and "when_true task 'producer' unkeyed [#0].item taken, " \
                               "task 'consumer' unkeyed [#0].item not taken" in names, names
    result = check_all_interleavings(tasks, graph)
    assert result.verdict == "UNSAFE" and result.deadlocks > 0, result.format()


def test_unkeyed_guards_on_one_token_see_one_value():
    ring = Ring(name="ring", pipeline_config=async_config(2, producers=32, consumers=32))
    flags = GmemSource(name="flags", src=FakeValue("f"))
    out = GmemDest(name="out", dst=FakeValue("o"), smem=ring)

    @schedule
    def produce(r: Ring):
        with domain_loop(0, 4, 1):
            r.acquire()
            r.fill()
            r.commit()

    @schedule
    def consume(f: GmemSource, r: Ring, o: GmemDest):
        flag = f.load()
        with domain_loop(0, 4, 1):
            with when_true(flag):
                r.wait()
            with when_false(flag):
                r.wait()
            with when_true(flag):
                o.store(r.read())
            r.release()

    tasks = [Task("producer", [], [ring], 0, 1, produce(ring)),
             Task("consumer", [flags, ring], [out], 1, 1, consume(flags, ring, out))]
    assert [v.name for v in program_variants(tasks)] == ["all tiles run", "when_true blocks not taken"]
    assert check_all_interleavings(tasks, {out: [ring, flags]}).verdict == "SAFE"
