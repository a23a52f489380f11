"""Programmatic dependent launch (PDL) as barrier resources (check PDL1).

With PDL a kernel may start while the previous kernel of the stream is still running; it
must execute ``griddepcontrol.wait`` before it reads anything the previous kernel wrote,
and it may execute ``griddepcontrol.launch_dependents`` to let the next kernel start early.
(PTX ISA §9.7.13.14; sm_90+.  The launch attribute is set by the runtime.)

:class:`PdlWaitBarrier` has one consumer work, ``wait_griddep``; declare the data that
depends on the previous grid with a graph edge ``{dep: [pdl_wait]}`` and check PDL1
makes every task that produces ``dep`` (or reads it, when ``dep`` has no pipeline) call
``pdl_wait.wait_griddep()`` before its first work on ``dep``.  As barrier resources they
may sit before or after a ``work_tile_loop`` (then they run once per CTA).

:class:`PdlLaunchBarrier` has one producer work, ``launch_griddep``.  The exhaustive
checker verifies that no launch can fire before some task has waited.

``TaskManager(assume_pdl_wait_completed=True)`` turns both checks off (the wait is
emitted outside the Task Scheduling schedules).
"""
from __future__ import annotations

from dataclasses import dataclass

from tsjit import lang  # the device language; its modules load when a work body compiles
from tsjit.ts.memory_resource import MemoryResource
from tsjit.ts.work import consumer_work, producer_work

__all__ = ["PdlWaitBarrier", "PdlLaunchBarrier"]


@dataclass(kw_only=True, eq=False, repr=False)
class PdlWaitBarrier(MemoryResource):
    """Barrier resource whose consumer work waits for the preceding grid (``griddepcontrol.wait``)."""

    is_barrier = True
    is_pdl_wait = True

    @consumer_work
    def wait_griddep(self, stage_info):
        """Block until the preceding grid's memory operations are visible."""
        lang.sync.griddepcontrol_wait()


@dataclass(kw_only=True, eq=False, repr=False)
class PdlLaunchBarrier(MemoryResource):
    """Barrier resource whose producer work lets the dependent grid launch
    (``griddepcontrol.launch_dependents``)."""

    is_barrier = True
    is_pdl_launch = True

    @producer_work
    def launch_griddep(self, stage_info):
        """Allow the next kernel of the stream to start."""
        lang.sync.griddepcontrol_launch_dependents()
