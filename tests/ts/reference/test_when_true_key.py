"""``when_true(tok, key=)`` / ``when_false``: a block guarded by a task-local value read at run time,
correlated across tasks by its key (the feature inventory §1.2).  A producer and a consumer task each
read one flag and guard their side of a ring with ``when_true(flag, key="valid")``: the checker takes
the two guards as one value (SAFE), the kernel compiles for sm_90a and runs on the CPU interpreter
(flag 1: every chunk copied; flag 0: the poisoned output untouched).  Without the key nothing ties
the two flags together, and the checker reports the deadlock of the producer skipping what the
consumer waits for."""
import re
from dataclasses import dataclass

import numpy as np
import pytest

import tsjit
from tsjit import ts
from tsjit.errors import VerificationError
from test_pipeline_config import Out, Ring

conformance = pytest.mark.conformance
CHUNK = 32


@dataclass(kw_only=True)
class Flag(ts.MemoryResource):
    """One Int32 flag in global memory, read by consumer work."""

    flags: object
    value: ts.TaskLocalVariable = ts.TaskLocalVariable.uninitialized()

    def __post_init__(self):
        self.value = ts.TaskLocalVariable(tsjit.Int32, default=0)

    @ts.consumer_work(returns=value)
    def load(self, stage_info):
        return self.flags[0]


@tsjit.kernel
def guarded_copy(flags, x, y, n_chunks, KEY: tsjit.Constexpr):
    cfg = ts.PipelineConfig.create_async_async_pipeline_cfg(
        2, ts.CooperativeGroup(ts.Agent.Thread, 32), ts.CooperativeGroup(ts.Agent.Thread, 32))
    flag_p, flag_c = Flag(name="flag_p", flags=flags), Flag(name="flag_c", flags=flags)
    chunks = Ring(name="chunks", pipeline_config=cfg, x=x, chunk=CHUNK)
    out = Out(name="out", y=y, ring=chunks)

    @ts.schedule
    def produce(f: Flag, c: Ring):
        valid = f.load()
        with ts.domain_loop(0, n_chunks, 1):
            with ts.when_true(valid, key=KEY):
                c.acquire()
                c.fill()
                c.commit()

    @ts.schedule
    def consume(f: Flag, c: Ring, o: Out):
        valid = f.load()
        with ts.domain_loop(0, n_chunks, 1):
            with ts.when_true(valid, key=KEY):
                c.wait()
                stage = c.take()
                o.write(stage=stage)
                c.release()

    producer = ts.Task("producer", [flag_p], [chunks], 0, 1, schedule=produce(flag_p, chunks))
    consumer = ts.Task("consumer", [flag_c, chunks], [out], 1, 1, schedule=consume(flag_c, chunks, out))
    manager = ts.TaskManager([producer, consumer], {chunks: [flag_p], out: [chunks, flag_c]}, verbose=False)
    manager.setup_resources_and_tasks()
    manager.run()


def _args(n_chunks):
    return np.zeros(1, np.int32), np.zeros(n_chunks * CHUNK, np.float32), np.zeros(n_chunks * CHUNK, np.float32)


@conformance("§1.2", "when_true(tok, key=) / when_false")
def test_one_key_ties_the_tasks_guards_together_and_the_block_runs_when_the_flag_is_set(monkeypatch):
    compiled = tsjit.compile(guarded_copy, *_args(4), 4, "valid", target="sm_90a")
    assert compiled.cubin[:4] == b"\x7fELF"
    monkeypatch.setenv("TSJIT_INTERPRET", "1")
    n_chunks = 5
    x = np.random.default_rng().standard_normal(n_chunks * CHUNK).astype(np.float32)
    for flag in (1, 0):
        y = tsjit.empty(n_chunks * CHUNK, tsjit.Float32).fill_bytes(0xFF)
        guarded_copy[(1,), (64,)](tsjit.to_device(np.array([flag], np.int32)), tsjit.to_device(x), y, n_chunks,
                                  "valid")
        got = y.numpy()
        if flag:
            assert np.array_equal(got, x * np.float32(2.0))
        else:
            assert np.isnan(got).all()          # 0xFF bytes: the blocks did not run


@conformance("§1.2", "when_true(tok, key=) / when_false")
def test_without_the_key_the_flags_may_disagree_and_the_checker_says_so():
    variant = "when_true task 'producer' unkeyed [#0].value taken, task 'consumer' unkeyed [#0].value not taken"
    with pytest.raises(VerificationError, match=r"(?s)\[deadlock\].*variant " + re.escape(f'"{variant}"')):
        tsjit.compile(guarded_copy, *_args(4), 4, None, target="sm_90a")
