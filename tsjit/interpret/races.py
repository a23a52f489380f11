"""Shared-memory race and uninitialized-read checks (``TSJIT_INTERPRET_CHECK=race`` / ``uninit``).

Happens-before with vector clocks.  Every thread has a clock (``thread.vc``: uid -> count); every
synchronization object carries the clock released into it: an arrive on a named barrier, the
cluster barrier or an mbarrier joins the arriving thread's clock into the object's and ticks the
thread; a thread that observes the completion (``bar.sync`` returning, ``try_wait`` succeeding,
``barrier.cluster.wait``) joins the clock of the completed phase; warp collectives that order memory
(``bar.warp.sync``) join all lanes.  Asynchronous copies (TMA, bulk copies) act for the issuing thread
with its clock at issue; their ``complete_tx`` releases that clock into the mbarrier, so a consumer
that waited on the phase is ordered after the copy.

Each shared byte remembers its last write (thread, clock, line, proxy) and the reads since (per
thread).  An access conflicts with a remembered one of another thread that its clock does not
cover: write-write, read-write or write-read; the :class:`~tsjit.errors.InterpretError` names both
lines.  A read by the asynchronous proxy (a TMA store's source, a wgmma operand) of bytes a thread
wrote through the generic proxy also needs that thread's ``fence.proxy.async`` between the write and
the copy (PTX ISA §9.7.13.4 "proxy fences"); without it the error says so.  With ``uninit``, a read
of a byte never written since the launch (shared memory starts undefined) is an error too.

Asynchronous reads stay *in flight* (never ordered before anything) until the issuing thread retires
them: a wgmma's operands at the ``wgmma.wait_group`` that completes its group, a TMA store's source at
``cp.async.bulk.wait_group(.read)``; overwriting them earlier (a release before the MMA retired) is a
race.

A race is *held*, not raised at once (``Machine.held_race``): the launch runs on, so that an error
that explains it wins — a ``syncthreads()`` in a divergent branch lets the threads that skip it race
ahead, and the divergent-barrier error (raised when the barrier's phase is found incomplete) is the
report to read, as it is without the check.  The held race is raised at the next other error, a
deadlock, the end of its cluster, or after :data:`HOLD_ACCESSES` further tracked accesses.

Granularity: aligned accesses of four bytes or more are tracked per 4-byte word; smaller ones per
byte (a window that saw a sub-word access checks both).
"""
from __future__ import annotations

from tsjit.errors import InterpretError

__all__ = ["SharedTracker", "attach_trackers", "release", "acquire", "join", "synchronize", "snapshot", "retire"]


#: tracked shared accesses allowed after a held race before it is raised anyway
HOLD_ACCESSES = 1 << 16


def join(a, b):
    """The elementwise maximum of clocks ``a`` and ``b`` (dicts uid -> count; None is empty)."""
    if not a:
        return dict(b) if b else None
    if not b:
        return a
    out = dict(a)
    for k, v in b.items():
        if out.get(k, 0) < v:
            out[k] = v
    return out


def release(th, clock):
    """``clock`` joined with ``th``'s clock; ``th`` ticks (what it does later is not covered)."""
    out = join(clock, th.vc)
    th.vc[th.uid] = th.vc.get(th.uid, 0) + 1
    return out


def acquire(th, clock) -> None:
    """``th`` is now ordered after everything ``clock`` covers."""
    if clock:
        th.vc = join(th.vc, clock)


def snapshot(th) -> dict:
    """``th``'s clock for an asynchronous operation it issues now (and ``th`` ticks)."""
    copy = dict(th.vc)
    th.vc[th.uid] = th.vc.get(th.uid, 0) + 1
    return copy


def synchronize(threads) -> None:
    """Every thread of ``threads`` is ordered after all of them (a barrier among them)."""
    total = None
    for th in threads:
        total = join(total, th.vc)
    for th in threads:
        th.vc = dict(total)
        th.vc[th.uid] = th.vc.get(th.uid, 0) + 1


def retire(th, records) -> None:
    """The asynchronous reads ``records`` (issued by ``th``) are complete as of ``th``'s current clock."""
    if not records or th.vc is None:
        return
    now = th.vc.get(th.uid, 0)
    for record in records:
        if record is not None:
            record.pending = False
            record.clock = now


def attach_trackers(machine, cluster) -> None:
    """Give every thread a clock and every CTA's window a tracker (called per cluster)."""
    for cta in cluster.ctas:
        cta.window.tracker = SharedTracker(cta, "uninit" in machine.checks)
        for th in cta.threads:
            th.vc = {th.uid: 1}


class _Access:
    __slots__ = ("uid", "clock", "where", "proxy", "fence_epoch", "thread", "pending", "base")

    def __init__(self, th, clock, where, proxy="generic", pending=False):
        self.pending = pending
        self.uid = th.uid
        self.clock = clock
        self.where = where
        self.proxy = proxy
        self.fence_epoch = th.fence_epoch
        self.thread = th
        self.base = None   # an atomic's record: the plain write before it, which every later atomic follows


