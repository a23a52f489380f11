"""Device-side buffers and launch groups ``tsjit.ops.matmul`` keeps between calls: packed launches run in
sequence, the split-K fp32 workspace with its zeroed counters per stream, and placeholder arrays."""
from __future__ import annotations

import threading

import tsjit
from tsjit import env
from tsjit.lang import dtypes as dt
from tsjit.runtime import driver
from tsjit.runtime.arrays import DeviceArray

__all__ = ["LaunchSequence", "Workspace", "dummy_array"]


class LaunchSequence:
    """Packed launches run one after the other on one stream (staging copies, then the GEMM)."""

    __slots__ = ("launches",)

    def __init__(self, launches):
        self.launches = tuple(launches)

    def __call__(self, stream: int) -> None:
        for launch in self.launches:
            launch(stream)


class Workspace:
    """The split-K fp32 workspace and its zeroed per-warp counters, one pair per stream."""

    def __init__(self):
        self.by_stream: dict = {}
        self.lock = threading.Lock()

    def get(self, stream: int, floats: int, counters: int):
        key = (stream, env.interpret())   # the interpreter's arrays are host memory: never a GPU workspace
        with self.lock:
            ws, cnt = self.by_stream.get(key, (None, None))
            if ws is None or ws.shape[0] < floats:
                ws = tsjit.empty((max(floats, 1 << 20),), dt.Float32)
            if cnt is None or cnt.shape[0] < counters:
                cnt = tsjit.zeros((max(counters, 1 << 14),), dt.Int32)
                if not env.interpret():       # the interpreter's arrays are host memory, zeroed at once
                    driver.check(driver.bindings().cuCtxSynchronize(), "cuCtxSynchronize")   # the memset is done
            self.by_stream[key] = (ws, cnt)
            return ws, cnt


_DUMMY: dict = {}


def dummy_array(rank: int) -> DeviceArray:
    """A 1-element float32 placeholder of ``rank`` dimensions for an absent operand (cached per rank, and apart
    for the CPU interpreter, whose arrays are host memory: a process may launch on the GPU, then interpreted)."""
    key = (rank, env.interpret())
    d = _DUMMY.get(key)
    if d is None:
        d = _DUMMY[key] = tsjit.zeros((1,) * rank, dt.Float32)
    return d
