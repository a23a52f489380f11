"""Synchronization objects with the hardware's semantics: warp/warpgroup rendezvous, named (CTA)
barriers, the cluster barrier, and mbarriers.

Sources: PTX ISA 8.6 §9.7.13.1 ``bar / barrier`` (a barrier completes when the expected number of
threads arrived; ``bar.sync 0`` without a count expects every thread of the CTA, exited threads
excepted), §9.7.13.3 ``barrier.cluster`` (arrive / wait per thread over every non-exited thread of
the cluster), §9.7.13.15 ``mbarrier`` (pending arrival count, transaction count, phase; a phase
completes when both reach zero, then the counts re-arm and the phase parity flips; ``try_wait.parity
p`` succeeds once the phase of parity ``p`` completed, i.e. while the current phase's parity differs
from ``p``), §9.7.8.9 ``shfl.sync`` / §9.7.13.8 ``vote.sync`` / §9.7.13.2 ``bar.warp.sync`` /
§9.7.13.11 ``elect.sync`` (every lane in ``membermask`` executes the same collective).

Each object is a :class:`~tsjit.interpret.machine.Waitable`; a change calls ``machine.notify``.
Race checking (:mod:`tsjit.interpret.races`) hangs vector clocks on these objects through
``release`` / ``acquire`` calls when it is on.
"""
from __future__ import annotations

from tsjit.errors import InterpretError
from tsjit.interpret import memory as M
from tsjit.interpret.races import join, release

__all__ = ["Waitable", "Rendezvous", "join_warp", "warp_collective", "join_warpgroup", "WARPGROUP_RULE", "NamedBarrier", "ClusterBarrier", "MBarrier",
           "mbarrier_at", "lanes_of"]


class Waitable:
    """Something threads wait on; ``describe()`` says what, for deadlock reports."""

    __slots__ = ("waiters", "__weakref__")

    def __init__(self):
        self.waiters = []

    def describe(self) -> str:
        return type(self).__name__


def lanes_of(mask: int) -> list[int]:
    return [lane for lane in range(32) if mask >> lane & 1]


class Rendezvous(Waitable):
    """One execution of a collective by a set of threads: ``inputs`` by lane (or thread), ``results``
    once everyone arrived."""

    __slots__ = ("key", "members", "inputs", "results", "what", "where", "scope")

    def __init__(self, key, members, what, where, scope):
        super().__init__()
        self.key = key
        self.members = members
        self.inputs = {}
        self.results = None
        self.what = what
        self.where = where
        self.scope = scope

    def describe(self) -> str:
        missing = [t.linear for t in self.members if t not in self.inputs]
        return (f"{self.what} at {self.where}: waits for thread(s) {_ranges(missing)} of its mask to execute it "
                f"({len(self.inputs)} of {len(self.members)} arrived)")

    def member_exited(self, th) -> None:
        if th in self.members and th not in self.inputs:
            rule = (f"{WARPGROUP_RULE}; {_warpgroup_fix(self.key[1])}" if self.scope is th.cta else
                    "every lane in the mask must execute the same collective (fix the mask or the branch around it)")
            raise InterpretError(f"{self.what} at {self.where}: thread {th.linear} of its member mask exited without "
                                 f"executing it; {rule}")


def _ranges(values) -> str:
    values = sorted(values)
    out, start = [], None
    for i, v in enumerate(values):
        if start is None:
            start = v
        if i + 1 == len(values) or values[i + 1] != v + 1:
            out.append(f"{start}" if start == v else f"{start}-{v}")
            start = None
    return ", ".join(out) or "none"


def _join(th, pending: dict, key, members, value, compute, what, where, scope):
    rv = pending.get(key)
    if rv is None:
        for m in members:
            if not m.alive:
                raise InterpretError(f"{what} at {where}: thread {m.linear} is in the member mask but has exited")
        rv = Rendezvous(key, members, what, where, scope)
        pending[key] = rv
    if th not in rv.members:
        raise InterpretError(f"{what} at {where}: {th.describe()} executes it but is not in the member mask of the "
                             f"lanes it meets there ({_ranges(t.linear for t in rv.members)}); put every executing "
                             f"lane in the mask")
    rv.inputs[th] = value
    if len(rv.inputs) == len(rv.members):
        del pending[key]
        rv.results = compute(rv)
        th.machine.notify(rv)
    return rv


