"""Handlers of barriers, mbarriers, fences, DSMEM addressing, PDL, setmaxnreg and ``vprintf``.

The objects and their semantics are in :mod:`tsjit.interpret.sync`; this module decodes the
intrinsics' operands (PTX ISA §9.7.13) and parks threads on the objects.  ``try_wait`` blocks until
the phase completes; when every live thread is parked the scheduler lets such waits return false
once (a hardware time limit), then reports the deadlock.  ``test_wait`` returns the current status
at once (a false result parks the thread until the barrier changes, so a polling loop cannot spin
forever).  ``griddepcontrol.wait`` / ``launch_dependents`` are no-ops (one grid at a time); in a
``pdl=True`` launch the wait orders the thread for the checks of :mod:`tsjit.interpret.pdl`; ``setmaxnreg`` checks the PTX rules (24..256, a multiple of 8, warpgroup-uniform).
"""
from __future__ import annotations

from tsjit.errors import InterpretError
from tsjit.interpret import memory as M
from tsjit.interpret.pdl import note_wait
from tsjit.interpret.printf import format_printf
from tsjit.interpret.races import acquire
from tsjit.interpret.registry import blocking, constant_arg, handles, handles_prefix
from tsjit.interpret.sync import ClusterBarrier, NamedBarrier, join_warpgroup, mbarrier_at

_NV = "llvm.nvvm."
_MB = _NV + "mbarrier."


def _named(th, index: int, where: str) -> NamedBarrier:
    if not 0 <= index < 16:
        raise InterpretError(f"bar.sync at {where}: barrier id {index} is outside 0..15")
    barrier = th.cta.named.get(index)
    if barrier is None:
        barrier = th.cta.named[index] = NamedBarrier(th.cta, index)
    return barrier


def _acquire(th, clock) -> None:
    if th.machine.checks and clock is not None:
        acquire(th, clock)


@handles(_NV + "barrier.cta.sync.aligned.all", _NV + "barrier.cta.sync.all",
         _NV + "barrier.cta.sync.aligned.count", _NV + "barrier.cta.sync.count",
         _NV + "barrier.cta.arrive.aligned.count", _NV + "barrier.cta.arrive.count")
def _bar(tr, instr, d, args):
    name = instr.callee.name
    wait = ".sync." in name
    counted = name.endswith(".count")
    aligned = ".aligned." in name
    i = args[0]
    c = args[1] if counted else None
    where = tr.where(instr)

    @blocking
    def bar(f):
        th = f[0]
        barrier = _named(th, f[i], where)
        generation = barrier.arrive(th, f[c] if counted else None, where, aligned)
        if not wait:
            return
        th.wait_line = where
        while barrier.generation == generation:
            yield barrier
        _acquire(th, getattr(barrier, "last_clock", None))
    return bar


@handles(_NV + "barrier.cta.red.popc.aligned.all", _NV + "barrier.cta.red.and.aligned.all",
         _NV + "barrier.cta.red.or.aligned.all")
def _bar_red(tr, instr, d, args):
    op = instr.callee.name.split(".")[3]
    i, p = args
    where = tr.where(instr)

    @blocking
    def bar_red(f):
        th = f[0]
        barrier = _named(th, f[i], where)
        generation = barrier.generation
        barrier.reductions.setdefault(generation, []).append(bool(f[p]))
        barrier.reductions.pop(generation - 2, None)
        barrier.arrive(th, None, where)
        th.wait_line = where
        while barrier.generation == generation:
            yield barrier
        values = barrier.reductions[generation]
        f[d] = {"popc": sum(values), "and": int(all(values)), "or": int(any(values))}[op]
        _acquire(th, barrier.last_clock)
    return bar_red


@handles_prefix(_NV + "barrier.cluster.")
def _cluster_barrier(tr, instr, d, args):
    op = instr.callee.name[len(_NV + "barrier.cluster."):]
    where = tr.where(instr)
    if op.startswith("arrive"):
        def arrive(f):
            th = f[0]
            th.cta.cluster.barrier.arrive(th, where)
        return arrive

    @blocking
    def wait(f):
        th = f[0]
        barrier: ClusterBarrier = th.cta.cluster.barrier
        phase = barrier.arrived_in.pop(th, None)
        if phase is None:
            raise InterpretError(f"barrier.cluster.wait at {where}: {th.describe()} waits without a "
                                 f"barrier.cluster.arrive before it")
        th.wait_line = where
        while barrier.phase == phase:
            yield barrier
        _acquire(th, barrier.last_clock)
    return wait


