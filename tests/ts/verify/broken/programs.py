"""Whole-program mistakes: persistent kernels, skip_if, aliasing, PDL, lanes, routing."""
from __future__ import annotations

import copy

from broken.builders import CONS, PROD, case
from tsjit.ts import ScheduleStage, Task, schedule_from_entries
from verify_schedules import (QUEUE_EPILOGUE, FakeValue, GmemDest, GmemSource, PdlLaunchBarrier,
                              PdlWaitBarrier, Program, Ring, Sink, SmemAllocation,
                              SmemAllocator, SmemBuffer, TaskSpec, async_config,
                              persistent_copy, static_queue, tma_config)


def edit(factory, task: str, **entries):
    """A Program factory with some entry lists (or TaskSpec fields) of ``task`` replaced."""
    def make():
        program = factory()
        specs = []
        for spec in program.specs:
            if spec.name == task:
                spec = copy.copy(spec)
                spec.entries = dict(spec.entries)
                for key, value in entries.items():
                    if key in ("skip_if", "domain", "persistent"):
                        setattr(spec, key, value)
                    else:
                        spec.entries[key] = value
            specs.append(spec)
        program.specs = specs
        return program
    return make


# -- aliasing -------------------------------------------------------------------------------------
def aliased_writers(aliased: bool):
    """Two tasks each write their own SMEM buffer; the buffers share bytes when aliased."""
    def program():
        def resources():
            a, b = SmemAllocation("buf_a", 4096), SmemAllocation("buf_b", 4096)
            return {"src_a": GmemSource(name="src_a", src=FakeValue("a")),
                    "src_b": GmemSource(name="src_b", src=FakeValue("b")),
                    "buf_a": SmemBuffer(name="buf_a", allocation=a),
                    "buf_b": SmemBuffer(name="buf_b", allocation=b)}

        def allocator(r):
            alloc = SmemAllocator()
            a, b = r["buf_a"].allocation, r["buf_b"].allocation
            if aliased:
                alloc.add_alias_group([[a], [b]])
            else:
                alloc.add(a)
                alloc.add(b)
            alloc.compute_layout()
            return alloc
        specs = [TaskSpec("writer_a", 0, 1, ("src_a",), ("buf_a",),
                          {"loop": [("src_a", "load"), ("buf_a", "write")]}),
                 TaskSpec("writer_b", 1, 1, ("src_b",), ("buf_b",),
                          {"loop": [("src_b", "load"), ("buf_b", "write")]})]
        return Program("aliased writers", resources, specs,
                       lambda r: {r["buf_a"]: [r["src_a"]], r["buf_b"]: [r["src_b"]]},
                       allocator=allocator)
    return program


def staging_aliases_ring(aliased: bool):
    """Persistent GEMM-like: the epilogue stages C in SMEM that aliases the A/B ring while
    the load warp already fills the ring for the next tile."""
    def program():
        def resources():
            ring = Ring(name="ab", pipeline_config=tma_config(2, 8192),
                        allocation=SmemAllocation("ab_tiles", 2 * 8192))
            staging = SmemBuffer(name="c_smem", allocation=SmemAllocation("c_tile", 8192))
            return {"ab": ring, "c_smem": staging, "wq": static_queue()}

        def allocator(r):
            alloc = SmemAllocator()
            ring_tiles, c_tile = r["ab"].allocation, r["c_smem"].allocation
            if aliased:
                alloc.add_alias_group([[ring_tiles], [c_tile]])
            else:
                alloc.add(ring_tiles)
                alloc.add(c_tile)
            alloc.add_barriers(r["ab"])
            alloc.compute_layout()
            return alloc
        load = TaskSpec("load", 0, 1, ("wq",), ("ab",), {
            "pre": [("wq", "init_work_tile")],
            "loop": [("ab", "acquire"), ("ab", "tma_load"), ("ab", "commit")],
            "queue": list(QUEUE_EPILOGUE)}, domain=(0, 4, 1), persistent=True)
        mma = TaskSpec("mma", 4, 4, ("wq", "ab"), ("c_smem",), {
            "pre": [("wq", "init_work_tile")],
            "loop": [("ab", "wait"), ("ab", "mma"), ("ab", "release")],
            "tail": [("c_smem", "write")],
            "queue": list(QUEUE_EPILOGUE)}, domain=(0, 4, 1), persistent=True)
        return Program("staging aliases ring", resources, [load, mma],
                       lambda r: {r["c_smem"]: [r["ab"]], r["ab"]: [r["wq"]]},
                       allocator=allocator)
    return program