def join_warp(th, mask: int, kind: str, value, compute, where: str):
    """Join the collective ``kind`` of the lanes in ``mask`` of ``th``'s warp; returns its Rendezvous
    (``results`` is None until every member arrived).

    Raises:
        InterpretError: ``th``'s lane is not in ``mask``, or ``mask`` names a lane that does not
            exist or has exited.
    """
    warp = th.warp
    if not mask >> th.lane & 1:
        raise InterpretError(f"{kind} at {where}: {th.describe()} executes it with member mask 0x{mask:08x}, which "
                             f"does not contain its own lane {th.lane}")
    members = warp.members.get(mask)
    if members is None:
        lanes = lanes_of(mask)
        if lanes and lanes[-1] >= len(warp.threads):
            raise InterpretError(f"{kind} at {where}: member mask 0x{mask:08x} names lane {lanes[-1]}, but warp "
                                 f"{warp.index} has {len(warp.threads)} threads (the block size is not a multiple of "
                                 f"32)")
        members = warp.members[mask] = [warp.threads[lane] for lane in lanes]
    return _join(th, warp.pending, (kind, mask), members, value, compute, kind, where, warp)


#: the hardware rule a warpgroup collective's error names (PTX ISA 8.6 §9.7.15 "warpgroup").
WARPGROUP_RULE = ("a warpgroup is 4 consecutive warps whose first warp index is a multiple of 4 (threads "
                  "128*g .. 128*g+127 of the CTA; PTX ISA 9.7.15), and all 128 of its threads execute a warpgroup "
                  "instruction (wgmma.*, setmaxnreg) together")


def _warpgroup_fix(group: int) -> str:
    return (f"run it in whole warpgroups: a Task with warp_idx a multiple of 4 and num_warps a multiple of 4 "
            f"(here warp_idx={4 * group}, num_warps=4), or branch and exit by whole warpgroups "
            f"(`tsjit.thread_idx().x // 128`), not by warps")


