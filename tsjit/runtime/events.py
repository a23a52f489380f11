"""CUDA events for timing (``cuEventRecord`` / ``cuEventElapsedTime``)."""
from __future__ import annotations

import weakref

from tsjit.runtime import driver, streams


def _destroy_quietly(handle) -> None:
    try:
        driver.bindings().cuEventDestroy(handle)
    except Exception:
        pass


class Event:
    """A CUDA event (``timing=False`` makes a cheaper synchronization-only event).

    Raises:
        LaunchError: no GPU, or the driver refused.
    """

    def __init__(self, *, timing: bool = True):
        driver.ensure_context()
        cu = driver.bindings()
        flags = cu.CUevent_flags.CU_EVENT_DEFAULT if timing else cu.CUevent_flags.CU_EVENT_DISABLE_TIMING
        self.handle = driver.check(cu.cuEventCreate(flags), "cuEventCreate")
        weakref.finalize(self, _destroy_quietly, self.handle)

    def record(self, stream=None) -> "Event":
        """Record the event on ``stream`` (default: the current stream); returns ``self``."""
        driver.check(driver.bindings().cuEventRecord(self.handle, streams.stream_handle(stream)), "cuEventRecord")
        return self

    def synchronize(self) -> None:
        """Wait until the work before the recorded point has finished."""
        driver.check(driver.bindings().cuEventSynchronize(self.handle), "cuEventSynchronize")

    def elapsed_ms(self, end: "Event") -> float:
        """Milliseconds between this event and ``end`` (waits for ``end``); resolution ~0.5 us."""
        end.synchronize()
        return float(driver.check(driver.bindings().cuEventElapsedTime(self.handle, end.handle),
                                  "cuEventElapsedTime"))
