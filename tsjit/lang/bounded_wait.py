"""Bounded waits of ``TSJIT_DEBUG=1`` builds: a hang becomes a message (issue 9 §3).

A release build waits on an mbarrier with a plain ``mbarrier.try_wait.parity`` loop: if the
phase never completes (a missing commit, a transaction byte count the copies never deliver,
a CTA launched with fewer warps than the program), the GPU hangs until the process is killed.
A debug build emits every mbarrier wait as::

    ok = try_wait.parity(bar, phase)              // the release fast path, unchanged
    if !ok:
        t0 = %globaltimer
        loop: ok = try_wait.parity(bar, phase)    // suspends up to a system time limit
              if ok: done
              if %globaltimer - t0 > budget: report
    report: one thread per warp (the lowest active lane) claims a slot (atom.global.add on
            tsjit_hang_claims), writes the record (volatile stores into mapped host memory,
            fence.sc.sys, the magic word last, fence.sc.sys), every timed-out thread then waits
            HANG_GRACE_NS (so the record lands and other warps stuck at the same moment record
            theirs) and executes ``trap``.

The budget is ``TSJIT_DEBUG_TIMEOUT_MS`` (default 2000) converted to nanoseconds of
``%globaltimer``.  The record (layout: :data:`tsjit.abi.HANG_FIELDS`) holds the wait *site*
(an index into the kernel's ``metadata["debug_waits"]``, which names the task, resource,
operation and barrier) and what only the device knows: CTA, warp, lane, cluster rank, stage,
loop offset, loop iteration, the phase parity waited for, the time waited and the SM.  Its
buffer is page-locked host memory whose address the runtime writes into the module's
``tsjit_hang_record`` global, so the host can read it after the trap, when the CUDA context
no longer answers (:mod:`tsjit.runtime.hang_report`).

What is bounded:

* every mbarrier wait (TS pipeline acquire / wait / producer-tail drain, ``tsjit.mbarrier_wait``);
* named barriers with a thread count (``tsjit.named_barrier_sync(id, n)`` / ``named_barrier_arrive``,
  PTX ``bar.sync id, n`` / ``bar.arrive id, n``).  ``bar.sync`` has no test-or-timeout form, so a
  debug build replaces them with a software barrier in shared memory (an arrival counter and a
  generation word per id, zeroed by every thread at kernel entry followed by one hardware
  ``bar.sync 0`` there, which cannot hang: every thread of the CTA starts at the entry) whose
  wait polls the generation with the same budget and report (:func:`named_barrier`).

What is not: ``tsjit.syncthreads()`` (``bar.sync 0`` over the whole CTA: the hardware counts only
the threads that have not exited, which a software counter cannot know) and
``barrier.cluster.wait`` (no timed form, and a cluster-wide software barrier would need
DSMEM atomics into every peer).  In a TS program both run only at setup (every thread, at kernel
entry) and after all tasks (cluster sync); a warp missing there is either stuck in a bounded wait
(whose timeout traps the grid and reports) or absent because the block is too small, which the
launch contract check refuses (:mod:`tsjit.abi`).

The TS lowering describes each wait with :func:`wait_context` (task, operation, resource,
barrier, stage, loop offset, iteration); a wait outside any context is reported as a
``tsjit.mbarrier_wait`` of the kernel.

Sources: PTX ISA 8.6 §9.7.13.15.16 "mbarrier.test_wait / mbarrier.try_wait" (try_wait is
potentially blocking and returns false after a system-dependent time limit), §10
"%globaltimer" (a 64-bit nanosecond timer), §9.7.19.1 "trap", §9.7.13.4 "membar / fence".
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Callable

from llvmlite import ir

from tsjit import abi, env
from tsjit.backend import emit
from tsjit.lang import dtypes as dt
from tsjit.lang.memory import shared_pointer
from tsjit.lang.values import Value, as_value, cast_to

__all__ = ["enabled", "wait_context", "bounded_wait"]


def enabled() -> bool:
    """Whether waits are compiled bounded (``TSJIT_DEBUG=1``); read while a kernel compiles."""
    return env.debug()


@contextmanager
def wait_context(*, task: str = "", operation: str = "", resource: str = "", barrier: str = "",
                 stage=None, loop_offset=None, iteration: Callable | None = None):
    """Describe the waits emitted inside the ``with`` block, for debug-build hang reports.

    Args:
        task: ``"task 'store' (warps 1-4)"``.
        operation: what waits, e.g. a schedule step's ``describe()`` text.
        resource: the resource's name.
        barrier: the barrier array waited on, e.g. ``"smem.full"`` (the stage index is appended).
        stage: the stage index (Int32 ``Value`` or int), or ``None``.
        loop_offset: the domain loop's offset (``Value``/int) or ``None``.
        iteration: a zero-argument callable returning the loop iteration (``Value``/int/None);
            called only in a debug build, inside the timeout path, so release code is unchanged.

    Emits nothing itself; cheap enough for every pipeline operation of a release build.
    """
    if not enabled() or not emit.active():
        yield
        return
    km = emit.current()
    stack = getattr(km, "wait_contexts", None)
    if stack is None:
        stack = km.wait_contexts = []
    stack.append(dict(task=task, operation=operation, resource=resource, barrier=barrier, stage=stage,
                      loop_offset=loop_offset, iteration=iteration))
    try:
        yield
    finally:
        stack.pop()


def _site(km, context: dict | None) -> int:
    sites = getattr(km, "debug_waits", None)
    if sites is None:
        sites = km.debug_waits = []
    if context is None:
        sites.append({"task": "", "operation": "tsjit.mbarrier_wait", "resource": "", "barrier": "mbarrier"})
    else:
        sites.append({k: context[k] for k in ("task", "operation", "resource", "barrier")})
    return len(sites) - 1


def _module_global(km, name: str, llvm_type: ir.Type) -> ir.GlobalVariable:
    gv = km.module.globals.get(name)
    if gv is None:
        gv = ir.GlobalVariable(km.module, llvm_type, name, addrspace=emit.GLOBAL)
        gv.initializer = ir.Constant(llvm_type, 0)
        gv.align = 8
        gv.type = emit.pointer_type(emit.GLOBAL)  # opaque, as LLVM 22 prints it
    return gv


def _sreg(km, name: str):
    return km.intrinsic(f"llvm.nvvm.read.ptx.sreg.{name}", [])


def _i64(km, value):
    if value is None:
        return ir.Constant(emit.I64, -1)
    return cast_to(as_value(value, dt.Int64), dt.Int64).ir


def current_context() -> dict | None:
    """The innermost :func:`wait_context` of the kernel being compiled (a dict), or ``None``."""
    stack = getattr(emit.current(), "wait_contexts", None)
    return stack[-1] if stack else None


def bounded_wait(try_wait: Callable[[], Value], phase, context: dict | None = None) -> None:
    """Emit ``while not try_wait(): ...`` bounded by the debug budget (see the module docstring).

    Args:
        try_wait: emits one test of the awaited condition (e.g. ``mbarrier.try_wait``) and returns
            its Boolean ``Value``.
        phase: the phase parity waited for (int or Int32 ``Value``), recorded on timeout.
        context: what the wait is (as :func:`wait_context`'s fields); default the innermost one.
    """
    km = emit.current()
    b, fn = km.builder, km.function
    context = context if context is not None else current_context()
    site = _site(km, context)
    budget_ns = env.debug_timeout_ms() * 1_000_000
    slow, loop, check = (fn.append_basic_block(f"wait.{n}") for n in ("slow", "loop", "check"))
    timeout, done = fn.append_basic_block("wait.timeout"), fn.append_basic_block("wait.done")
    b.cbranch(try_wait().ir, done, slow)
    b.position_at_end(slow)
    start = _sreg(km, "globaltimer")
    b.branch(loop)
    b.position_at_end(loop)
    b.cbranch(try_wait().ir, done, check)
    b.position_at_end(check)
    now = _sreg(km, "globaltimer")
    waited = b.sub(now, start)
    b.cbranch(b.icmp_unsigned(">", waited, ir.Constant(emit.I64, budget_ns)), timeout, loop)
    b.position_at_end(timeout)
    _report_and_trap(km, site, context, phase, waited, budget_ns)
    b.branch(loop)  # not reached: trap ends the grid
    b.position_at_end(done)


def _record_fields(km, site: int, context: dict | None, phase, waited, budget_ns) -> list:
    b = km.builder
    tid = [_sreg(km, f"tid.{a}") for a in "xyz"]
    ntid = [_sreg(km, f"ntid.{a}") for a in "xy"]
    linear = b.add(b.add(tid[0], b.mul(tid[1], ntid[0])), b.mul(tid[2], b.mul(ntid[0], ntid[1])))
    context = context or {}
    iteration = context.get("iteration")
    fields = {
        "site": ir.Constant(emit.I64, site),
        "cta_x": b.zext(_sreg(km, "ctaid.x"), emit.I64),
        "cta_y": b.zext(_sreg(km, "ctaid.y"), emit.I64),
        "cta_z": b.zext(_sreg(km, "ctaid.z"), emit.I64),
        "warp": b.zext(b.lshr(linear, ir.Constant(emit.I32, 5)), emit.I64),
        "lane": b.zext(_sreg(km, "laneid"), emit.I64),
        "cluster_rank": b.zext(_sreg(km, "cluster.ctarank"), emit.I64),
        "stage": _i64(km, context.get("stage")),
        "loop_offset": _i64(km, context.get("loop_offset")),
        "iteration": _i64(km, iteration() if iteration is not None else None),
        "phase": _i64(km, phase),
        "waited_ns": waited,
        "sm": b.zext(_sreg(km, "smid"), emit.I64),
        "budget_ns": ir.Constant(emit.I64, budget_ns),
        "reserved": ir.Constant(emit.I64, 0),
    }
    return [fields[name] for name in abi.HANG_FIELDS[1:]]


def _store_volatile(km, address, value) -> None:
    km.inline_asm(emit.VOID, "st.volatile.u64 [$0], $1;", "l,l,~{memory}", [address, value])


def _report_and_trap(km, site: int, context, phase, waited, budget_ns) -> None:
    b, fn = km.builder, km.function
    fields = _record_fields(km, site, context, phase, waited, budget_ns)
    mask = km.intrinsic("llvm.nvvm.activemask", [])
    lowest = b.and_(mask, b.sub(ir.Constant(emit.I32, 0), mask))
    leader = b.icmp_unsigned("==", b.shl(ir.Constant(emit.I32, 1), _sreg(km, "laneid")), lowest)
    claim, write, grace = (fn.append_basic_block(f"hang.{n}") for n in ("claim", "write", "grace"))
    b.cbranch(leader, claim, grace)
    b.position_at_end(claim)
    claims = _module_global(km, abi.HANG_CLAIMS_SYMBOL, emit.I32)
    slot = b.atomic_rmw("add", claims, ir.Constant(emit.I32, 1), "monotonic")
    base = b.load(_module_global(km, abi.HANG_RECORD_SYMBOL, emit.I64), typ=emit.I64)
    usable = b.and_(b.icmp_unsigned("<", slot, ir.Constant(emit.I32, abi.HANG_MAX_RECORDS)),
                    b.icmp_unsigned("!=", base, ir.Constant(emit.I64, 0)))
    b.cbranch(usable, write, grace)
    b.position_at_end(write)
    record = b.add(base, b.mul(b.zext(slot, emit.I64), ir.Constant(emit.I64, abi.HANG_RECORD_BYTES)))
    for index, value in enumerate(fields, start=1):
        _store_volatile(km, b.add(record, ir.Constant(emit.I64, 8 * index)), value)
    km.inline_asm(emit.VOID, "fence.sc.sys;", "~{memory}", [])
    _store_volatile(km, record, ir.Constant(emit.I64, abi.HANG_MAGIC))
    km.inline_asm(emit.VOID, "fence.sc.sys;", "~{memory}", [])
    b.branch(grace)
    b.position_at_end(grace)
    grace_start = _sreg(km, "globaltimer")
    spin, trap = fn.append_basic_block("hang.spin"), fn.append_basic_block("hang.trap")
    b.branch(spin)
    b.position_at_end(spin)
    km.inline_asm(emit.VOID, "nanosleep.u32 1000;", "~{memory}", [])
    elapsed = b.sub(_sreg(km, "globaltimer"), grace_start)
    b.cbranch(b.icmp_unsigned("<", elapsed, ir.Constant(emit.I64, abi.HANG_GRACE_NS)), spin, trap)
    b.position_at_end(trap)
    km.inline_asm(emit.VOID, "trap;", "~{memory}", [])


# -- named barriers (bar.sync id, count) ------------------------------------------------------
_NAMED_BARRIERS = 16


def _named_barrier_words(km):
    """Byte offset of the debug build's 16 (arrival counter, generation) u32 pairs in the dynamic
    shared-memory block.  Reserved on first use; zeroed by every thread at kernel entry, followed by
    a ``bar.sync 0`` there (every thread of the CTA is at the entry, so that barrier cannot hang)."""
    offset = getattr(km, "named_barrier_words", None)
    if offset is not None:
        return offset
    offset = km.named_barrier_words = km.reserve_shared(8 * _NAMED_BARRIERS, 8)
    b = km.builder
    here = b.block
    b.position_at_start(km.function.entry_basic_block)
    words = shared_pointer(offset, dt.Int32, 8)
    for index in range(2 * _NAMED_BARRIERS):
        b.store(ir.Constant(emit.I32, 0), words.offset(index).ir)
    km.intrinsic("llvm.nvvm.barrier.cta.sync.aligned.all", [ir.Constant(emit.I32, 0)])
    b.position_at_end(here)
    return offset


def _fence_cta(km) -> None:
    km.inline_asm(emit.VOID, "fence.acq_rel.cta;", "~{memory}", [])


def named_barrier(barrier_id: Value, num_threads: Value, *, wait: bool) -> None:
    """``bar.sync id, count`` (``wait``) or ``bar.arrive id, count`` of a debug build, as a software
    barrier in shared memory whose wait is bounded like an mbarrier wait.

    Each arriving thread reads the barrier's generation (``ld.acquire``), then (``fence.acq_rel.cta``
    + relaxed ``atom.add``: a release) adds 1 to its arrival counter; the thread that completes
    ``num_threads`` arrivals fences (acquiring every arrival, releasing to the waiters), resets the
    counter and increments the generation; waiting threads poll the generation (``ld.acquire``)
    with the debug budget.
    Acquire/release at CTA scope gives the ordering ``bar.sync`` gives its participants (PTX ISA
    §9.7.13.1 "bar, barrier"; memory consistency model §8).  The hang record's ``stage`` is the
    barrier id and ``phase`` the generation waited on.
    """
    km = emit.current()
    b, fn = km.builder, km.function
    base = _named_barrier_words(km)
    words = shared_pointer(base, dt.Int32, 8)
    counter = words.offset(barrier_id * 2).ir
    generation = words.offset(barrier_id * 2 + 1).ir
    mine = b.load_atomic(generation, "acquire", 4, typ=emit.I32)
    # LLVM's NVPTX backend emits atomicrmw as a relaxed atom whatever its ordering: the release and
    # acquire patterns are written out as fence.acq_rel.cta next to relaxed atomics (PTX ISA §8.7).
    _fence_cta(km)
    arrived = b.atomic_rmw("add", counter, ir.Constant(emit.I32, 1), "monotonic")
    last = b.icmp_unsigned("==", b.add(arrived, ir.Constant(emit.I32, 1)), num_threads.ir)
    release, done = fn.append_basic_block("namedbar.release"), fn.append_basic_block("namedbar.done")
    waiting = fn.append_basic_block("namedbar.wait") if wait else done
    b.cbranch(last, release, waiting)
    b.position_at_end(release)
    _fence_cta(km)  # acquire the other arrivals, then release them all with the new generation
    b.atomic_rmw("xchg", counter, ir.Constant(emit.I32, 0), "monotonic")
    b.atomic_rmw("add", generation, ir.Constant(emit.I32, 1), "monotonic")
    b.branch(done)
    if wait:
        b.position_at_end(waiting)
        context = dict(current_context() or dict(task="", operation="tsjit.named_barrier_sync", resource="",
                                                 loop_offset=None, iteration=None))
        context.update(barrier="named barrier", stage=barrier_id)

        def passed() -> Value:
            now = b.load_atomic(generation, "acquire", 4, typ=emit.I32)
            return Value(b.icmp_unsigned("!=", now, mine), dt.Boolean)
        bounded_wait(passed, Value(mine, dt.Int32), context)
        b.branch(done)
    b.position_at_end(done)
    # bar.sync/bar.arrive .aligned are executed by whole warps; the polling above may leave the
    # lanes diverged, and what follows (wgmma, stmatrix: .sync.aligned) needs them converged.
    km.intrinsic("llvm.nvvm.bar.warp.sync", [ir.Constant(emit.I32, -1)])
