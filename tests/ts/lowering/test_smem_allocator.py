"""The TaskManager's SmemAllocator places resource buffers (get_smem_requirements) and ring barriers in
the kernel's one dynamic shared-memory block, exactly where its layout says (issue 4)."""
import re

import numpy as np

import tsjit
from tsjit.examples import ts_async


def test_allocator_layout_is_the_kernel_layout():
    c = tsjit.compile(ts_async.pingpong_scale, np.zeros(64, np.float32), np.zeros(64, np.float32), 64, 1024)
    buffer_bytes = 2 * 1024 * 4                      # 2 stages x 1024 Float32, allocated by the allocator
    barrier_bytes = 2 * 2 * 8                        # full + empty per stage
    assert c.metadata["smem_bytes"] == buffer_bytes + barrier_bytes
    offsets = sorted({int(m) for m in re.findall(r"mbarrier\.init\.shared\.b64\s+\[tsjit_smem\+(\d+)\]", c.ptx)})
    assert offsets == [buffer_bytes + 8 * i for i in range(4)]


def test_allocation_view_before_setup_is_a_clear_error():
    from tsjit.ts import SmemAllocation
    alloc = SmemAllocation("early", dtype=tsjit.Float32, count=16)

    @tsjit.kernel
    def uses_view_too_early(out):
        out[0] = alloc.tensor()[0]

    try:
        tsjit.compile(uses_view_too_early, np.zeros(4, np.float32))
    except tsjit.CompilationError as err:
        assert "early" in str(err) and "setup_resources_and_tasks" in str(err)
    else:
        raise AssertionError("expected a CompilationError")
