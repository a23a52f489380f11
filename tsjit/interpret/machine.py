"""Threads as fibers, CTAs, clusters, and the scheduler that runs them.

Every GPU thread is a Python generator (:func:`thread_main`) over the translated blocks
(:mod:`tsjit.interpret.translate`).  It runs until an instruction must wait (a barrier, a warp
collective, an mbarrier phase); the blocker yields the :class:`Waitable` it waits on and the
scheduler parks the thread on it.  Whatever changes a waitable's state calls :meth:`Machine.notify`,
which makes its waiters runnable again; they re-check their condition.  So threads interleave only
at synchronization points, warps are lockstep exactly where the program asks for it (collectives
are rendezvous of their lanes), and the order is deterministic.

The CTAs of one cluster run together; clusters run one after another (a grid without clusters has
clusters of one CTA), taken from :attr:`Machine.launch_queue` (CLC ``try_cancel`` takes clusters off it:
:mod:`tsjit.interpret.clc`).  Asynchronous units (wgmma groups, tcgen05 MMAs) complete from
:attr:`Machine.at_quiescence` when every live thread is parked.  When no thread is runnable but some are still alive, the program is
deadlocked: :func:`tsjit.interpret.report.deadlock_error` builds the :class:`~tsjit.errors.InterpretError`
that lists every blocked thread group (CTA, warp, task, step, the barrier or collective, its phase,
and the source line).
"""
from __future__ import annotations

import linecache
import re
from collections import deque

from tsjit.errors import InterpretError
from tsjit.interpret.async_ops import finish_thread
from tsjit.interpret.tcgen05_ops import finish_cta
from tsjit.interpret.memory import LocalMemory, SharedWindow
from tsjit.interpret.races import attach_trackers
from tsjit.interpret.report import deadlock_error
from tsjit.interpret.sync import ClusterBarrier

__all__ = ["Thread", "Warp", "CTA", "Cluster", "Machine"]


class Thread:
    """One GPU thread: its registers ``regs`` (slot 0 is the thread), ids, CTA, warp, fiber."""

    __slots__ = ("machine", "cta", "regs", "tid", "linear", "warp", "lane", "local", "gen", "waiting",
                 "wait_line", "task", "step", "steps_seen", "alive", "uid", "wgmma", "bulk", "cp_async",
                 "vc", "fence_epoch", "regs_budget", "pdl_waited", "timed_out", "wait_phase", "cluster_phase",
                 "spins")

    def __init__(self, machine, cta, tid, linear, uid):
        self.machine = machine
        self.cta = cta
        self.tid = tid
        self.linear = linear
        self.lane = linear % 32
        self.uid = uid
        self.local = LocalMemory(uid)
        self.waiting = None
        self.wait_line = ""
        self.task = ""
        self.step = ""
        self.steps_seen = {}
        self.alive = True
        self.wgmma = []
        self.bulk = []
        self.cp_async = []
        self.vc = None
        self.fence_epoch = 0
        self.regs_budget = None
        self.pdl_waited = False
        self.timed_out = False
        self.wait_phase = None
        self.cluster_phase = None
        self.spins = None     # atomic-load site -> (buffer, offset, value) last read (memory_ops.WordWatch)

    def describe(self) -> str:
        x, y, z = self.cta.ctaid
        return f"CTA ({x}, {y}, {z}) thread {self.linear} (warp {self.linear // 32}, lane {self.lane})"


class Warp:
    """The threads of one warp and its open collectives (``pending``: key -> Rendezvous)."""

    __slots__ = ("index", "threads", "pending", "cta", "members")

    def __init__(self, cta, index):
        self.cta = cta
        self.index = index
        self.threads = []
        self.pending = {}
        self.members = {}     # member mask -> its threads (sync.join_warp; the warp's threads are fixed at launch)


class CTA:
    """One thread block: ids, shared window, threads, warps, named barriers, mbarriers."""

    def __init__(self, machine, cluster, ctaid, rank, smem_bytes):
        self.machine = machine
        self.cluster = cluster
        self.ctaid = ctaid
        self.rank = rank
        self.window = SharedWindow(smem_bytes, rank, machine.program.nearest_shared)
        self.threads = []
        self.warps = []
        self.named = {}       # barrier id -> NamedBarrier
        self.mbarriers = {}   # offset -> MBarrier
        self.warpgroups = {}  # index -> pending warpgroup rendezvous
        self.live = 0         # threads not yet exited (kept by Machine: a count, not a scan per exit)

    def live_threads(self) -> int:
        return self.live


