"""Mistakes in the brackets, order and trip counts of one producer / consumer ring."""
from __future__ import annotations

from broken.builders import ASYNC, CONS, PROD, PROD_TMA, TMA, case, ring_program
from verify_schedules import FakeValue, GmemDest, Program, Ring, TaskSpec, async_config

W, R, S, RL = ("ring", "wait"), ("ring", "read"), ("out", "store"), ("ring", "release")
A, F, C, T = ("ring", "acquire"), ("ring", "fill"), ("ring", "commit"), ("ring", "tma_load")


def consumer_case(name, mistake, consumer, config=ASYNC(), producer=PROD, broken_kw=None,
                  **expect):
    return case(name, mistake,
                lambda: ring_program(config, producer, consumer, **(broken_kw or {})),
                lambda: ring_program(config, producer, CONS), **expect)


def producer_case(name, mistake, producer, config=ASYNC(), good=PROD, **expect):
    return case(name, mistake,
                lambda: ring_program(config, producer, CONS),
                lambda: ring_program(config, good, CONS), **expect)


def same_task(entries):
    """One task both produces and consumes ``ring`` (ping-pong through itself)."""
    def program():
        def resources():
            ring = Ring(name="ring", pipeline_config=async_config(2, producers=128))
            return {"ring": ring, "out": GmemDest(name="out", dst=FakeValue("out"), smem=ring)}
        spec = TaskSpec("pingpong", 0, 4, ("ring",), ("ring", "out"), {"loop": entries})
        return Program("same task", resources, [spec],
                       lambda r: {r["out"]: [r["ring"]], r["ring"]: [r["ring"]]})
    return program


CONS_WORK = ("'cons'", "'ring'", "ConsumerWork")
CONS_WAIT = ("'cons'", "'ring'", "ConsumerWait")
PROD_WORK = ("'prod'", "'ring'", "ProducerWork")
PROD_ACQ = ("'prod'", "'ring'", "ProducerAcquire")

CASES = [
    consumer_case("release_before_read", "the consumer releases the stage, then reads it",
                  [W, RL, R, S], B1=CONS_WORK, X=CONS_WORK),
    consumer_case("release_before_store", "the consumer releases the stage before its store "
                  "(which reads the stage through GmemDest.smem) ran", [W, R, RL, S],
                  X=("'cons'", "'ring'", "'out' ProducerWork 'store'")),
    consumer_case("read_before_wait", "the consumer reads the stage before waiting for it",
                  [R, W, S, RL], B1=CONS_WORK, X=CONS_WORK),
    consumer_case("wait_missing", "the consumer never waits: it reads stages still being "
                  "filled", [R, S, RL], B1=CONS_WORK, X=CONS_WORK),
    consumer_case("release_missing", "the consumer never releases: the producer waits for a "
                  "free stage forever", [W, R, S], B1=CONS_WAIT, X=PROD_ACQ),
    consumer_case("release_twice", "the consumer releases twice per iteration, handing the "
                  "producer stages still being read", [W, R, S, RL, RL], C0=CONS_WAIT,
                  X=CONS_WAIT),
    consumer_case("try_wait_without_wait", "a try_wait is not followed by its wait: the "
                  "consumer reads whether or not the stage is full",
                  [("ring", "try_wait"), R, S, RL], B1=CONS_WORK, X=CONS_WORK),
    consumer_case("release_only_on_last_iteration", "release sits in a last_iter() block: "
                  "the ring runs dry after num_stages iterations",
                  [W, R, S, ("last_iter", [RL])], B1=CONS_WAIT, X=PROD_ACQ),
    consumer_case("consumer_runs_fewer_iterations", "the consumer's domain is one iteration "
                  "shorter than the producer's", CONS, broken_kw=dict(cons_domain=(0, 5, 1)),
                  C0=("'ring'", "ProducerCommit"), X=PROD_ACQ + ("producer tail",)),
    producer_case("commit_without_acquire", "the producer fills and commits without "
                  "acquiring: it overwrites stages the consumer still reads", [F, C],
                  B1=PROD_WORK, X=PROD_WORK),
    producer_case("wait_with_no_commit", "the producer never commits: the consumer waits for "
                  "a full stage forever", [A, F], C0=CONS_WAIT, X=CONS_WAIT),
    producer_case("fill_before_acquire", "the producer writes the stage before acquiring it",
                  [F, A, C], B1=PROD_WORK, X=PROD_WORK),
    producer_case("fill_after_commit", "the producer commits, then writes: the consumer can "
                  "read a half-written stage", [A, C, F], B1=PROD_WORK, X=PROD_WORK),
    producer_case("acquire_twice_one_stage", "advance_on_acquire ring of one stage acquired "
                  "twice per iteration: the second acquire waits for a release that needs the "
                  "commit after it", [A, A, F, C], config=ASYNC(1, advance_on_acquire=True),
                  C0=PROD_ACQ, X=PROD_ACQ),
    producer_case("tma_acquire_twice", "a TMA producer acquires twice per stage: it arms the "
                  "full barrier twice (two arrivals, twice the bytes)", [A, A, T, C],
                  config=TMA(), good=PROD_TMA, B1=PROD_ACQ, X=PROD_ACQ),
    producer_case("try_acquire_without_acquire", "a TMA producer probes with try_acquire but "
                  "never acquires: the stage is never armed", [("ring", "try_acquire"), T, C],
                  config=TMA(), good=PROD_TMA, B1=PROD_WORK, X=CONS_WAIT),
    producer_case("acquire_only_on_first_iteration", "acquire sits in a first_iter() block: "
                  "later iterations overwrite stages without waiting",
                  [("first_iter", [A]), F, C], B1=PROD_WORK, X=PROD_WORK),
    case("producer_and_consumer_in_one_task", "one task waits for its own commit before "
         "making it", same_task([A, F, W, R, S, C, RL]), same_task([A, F, C, W, R, S, RL]),
         C0=("'pingpong'", "'ring'", "ConsumerWait"),
         X=("'pingpong'", "'ring'", "ConsumerWait")),
]
