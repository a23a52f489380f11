"""Breadth-first search over the interleavings of a compiled program, with partial-order
reduction.

State (one flat tuple, hashed for the visited set): the op counter of every process, its
probe flags (successful try_acquire/try_wait not yet consumed), every barrier's
``(parity, pending arrivals, transaction count)``, the "a PDL wait has run" flag and the
sorted ids of the asynchronous operations in flight (TMA copies, tcgen05.commit completions).  Cursor indices and phases are not part of it:
they are a function of the op counter (see :mod:`tsjit.ts.verify.exhaustive_model`).

Transitions: a process runs its next op when it is enabled (no guard, a successful probe,
or the guarded barrier's parity differs from the awaited one -- ``mbarrier.try_wait.parity``
semantics, so a ring that falls two phases behind passes spuriously, as on the GPU); an
in-flight copy completes (``complete_tx``; a tcgen05.commit lands its arrival, after the
previous commit of its process).  While running an op the search reports:

* a *race* when an access the op begins (its segment, or a copy it issues) conflicts with
  an access another process or copy has active (same stage / aliased bytes, one writes), or its
  segment with a copy it issued itself that is still in flight;
* an *arrival-count* violation when an arrive delivers more arrivals than the phase still
  waits for, or a copy delivers more bytes than were armed: the phase completes while
  threads (bytes) of the same operation are still outstanding;
* a *PDL* violation when ``launch_griddep`` runs before any ``wait_griddep``.

A state where no transition is enabled and some process has not finished is a deadlock.
A transition that raises an arrival-count or byte violation ends its path: the state after it
is not explored, since every later finding on that path (a hang on a parity the extra
arrivals flipped back, ...) follows from the miscounted phase already reported.  So the
findings are those of the miscount-free paths, which both searches (reduced and full) cover.

Partial-order reduction (persistent sets, Godefroid 1996).  Each op and copy has a packed
*footprint* -- the barriers it arrives on / waits on, the regions whose accesses it begins
or ends, the PDL flag -- and a *query mask* such that ``query(t) & footprint(u) != 0``
exactly when t and u are dependent (arrive vs wait on one barrier; two arrivals of
different kinds -- count, bytes -- on one barrier, while arrivals of one kind commute;
conflicting region accesses; PDL wait vs launch).  From a state, the search expands only
the enabled transitions of a set ``P`` of processes closed under: for an enabled next op
``t`` of a process in ``P``, every other process whose *free run* contains a transition
dependent with ``t`` joins ``P``; for a blocked wait on barrier ``b``, every process whose
free run arrives on ``b`` joins.  The
free run of a process outside ``P`` is how far it could get without any help from ``P``:
its ops up to the first wait that cannot pass on the arrivals the other outside processes
(and copies) could still deliver (counted per barrier, with the TMA bytes they could still
land against the bytes armed, and the phases a wait's parity needs against the phases those
arrivals can complete: :mod:`tsjit.ts.verify.exhaustive_free_runs`).  An
enabled wait commutes with every arrival the outside can make on its barrier when those cannot
complete the barrier's phase (fewer than its pending arrivals): the parity it passed on stays; an
enabled op's arrivals commute with the outside's arrivals and byte landings of other kinds on a
barrier while no arrival can exceed its phase nor a phase complete between them
(:func:`~tsjit.ts.verify.exhaustive_free_runs.stable_arrivals`: the CLC ring's releases of warps and
warpgroups, a pair leader's arm against the copies landing on its barrier).  A process's own copies
are independent of each other (one producer's shares of a stage), not of its own accesses: a read of
bytes its own TMA copy or CLC response still writes is a race.
An op that touches nothing visible, or whose query meets no
footprint in what any other process has left (a superset of its free run), is a persistent
set alone, found without free runs; so is a PDL op once a PDL wait has run (the flag never
clears: a wait sets it to what it is, a launch meets it set).  Any sequence of moves by
processes outside ``P`` is then independent of what ``P`` does, so ``P``'s enabled
transitions form a persistent set; the smallest such set over the possible starting
processes is used.  The state graph is acyclic (every transition advances an op counter
or retires a copy), so persistent sets alone preserve every deadlock and every terminal
state; because accesses are part of the dependency relation, every Mazurkiewicz trace of
a maximal run is represented, so every race and PDL violation is still found.  Breadth-
first order makes a reported deadlock's interleaving a shortest one (every path to a state
has the same length); a race or count violation is reported at its first position in the
representatives explored, which with reduction may be later than its shortest one.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from tsjit.ts.options import DEFAULTS
from tsjit.ts.verify.exhaustive_footprints import Model, copy_bits
from tsjit.ts.verify.exhaustive_free_runs import free_runs, stable_arrivals, stable_guard

__all__ = ["SearchResult", "Event", "search"]

_MISCOUNTS = ("arrivals", "bytes")


@dataclass
class Event:
    """One finding at a transition: ``kind`` is race / arrivals / bytes / pdl / deadlock."""

    kind: str
    state: tuple
    transition: tuple | None
    data: dict


@dataclass
class SearchResult:
    states: int = 0
    complete: int = 0
    deadlock_states: int = 0
    capped: bool = False
    stopped_early: bool = False
    events: list = field(default_factory=list)
    parents: dict = field(default_factory=dict)


def arrive_on(bars: list, b: int, n: int, tx: int, count: int, completed: list | None = None):
    """Apply arrivals / transaction bytes to barrier ``b``; returns a violation or None.

    ``completed`` (optional one-element list) accumulates the phases completed.
    """
    i = 3 * b
    parity, pending, txc = bars[i], bars[i + 1], bars[i + 2]
    violation = None
    flips = 0
    if tx < 0 and txc > 0 and txc + tx < 0 and pending <= 0:
        violation = ("bytes", txc, -tx)          # the phase completes mid-copy
        parity, pending, flips = parity ^ 1, pending + count, 1
    txc += tx
    if n:
        if n > pending > 0:
            violation = ("arrivals", pending, n)  # arrivals spill into the next phase
        pending -= n
    while pending <= 0 and txc == 0:
        parity ^= 1
        pending += count
        flips += 1
    bars[i], bars[i + 1], bars[i + 2] = parity, pending, txc
    if completed is not None:
        completed[0] += flips
    return violation


class _Searcher:
    def __init__(self, model: Model, max_states: int):
        self.m = model
        self.max_states = max_states
        P, B = model.P, model.B
        self.bar0 = 2 * P
        self.pdl_at = 2 * P + 3 * B
        self.copies_at = self.pdl_at + 1

    # -- transitions ---------------------------------------------------------------------------
    def live(self, state):
        m = self.m
        procs = [i for i in range(m.P) if state[i] < len(m.ops[i])]
        return procs, state[self.copies_at:]

    def step_process(self, state, i: int, events: list):
        m = self.m
        P = m.P
        pc = state[i]
        op = m.ops[i][pc]
        s = list(state[:self.copies_at])
        copies = list(state[self.copies_at:])
        if op.guard >= 0 and op.probe_key >= 0:
            s[P + i] &= ~(1 << op.probe_key)
        if op.probe_barrier >= 0:
            bit = 1 << op.probe_key
            if s[self.bar0 + 3 * op.probe_barrier] != op.parity:
                s[P + i] |= bit
            else:
                s[P + i] &= ~bit
        bars = s[self.bar0:self.pdl_at]
        for b, n, tx in op.arrivals:
            bad = arrive_on(bars, b, n, tx, m.counts[b])
            if bad:
                events.append(("arrivals", dict(process=i, op=pc, barrier=b, pending=bad[1],
                                                delivered=bad[2])))
        s[self.bar0:self.pdl_at] = bars
        if op.pdl == 2 and not s[self.pdl_at]:
            events.append(("pdl", dict(process=i, op=pc)))
        if op.pdl == 1:
            s[self.pdl_at] = 1
        self._race_check(state, i, pc, copies, events)
        if op.spawns:
            copies = sorted(copies + [c.id for c in op.spawns])
        s[i] = pc + 1
        return tuple(s + copies)

    def step_copy(self, state, cid: int, events: list):
        m = self.m
        copy = m.copies[cid]
        s = list(state[:self.copies_at])
        bars = s[self.bar0:self.pdl_at]
        bad = arrive_on(bars, copy.barrier, copy.arrivals, -copy.nbytes, m.counts[copy.barrier])
        if bad and bad[0] == "bytes":
            events.append(("bytes", dict(copy=cid, barrier=copy.barrier, armed=bad[1],
                                         delivered=bad[2])))
        s[self.bar0:self.pdl_at] = bars
        copies = [c for c in state[self.copies_at:] if c != cid]
        return tuple(s + copies)

    def _race_check(self, state, i, pc, copies, events):
        """A race when an access op ``pc`` of process ``i`` begins conflicts with an access active in
        another process or in a copy in flight -- another process's, or one this process issued itself
        when the access is a work step's (its own read of the bytes its TMA copy or CLC ``try_cancel``
        response is still writing: it skipped the wait the copy completes on).  A process's copies never
        race each other (one producer's shares of a stage are disjoint bytes)."""
        m = self.m
        wconf, rconf = m.new_conf[i][pc]
        if not (wconf or rconf):
            return
        others_wr = others_rd = own_wr = own_rd = 0
        for j in range(m.P):
            if j != i:
                wr, rd = m.seg_bits[j][state[j]]
                others_wr |= wr
                others_rd |= rd
        for cid in copies:
            wr, rd = copy_bits(m.copies[cid])
            if m.copies[cid].process != i:
                others_wr |= wr
                others_rd |= rd
            else:
                own_wr |= wr
                own_rd |= rd
        seg_w, seg_r = m.seg_conf[i][pc]
        if (wconf & (others_wr | others_rd)) or (rconf & others_wr) or \
                (seg_w & (own_wr | own_rd)) or (seg_r & own_wr):
            events.append(("race", dict(process=i, op=pc, copies=tuple(copies))))

    # -- partial-order reduction ---------------------------------------------------------------
    def origin(self, key) -> int:
        """The task process behind a key (a copy's issuing process)."""
        return self.m.copies[key[1]].process if key[0] == "c" else key[1]

    def query(self, state, key) -> tuple[int, int]:
        """``(query, query against the key's own process or copies)``: a process's next op meets its own
        copies only through its segment accesses and barriers; a copy meets its process's segment accesses
        and barriers, and another copy of that process only barriers (one producer's shares of a stage are
        disjoint bytes)."""
        m = self.m
        if key[0] == "c":
            return m.copy_queries[key[1]], m.copy_queries[key[1]]
        i = key[1]
        op = m.ops[i][state[i]]
        if m.enabled(state, i):
            return m.query[i][state[i]], m.query_own[i][state[i]]
        return 1 << op.guard, 1 << op.guard

    def _meets(self, key, q: tuple, other, fp: int, fp_own: int) -> bool:
        """Whether ``key`` (queries ``q``) depends on ``other`` (footprints ``fp`` / ``fp_own``, see
        :meth:`query`)."""
        if self.origin(other) != self.origin(key):
            return bool(fp & q[0])
        if key[0] == "p":
            return bool(fp & q[1])                        # other: a copy of this process
        if other[0] == "p":
            return bool(fp_own & q[0])                    # key: a copy of that process
        return bool(fp & q[0] & self.m.no_regions)        # two copies of one process

    def _independent_of_all_futures(self, state, key, live_keys) -> bool:
        """Whether ``key`` is independent of everything every other live process may still do and
        every copy in flight (the static suffix of their ops bounds any free run): then it is a
        persistent set on its own, found without computing free runs."""
        m = self.m
        if key[0] == "c" and m.copies[key[1]].after in state[self.copies_at:]:
            return False
        q = self.query(state, key)
        for other in live_keys:
            if other == key:
                continue
            if other[0] == "c":
                fp = fp_own = m.copy_fps[other[1]]
            else:
                fp, fp_own = m.suffix[other[1]][state[other[1]]], m.suffix_own[other[1]][state[other[1]]]
            if self._meets(key, q, other, fp, fp_own):
                return False
        return True

    def ample(self, state, enabled: list, live_keys: list) -> list:
        if len(enabled) <= 1:
            return enabled
        invisible = self.m.invisible_after_pdl if state[self.pdl_at] else self.m.invisible
        for key in enabled:
            if key[0] == "p" and invisible[key[1]][state[key[1]]]:
                return [key]
        for key in enabled:
            if self._independent_of_all_futures(state, key, live_keys):
                return [key]
        best = None
        runs: dict = {}          # the free runs of one outside set (several starts meet the same sets)
        enabled_set = set(enabled)
        for start in enabled:
            members = {start}
            frontier = [start]
            while frontier:
                if best is not None and len(enabled_set & members) >= len(best):
                    break            # this start cannot give a smaller set
                outside = tuple(k for k in live_keys if k not in members)
                if not outside:
                    break
                found = runs.get(outside)
                if found is None:
                    found = runs[outside] = free_runs(self.m, state, [k[1] for k in outside if k[0] == "p"],
                                                      [k[1] for k in outside if k[0] == "c"])
                fps, own_fps, bounds = found
                new = []
                for key in frontier:
                    if key[0] == "c" and self.m.copies[key[1]].after in state[self.copies_at:]:
                        before = ("c", self.m.copies[key[1]].after)   # completes first
                        if before not in members and before not in new:
                            new.append(before)
                    q = self.query(state, key)
                    if key[0] == "p":
                        stable = ~(stable_guard(self.m, state, key[1], bounds) |
                                   stable_arrivals(self.m, state, key[1], bounds))
                        q = (q[0] & stable, q[1] & stable)
                    for other, fp in fps.items():
                        if other not in members and other not in new and \
                                self._meets(key, q, other, fp, own_fps.get(other, fp)):
                            new.append(other)
                members.update(new)
                frontier = new
            chosen = [k for k in enabled if k in members]
            if best is None or len(chosen) < len(best):
                best = chosen
                if len(best) == 1:
                    break
        return best

    # -- search ---------------------------------------------------------------------------------
    def run(self, reduce: bool = True, levels_after_finding: int = 1) -> SearchResult:
        """Breadth first, level by level.  Once something is found the search finishes the
        ``levels_after_finding`` next levels (every shortest finding is in) and stops."""
        m = self.m
        result = SearchResult()
        init = m.initial_state()
        parents = {init: None}
        result.parents = parents
        self._initial_races(init, result)
        level = [init]
        stop_at = 0 if result.events else None
        depth = 0
        while level:
            if stop_at is not None and depth > stop_at:
                result.stopped_early = True
                break
            following = []
            for state in level:
                self._expand(state, reduce, result, parents, following)
            if stop_at is None and result.events:
                stop_at = depth + levels_after_finding
            level = following
            depth += 1
        result.states = len(parents)
        return result

    def _expand(self, state, reduce, result, parents, following) -> None:
        m = self.m
        procs, copies = self.live(state)
        enabled = [("c", c) for c in copies if m.copies[c].after not in copies] + \
            [("p", i) for i in procs if m.enabled(state, i)]
        if not enabled:
            if procs:
                result.deadlock_states += 1
                result.events.append(Event("deadlock", state, None, {}))
            else:
                result.complete += 1
            return
        if reduce:
            live_keys = [("c", c) for c in copies] + [("p", i) for i in procs]
            chosen = self.ample(state, enabled, live_keys)
        else:
            chosen = enabled
        for key in chosen:
            events: list = []
            if key[0] == "p":
                nxt = self.step_process(state, key[1], events)
            else:
                nxt = self.step_copy(state, key[1], events)
            for kind, data in events:
                result.events.append(Event(kind, state, key, data))
            if any(kind in _MISCOUNTS for kind, _ in events):
                continue      # the phase accounting is broken from here on: later findings follow from this one
            if nxt not in parents:
                if len(parents) >= self.max_states:
                    result.capped = True
                    continue
                parents[nxt] = (state, key)
                following.append(nxt)

    def _initial_races(self, init, result) -> None:
        m = self.m
        for i, proc in enumerate(m.procs):
            wr, rd = m.seg_bits[i][0]
            for c in proc.initial_spawns:
                cw, cr = copy_bits(c)
                wr, rd = wr | cw, rd | cr
            wconf, rconf = m._conf(wr), m._conf(rd)
            for j in range(i + 1, m.P):
                owr, ord_ = m.seg_bits[j][0]
                for c in m.procs[j].initial_spawns:
                    cw, cr = copy_bits(c)
                    owr, ord_ = owr | cw, ord_ | cr
                if (wconf & (owr | ord_)) or (rconf & owr):
                    result.events.append(Event("race", init, None, dict(
                        process=i, op=-1, other=j, copies=())))


def search(program, max_states: int = DEFAULTS.max_states, reduce: bool = True):
    """Explore ``program``; returns ``(Model, SearchResult)``."""
    model = Model(program)
    return model, _Searcher(model, max_states).run(reduce)


def path_to(result: SearchResult, state) -> list:
    """The transitions from the initial state to ``state`` (shortest in BFS order)."""
    out = []
    entry = result.parents.get(state)
    while entry is not None:
        prev, key = entry
        out.append((prev, key))
        entry = result.parents.get(prev)
    out.reverse()
    return out