class Cluster:
    """The CTAs that run together, and the cluster barrier."""

    def __init__(self, index, cluster_id):
        self.index = index
        self.cluster_id = cluster_id
        self.ctas = []
        self.barrier = None
        self.pdl_waits = []   # (thread uid, its clock) at each griddepcontrol.wait (tsjit.interpret.pdl)


class Machine:
    """One launch: global memory, the program, the grid; :meth:`run` executes it."""

    def __init__(self, program, gmem, grid, block, cluster, smem_bytes, params, translated, checks=frozenset()):
        self.program = program
        self.gmem = gmem
        self.grid = grid
        self.block = block
        self.cluster_dims = cluster
        self.smem_bytes = smem_bytes
        self.params = params
        self.translated = translated
        self.checks = checks
        self.runq = deque()
        self.progress = 0
        self.output = []
        self.current = None
        self.clusters_done = 0
        self.uid = 0
        self.launch_queue = deque()
        self.at_quiescence = []   # jobs run when every live thread is parked (asynchronous units finish)
        self.watches = {}     # (id(buffer), byte offset) -> memory_ops.WordWatch of polling threads
        self.held_race = None  # (InterpretError, thread): the first race found, raised later (races.py)
        self.held_accesses = 0

    # -- scheduling ---------------------------------------------------------------------------
    def notify(self, waitable) -> None:
        """``waitable`` changed: its waiters become runnable (they re-check their condition)."""
        self.progress += 1
        waiters = waitable.waiters
        if waiters:
            self.runq.extend(waiters)
            waitable.waiters = []

    def run(self) -> None:
        gx, gy, gz = self.grid
        cx, cy, cz = self.cluster_dims
        nclusters = (gx // cx, gy // cy, gz // cz)
        ids = [(kx, ky, kz) for kz in range(nclusters[2]) for ky in range(nclusters[1]) for kx in range(nclusters[0])]
        self.launch_queue = deque(enumerate(ids))   # clusters not started yet (CLC try_cancel takes from it)
        try:
            while self.launch_queue:
                self._run_cluster(*self.launch_queue.popleft())
        except KeyboardInterrupt as exc:     # Ctrl-C, typically in a loop that never ends: say where
            raise KeyboardInterrupt(self._interrupted_at(exc)) from None

    def _interrupted_at(self, exc: KeyboardInterrupt) -> str:
        """Where the interrupt found the launch: the running thread and the source line of its basic block
        (read from the traceback: the thread's fiber has finished by now)."""
        block, tb = None, exc.__traceback__
        while tb is not None:
            if tb.tb_frame.f_code is thread_main.__code__:
                block = tb.tb_frame.f_locals.get("block")
            tb = tb.tb_next
        th = self.current
        if block is None or th is None:
            return "the CPU interpreter was interrupted between threads"
        lines = [line for line in map(self.program.line_of, block.ir_block.instructions) if line]
        where = lines[0] if lines else f"basic block {block.name!r}"
        task = f", task '{th.task}'" if th.task else ""
        return (f"the CPU interpreter was interrupted while {th.describe()}{task} ran {where}; a loop that never "
                f"ends runs forever here as on a GPU: check its condition and what changes it{_source_excerpt(where)}")

    def _make_cluster(self, index, cluster_id) -> Cluster:
        cluster = Cluster(index, cluster_id)
        cx, cy, cz = self.cluster_dims
        bx, by, bz = self.block
        rank = 0
        for z in range(cz):
            for y in range(cy):
                for x in range(cx):
                    ctaid = (cluster_id[0] * cx + x, cluster_id[1] * cy + y, cluster_id[2] * cz + z)
                    cta = CTA(self, cluster, ctaid, rank, self.smem_bytes)
                    cta.cluster_ctaid = (x, y, z)
                    rank += 1
                    cluster.ctas.append(cta)
                    nthreads = bx * by * bz
                    for w in range((nthreads + 31) // 32):
                        cta.warps.append(Warp(cta, w))
                    linear = 0
                    for tz in range(bz):
                        for ty in range(by):
                            for tx in range(bx):
                                th = Thread(self, cta, (tx, ty, tz), linear, self.uid)
                                self.uid += 1
                                th.warp = cta.warps[linear // 32]
                                th.warp.threads.append(th)
                                cta.threads.append(th)
                                linear += 1
                    cta.live = len(cta.threads)
        cluster.barrier = ClusterBarrier(cluster)
        if "race" in self.checks or "uninit" in self.checks:
            attach_trackers(self, cluster)
        elif "pdl" in self.checks:   # clocks only: orders accesses after griddepcontrol.wait
            for cta in cluster.ctas:
                for th in cta.threads:
                    th.vc = {th.uid: 1}
        return cluster

    def _run_cluster(self, index, cluster_id) -> None:
        cluster = self._make_cluster(index, cluster_id)
        runq = self.runq
        runq.clear()
        threads = []
        for cta in cluster.ctas:
            for th in cta.threads:
                th.regs = self.translated.new_frame(th)
                th.gen = thread_main(th, self.translated.entry)
                threads.append(th)
        runq.extend(threads)
        live = len(threads)
        timed_out_at = -1
        while live:
            while runq:
                th = runq.popleft()
                if not th.alive:
                    continue
                self.current = th
                try:
                    waitable = th.gen.send(None)
                except StopIteration:
                    th.alive = False
                    th.waiting = None
                    live -= 1
                    try:
                        self._thread_exited(th)
                    except InterpretError as exc:
                        raise self._first_error(exc, th) from None
                    continue
                except InterpretError as exc:
                    raise self._first_error(exc, th) from None
                th.waiting = waitable
                waitable.waiters.append(th)
            if live:
                if self.at_quiescence:   # asynchronous MMAs finish as late as they may (wgmma_ops, tcgen05_ops)
                    jobs, self.at_quiescence = self.at_quiescence, []
                    for job in jobs:
                        job()
                    continue
                # Every live thread is parked: first let try_wait-style waits time out once (the
                # hardware may return false after a time limit); then it is a deadlock.
                if self.progress != timed_out_at and self._time_out_waits(threads):
                    timed_out_at = self.progress
                    continue
                if self.held_race is not None:
                    raise self._first_error(None, None)
                raise deadlock_error(self, [t for t in threads if t.alive])
        if self.held_race is not None:
            raise self._first_error(None, None)
        self.clusters_done += 1

    def _first_error(self, exc, th) -> InterpretError:
        """The error to report for ``exc`` raised in ``th`` (None: at a deadlock or the cluster's end),
        located: a held race (races.py) comes first unless ``exc`` is a divergent-barrier error, which
        explains it (threads that skipped the barrier raced ahead)."""
        held = self.held_race
        if held is None:
            return _located(exc, th)
        race, racer = held
        if exc is None or exc is race or not getattr(exc, "divergent_barrier", False):
            return _located(race, racer)
        first = str(race).split(";")[0]
        return InterpretError(f"{_located(exc, th)}\n  (TSJIT_INTERPRET_CHECK=race also saw a "
                              f"{first[len('shared-memory '):]}; it follows from the divergent barrier: the threads "
                              f"that skipped it ran ahead)")

    def _time_out_waits(self, threads) -> bool:
        woken = False
        for th in threads:
            w = th.waiting
            if th.alive and w is not None and getattr(w, "timeout_allowed", False) and th in w.waiters:
                w.waiters.remove(th)
                th.timed_out = True
                self.runq.append(th)
                woken = True
        return woken

    def _thread_exited(self, th) -> None:
        finish_thread(th)
        cta = th.cta
        cta.live -= 1
        if not cta.live:
            finish_cta(cta)                 # its TMEM must be freed (tcgen05)
        for barrier in list(cta.named.values()):
            barrier.thread_exited(th)
        cta.cluster.barrier.thread_exited(th)
        for pending in (th.warp.pending, cta.warpgroups):
            for rv in list(pending.values()):
                rv.member_exited(th)


#: the ``file:line`` of a kernel statement as the interpreter's messages write it (program.py).
_STATEMENT = re.compile(r"((?:/|[A-Za-z]:\\)[^\s:()]+\.py):(\d+)")


def _source_excerpt(text: str) -> str:
    """The source line of the last kernel statement ``text`` names, with a caret under its start (the
    shape of a CompilationError's excerpt), or ``""``."""
    found = _STATEMENT.findall(text)
    if not found:
        return ""
    filename, line = found[-1]
    source = linecache.getline(filename, int(line)).rstrip("\n")
    if not source.strip():
        return ""
    stripped = source.lstrip()
    return f"\n    {stripped}\n    ^"


def _located(exc: InterpretError, th) -> InterpretError:
    text = str(exc)
    task = f", task '{th.task}'" if th.task else ""
    step = f", step {th.step}" if th.step else ""
    return InterpretError(f"{text}{_source_excerpt(text)}\n  in {th.describe()}{task}{step}")


def thread_main(th, entry):
    """The fiber of one thread: run blocks until ``ret``; ``yield`` a Waitable to park."""
    f = th.regs
    block = entry
    while block is not None:
        for ops, blocker in block.segments:
            for op in ops:
                op(f)
            if blocker is not None:
                yield from blocker(f)
        block = block.term(f)
