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

What is bounded: every mbarrier wait (TS pipeline acquire / wait / producer-tail drain and
``tsjit.mbarrier_wait``).  ``bar.sync`` (``syncthreads``, named barriers) and
``barrier.cluster.wait`` have no test-or-timeout form in PTX and stay unbounded; in a TS
program they run at setup (every thread, at kernel entry) and after all tasks (cluster
sync), and a warp missing there is either stuck in a bounded mbarrier wait (whose timeout
traps the grid and reports) or absent because the block is too small, which the launch
contract check refuses (:mod:`tsjit.abi`).

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


def bounded_wait(try_wait: Callable[[], Value], phase) -> None:
    """Emit ``while not try_wait(): ...`` bounded by the debug budget (see the module docstring).

    Args:
        try_wait: emits one ``mbarrier.try_wait`` and returns its Boolean ``Value``.
        phase: the phase parity waited for (int or Int32 ``Value``), recorded on timeout.
    """
    km = emit.current()
    b, fn = km.builder, km.function
    stack = getattr(km, "wait_contexts", None)
    context = stack[-1] if stack else None
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
