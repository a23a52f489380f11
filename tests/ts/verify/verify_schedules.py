"""Tutorial-like programs for the checker tests and ``benchmarks/checker.py``.

Host-side only: resources hold stand-in device values (:class:`FakeValue`); pipelined
resources use real :class:`~tsjit.ts.pipeline.PipelineConfig` objects.  Each builder
returns a :class:`Program` (tasks, graph, TaskManager keyword options) whose schedules are
*captured from entry lists* so that the mutation test can delete or swap single steps:
``build(entries_by_task)`` re-captures every task from (possibly mutated) entry lists.

An entry is ``(resource attribute, operation)`` with operation a pipeline op name
(``"acquire"``, ``"wait"``, ...) or a work label, optionally with routed-token plumbing
handled by :func:`record`.  Sections: entries before the ``"LOOP"`` marker are Head,
between ``"LOOP"`` and ``"END"`` the domain loop, after ``"END"`` Tail; ``("WQ", ...)``
entries go after the domain loop inside the work tile loop (the queue epilogue).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from tsjit import Constexpr, wgmma
from tsjit.lang.dtypes import Int32
from tsjit.ts import (MemoryResource, Task, TaskLocalVariable, WorkAttr, consumer_work,
                      domain_loop, producer_work, schedule, work_tile_loop)
from tsjit.ts.memory import SmemAllocation, SmemAllocator
from tsjit.ts.pdl import PdlLaunchBarrier, PdlWaitBarrier
from tsjit.ts.pipeline import Agent, CooperativeGroup, PipelineConfig
from tsjit.ts.verify.exhaustive import check_all_interleavings
from tsjit.ts.work_queue import TileSchedulerConfig, WorkQueue


class FakeValue:
    """A run-time value stand-in: arithmetic builds new values; no truth value, no hash."""

    __hash__ = None

    def __init__(self, text: str):
        self.text = text

    def _op(self, other, symbol):
        return FakeValue(f"({self.text} {symbol} {getattr(other, 'text', other)})")

    def __add__(self, other): return self._op(other, "+")
    def __radd__(self, other): return self._op(other, "+")
    def __mul__(self, other): return self._op(other, "*")
    def __rmul__(self, other): return self._op(other, "*")
    def __floordiv__(self, other): return self._op(other, "//")
    def __mod__(self, other): return self._op(other, "%")
    def __getitem__(self, index): return FakeValue(f"{self.text}[...]")

    def __bool__(self):
        raise TypeError(f"run-time value {self.text} used as a Python bool")


def threads(n: int) -> CooperativeGroup:
    return CooperativeGroup(Agent.Thread, n)


def tma_config(stages: int, num_bytes: int = 8192, producers: int = 1, consumers: int = 128,
               **kw) -> PipelineConfig:
    return PipelineConfig.create_tma_async_pipeline_cfg(stages, num_bytes, threads(producers),
                                                        threads(consumers), **kw)


def async_config(stages: int, producers: int = 32, consumers: int = 128,
                 **kw) -> PipelineConfig:
    return PipelineConfig.create_async_async_pipeline_cfg(stages, threads(producers),
                                                          threads(consumers), **kw)


# -- resources ----------------------------------------------------------------------------------
@dataclass(kw_only=True)
class Ring(MemoryResource):
    """A shared-memory ring: TMA or thread producers fill a stage, consumers read it."""

    stage: TaskLocalVariable = TaskLocalVariable.uninitialized()
    allocation: object = None

    def __post_init__(self):
        self.stage = TaskLocalVariable(Int32, default=0)

    def get_smem_requirements(self):
        return [self.allocation] if self.allocation is not None else []

    @producer_work
    def tma_load(self, stage_info):
        pass

    @producer_work
    def tma_load_b(self, stage_info):
        pass

    @producer_work
    def fill(self, stage_info):
        pass

    @consumer_work(returns="stage")
    def read(self, stage_info):
        return stage_info.stage_idx

    @consumer_work
    def mma(self, stage_info):
        pass


@dataclass(kw_only=True)
class WgmmaRing(Ring):
    """A ring whose consumer works issue warpgroup MMAs on the stage (the bodies are never
    run: the checker reads which wgmma calls they make)."""

    @consumer_work
    def mma_keep_one(self, stage_info):
        wgmma.fence()
        wgmma.mma_async(None, stage_info, stage_info)
        wgmma.commit_group()
        wgmma.wait_group(1)          # the previous stage's MMAs are done, this one's may run

    @consumer_work
    def mma_sync(self, stage_info):
        wgmma.mma_async(None, stage_info, stage_info)
        wgmma.commit_group()
        wgmma.wait_group(0)

    @consumer_work
    def retire(self, stage_info):
        wgmma.wait_group(0)

    @consumer_work
    def retire_but(self, stage_info, *, keep: Constexpr[bool] = False):
        wgmma.wait_group(1 if keep else 0)


@dataclass(kw_only=True)
class GmemSource(MemoryResource):
    src: object = None
    item: TaskLocalVariable = TaskLocalVariable.uninitialized()

    def __post_init__(self):
        self.item = TaskLocalVariable(Int32, default=0)

    @consumer_work(returns="item")
    def load(self, stage_info):
        return self.src[stage_info.loop_offset]


@dataclass(kw_only=True)
class GmemDest(MemoryResource):
    """Global-memory output; ``smem`` names the ring its stores read (TMA copy tutorial)."""

    dst: object = None
    smem: object = None

    @producer_work
    def store(self, stage_info, value=None):
        pass

    @producer_work(work_attrs=WorkAttr.AUXILIARY)
    def fence(self, stage_info):
        pass


@dataclass(kw_only=True)
class SmemBuffer(MemoryResource):
    """A shared-memory buffer; ``allocation`` is its SmemAllocation (alias groups)."""

    allocation: object = None

    def get_smem_requirements(self):
        return [self.allocation] if self.allocation is not None else []

    @producer_work
    def write(self, stage_info, value=None):
        pass

    @consumer_work
    def read_all(self, stage_info):
        pass


@dataclass(kw_only=True)
class Sink(MemoryResource):
    """Global-memory output whose work needs a routed value."""

    @producer_work
    def put(self, stage_info, item):
        pass


def staging_allocator(ring: str, staging: str, aliased: bool, rings=("ab", "flag")) -> Callable:
    """resources -> a laid-out SmemAllocator holding the barriers of ``rings`` and the
    allocations of ``ring`` and ``staging``, in one alias group when ``aliased``."""
    def allocator(r):
        alloc = SmemAllocator()
        for name in rings:
            alloc.add_barriers(r[name])
        if aliased:
            alloc.add_alias_group([[r[ring].allocation], [r[staging].allocation]])
        else:
            alloc.add(r[ring].allocation)
            alloc.add(r[staging].allocation)
        alloc.compute_layout()
        return alloc
    return allocator


def static_queue(name: str = "wq", tiles: int = 8) -> WorkQueue:
    config = TileSchedulerConfig.create_static_persistent_tile_scheduler_params(tiles, 1, 1)
    return WorkQueue(name=name, tile_scheduler_config=config)


# -- capture from entry lists ---------------------------------------------------------------------
def record(proxies: dict, entries, loop=None) -> None:
    """Replay entries on the schedule proxies; a ``read``/``mma``/``load`` token feeds the
    next ``store`` of the same entry list (None when no token was produced).
    ``("first_iter", [...])`` / ``("last_iter", [...])`` record a guarded block,
    ``("every", (period, start), [...])`` a block guarded by ``loop.every(period, start)``."""
    token = None
    for entry in entries:
        name, op = entry[0], entry[1]
        if name in ("first_iter", "last_iter"):
            with getattr(loop, name)():
                record(proxies, op, loop)
            continue
        if name == "every":
            with loop.every(*op):
                record(proxies, entry[2], loop)
            continue
        kwargs = entry[2] if len(entry) > 2 else {}
        proxy = proxies[name]
        if op in ("acquire", "try_acquire", "commit", "wait", "try_wait", "release"):
            getattr(proxy, op)()
        elif op in ("store", "write"):
            if token is not None:
                getattr(proxy, op)(token, **kwargs)
            else:
                getattr(proxy, op)(**kwargs)
        else:
            result = getattr(proxy, op)(**kwargs)
            if op in ("read", "mma", "load"):
                token = result


@dataclass
class TaskSpec:
    """One task of a tutorial program: name, warps, src/dst attribute names and entries.

    ``entries`` is a dict with keys ``pre``, ``head``, ``loop``, ``tail``, ``queue`` (the
    per-tile epilogue), ``skippable`` (True: head/loop/tail sit in ``wtl.skippable()``);
    ``domain`` is ``(start, end, step)``; ``only_cta``: ``Task(run_only_on_cta_id=...)``.
    """

    name: str
    warp: int
    warps: int
    src: tuple
    dst: tuple
    entries: dict
    domain: tuple = (0, 8, 1)
    persistent: bool = False
    skip_if: bool = False
    only_cta: int | None = None


def capture(spec: TaskSpec, resources: dict):
    names = tuple(dict.fromkeys(spec.src + spec.dst))
    e = spec.entries

    def body(*proxies):
        by_name = dict(zip(names, proxies))
        record(by_name, e.get("pre", ()))

        def per_tile():
            record(by_name, e.get("head", ()))
            with domain_loop(*spec.domain) as loop:
                record(by_name, e.get("loop", ()), loop)
            record(by_name, e.get("tail", ()))

        if spec.persistent:
            queue = by_name["wq"]
            skip = queue.skip_work_tile_if if spec.skip_if else None
            with work_tile_loop(queue, skip_if=skip) as wtl:
                if spec.skip_if:
                    with wtl.skippable():
                        per_tile()
                else:
                    per_tile()
                record(by_name, e.get("queue", ()))
        else:
            per_tile()
    body.__name__ = f"{spec.name}_schedule"
    captured = schedule(body)(*(resources[n] for n in names))
    return Task(spec.name, [resources[n] for n in spec.src], [resources[n] for n in spec.dst],
                spec.warp, spec.warps, captured, run_only_on_cta_id=spec.only_cta)


@dataclass
class Program:
    """A tutorial-like program: how to build its resources, its task specs and graph."""

    name: str
    make_resources: Callable
    specs: list
    graph: Callable                      # resources -> {downstream: [upstream]}
    options: dict = field(default_factory=dict)
    allocator: Callable | None = None    # resources -> SmemAllocator (laid out)

    def build(self, specs: list | None = None):
        """(tasks, graph, options) from fresh resources."""
        resources = self.make_resources()
        tasks = [capture(s, resources) for s in (specs or self.specs)]
        options = dict(self.options)
        if self.allocator is not None:
            options["smem_allocator"] = self.allocator(resources)
        return tasks, self.graph(resources), options

    def check(self):
        """The exhaustive checker's result for this program (with its allocator, if any)."""
        tasks, graph, options = self.build()
        return check_all_interleavings(tasks, graph, smem_allocator=options.get("smem_allocator"))


