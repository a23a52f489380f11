"""A Fork group's deadlock under the interpreter (newcomer report 8, item 6): the consumer 'rows' walks
domain_loop(0, n, 1) while the producer walks (cta, n, ctas); the report names the group and member as
written (fork.ring, fork.full[1]) and says which tasks left their loops after how many iterations."""
import re
from dataclasses import dataclass

import numpy as np
import pytest

import tsjit
from tsjit import ts
from tsjit.errors import InterpretError, VerificationError

from tests.ts.lowering.test_two_consumer_tasks import BM, BN, M, N, Neg, Ring, RowSums


@dataclass(kw_only=True)
class Member(ts.MemoryResource):
    """The second Fork member: no buffer of its own (its consumer reads the primary's tiles)."""
    stage: ts.TaskLocalVariable = ts.TaskLocalVariable.uninitialized()

    def __post_init__(self):
        self.stage = ts.TaskLocalVariable(tsjit.Int32, default=0)

    @ts.consumer_work(returns="stage")
    def take(self, si):
        return si.stage_idx


@tsjit.kernel
def forked(tmap, sums, out, num_tiles, tiles_n, SAME_LOOPS: tsjit.Constexpr[bool], STAGES2: tsjit.Constexpr[int]):
    mk = lambda stages: ts.PipelineConfig.create_tma_async_pipeline_cfg(stages, tmap.box_bytes,  # noqa: E731
        ts.CooperativeGroup(ts.Agent.Thread, 1), ts.CooperativeGroup(ts.Agent.Thread, 32))
    ring = Ring(name="ring", pipeline_config=mk(2), tmap=tmap, tiles_n=tiles_n)
    ring2 = Member(name="ring2", pipeline_config=mk(STAGES2))
    fork = ts.PipelineGroup("fork", [ring, ring2], ts.PipelineGroupMode.Fork)
    rs = RowSums(name="rs", sums=sums, ring=ring)
    ng = Neg(name="neg", out=out, ring=ring)
    cta, ctas = tsjit.block_idx().x, tsjit.grid_dim().x
    start = cta if tsjit.const_expr(SAME_LOOPS) else 0
    step = ctas if tsjit.const_expr(SAME_LOOPS) else 1

    @ts.schedule
    def produce(g, r, r2):
        with ts.domain_loop(cta, num_tiles, ctas):
            r.acquire(); r2.acquire(); r.load(); g.commit()

    @ts.schedule
    def c_rows(r: Ring, s: RowSums):
        with ts.domain_loop(start, num_tiles, step):
            r.wait(); st = r.take(); s.rowsum(st); r.release()

    @ts.schedule
    def c_neg(r, n: Neg):
        with ts.domain_loop(cta, num_tiles, ctas):
            r.wait(); st = r.take(); n.write(st); r.release()
    tasks = [ts.Task("tma", [], [ring, ring2], warp_idx=0, num_warps=1, schedule=produce(fork, fork.ring, fork.ring2)),
             ts.Task("rows", [ring], [rs], warp_idx=1, num_warps=1, schedule=c_rows(fork.ring, rs)),
             ts.Task("neg", [ring2], [ng], warp_idx=2, num_warps=1, schedule=c_neg(fork.ring2, ng))]
    m = ts.TaskManager(tasks, {rs: [ring], ng: [ring2]})
    m.setup_resources_and_tasks()
    m.run()


def _run(same_loops, stages2=2):
    a = np.random.default_rng(6).standard_normal((M, N)).astype(np.float32)
    tiles_m, tiles_n = -(-M // BM), -(-N // BN)
    nt = tiles_m * tiles_n
    sums, out = np.full((nt, BM), np.nan, np.float32), np.full_like(a, np.nan)
    forked.interpret[(2,), (96,)](tsjit.TensorMap(a, (BM, BN)), sums, out, nt, tiles_n, same_loops, stages2)
    pad = np.zeros((tiles_m * BM, tiles_n * BN)); pad[:M, :N] = a
    return a, out, sums, pad.reshape(tiles_m, BM, tiles_n, BN).sum(3).transpose(0, 2, 1).reshape(nt, BM)


def test_fork_with_equal_loops_runs():
    a, out, sums, ref = _run(True)
    assert np.array_equal(out, -a)
    np.testing.assert_allclose(sums, ref, rtol=1e-5, atol=1e-4)


def test_fork_deadlock_names_the_group_member_and_the_short_loop():
    with pytest.raises(InterpretError) as info:
        _run(False)
    text = str(info.value)
    assert "task 'rows (warps 1-1)', resource 'fork.ring'," in text
    assert re.search(r"waiting on mbarrier fork\.full\[\d\]", text)
    assert "ring2" not in text.split("Tasks that already exited")[0]      # not the other member's name
    # CTA 0 of 2 runs tiles 0, 2, 4, 6, 8 in the producer: 5 iterations
    assert "task 'tma (warps 0-0)' exited after 5 iteration(s)" in text
    assert "domain_loop(start, end, step)" in text and "trip counts must match" in text


def test_group_error_is_located_at_the_users_pipeline_group_line():
    """newcomer report 8, item 8: the PG error named tsjit/frontend/calls.py as the group's place."""
    with pytest.raises(VerificationError) as info:
        _run(True, stages2=3)
    text = str(info.value)
    assert re.match(r"\[PG\] pipeline group 'fork' \(Fork, \S*test_fork_deadlock_report.py:\d+\)", text)
    assert "calls.py" not in text and "tsjit/" not in text.split("\n")[0]
    assert "'ring': 2, 'ring2': 3" in text and "Give every member the same num_stages" in text