# -- fences -------------------------------------------------------------------------------------------
@handles_prefix(_NV + "fence.proxy.async")
def _fence_proxy(tr, instr, d, args):
    def fence_proxy(f):
        f[0].fence_epoch += 1
    return fence_proxy


@handles_prefix(_NV + "membar.")
@handles_prefix(_NV + "fence.")
def _fence(tr, instr, d, args):
    return None


# -- mbarrier -----------------------------------------------------------------------------------------
def _space(instr, index=0) -> int:
    return instr.args[index].type.addrspace


def _observe(th, barrier, where: str) -> None:
    """Race check of an mbarrier operation: it reads the barrier's 8 bytes atomically, so it must be
    ordered after the ``mbarrier.init`` that wrote them (a missing ``syncthreads`` after the init is a
    race); atomics among themselves never race."""
    tracker = barrier.cta.window.tracker
    if tracker is not None:
        tracker.atomic(th, barrier.offset, 8, where)


@handles(_MB + "init.shared")
def _mb_init(tr, instr, d, args):
    b, c = args
    where = tr.where(instr)

    def init(f):
        th = f[0]
        mbarrier_at(th, 3, f[b], where, create_count=f[c])
        tracker = th.cta.window.tracker
        if tracker is not None:
            tracker.write(th, f[b] & M.OFFSET_MASK, 8, where)
    return init


@handles(_MB + "inval.shared")
def _mb_inval(tr, instr, d, args):
    b, = args
    where = tr.where(instr)

    def inval(f):
        th = f[0]
        mbarrier_at(th, 3, f[b], where)
        th.cta.mbarriers.pop(f[b] & M.OFFSET_MASK, None)
    return inval


@handles_prefix(_MB + "arrive")
def _mb_arrive(tr, instr, d, args):
    name = instr.callee.name[len(_MB):]
    space = _space(instr)
    where = tr.where(instr)
    expect = "expect.tx" in name
    drop = ".drop" in name
    b = args[0]
    n = args[1] if len(args) > 1 else None

    def arrive(f):
        th = f[0]
        barrier = mbarrier_at(th, space, f[b], where)
        _observe(th, barrier, where)
        if expect:
            barrier.expect_tx(f[n], where)
            state = barrier.arrive(th, 1, where)
        else:
            state = barrier.arrive(th, f[n] if n is not None else 1, where, drop=drop)
        if d is not None:
            f[d] = state
    return arrive


@handles(_MB + "expect.tx.scope.cta.space.cta", _MB + "expect.tx.scope.cluster.space.cta",
         _MB + "expect.tx.scope.cluster.space.cluster")
def _mb_expect_tx(tr, instr, d, args):
    b, n = args
    space = _space(instr)
    where = tr.where(instr)

    def expect_tx(f):
        barrier = mbarrier_at(f[0], space, f[b], where)
        _observe(f[0], barrier, where)
        barrier.expect_tx(f[n], where)
    return expect_tx


@handles(_MB + "complete.tx.scope.cta.space.cta", _MB + "complete.tx.scope.cluster.space.cta")
def _mb_complete_tx(tr, instr, d, args):
    b, n = args
    where = tr.where(instr)

    def complete_tx(f):
        mbarrier_at(f[0], 3, f[b], where).complete_tx(f[n])
    return complete_tx


@handles(_MB + "pending.count")
def _mb_pending(tr, instr, d, args):
    s, = args

    def pending(f):
        f[d] = f[s] & 0xFFFFF
    return pending