QUEUE_EPILOGUE = (("wq", "wait"), ("wq", "get_and_advance_work_tile"), ("wq", "release"))


# -- the four tutorial-like programs ---------------------------------------------------------------
def grid_stride_copy() -> Program:
    """Tutorial 1: one task, GMEM -> GMEM, no pipeline."""
    def resources():
        return {"src": GmemSource(name="src", src=FakeValue("src")),
                "dst": GmemDest(name="dst", dst=FakeValue("dst"))}
    bx = FakeValue("bx")
    spec = TaskSpec("copy", 0, 4, ("src",), ("dst",),
                    {"loop": [("src", "load"), ("dst", "store")]},
                    domain=(bx, FakeValue("n"), FakeValue("grid")))
    return Program("grid-stride copy", resources, [spec], lambda r: {r["dst"]: [r["src"]]})


def tma_copy(stages: int = 4) -> Program:
    """Tutorial 2: a TMA load warp feeds 4 store warps through a TmaAsync ring; two padding
    tasks complete the CTA (4 tasks)."""
    def resources():
        smem = Ring(name="smem", pipeline_config=tma_config(stages, 64 * 64 * 4))
        return {"smem": smem, "gmem": GmemDest(name="gmem", dst=FakeValue("dst"), smem=smem)}
    bx, n, gx = FakeValue("bx"), FakeValue("num_tiles"), FakeValue("gx")
    load = TaskSpec("load", 0, 1, (), ("smem",), {"loop": [
        ("smem", "try_acquire"), ("smem", "acquire"), ("smem", "tma_load"),
        ("smem", "commit")]}, domain=(bx, n, gx))
    store = TaskSpec("store", 4, 4, ("smem",), ("gmem",), {"loop": [
        ("smem", "try_wait"), ("smem", "wait"), ("smem", "read"), ("gmem", "store"),
        ("smem", "release")]}, domain=(bx, n, gx))
    pad0 = TaskSpec("pad0", 1, 1, (), (), {}, domain=(0, 0, 1))
    pad1 = TaskSpec("pad1", 2, 2, (), (), {}, domain=(0, 0, 1))
    return Program("TMA copy (4 tasks)", resources, [load, pad0, pad1, store],
                   lambda r: {r["gmem"]: [r["smem"]]})


