"""R5: a stage token (a consumer work's ``stage_info.stage_idx``) is not read after the release of
its stage: after the domain loop (the newcomer's silent wrong answer: the exhaustive checker said
SAFE and the sums of all but the last tile were never written) or after the release in the same
iteration.  The corrected twins verify and give the right numbers under the interpreter."""
import inspect
from dataclasses import dataclass

import numpy as np
import pytest

import tsjit
from tsjit import ts
from tsjit.errors import VerificationError
from tsjit.ts.verify.lifetimes import STAGE, stage_returns

ROWS = 32          # one 32-float chunk per stage, one lane per element


@dataclass(kw_only=True)
class Chunks(ts.MemoryResource):
    """A ring of 32-float chunks in shared memory filled by one producer warp."""

    x: object
    allocation: object = None
    stage: ts.TaskLocalVariable = ts.TaskLocalVariable.uninitialized()

    def __post_init__(self):
        self.allocation = ts.SmemAllocation(f"{self.name}.buffers", dtype=tsjit.Float32,
                                            count=self.pipeline_config.num_stages * ROWS)
        self.stage = ts.TaskLocalVariable(tsjit.Int32, default=0)

    def get_smem_requirements(self):
        return [self.allocation]

    @ts.producer_work()
    def fill(self, stage_info):
        buffers = self.allocation.tensor((self.pipeline_config.num_stages, ROWS))
        buffers[stage_info.stage_idx][tsjit.lane_idx()] = self.x[stage_info.loop_offset * ROWS + tsjit.lane_idx()]

    @ts.consumer_work(returns="stage")
    def take(self, stage_info):
        return stage_info.stage_idx


@dataclass(kw_only=True)
class Scaled(ts.MemoryResource):
    """``y[chunk] = 2 * chunk``, read from the ring's stage the routed token names."""

    y: object
    chunks: object

    @ts.producer_work()
    def write(self, stage_info, stage):
        buffers = self.chunks.allocation.tensor((self.chunks.pipeline_config.num_stages, ROWS))
        self.y[stage_info.loop_offset * ROWS + tsjit.lane_idx()] = buffers[stage][tsjit.lane_idx()] * 2.0


@tsjit.kernel
def scale_chunks(x, y, num_chunks, MODE: tsjit.Constexpr[str]):
    cfg = ts.PipelineConfig.create_async_async_pipeline_cfg(
        3, ts.CooperativeGroup(ts.Agent.Thread, 32), ts.CooperativeGroup(ts.Agent.Thread, 32),
        advance_on_wait=MODE == "lagged")      # the release lags the wait by one stage
    chunks = Chunks(name="chunks", pipeline_config=cfg, x=x)
    scaled = Scaled(name="scaled", y=y, chunks=chunks)

    @ts.schedule
    def produce(c: Chunks):
        with ts.domain_loop(0, num_chunks, 1):
            c.acquire()
            c.fill()
            c.commit()

    @ts.schedule
    def consume(c: Chunks, s: Scaled):
        with ts.domain_loop(0, num_chunks, 1) as d:
            c.wait()
            stage = c.take()
            if tsjit.const_expr(MODE == "inside"):
                s.write(stage)
                c.release()
            elif tsjit.const_expr(MODE == "after_release"):
                c.release()
                s.write(stage)
            elif tsjit.const_expr(MODE == "lagged"):
                with d.every(1, start=1):
                    c.release()              # frees the previous trip's stage, not this one
                s.write(stage)
            else:
                c.release()
        if tsjit.const_expr(MODE == "after_loop"):
            s.write(stage)
        if tsjit.const_expr(MODE == "lagged"):
            c.release()                      # the last stage

    producer = ts.Task("producer", [], [chunks], warp_idx=0, num_warps=1, schedule=produce(chunks))
    consumer = ts.Task("consumer", [chunks], [scaled], warp_idx=1, num_warps=1,
                       schedule=consume(chunks, scaled))
    manager = ts.TaskManager([producer, consumer], {scaled: [chunks]}, verbose=False)
    manager.setup_resources_and_tasks()
    manager.run()


def _line(text: str) -> int:
    lines, first = inspect.getsourcelines(scale_chunks.fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


def _compile(mode: str):
    return tsjit.compile(scale_chunks, np.zeros(4 * ROWS, np.float32), np.zeros(4 * ROWS, np.float32), 4, mode)


@pytest.mark.parametrize("mode,release,use", [
    ("after_loop", "            else:\n", "        if tsjit.const_expr(MODE == \"after_loop\"):"),
    ("after_release", "            elif tsjit.const_expr(MODE == \"after_release\"):", None)])
def test_stage_token_read_after_its_release_is_an_error(mode, release, use):
    with pytest.raises(VerificationError) as info:
        _compile(mode)
    text = str(info.value)
    assert "[R5]" in text and "task 'consumer'" in text
    assert "stage token 'stage' of 'chunks'" in text
    file = scale_chunks.fn.__code__.co_filename.rsplit("/", 1)[-1]
    release_line = _line(release) + 1            # the c.release() under that branch
    use_line = _line(use) + 1 if use else release_line + 1
    assert f"'chunks' ConsumerRelease at schedule step" in text and f"{file}:{release_line})" in text
    assert f"'scaled' ProducerWork 'write'" in text and f"{file}:{use_line})" in text
    assert f"{file}:{_line('stage = c.take()')})" in text
    assert "move scaled.write() between chunks.take() and chunks.release()" in text
    if mode == "after_loop":
        assert "after the domain loop" in text and "runs once, after the loop" in text


@pytest.mark.parametrize("mode", ["inside", "lagged"])
def test_stage_token_read_before_its_release_runs_right(mode):
    chunks = 5
    x = np.random.default_rng().standard_normal(chunks * ROWS).astype(np.float32)
    y = np.full(chunks * ROWS, np.nan, np.float32)
    scale_chunks.interpret[(1,), (64,)](x, y, chunks, mode)
    np.testing.assert_array_equal(y.astype(np.float64), 2.0 * x.astype(np.float64))


class _Bodies:
    def stage(self, stage_info):
        return stage_info.stage_idx

    def cast(self, info):
        k = info.stage_idx + 1
        return tsjit.Int32(k % 2)

    def loaded(self, stage_info):
        return self.tiles[stage_info.stage_idx][0]        # data read from the stage: a value

    def method(self, stage_info):
        return self.tile_at(stage_info.stage_idx)

    def passed(self, stage_info, item):
        return item

    def pair(self, stage_info, item):
        return stage_info.loop_offset, stage_info.barrier


@pytest.mark.parametrize("name,returns,inputs,expected", [
    ("stage", ("s",), (), {"s": {STAGE}}),
    ("cast", ("s",), (), {"s": {STAGE}}),
    ("loaded", ("v",), (), {}),
    ("method", ("v",), (), {}),
    ("passed", ("v",), ("item",), {"v": {"item"}}),
    ("pair", ("offset", "bar"), ("item",), {"bar": {STAGE}})])
def test_stage_tokens_are_stage_fields_and_arithmetic_not_loads(name, returns, inputs, expected):
    found = stage_returns(getattr(_Bodies, name), returns, inputs)
    assert {k: set(v) for k, v in found.items()} == expected