def smem_handoff(synchronised: bool):
    """Task ``pack`` writes an SMEM buffer that task ``unpack`` reads; a one-stage ring
    orders them only if the write sits inside the ring's acquire/commit bracket."""
    def program():
        def resources():
            ring = Ring(name="ring", pipeline_config=async_config(1, producers=32,
                                                                  consumers=128))
            buf = SmemBuffer(name="buf", allocation=SmemAllocation("buf", 4096))
            return {"ring": ring, "buf": buf,
                    "out": GmemDest(name="out", dst=FakeValue("out"), smem=ring)}
        write = [("buf", "write")]
        producer = (PROD[:1] + write + PROD[1:]) if synchronised else (PROD + write)
        consumer = [("ring", "wait"), ("buf", "read_all")] + CONS[1:]
        specs = [TaskSpec("pack", 0, 1, (), ("ring", "buf"), {"loop": producer}),
                 TaskSpec("unpack", 1, 4, ("ring", "buf"), ("out",), {"loop": consumer})]
        def allocator(r):
            alloc = SmemAllocator()
            for name in ("ring", "buf"):
                alloc.add_resource(r[name])
            alloc.compute_layout()
            return alloc
        return Program("smem handoff", resources, specs,
                       lambda r: {r["out"]: [r["ring"], r["buf"]]}, allocator=allocator)
    return program


# -- PDL ----------------------------------------------------------------------------------------------
def pdl_program(layout: str):
    """``launch_early``: task ``early`` launches dependents while only task ``late`` waits;
    ``launch_after``: the launch follows the same task's wait; ``loop_then_wait``: one task
    launches inside its loop and waits in its Tail; ``wait_then_loop``: the fix."""
    def program():
        def resources():
            return {"pdl_wait": PdlWaitBarrier(name="pdl_wait"),
                    "pdl_launch": PdlLaunchBarrier(name="pdl_launch"),
                    "x": GmemSource(name="x", src=FakeValue("x")),
                    "y": GmemDest(name="y", dst=FakeValue("y"))}
        copy_loop = [("x", "load"), ("y", "store")]
        wait, launch = ("pdl_wait", "wait_griddep"), ("pdl_launch", "launch_griddep")
        if layout in ("launch_early", "launch_after"):
            launches = layout == "launch_early"
            early = TaskSpec("early", 0, 1, (), ("pdl_launch",) if launches else (),
                             {"tail": [launch] if launches else []}, domain=(0, 0, 1))
            late = TaskSpec("late", 1, 4, ("pdl_wait", "x"),
                            ("y", "pdl_launch") if layout == "launch_after" else ("y",), {
                "head": [wait], "loop": copy_loop,
                "tail": [launch] if layout == "launch_after" else []})
            specs = [early, late]
        else:
            entries = {"loop": copy_loop + ([launch] if layout == "loop_then_wait" else []),
                       "head": [wait] if layout == "wait_then_loop" else [],
                       "tail": [wait] if layout == "loop_then_wait" else [launch]}
            specs = [TaskSpec("copy", 0, 4, ("pdl_wait", "x"), ("y", "pdl_launch"), entries)]
        return Program("pdl", resources, specs,
                       lambda r: {r["y"]: [r["x"]], r["x"]: [r["pdl_wait"]],
                                  r["pdl_launch"]: []})
    return program