def persistent_copy(stages: int = 2, iterations: int = 3, skip_if: bool = True) -> Program:
    """Tutorial 4 on a ring: a static persistent TMA copy whose overlaunched tiles are
    skipped (``skip_if``), each task ending its tile with the queue epilogue."""
    def resources():
        smem = Ring(name="smem", pipeline_config=tma_config(stages, 4096))
        return {"smem": smem, "gmem": GmemDest(name="gmem", dst=FakeValue("dst"), smem=smem),
                "wq": static_queue()}
    load = TaskSpec("load", 0, 1, ("wq",), ("smem",), {
        "pre": [("wq", "init_work_tile")],
        "loop": [("smem", "acquire"), ("smem", "tma_load"), ("smem", "commit")],
        "queue": list(QUEUE_EPILOGUE)}, domain=(0, iterations, 1), persistent=True,
        skip_if=skip_if)
    store = TaskSpec("store", 1, 4, ("wq", "smem"), ("gmem",), {
        "pre": [("wq", "init_work_tile")],
        "loop": [("smem", "wait"), ("smem", "read"), ("gmem", "store"), ("smem", "release")],
        "queue": list(QUEUE_EPILOGUE)}, domain=(0, iterations, 1), persistent=True,
        skip_if=skip_if)
    return Program("persistent copy (skip_if)", resources, [load, store],
                   lambda r: {r["gmem"]: [r["smem"]], r["smem"]: [r["wq"]]})