def join_warpgroup(th, kind: str, value, compute, where: str):
    """Join the warpgroup collective ``kind`` (all 128 threads of ``th``'s warpgroup).

    Raises:
        InterpretError: the warpgroup is not 4 full warps, or one of its threads exited before the
            collective started (the message names :data:`WARPGROUP_RULE`: typically warps 1-4 run the
            collective, which spans warpgroups 0 and 1).
    """
    cta = th.cta
    group = th.linear // 128
    members = cta.threads[group * 128:(group + 1) * 128]
    if len(members) != 128:
        raise InterpretError(f"{kind} at {where}: warpgroup {group} of the CTA has {len(members)} threads; a "
                             f"warpgroup collective needs 4 full warps (launch a multiple of 128 threads); "
                             f"{WARPGROUP_RULE}; {_warpgroup_fix(group)}")
    if (kind, group) not in cta.warpgroups:
        exited = [m.linear for m in members if not m.alive]
        if exited:
            warps = sorted({linear // 32 for linear in exited})
            raise InterpretError(
                f"{kind} at {where}: {th.describe()} executes it for warpgroup {group} (warps {4 * group}-"
                f"{4 * group + 3}), but thread(s) {_ranges(exited)} of that warpgroup (warp(s) "
                f"{_ranges(warps)}) have exited; {WARPGROUP_RULE}. The warps executing it do not form a "
                f"warpgroup: {_warpgroup_fix(group)}")
    return _join(th, cta.warpgroups, (kind, group), members, value, compute, kind, where, cta)


def warp_collective(kind: str, mask_of, value_of, compute, where: str, d):
    """The blocking op of a warp collective: join the rendezvous of ``kind`` over the lanes
    ``mask_of(f)`` with this thread's ``value_of(f)``, wait for every member, store this thread's result in
    slot ``d`` (unless None).  ``compute(rendezvous) -> {thread: result}`` runs once, in the last arrival."""
    def op(f):
        th = f[0]
        rv = join_warp(th, mask_of(f), kind, value_of(f), compute, where)
        while rv.results is None:
            yield rv
        if d is not None:
            f[d] = rv.results[th]
    op.blocking = True
    return op


def _divergent(text: str) -> InterpretError:
    """A divergent-barrier error: it wins over a race the checker held (``Machine._first_error``)."""
    error = InterpretError(text)
    error.divergent_barrier = True
    return error


class NamedBarrier(Waitable):
    """``bar.sync`` / ``bar.arrive`` barrier ``index`` of a CTA (0..15)."""

    timeout_allowed = False

    def __init__(self, cta, index):
        super().__init__()
        self.cta = cta
        self.index = index
        self.expected = None   # None: every live thread of the CTA
        self.arrived = 0
        self.generation = 0
        self.where = ""
        self.aligned = False   # this phase: an aligned barrier of every thread (syncthreads)
        self.clock = None
        self.last_clock = None
        self.reductions = {}

    def describe(self) -> str:
        want = self.expected if self.expected is not None else f"all {self.cta.live_threads()} live threads"
        return f"barrier {self.index} (bar.sync) of CTA {self.cta.ctaid}: {self.arrived} of {want} arrived"

    def arrive(self, th, count, where: str, aligned: bool = True) -> int:
        """Arrive (``count`` None: every thread of the CTA); returns the generation to wait for the end of.
        ``aligned`` (``barrier.cta.sync.aligned``, what ``syncthreads()`` emits): a phase of every thread
        of the CTA must be reached by every thread, at this one instruction (:meth:`_check_all_arrived`)."""
        if self.arrived == 0:
            self.expected = count
            self.where = where
            self.aligned = aligned and count is None
        elif self.aligned and where != self.where:
            raise _divergent(
                f"syncthreads (bar.sync {self.index}, every thread of the CTA) at {where}: {th.describe()} arrives "
                f"in the phase that other threads of CTA {self.cta.ctaid} entered at a different syncthreads, at "
                f"{self.where}: the threads took different branches and each group waits at its own barrier "
                f"(PTX ISA barrier{{.cta}}: an aligned barrier in conditionally executed code is undefined unless "
                f"every thread of the CTA evaluates the condition identically).\n  Call syncthreads() where "
                f"every thread of the CTA executes it (after the `if`), or give each group a named barrier with "
                f"its thread count (tsjit.named_barrier_sync(id, count)).")
        elif count != self.expected:
            raise InterpretError(f"barrier {self.index} at {where}: {th.describe()} arrives expecting "
                                 f"{count if count is not None else 'all'} threads while the barrier's current phase "
                                 f"(started at {self.where}) expects {self.expected if self.expected is not None else 'all'}; "
                                 f"every participant must give the same thread count")
        if count is not None and (count <= 0 or count % 32):
            raise InterpretError(f"bar.sync {self.index}, {count} at {where}: the thread count must be a positive "
                                 f"multiple of 32 (PTX ISA bar.sync)")
        generation = self.generation
        self.arrived += 1
        if th.machine.checks:
            self.clock = release(th, self.clock)
        self._check()
        return generation

    def _check_all_arrived(self) -> None:
        """An aligned phase of every thread completes only when every thread of the CTA arrived: one that
        exited without arriving skipped a syncthreads() in a branch it did not take (or returned early)."""
        missing = [t for t in self.cta.threads if not t.alive]
        warps = sorted({t.linear // 32 for t in missing})
        shown = ", ".join(map(str, warps[:8])) + (", ..." if len(warps) > 8 else "")
        raise _divergent(
            f"syncthreads (bar.sync {self.index}, every thread of the CTA) at {self.where}: only {self.arrived} of "
            f"the {len(self.cta.threads)} threads of CTA {self.cta.ctaid} reach it; {len(missing)} thread(s) of "
            f"warp(s) {shown} exited without arriving (the barrier is in a branch, or after a return, that not "
            f"every thread takes).  On the GPU this may hang or let the waiting threads through before the "
            f"others' writes (PTX ISA barrier{{.cta}}: an aligned barrier in conditionally executed code is "
            f"undefined unless every thread of the CTA evaluates the condition identically).\n  Move the "
            f"syncthreads() out of the `if` so that every thread of the CTA executes it, or synchronize the "
            f"subset with a named barrier and its thread count (tsjit.named_barrier_sync(id, count)).")

    def _check(self) -> None:
        want = self.expected if self.expected is not None else self.cta.live_threads()
        if self.arrived >= want:
            if self.expected is None and self.aligned and self.arrived < len(self.cta.threads):
                self._check_all_arrived()
            self.arrived = 0
            self.generation += 1
            self.expected = None
            self.last_clock = self.clock
            self.clock = None
            self.cta.machine.notify(self)

    def thread_exited(self, th) -> None:
        if self.arrived and self.expected is None:
            self._check()


class ClusterBarrier(Waitable):
    """``barrier.cluster.arrive`` / ``wait`` over every live thread of the cluster."""

    timeout_allowed = False

    def __init__(self, cluster):
        super().__init__()
        self.cluster = cluster
        self.arrived = set()
        self.phase = 0
        self.arrived_in = {}
        self.clock = None
        self.last_clock = None

    def live(self) -> int:
        return sum(cta.live_threads() for cta in self.cluster.ctas)

    def describe(self) -> str:
        return (f"the cluster barrier (barrier.cluster) of cluster {self.cluster.cluster_id}: "
                f"{len(self.arrived)} of {self.live()} live threads arrived in phase {self.phase}")

    def arrive(self, th, where: str) -> None:
        if th in self.arrived:
            raise InterpretError(f"barrier.cluster.arrive at {where}: {th.describe()} arrives twice in one phase "
                                 f"(each arrive needs a barrier.cluster.wait before the next)")
        self.arrived.add(th)
        self.arrived_in[th] = self.phase
        if th.machine.checks:
            self.clock = release(th, self.clock)
        self._check()

    def _check(self) -> None:
        if self.arrived and len(self.arrived) >= self.live():
            self.arrived = set()
            self.phase += 1
            self.last_clock = self.clock
            self.clock = None
            self.cluster.ctas[0].machine.notify(self)

    def thread_exited(self, th) -> None:
        self._check()


class MBarrier(Waitable):
    """An mbarrier object in a CTA's shared memory (PTX ISA §9.7.13.15)."""

    __slots__ = ("cta", "offset", "expected", "pending", "tx", "phase", "name", "clock", "phase_clocks",
                 "init_where")

    timeout_allowed = True

    def __init__(self, cta, offset, count, name, where):
        super().__init__()
        self.cta = cta
        self.offset = offset
        self.expected = count
        self.pending = count
        self.tx = 0
        self.phase = 0
        self.name = name
        self.clock = None
        self.phase_clocks = {}
        self.init_where = where

    def describe(self) -> str:
        text = (f"{self.name} (CTA rank {self.cta.rank}): in phase {self.phase} (parity {self.phase & 1}), "
                f"{self.pending} of {self.expected} arrivals and {self.tx} transaction bytes pending")
        if self.tx < 0:   # the phase can never complete: more bytes landed than expect_tx armed
            text += (f" ({-self.tx} bytes more were delivered than expect_tx armed: was the TMA copy issued by "
                     f"every thread of a warp instead of one (`if tsjit.elect_one():`), or is the stage's "
                     f"num_bytes too small?)")
        elif self.tx > 0 and self.pending == 0:   # every arrival came; armed bytes never landed
            text += (f" (every arrival came, but {self.tx} of the bytes expect_tx armed never landed: is the stage's "
                     f"num_bytes larger than its copies deliver (a box's dtype or shape), or was a copy skipped?)")
        return text

    def completed(self, parity: int) -> bool:
        """Whether the phase of ``parity`` has completed (the current phase has the other parity)."""
        return (self.phase & 1) != (parity & 1)

    def state(self) -> int:
        return (self.phase & 0xFFFFFFFF) << 32 | (self.pending & 0xFFFFF)

    def arrive(self, th, count: int, where: str, drop: bool = False) -> int:
        if count <= 0:
            raise InterpretError(f"mbarrier arrive at {where} on {self.name}: the count must be positive, got {count}")
        if count > self.pending:
            raise InterpretError(f"mbarrier arrive at {where}: {th.describe()} arrives {count} time(s) on {self.name}, "
                                 f"which has only {self.pending} of {self.expected} arrivals pending in phase "
                                 f"{self.phase}; more arrivals than the barrier's count (check the arrive count, "
                                 f"or who arrives)")
        state = self.state()
        if th is not None and th.machine.checks:
            self.clock = release(th, self.clock)
        self.pending -= count
        if drop:
            self.expected -= count
        self._check()
        return state

    def expect_tx(self, nbytes: int, where: str) -> None:
        self.tx += nbytes
        if self.tx >= 1 << 20:
            raise InterpretError(f"mbarrier expect_tx at {where} on {self.name}: {self.tx} transaction bytes pending "
                                 f"exceeds the hardware's 2**20 - 1")

    def complete_tx(self, nbytes: int, clock=None) -> None:
        self.tx -= nbytes
        if clock is not None:
            self.clock = join(self.clock, clock)
        self._check()

    def _check(self) -> None:
        if self.pending == 0 and self.tx == 0:
            self.phase_clocks[self.phase] = self.clock
            self.phase += 1
            self.pending = self.expected
            self.clock = None
            self.cta.machine.notify(self)


def mbarrier_at(th, space: int, address: int, where: str, create_count: int | None = None) -> MBarrier:
    """The mbarrier at ``address`` (shared::cta offset for space 3, shared::cluster for 7); with
    ``create_count`` (``mbarrier.init``) a new one replaces whatever was there.

    Raises:
        InterpretError: the address is not 8-byte aligned, or no mbarrier was initialized there.
    """
    if space == 7:
        rank = (address >> M.CLUSTER_SHIFT) - 1
        ctas = th.cta.cluster.ctas
        if not 0 <= rank < len(ctas):
            raise InterpretError(f"mbarrier operation at {where}: shared::cluster address 0x{address:x} names CTA "
                                 f"rank {rank}, but the cluster has {len(ctas)} CTAs")
        cta, offset = ctas[rank], address & M.OFFSET_MASK
    else:
        cta, offset = th.cta, address & M.OFFSET_MASK
    if offset % 8:
        raise InterpretError(f"mbarrier operation at {where}: address {offset} is not 8-byte aligned")
    cta.window.check(offset, 8, "mbarrier access", where)
    if create_count is not None:
        if not 0 < create_count < 1 << 20:
            raise InterpretError(f"mbarrier.init at {where}: count {create_count} is outside 1..2**20-1")
        name = th.machine.program.describe_shared(offset)
        barrier = MBarrier(cta, offset, create_count, name if name.startswith("mbarrier ") else f"mbarrier at {name}",
                           where)
        barrier.name = barrier.name.replace("mbarrier mbarrier", "mbarrier")
        cta.mbarriers[offset] = barrier
        return barrier
    barrier = cta.mbarriers.get(offset)
    if barrier is None:
        raise InterpretError(f"mbarrier operation at {where} on {th.machine.program.describe_shared(offset)} of CTA "
                             f"rank {cta.rank}: no mbarrier.init happened there before (initialize it, and order the "
                             f"init before the first use with fence.mbarrier_init and a barrier)")
    return barrier
