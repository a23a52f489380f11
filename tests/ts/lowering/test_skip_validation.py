"""``TaskManager(skip_validation=True)`` demotes the lowering-time shared-memory check (M1) to a warning.

The kernel places a ``tsjit.shared_array`` next to a TS ring, so only the check at
``setup_resources_and_tasks()`` (which sees every byte of the dynamic block) exceeds the
TaskManager's ``smem_capacity_bytes``; the allocator's own M1 at construction passes.
"""
import warnings

import numpy as np
import pytest

import tsjit
from tsjit import ts
from tsjit.errors import VerificationError
from tsjit.examples.ts_async import ScaledOutput, StagedChunks
from tsjit.ts import VerificationWarning

CAPACITY = 16 * 1024
CHUNK = 256                                   # 2 stages x 256 Float32 = 2 KiB in the allocator
PAD_FLOATS = 4096                             # 16 KiB of shared_array: the total crosses CAPACITY


def _kernel(skip_validation: bool):
    @tsjit.kernel
    def ring_with_padding(x, y, n):
        pad = tsjit.shared_array(tsjit.Float32, (PAD_FLOATS,))
        pad[tsjit.thread_idx().x] = tsjit.Float32(0)
        cfg = ts.PipelineConfig.create_async_async_pipeline_cfg(
            2, ts.CooperativeGroup(ts.Agent.Thread, 32), ts.CooperativeGroup(ts.Agent.Thread, 32))
        chunks = StagedChunks(name="chunks", pipeline_config=cfg, x=x, n=n, chunk=CHUNK, lane_threads=32,
                              first_producer_thread=0)
        out = ScaledOutput(name="out", y=y, n=n, chunks=chunks, first_consumer_thread=32)

        @ts.schedule
        def produce(c: StagedChunks):
            with ts.domain_loop(tsjit.block_idx().x, (n + CHUNK - 1) // CHUNK, tsjit.grid_dim().x):
                c.acquire()
                c.fill()
                c.commit()

        @ts.schedule
        def consume(c: StagedChunks, o: ScaledOutput):
            with ts.domain_loop(tsjit.block_idx().x, (n + CHUNK - 1) // CHUNK, tsjit.grid_dim().x):
                c.wait()
                stage = c.take()
                o.write(stage)
                c.release()

        producer = ts.Task("producer", [], [chunks], 0, 1, schedule=produce(chunks))
        consumer = ts.Task("consumer", [chunks], [out], 1, 1, schedule=consume(chunks, out))
        manager = ts.TaskManager([producer, consumer], {out: [chunks]}, verbose=False,
                                 smem_capacity_bytes=CAPACITY, skip_validation=skip_validation)
        manager.setup_resources_and_tasks()
        manager.run()

    return ring_with_padding


def _compile(skip_validation: bool):
    x = np.zeros(1024, np.float32)
    return tsjit.compile(_kernel(skip_validation), x, x, 1024)


def test_lowering_m1_is_an_error_by_default():
    with pytest.raises(VerificationError) as err:
        _compile(skip_validation=False)
    assert err.value.check == "M1" and str(CAPACITY) in str(err.value)


def test_skip_validation_demotes_lowering_m1_to_a_warning():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compiled = _compile(skip_validation=True)
    messages = [str(w.message) for w in caught if issubclass(w.category, VerificationWarning)]
    assert any(m.startswith("[M1]") and str(CAPACITY) in m for m in messages), messages
    assert compiled.metadata["smem_bytes"] > CAPACITY and "mbarrier" in compiled.ptx
