"""Work bodies are compiled with compile-time labels and Constexpr arguments: a body that switches on
``stage_info.label`` or a ``Constexpr`` parameter emits only the taken branch (issue 3)."""
from dataclasses import dataclass

import numpy as np

import tsjit
from tsjit import ts


@dataclass(kw_only=True)
class Scaled(ts.MemoryResource):
    src: object
    item: ts.TaskLocalVariable = ts.TaskLocalVariable.uninitialized()

    def __post_init__(self):
        self.item = ts.TaskLocalVariable(tsjit.Float32, default=0)

    def _scaled(self, stage_info):
        value = self.src[stage_info.loop_offset]
        if stage_info.label == "triple":
            return value * 3.0
        else:
            return value * 7.0

    @ts.consumer_work(returns="item")
    def triple(self, stage_info):
        return self._scaled(stage_info)

    @ts.consumer_work(returns="item")
    def septuple(self, stage_info):
        return self._scaled(stage_info)


@dataclass(kw_only=True)
class Sink(ts.MemoryResource):
    dst: object

    @ts.producer_work()
    def store(self, stage_info, item, *, offset: tsjit.Constexpr[int]):
        if tsjit.const_expr(offset == 0):
            self.dst[stage_info.loop_offset] = item + 11.0
        else:
            self.dst[stage_info.loop_offset] = item + 13.0


@tsjit.kernel
def labelled(src, dst, n, WHICH: tsjit.Constexpr[str]):
    source = Scaled(name="source", src=src)
    sink = Sink(name="sink", dst=dst)

    @ts.schedule
    def sched(s: Scaled, d: Sink):
        with ts.domain_loop(tsjit.thread_idx().x, n, 32):
            item = s.triple() if WHICH == "triple" else s.septuple()
            d.store(item, offset=0 if WHICH == "triple" else 1)

    task = ts.Task("t", [source], [sink], warp_idx=0, num_warps=1, schedule=sched(source, sink))
    manager = ts.TaskManager([task], {sink: [source]}, verbose=False)
    manager.setup_resources_and_tasks()
    manager.run()


def _ir(which):
    f32 = np.zeros(64, np.float32)
    return tsjit.compile(labelled, f32, f32, 64, which).llir


def test_label_switch_emits_only_the_taken_branch():
    triple, septuple = _ir("triple"), _ir("septuple")
    assert "0x4008000000000000" in triple                 # 3.0
    assert "0x401c000000000000" not in triple          # 7.0 never reaches the IR of the 'triple' build
    assert "0x401c000000000000" in septuple and "0x4008000000000000" not in septuple


def test_constexpr_keyword_selects_one_store():
    triple, septuple = _ir("triple"), _ir("septuple")
    assert "0x4026000000000000" in triple and "0x402a000000000000" not in triple     # 11.0 only
    assert "0x402a000000000000" in septuple and "0x4026000000000000" not in septuple  # 13.0 only