def pdl_wait_order(wait_first: bool):
    def program():
        def resources():
            return {"pdl_wait": PdlWaitBarrier(name="pdl_wait"),
                    "mid": GmemSource(name="mid", src=FakeValue("mid")),
                    "y": GmemDest(name="y", dst=FakeValue("y"))}
        wait = [("pdl_wait", "wait_griddep")]
        entries = {"head": wait} if wait_first else {"tail": wait}
        entries["loop"] = [("mid", "load"), ("y", "store")]
        spec = TaskSpec("consume", 0, 4, ("pdl_wait", "mid"), ("y",), entries)
        return Program("pdl order", resources, [spec],
                       lambda r: {r["y"]: [r["mid"]], r["mid"]: [r["pdl_wait"]]})
    return program


# -- interleave lanes -------------------------------------------------------------------------------------
def domain_lanes(lanes):
    """Producer tasks on domain lanes (step 2 over a 4-stage ring), a 2-warp consumer."""
    def program():
        def resources():
            ring = Ring(name="ring", pipeline_config=async_config(
                4, producers=32, consumers=32, interleave_stride=2))
            return {"ring": ring, "out": GmemDest(name="out", dst=FakeValue("out"), smem=ring)}
        specs = [TaskSpec(f"lane{i}", i, 1, (), ("ring",), {"loop": PROD}, domain=(lane, 8, 2))
                 for i, lane in enumerate(lanes)]
        specs.append(TaskSpec("cons", 2, 2, ("ring",), ("out",), {"loop": CONS},
                              domain=(0, 8, 2)))
        return Program("domain lanes", resources, specs, lambda r: {r["out"]: [r["ring"]]})
    return program


# -- routing, roles, split consumers ------------------------------------------------------------------------
def routed(order_ok: bool):
    """A raw schedule whose store reads the loaded item before the load wrote it."""
    class RawProgram(Program):
        def build(self, specs=None):
            src, out = GmemSource(name="src", src=FakeValue("src")), Sink(name="out")
            entries = [(src, ScheduleStage.ConsumerWork, "load"),
                       (out, ScheduleStage.ProducerWork, "put")]
            if not order_ok:
                entries.reverse()
            task = Task("copy", [src], [out], 0, 4, schedule_from_entries(entries, end=4))
            return [task], {out: [src]}, {}
    return lambda: RawProgram("routing", None, [], None)


def producer_role(releases: bool):
    def program():
        from broken.builders import ring_program, ASYNC
        producer = PROD + ([("ring", "release")] if releases else [])
        return ring_program(ASYNC(), producer, CONS)
    return program


def split_consumer(with_proxy: bool):
    """``peek`` waits on ``ring`` and hands the stage on through ``mid``; ``finish`` reads
    and releases ``ring``, which is ordered only if it first waits on ``mid``."""
    def program():
        def resources():
            ring = Ring(name="ring", pipeline_config=async_config(
                2, producers=32, consumers=32, advance_on_wait=True))
            mid = Ring(name="mid", pipeline_config=async_config(2, producers=32, consumers=32))
            return {"ring": ring, "mid": mid,
                    "out": GmemDest(name="out", dst=FakeValue("out"), smem=ring)}
        peek = [("ring", "wait"), ("ring", "read"), ("mid", "acquire"), ("mid", "fill"),
                ("mid", "commit")]
        take = [("ring", "read"), ("out", "store")]
        finish = ([("mid", "wait")] + take if with_proxy else take + [("mid", "wait")]) + \
            [("mid", "release"), ("ring", "release")]
        specs = [TaskSpec("prod", 0, 1, (), ("ring",), {"loop": PROD}, domain=(0, 4, 1)),
                 TaskSpec("peek", 1, 1, ("ring",), ("mid",), {"loop": peek}, domain=(0, 4, 1)),
                 TaskSpec("finish", 2, 1, ("ring", "mid"), ("out",), {"loop": finish},
                          domain=(0, 4, 1))]
        return Program("split consumer", resources, specs,
                       lambda r: {r["mid"]: [r["ring"]], r["out"]: [r["ring"], r["mid"]]})
    return program


