"""Reference sections ``PdlWaitBarrier`` and ``PdlLaunchBarrier``: the wiring contract as the
reference writes it (``resource_dependency_graph[smem_a] = [pdl_wait, ...]``; a launch barrier is
not expected in the graph), the encouraged inline-wait pattern, compiled for sm_90a.
"""
from dataclasses import dataclass

import numpy as np
import pytest

import tsjit
from tsjit import ts
from tsjit.ts import PdlLaunchBarrier, PdlWaitBarrier

conformance = pytest.mark.conformance


@dataclass(kw_only=True)
class GmemA(ts.MemoryResource):
    src: object
    item: ts.TaskLocalVariable = ts.TaskLocalVariable.uninitialized()

    def __post_init__(self):
        self.item = ts.TaskLocalVariable(tsjit.Float32, default=0)

    @ts.consumer_work(returns=item)
    def load(self, stage_info):
        return self.src[stage_info.loop_offset]


@dataclass(kw_only=True)
class GmemOut(ts.MemoryResource):
    dst: object

    @ts.producer_work
    def store(self, stage_info, *, item):
        self.dst[stage_info.loop_offset] = item + 1.0


@tsjit.kernel
def chained(x, y, n):
    pdl_wait = PdlWaitBarrier(name="pdl_wait")
    pdl_launch = PdlLaunchBarrier(name="pdl_launch")
    smem_a = GmemA(name="a", src=x)
    out = GmemOut(name="out", dst=y)

    @ts.schedule
    def sched(w: PdlWaitBarrier, a: GmemA, o: GmemOut, launch: PdlLaunchBarrier):
        w.wait_griddep()                          # encouraged pattern: inline wait
        with ts.domain_loop(tsjit.block_idx().x * 32 + tsjit.thread_idx().x, n, tsjit.grid_dim().x * 32):
            item = a.load()
            o.store(item=item)
        launch.launch_griddep()

    resource_dependency_graph = {out: [smem_a]}
    # -- pasted: PdlWaitBarrier wiring contract (the "..." are the resource's other upstreams) --------
    resource_dependency_graph[smem_a] = [pdl_wait]
    task = ts.Task([pdl_wait, smem_a], [out, pdl_launch], 0, 1, schedule=sched(pdl_wait, smem_a, out, pdl_launch),
                   name="consume")
    manager = ts.TaskManager([task], resource_dependency_graph, verbose=False)
    manager.setup_resources_and_tasks()
    manager.run()


@conformance("A8", "PdlLaunchBarrier / launch_griddep()")
def test_launch_barrier_outside_the_graph_compiles_for_sm90a():
    x = np.zeros(1024, np.float32)
    kernel = tsjit.compile(chained, x, x, 1024, target="sm_90a")
    assert kernel.ptx.count("griddepcontrol.wait") == 1
    assert kernel.ptx.count("griddepcontrol.launch_dependents") == 1


@pytest.mark.gpu_or_interpret
def test_chained_kernel_runs():
    n = 1000
    x = np.random.default_rng().standard_normal(1024).astype(np.float32)
    y = tsjit.empty(1024, tsjit.Float32).fill_bytes(0x7F)
    chained[(4,), (32,)](tsjit.to_device(x), y, n)
    out = y.numpy()
    np.testing.assert_allclose(out[:n], x[:n].astype(np.float64) + 1.0, rtol=1e-6)
    assert (out[n:].view(np.uint8) == 0x7F).all()
