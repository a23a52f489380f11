"""``d.last_iter()`` (the feature inventory §1.2 "last-iter loop peeling": the reference peels the last
trip into a straight-line copy after N-1 iterations).  tsjit keeps one loop and guards the block with
``loop_offset + step >= end`` on every trip; the steps that run, and their order, are the same.  A
one-warp task writes each chunk in the loop and, under ``last_iter()``, a marker: compiled for
sm_90a and run on the CPU interpreter, the marker is written once, by the last trip, and a domain of
zero trips runs neither."""
from dataclasses import dataclass

import numpy as np
import pytest

import tsjit
from tsjit import ts

conformance = pytest.mark.conformance
CHUNK = 32
REASON = "LastIter is a run-time guard (loop_offset + step >= end) inside the one domain loop, not a peeled " \
         "last trip: the same steps run in the same order"


@dataclass(kw_only=True)
class Source(ts.MemoryResource):
    @ts.consumer_work
    def read(self, stage_info):
        pass


@dataclass(kw_only=True)
class Out(ts.MemoryResource):
    x: object
    y: object
    marker: object

    @ts.producer_work
    def copy(self, stage_info):
        i = stage_info.loop_offset * CHUNK + tsjit.lane_idx()
        self.y[i] = self.x[i] * 2.0

    @ts.producer_work
    def mark(self, stage_info):
        if tsjit.lane_idx() == 0:
            self.marker[0] = self.marker[0] + 1           # counts the runs
            self.marker[1] = stage_info.loop_offset        # the trip that ran it


@tsjit.kernel
def last_iter_copy(x, y, marker, n_chunks):
    source, out = Source(name="source"), Out(name="out", x=x, y=y, marker=marker)

    @ts.schedule
    def body(s: Source, o: Out):
        with ts.domain_loop(0, n_chunks, 1) as d:
            s.read()
            o.copy()
            with d.last_iter():
                o.mark()

    task = ts.Task("t", [source], [out], 0, 1, schedule=body(source, out))
    manager = ts.TaskManager([task], {out: [source]}, verbose=False)
    manager.setup_resources_and_tasks()
    manager.run()


@conformance("§1.2", "last-iter loop peeling", reason=REASON)
@pytest.mark.parametrize("n_chunks", [5, 1, 0])
def test_the_last_iter_block_runs_once_on_the_last_trip(n_chunks, monkeypatch):
    z = np.zeros(4 * CHUNK, np.float32)
    assert tsjit.compile(last_iter_copy, z, z, np.zeros(2, np.int32), 4, target="sm_90a").cubin[:4] == b"\x7fELF"
    monkeypatch.setenv("TSJIT_INTERPRET", "1")
    x = np.random.default_rng().standard_normal(max(n_chunks, 1) * CHUNK).astype(np.float32)
    y = tsjit.empty(x.size, tsjit.Float32).fill_bytes(0xFF)
    marker = tsjit.to_device(np.array([0, -1], np.int32))
    last_iter_copy[(1,), (32,)](tsjit.to_device(x), y, marker, n_chunks)
    got = y.numpy()
    assert np.array_equal(got[:n_chunks * CHUNK], x[:n_chunks * CHUNK] * np.float32(2.0))
    assert np.isnan(got[n_chunks * CHUNK:]).all()
    assert marker.numpy().tolist() == ([1, n_chunks - 1] if n_chunks else [0, -1])