def gemm(stages: int = 4, k_iterations: int = 8) -> Program:
    """A Hopper GEMM mainloop: one TMA producer warp (A and B tiles) feeds two consumer
    warpgroups through a TmaAsync ring; persistent over two tiles; epilogue in the Tail."""
    def resources():
        ab = Ring(name="ab", pipeline_config=tma_config(stages, 2 * 16384, consumers=256))
        return {"ab": ab, "c": GmemDest(name="c", dst=FakeValue("c")), "wq": static_queue()}
    load = TaskSpec("load", 0, 1, ("wq",), ("ab",), {
        "pre": [("wq", "init_work_tile")],
        "loop": [("ab", "acquire"), ("ab", "tma_load"), ("ab", "tma_load_b"),
                 ("ab", "commit")],
        "queue": list(QUEUE_EPILOGUE)}, domain=(0, k_iterations, 1), persistent=True)
    pad = TaskSpec("pad", 1, 3, ("wq",), (), {
        "pre": [("wq", "init_work_tile")], "queue": list(QUEUE_EPILOGUE)},
        domain=(0, 0, 1), persistent=True)
    consumers = [TaskSpec(f"mma{k}", 4 + 4 * k, 4, ("wq", "ab"), ("c",), {
        "pre": [("wq", "init_work_tile")],
        "loop": [("ab", "wait"), ("ab", "mma"), ("ab", "release")],
        "tail": [("c", "store")],
        "queue": list(QUEUE_EPILOGUE)}, domain=(0, k_iterations, 1), persistent=True)
        for k in range(2)]
    return Program(f"GEMM TMA -> 2 warpgroups ({stages} stages)", resources,
                   [load, pad] + consumers,
                   lambda r: {r["c"]: [r["ab"]], r["ab"]: [r["wq"]]})


TUTORIALS = {
    "grid-stride copy": grid_stride_copy,
    "TMA copy": tma_copy,
    "persistent copy": persistent_copy,
    "GEMM": gemm,
}


__all__ = ["FakeValue", "threads", "tma_config", "async_config", "Ring", "WgmmaRing", "GmemSource",
           "GmemDest", "SmemBuffer", "Sink", "staging_allocator", "static_queue", "record", "TaskSpec", "capture",
           "Program", "QUEUE_EPILOGUE", "grid_stride_copy", "tma_copy", "persistent_copy",
           "gemm", "TUTORIALS", "SmemAllocation", "SmemAllocator", "PdlWaitBarrier",
           "PdlLaunchBarrier"]