CASES = [
    case("missing_queue_epilogue_in_one_task", "the store task never advances its work tile",
         edit(persistent_copy, "store", queue=[("wq", "wait"), ("wq", "release")]),
         persistent_copy, Q1=("'store'", "get_and_advance_work_tile"),
         X=("'store'", "'wq'", "get_and_advance_work_tile")),
    case("queue_advanced_every_iteration", "the store task advances the work queue inside "
         "the domain loop (once per iteration instead of once per tile)",
         edit(lambda: persistent_copy(skip_if=False), "store", loop=[
             ("smem", "wait"), ("smem", "read"), ("gmem", "store"), ("smem", "release"),
             ("wq", "get_and_advance_work_tile")]),
         lambda: persistent_copy(skip_if=False),
         Q1=("'store'", "'wq'", "get_and_advance_work_tile")),
    case("skip_if_in_one_task_only", "only the load task skips overlaunched tiles: on a "
         "skipped tile the store task waits for a stage nobody fills",
         edit(persistent_copy, "store", skip_if=False), persistent_copy,
         X=("'store'", "'smem'", "ConsumerWait", "skipped")),
    case("two_tasks_write_aliased_buffers", "two tasks write SMEM buffers that share bytes "
         "(one alias group) at the same time", aliased_writers(True), aliased_writers(False),
         X=("'writer_a'", "'writer_b'", "'buf_a'", "ProducerWork", "smem[0:4096]")),
    case("epilogue_staging_aliases_ring", "the epilogue's C staging aliases the A/B ring that "
         "the load warp refills for the next tile", staging_aliases_ring(True),
         staging_aliases_ring(False),
         X=("'load'", "'mma'", "'c_smem'", "'ab'", "ProducerWork", "smem[")),
    case("smem_buffer_written_after_commit", "the producer writes a side buffer after its "
         "commit, while the consumer reads it", smem_handoff(False), smem_handoff(True),
         X=("'pack'", "'unpack'", "'buf'", "ProducerWork", "ConsumerWork")),
    case("pdl_launch_before_any_wait", "one task launches dependents while the waiting task "
         "may not have waited yet", pdl_program("launch_early"), pdl_program("launch_after"),
         X=("'early'", "'pdl_launch'", "ProducerWork 'launch_griddep'")),
    case("pdl_launch_in_loop_wait_in_tail", "the launch sits in the loop, the wait after it",
         pdl_program("loop_then_wait"), pdl_program("wait_then_loop"),
         PDL1=("'copy'", "'x'", "pdl_wait"),
         X=("'copy'", "'pdl_launch'", "ProducerWork 'launch_griddep'")),
    case("pdl_wait_after_dependent_read", "the task reads predecessor-grid data before "
         "griddepcontrol.wait", pdl_wait_order(False), pdl_wait_order(True),
         PDL1=("'consume'", "'mid'", "pdl_wait", "ConsumerWork")),
    case("interleave_lanes_colliding", "two producer tasks both take domain lane 0 of a "
         "stride-2 ring", domain_lanes((0, 0)), domain_lanes((0, 1)),
         C0=("'cons'", "'ring'", "ConsumerWait", "warp lane 1", "a commit of stage 1"), P6=("'lane0'", "'ring'"),
         X=("'lane1'", "'ring'", "ProducerWork")),
    case("interleave_lane_missing", "no producer covers lane 1: the consumer warp of lane 1 "
         "waits forever", domain_lanes((0,)), domain_lanes((0, 1)),
         C0=("'cons'", "'ring'", "ConsumerWait", "warp lane 1", "a commit of stage 1"), P6=("'ring'",),
         X=("'cons'", "'ring'", "ConsumerWait", "lane 1")),
    case("token_read_before_written", "the store reads the loaded item before the load "
         "writes it (raw schedule order)", routed(False), routed(True),
         R3=("'copy'", "out.put", "'item'")),
    case("producer_releases_its_own_ring", "the producer task also releases the ring it "
         "fills (a consumer operation)", producer_role(True), producer_role(False),
         R0=("'prod'", "'ring'", "ConsumerRelease"), X=("'ring'", "ConsumerRelease")),
    case("split_consumer_without_proxy", "the releasing half of a split consumer reads the "
         "stage before waiting on the downstream ring that proves it full",
         split_consumer(False), split_consumer(True),
         B1=("'finish'", "'ring'", "ConsumerWork"),
         X=("'finish'", "'ring'", "ConsumerWork")),
]