def _wait_factory(tr, instr, d, args):
    name = instr.callee.name[len(_MB):]
    parity_form = ".parity" in name
    testing = name.startswith("test")
    b, p = args[0], args[1]
    space = _space(instr)
    where = tr.where(instr)

    def done(barrier, value):
        if parity_form:
            return barrier.completed(value & 1)
        return barrier.phase != (value >> 32)

    @blocking
    def wait(f):
        th = f[0]
        barrier = mbarrier_at(th, space, f[b], where)
        _observe(th, barrier, where)
        value = f[p]
        th.wait_line = where
        th.timed_out = False
        while not done(barrier, value):
            th.wait_phase = value
            yield barrier
            if th.timed_out or testing:
                th.timed_out = False
                break
        ok = done(barrier, value)
        if ok:
            phase = (barrier.phase - 1) if parity_form else (value >> 32)
            _acquire(th, _phase_clock(barrier, value if parity_form else None, phase))
        f[d] = 1 if ok else 0
    return wait


def _phase_clock(barrier, parity, phase):
    if parity is not None:
        # the most recent completed phase of this parity
        phase = barrier.phase - 1 if ((barrier.phase - 1) & 1) == (parity & 1) else barrier.phase - 2
    return barrier.phase_clocks.get(phase)


for _scope in ("cta", "cluster"):
    for _rel in ("", ".relaxed"):
        for _op in ("try.wait.parity", "try.wait.parity.tl", "try.wait", "test.wait.parity", "test.wait"):
            handles(f"{_MB}{_op}{_rel}.scope.{_scope}.space.cta")(_wait_factory)
handles(_MB + "test.wait.shared")(_wait_factory)


# -- DSMEM addressing -----------------------------------------------------------------------------
@handles(_NV + "mapa.shared.cluster", _NV + "mapa")
def _mapa(tr, instr, d, args):
    a, r = args
    generic = instr.callee.name == _NV + "mapa"
    where = tr.where(instr)

    def mapa(f):
        th = f[0]
        rank = f[r]
        if not 0 <= rank < len(th.cta.cluster.ctas):
            raise InterpretError(f"mapa at {where}: CTA rank {rank} is outside the cluster of "
                                 f"{len(th.cta.cluster.ctas)} CTAs")
        address = ((rank + 1) << M.CLUSTER_SHIFT) | (f[a] & M.OFFSET_MASK)
        f[d] = (M.GENERIC_SHARED | address) if generic else address
    return mapa


@handles(_NV + "getctarank.shared.cluster", _NV + "getctarank")
def _getctarank(tr, instr, d, args):
    a, = args

    def getctarank(f):
        f[d] = ((f[a] & 0xFFFFFFFF) >> M.CLUSTER_SHIFT) - 1
    return getctarank


# -- PDL, setmaxnreg, printf -----------------------------------------------------------------------
@handles(_NV + "griddepcontrol.wait")
def _pdl_wait(tr, instr, d, args):
    def pdl_wait(f):
        note_wait(f[0])
    return pdl_wait


@handles(_NV + "griddepcontrol.launch.dependents")
def _pdl_launch(tr, instr, d, args):
    return None


@handles(_NV + "setmaxnreg.inc.sync.aligned.u32", _NV + "setmaxnreg.dec.sync.aligned.u32")
def _setmaxnreg(tr, instr, d, args):
    regs = constant_arg(tr, instr, 0)
    increase = ".inc." in instr.callee.name
    where = tr.where(instr)
    if regs is None or not 24 <= regs <= 256 or regs % 8:
        raise InterpretError(f"setmaxnreg at {where}: the register count must be a constant in 24..256 and a "
                             f"multiple of 8, got {regs}")

    def compute(rv):
        return {t: None for t in rv.inputs}

    @blocking
    def setmaxnreg(f):
        th = f[0]
        rv = join_warpgroup(th, f"setmaxnreg.{'inc' if increase else 'dec'} {regs}", None, compute, where)
        while rv.results is None:
            yield rv
        th.regs_budget = regs
    return setmaxnreg


@handles("vprintf")
def _vprintf(tr, instr, d, args):
    fmt_slot, buf_slot = args

    def vprintf(f):
        th = f[0]
        th.machine.output.append(format_printf(th, f[fmt_slot], f[buf_slot]))
        if d is not None:
            f[d] = 0
    return vprintf
