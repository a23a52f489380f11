"""A ring that keeps a reference to another ring (``TmaOperandB.a_ring``: its MMA work reads this
stage's A tile too) -- which of its works access the referenced ring (ts/verify/work_fields.py).

The false race: one 4-warp task fills two TMA rings, A and then B, committing A before B's TMA;
B's resource keeps ``a_ring`` for its MMAs.  The model counted B's TMA load as a write of A's
stage, so the consumer's read of A (after A's full barrier completed) was reported as "race on
'smem_a'".  B's load writes B's tiles only; its body never names ``a_ring``.  A load whose body
does name it (directly, through a method of the resource, or by letting ``self`` escape) still
writes A, reads through the reference (the MMA's) are kept as before, and the true races stay found."""
from dataclasses import dataclass

import pytest

from tsjit.ts import consumer_work, producer_work
from tsjit.ts.pipeline import SignalingThreads
from tsjit.ts.verify.exhaustive import check_all_interleavings
from tsjit.ts.verify.work_fields import fields_named
from verify_schedules import FakeValue, GmemDest, Program, Ring, TaskSpec, tma_config

pytestmark = pytest.mark.filterwarnings("ignore::tsjit.ts.ScheduleWarning")


def _touch(*values):
    return values


def _leak(resource):
    return resource.a_ring


@dataclass(kw_only=True)
class OperandB(Ring):
    """Ring B: its TMA load writes its own tiles; its MMA reads A's stage through ``a_ring``."""

    a_ring: object = None
    tiles: object = None

    @producer_work
    def load_b(self, stage_info):
        _touch(self.tiles)

    @producer_work
    def load_b_and_a(self, stage_info):            # also writes A's tiles (a wrong split of the work)
        self._both(stage_info)

    def _both(self, stage_info):
        _touch(self.tiles, self.a_ring)

    @producer_work
    def load_b_escaping(self, stage_info):         # hands self to a helper: anything may be written
        _leak(self)

    @consumer_work
    def mma_ab(self, stage_info):
        _touch(self.tiles, self.a_operand)

    @property
    def a_operand(self):
        return self.a_ring


def _program(load_b="load_b", release_a_before_mma=False, warps=4):
    def resources():
        cfg = lambda: tma_config(2, 8192, 1, 128, producer_signaling_threads=SignalingThreads.TaskWarpLeader,
                                 num_bytes_per_warp_per_cta=8192 // warps)
        a = Ring(name="smem_a", pipeline_config=cfg())
        b = OperandB(name="smem_b", pipeline_config=cfg(), a_ring=a, tiles=FakeValue("b tiles"))
        return {"a": a, "b": b, "out": GmemDest(name="out", dst=FakeValue("c"))}
    load = [("a", "acquire"), ("a", "tma_load"), ("a", "commit"),
            ("b", "acquire"), ("b", load_b), ("b", "commit")]
    if release_a_before_mma:
        cons = [("a", "wait"), ("b", "wait"), ("a", "release"), ("b", "mma_ab"), ("out", "store"), ("b", "release")]
    else:
        cons = [("a", "wait"), ("b", "wait"), ("b", "mma_ab"), ("out", "store"), ("a", "release"), ("b", "release")]
    return Program("two TMA rings from one task", resources, [
        TaskSpec("load", 0, warps, (), ("a", "b"), {"loop": load}, domain=(0, 4, 1)),
        TaskSpec("mma", warps, 4, ("a", "b"), ("out",), {"loop": cons}, domain=(0, 4, 1))],
        lambda r: {r["out"]: [r["a"], r["b"]]})


def _check(program):
    tasks, graph, _ = program.build()
    return check_all_interleavings(tasks, graph)


@pytest.mark.parametrize("warps", [1, 4])
def test_loading_b_after_committing_a_is_not_a_race_on_a(warps):
    result = _check(_program(warps=warps))
    assert result.verdict == "SAFE", result.format()


def test_the_mma_still_reads_a_through_the_reference():
    result = _check(_program(release_a_before_mma=True))
    assert result.verdict == "UNSAFE"
    text = "\n".join(r.message for r in result.reports)
    assert "race on 'smem_a'" in text and "'smem_b' ConsumerWork 'mma_ab'" in text


@pytest.mark.parametrize("work", ["load_b_and_a", "load_b_escaping"])
def test_a_load_that_names_a_still_writes_it(work):
    result = _check(_program(load_b=work))
    assert result.verdict == "UNSAFE"
    text = "\n".join(r.message for r in result.reports)
    assert "race on 'smem_a'" in text and f"'smem_b' ProducerWork '{work}'" in text


def test_fields_named_follows_methods_and_properties_and_gives_up_on_escapes():
    b = OperandB(name="b", pipeline_config=tma_config(2), a_ring=None)
    assert fields_named(OperandB.load_b, b) == {"tiles"}
    assert fields_named(OperandB.load_b_and_a, b) == {"_both", "tiles", "a_ring"}
    assert fields_named(OperandB.mma_ab, b) == {"tiles", "a_operand", "a_ring"}
    assert fields_named(OperandB.load_b_escaping, b) is None
    assert fields_named(len, b) is None