class SharedTracker:
    """The per-byte history of one CTA's shared window (see the module docstring)."""

    def __init__(self, cta, uninit: bool):
        self.cta = cta
        self.uninit = uninit
        self.writes = {}
        self.reads = {}
        self.subword = False

    # -- keys ----------------------------------------------------------------------------------
    def _keys(self, offset: int, size: int):
        """(keys to check, keys to record) of an access."""
        if size >= 4 and offset % 4 == 0 and size % 4 == 0:
            words = range(offset, offset + size, 4)
            if not self.subword:
                return words, words
            return list(words) + [b for b in range(offset, offset + size) if b % 4], words
        self.subword = True
        data = range(offset, offset + size)
        return list(data) + sorted({b - b % 4 for b in data}), data

    def _ever_written(self, key: int) -> bool:
        writes = self.writes
        word = key - key % 4
        return key in writes or word in writes or any(word + i in writes for i in (1, 2, 3))

    def _covers(self, th, access) -> bool:
        if access.pending:
            return False
        return access.uid == th.uid or th.vc.get(access.uid, 0) >= access.clock

    def _race(self, kind, th, where, other, offset, proxy="generic") -> InterpretError:
        name = self.cta.machine.program.describe_shared(offset)
        who = "the asynchronous proxy (TMA / wgmma) for " if other.proxy != "generic" else ""
        me = "the asynchronous proxy (TMA / wgmma) for " if proxy != "generic" else ""
        if other.pending:
            return InterpretError(
                f"shared-memory race ({kind}) on {name} of CTA {self.cta.ctaid}: {me}{th.describe()} at {where} "
                f"overwrites what the asynchronous operation issued by {other.thread.describe()} at {other.where} "
                f"still reads; retire it first (wgmma.wait_group / bulk_wait_group(read=True)) before the release "
                f"or commit that lets the writer in")
        return InterpretError(   # the two accesses in the order ``kind`` names them: the earlier one first
            f"shared-memory race ({kind}) on {name} of CTA {self.cta.ctaid}: {who}{other.thread.describe()} at "
            f"{other.where}, then {me}{th.describe()} at {where}; no barrier orders the two accesses (add "
            f"tsjit.syncthreads() between them in a plain kernel, or the barrier wait / arrive the pipeline needs)")

    def _hold(self, *race) -> None:
        """Keep the first race of the launch (:meth:`_race` of ``race``, with the thread that found it) in
        ``Machine.held_race`` (the module docstring says why); execution goes on."""
        machine = self.cta.machine
        if machine.held_race is None:
            machine.held_race = (self._race(*race), machine.current)
            machine.held_accesses = 0

    def _after_race(self) -> None:
        """Bound what runs after a held race (a thread spinning on a plain shared load never parks)."""
        machine = self.cta.machine
        machine.held_accesses += 1
        if machine.held_accesses > HOLD_ACCESSES:
            raise machine.held_race[0]

    # -- accesses ------------------------------------------------------------------------------
    def read(self, th, offset: int, size: int, where: str, proxy: str = "generic", pending: bool = False):
        """Record a read (``pending``: an asynchronous read in flight until :func:`retire`); returns its record."""
        if self.cta.machine.held_race is not None:
            self._after_race()
        uid = th.uid
        clock = th.vc.get(uid, 0)
        check, record = self._keys(offset, size)
        for key in check:
            w = self.writes.get(key)
            if w is None:
                if self.uninit and key >= offset and not self._ever_written(key):
                    raise InterpretError(
                        f"read of uninitialized shared memory (TSJIT_INTERPRET_CHECK=uninit): "
                        f"{self.cta.machine.program.describe_shared(key)}, which nothing wrote since the launch, "
                        f"is read by {th.describe()} at {where}")   # the read last: the caret goes under it
            elif not self._covers(th, w):
                self._hold("write then read", th, where, w, key, proxy)
            elif proxy != "generic" and w.proxy == "generic" and w.thread.fence_epoch == w.fence_epoch:
                raise InterpretError(
                    f"missing fence.proxy.async: the asynchronous proxy (TMA store / wgmma) issued by "
                    f"{th.describe()} at {where} reads {self.cta.machine.program.describe_shared(key)}, written "
                    f"through the generic proxy by {w.thread.describe()} at {w.where} with no fence.proxy.async "
                    f"after the write; add tsjit.fence_proxy_async() between the writes and the copy")
        access = _Access(th, clock, where, proxy, pending)
        for key in record:
            readers = self.reads.get(key)
            if readers is None:
                self.reads[key] = {uid: access}
            elif pending:
                readers[-len(readers) - 1] = access   # an in-flight read never replaces another record
            else:
                readers[uid] = access
        return access

    def write(self, th, offset: int, size: int, where: str, proxy: str = "generic", clock=None) -> None:
        if self.cta.machine.held_race is not None:
            self._after_race()
        uid = th.uid
        own = th.vc.get(uid, 0) if clock is None else clock
        access = _Access(th, own, where, proxy)
        check, record = self._keys(offset, size)
        for key in check:
            w = self.writes.get(key)
            if w is not None and w.uid != uid and not self._covers(th, w):
                self._hold("write then write", th, where, w, key, proxy)
            readers = self.reads.get(key)
            if readers:
                for r in readers.values():
                    if not self._covers(th, r):
                        self._hold("read then write", th, where, r, key, proxy)
        for key in check:
            self.reads.pop(key, None)
            if key not in record:
                self.writes.pop(key, None)
        for key in record:
            self.writes[key] = access

    def atomic(self, th, offset: int, size: int, where: str) -> None:
        """Atomics never race with each other; they still must be ordered with plain accesses: every
        atomic must follow the last plain write (an ``mbarrier.init``, say) even when other atomics came
        in between, and a later plain write must follow them (tracked as a write)."""
        check, record = self._keys(offset, size)
        base = None
        for key in check:
            w = self.writes.get(key)
            plain = w if w is None or w.proxy != "atomic" else w.base
            if plain is not None and not self._covers(th, plain):
                self._hold("write then atomic", th, where, plain, key)
            base = base or plain
        access = _Access(th, th.vc.get(th.uid, 0), where, "atomic")
        access.base = base
        for key in record:
            self.writes[key] = access
            self.reads.pop(key, None)
