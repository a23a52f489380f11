"""The program the exhaustive checker explores, as data: barriers, data accesses, asynchronous copies,
the synchronising ops of each process, and one variant's whole program.  :mod:`tsjit.ts.verify.exhaustive_model`
builds it from the tasks; :mod:`tsjit.ts.verify.exhaustive_search` explores it; the reports read it."""
from __future__ import annotations

from dataclasses import dataclass, field

from tsjit.ts.verify.exhaustive_expand import Variant
from tsjit.ts.verify.exhaustive_regions import RegionTable

__all__ = ["Barrier", "Access", "Copy", "Op", "Process", "Program"]


@dataclass(frozen=True)
class Barrier:
    """One mbarrier: ``resource.full[slot]`` or ``resource.empty[slot]``."""

    id: int
    resource: object
    kind: str
    slot: int
    count: int
    cta: int | None = None

    @property
    def name(self) -> str:
        where = f" of CTA {self.cta}" if self.cta is not None else ""
        return f"{self.resource.name}.{self.kind}[{self.slot}]{where}"


@dataclass(frozen=True)
class Access:
    """A data access of a work step: ``mode`` is ``"read"`` or ``"write"``; ``in_flight``
    says, for a read an asynchronous operation keeps going after its step (wgmma operands, a
    TMA store's source), what keeps it (for messages), else ``""``."""

    mode: str
    region: int
    step: object
    iteration: int | None
    tile: int | None
    in_flight: str = ""


@dataclass(frozen=True)
class Copy:
    """An asynchronous operation in flight: a TMA write of one stage, completing with
    ``complete_tx(nbytes)``, or the MMAs behind a ``tcgen05.commit`` (``umma``), whose reads
    (``access``, or None) last until the commit's ``arrivals`` land.  A copy with ``after >= 0``
    completes only after copy ``after`` (one thread's tcgen05 operations complete in order)."""

    id: int
    process: int
    barrier: int
    nbytes: int
    access: Access | None
    arrivals: int = 0
    after: int = -1
    umma: bool = False


@dataclass
class Op:
    """One synchronising transition of a process (see the module docstring)."""

    kind: str
    step: object                 # the schedule Step (None for the producer tail)
    resource: object
    slot: int | None
    iteration: int | None
    tile: int | None
    guard: int = -1              # barrier id of a blocking parity wait, -1 for none
    parity: int = 0
    probe_key: int = -1          # probe flag that skips the guard / that a try op sets
    probe_barrier: int = -1      # barrier a try op tests
    arrivals: tuple = ()         # (barrier id, arrivals, transaction bytes)
    spawns: tuple = ()           # Copies issued in the segment this op opens
    pdl: int = 0                 # 1: griddepcontrol.wait, 2: launch_dependents
    segment: tuple = ()          # Accesses active from this op to the next
    footprint: int = 0           # packed footprint (see exhaustive_search)

    def describe(self) -> str:
        where = []
        if self.slot is not None:
            where.append(f"stage {self.slot}")
        if self.tile is not None:
            where.append(f"tile {self.tile}")
        if self.iteration is not None:
            where.append(f"iteration {self.iteration}")
        ctx = f" ({', '.join(where)})" if where else ""
        if self.step is None:
            return (f"{self.resource.name!r} ProducerAcquire of the producer tail (the drain "
                    f"after the schedule waits for every stage to be released){ctx}")
        return f"{self.step.describe()}{ctx}"


@dataclass
class Process:
    """One task (or one warp lane of an interleaved task) as a list of ops."""

    index: int
    task: object
    lane: int | None
    warps: int
    ops: list
    initial_segment: tuple = ()
    initial_spawns: tuple = ()
    probe_keys: int = 0
    stuck: object = None         # (queue resource) when the task never advances its tile
    cta: int | None = None       # its CTA when every CTA of the cluster is modelled

    @property
    def name(self) -> str:
        name = self.task.name if self.lane is None else f"{self.task.name}/warp{self.lane}"
        return name if self.cta is None else f"{name}@CTA{self.cta}"

    def describe(self) -> str:
        where = f" on CTA {self.cta}" if self.cta is not None else ""
        if self.lane is None:
            return self.task.describe() + where
        return (f"task {self.task.name!r} warp {self.task.warp_start + self.lane} (lane "
                f"{self.lane}){where}")


@dataclass
class Program:
    """Everything the search needs for one variant."""

    variant: Variant
    processes: list
    barriers: list
    regions: RegionTable
    copies: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    pdl_checked: bool = True
