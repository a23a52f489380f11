"""C0: the pipeline credit simulation behind the schedule table (check C0).

:class:`PipelineSimulator` plugs pipeline credits into the lock-step walk of
:class:`~tsjit.ts.simulate.ScheduleSimulator` (round robin over the tasks; a round where
no remaining task can move is a deadlock).  Persistent tasks are expanded for two tiles.

Model, per pipelined resource (a ring of ``S`` stages; see :mod:`.pipelines` for lanes
and positions):

* a task's ``c``-th acquire/commit/wait/release touches ring positions
  ``lane + c * stride``; the cursor semantics follow the lowering: without
  ``advance_on_acquire`` an acquire uses the commit cursor (commit advances it), with it
  acquire advances its own cursor; likewise ``advance_on_wait`` for wait vs release;
* the full barrier of position ``p`` completes when every committing task covering that
  stage has committed ``p``; the empty barrier when every releasing task has released it;
* **Wait** on ``p`` needs ``p``'s full barrier complete (an outstanding commit);
  **Acquire** on ``p`` needs generation ``p // S == 0`` (initially ``S`` free slots) or
  the empty barrier of ``p - S`` complete (a freed slot); everything else never blocks.

After a complete walk the ring must balance: every completed commit waited on by every
waiting task, every acquired slot released, and the reverse; imbalances are reported as
``"Nx ProducerCommit from R not consumed by a ConsumerWait"`` etc.  The balance is only
judged when every task touching the resource was simulated with its exact trip count
(static bounds, not capped by ``max_simulated_iterations``): a capped or run-time domain
stands in for an unknown count, so a difference there proves nothing.

Warp lanes: a task covering one lane per warp of some ring (``num_warps`` equal to its
interleave stride; :func:`~tsjit.ts.verify.exhaustive_expand.warp_lane_stride`) is walked as
one process per warp, as the exhaustive checker and the hardware run it: warp ``j`` runs lane
``j`` of such a ring alone, with its own cursors, so it waits only for its own stages (in lock
step the next trip of all lanes needs every stage free, a false deadlock against a consumer
that releases a stage late).  On any other ring the task's warps arrive together: an
operation counts once all of them have done it.

Resources whose ``pipeline_config`` is not a :class:`PipelineConfig` but has an int
``num_stages`` are simulated with stride 1 and default advance points.
"""
from __future__ import annotations

from collections import defaultdict

from tsjit.ts.enums import ScheduleStage
from tsjit.ts.options import DEFAULTS
from tsjit.ts.schedule import format_location
from tsjit.ts.simulate import ScheduleSimulator, SimulatedStep, SimulationResult, expand_schedule, \
    simulated_trip_count
from tsjit.ts.verify.exhaustive_expand import trip_counts, warp_lane_stride
from tsjit.ts.verify.pipelines import ROLE_STAGES, is_pipelined, pipeline_config, role_tasks, \
    task_lanes

__all__ = ["PipelineSimulator", "Ring"]

_ROLE_BY_STAGE = {stage: role for role, stage in ROLE_STAGES.items()}


class Ring:
    """Credit state of one pipelined resource."""

    def __init__(self, manager, resource, split: dict | None = None):
        """``split``: ``{id(task): warps}`` of the tasks walked one process per warp."""
        self.resource = resource
        self.split = split or {}
        config = pipeline_config(resource)
        self.stages = resource.pipeline_config.num_stages
        self.advance_on_acquire = bool(getattr(config, "advance_on_acquire", False))
        self.advance_on_wait = bool(getattr(config, "advance_on_wait", False))
        self.lanes = {}          # (task id, role) -> Lanes
        self.participants = {}   # role -> [count per stage]
        for role in ROLE_STAGES:
            counts = [0] * self.stages
            for task in role_tasks(manager, resource, role):
                lanes = task_lanes(task, resource, role)
                self.lanes[(id(task), role)] = lanes
                for stage in range(self.stages):
                    if stage % lanes.stride in lanes.lanes:
                        counts[stage] += 1
            self.participants[role] = counts
        self.arrivals = {role: defaultdict(int) for role in ROLE_STAGES}
        self.counters = defaultdict(int)     # (task id, lane, cursor name) -> ops done
        self.partial = defaultdict(int)      # (role, position, task id) -> warps of a split task done

    # -- positions -----------------------------------------------------------------------
    def _cursor(self, task, role: str) -> str:
        if role == "acquire" and not self.advance_on_acquire:
            return "commit"
        if role == "wait" and not self.advance_on_wait:
            return "release"
        return role

    def _own(self, lanes, lane: int | None) -> bool:
        """Whether warp lane ``lane`` of a split task runs its ring lane alone here."""
        return lane is not None and lanes.kind == "warp"

    def positions(self, task, role: str, lane: int | None = None) -> list[int]:
        """The ring positions ``task`` (its warp ``lane`` when split) touches with its next
        ``role`` operation."""
        lanes = self.lanes[(id(task), role)]
        count = self.counters[(id(task), lane, self._cursor(task, role))]
        own = (lane,) if self._own(lanes, lane) else lanes.lanes
        return [j + count * lanes.stride for j in own]

    def done(self, role: str, position: int) -> bool:
        """Whether every participant of ``role`` covering the stage has done ``position``."""
        needed = self.participants[role][position % self.stages]
        return needed > 0 and self.arrivals[role][position] >= needed

    # -- the simulation hooks ------------------------------------------------------------
    def blocked(self, task, role: str, lane: int | None = None) -> list[int]:
        """The positions that keep ``task`` (its warp ``lane``) from running ``role`` now
        (empty: can run)."""
        if role == "wait":
            return [p for p in self.positions(task, role, lane) if not self.done("commit", p)]
        if role == "acquire":
            return [p for p in self.positions(task, role, lane)
                    if p >= self.stages and not self.done("release", p - self.stages)]
        return []

    def step(self, task, role: str, lane: int | None = None) -> None:
        together = lane is not None and not self._own(self.lanes[(id(task), role)], lane)
        for position in self.positions(task, role, lane):
            if together:        # the task arrives once its last warp has
                self.partial[(role, position, id(task))] += 1
                if self.partial[(role, position, id(task))] < self.split[id(task)]:
                    continue
            self.arrivals[role][position] += 1
        cursor = self._cursor(task, role)
        if cursor == role:
            self.counters[(id(task), lane, role)] += 1

    # -- state for messages ------------------------------------------------------------------
    def completed(self, role: str) -> int:
        return sum(1 for p in list(self.arrivals[role]) if self.done(role, p))

    def state(self) -> str:
        committed, waited = self.completed("commit"), self.completed("wait")
        acquired, released = self.completed("acquire"), self.completed("release")
        free = self.stages - (acquired - released)
        return (f"'{self.resource.name}' credit state: {committed - waited} committed "
                f"stage(s) not yet waited on ({committed} commits, {waited} waits), "
                f"{free} of {self.stages} slot(s) free ({acquired} acquires, {released} "
                f"releases)")

    def too_shallow(self, task, role: str, lane: int | None = None) -> str | None:
        """Why ``task`` cannot run ``role`` on a ring this deep, when it holds every stage itself: with
        ``advance_on_acquire`` it acquired them all and committed none (its next acquire waits for a
        release that needs those commits, after it), or with ``advance_on_wait`` it waited on them all
        and released none; warp ``lane`` of a split task holds its lane's share of the stages.
        ``None`` otherwise."""
        closing = {"acquire": ("commit", self.advance_on_acquire, "acquired", "committed"),
                   "wait": ("release", self.advance_on_wait, "waited on", "released")}.get(role)
        if closing is None or not closing[1]:
            return None
        close, _, opened_how, closed_how = closing
        opened = self.counters[(id(task), lane, role)] - self.counters[(id(task), lane, close)]
        lanes = self.lanes[(id(task), role)]
        share = -(-self.stages // lanes.stride) if self._own(lanes, lane) else self.stages
        if opened < share:
            return None
        name, holder, step = self.resource.name, task.describe(), 1
        if self._own(lanes, lane):       # every lane holds as many: the stages they take together
            opened, holder = opened * lanes.stride, f"{holder} ({lanes.stride} warp lanes)"
            step = lanes.stride
        return (f"'{name}' is too shallow for this schedule: {holder} holds {opened} stage(s) "
                f"{opened_how} and not yet {closed_how}, and '{name}' has {self.stages}; its next "
                f"{role}() needs one of them back.  Give '{name}' at least {opened + step} stages, or "
                f"{close}() before the next {role}().")

    def imbalances(self) -> list[str]:
        name = self.resource.name
        committed, waited = self.completed("commit"), self.completed("wait")
        acquired, released = self.completed("acquire"), self.completed("release")
        out = []
        if committed > waited:
            out.append(f"{committed - waited}x ProducerCommit from {name} not consumed by a "
                       f"ConsumerWait ({committed} commits, {waited} waits)")
        if waited > committed:
            out.append(f"{waited - committed}x ConsumerWait on {name} without a matching "
                       f"ProducerCommit ({waited} waits, {committed} commits)")
        if acquired > released:
            out.append(f"{acquired - released}x ProducerAcquire on {name} not matched by a "
                       f"ConsumerRelease ({acquired} acquires, {released} releases)")
        if released > acquired:
            out.append(f"{released - acquired}x ConsumerRelease on {name} not matched by a "
                       f"ProducerAcquire ({released} releases, {acquired} acquires)")
        return out


class PipelineSimulator(ScheduleSimulator):
    """The lock-step walk with pipeline credits (see the module docstring)."""

    persistent_tiles = 2
    #: the exact re-run of a capped walk that deadlocked is made when it has at most this many steps
    exact_rerun_steps = 20_000
    #: an exact re-run that passes replaces the capped rows of the schedule table up to this length
    table_rows = 64

    def __init__(self, manager, max_iterations: int | None = DEFAULTS.max_simulated_iterations,
                 dynamic_trip_count: int = DEFAULTS.dynamic_trip_count):
        super().__init__(manager, max_iterations, dynamic_trip_count)
        self.max_iterations, self.dynamic_trip_count = max_iterations, dynamic_trip_count
        # with a run-time warp-lane task, run-time domains get the trip counts the exhaustive
        # checker uses (balanced on a ring: the partner's trips split between the lanes)
        runtime = {id(t) for t in manager.tasks if t.schedule.domain_loop is not None
                   and t.schedule.domain_loop.static_trip_count is None}
        if not any(warp_lane_stride(t) > 1 for t in manager.tasks if id(t) in runtime):
            runtime = set()
        balanced = trip_counts(tuple(manager.tasks), dynamic_trip_count, []) if runtime else {}
        for task in manager.tasks:
            trips = balanced.get(id(task)) if id(task) in runtime else None
            if trips is None:
                trips = simulated_trip_count(task.schedule, max_iterations, dynamic_trip_count)
            if task.schedule.work_tile_loop is not None or id(task) in runtime:
                tiles = self.persistent_tiles if task.schedule.work_tile_loop is not None else 1
                self.sequences[id(task)] = expand_schedule(task.schedule, trips, tiles=tiles)
        self.split = {id(t): t.num_warps for t in manager.tasks if warp_lane_stride(t) > 1}
        self.rings = {id(r): Ring(manager, r, self.split) for r in manager.resources if is_pipelined(r)}
        self.exact = {id(t): _exact(t.schedule, max_iterations) for t in manager.tasks}

    def run(self) -> SimulationResult:
        """The lock-step walk.  Capping static trip counts at ``max_iterations`` makes tasks with
        different trip counts (8 single commits against 4 double waits) look deadlocked: a walk
        that blocks while some static domain was capped is run again with the exact trip
        counts (when that is at most :attr:`exact_rerun_steps` steps), and its verdict stands."""
        result = super().run()
        if not result.blocked or all(self.exact.values()) or self.max_iterations is None:
            return result
        exact = type(self)(self.manager, None, self.dynamic_trip_count)
        if sum(len(seq) for seq in exact.sequences.values()) > self.exact_rerun_steps:
            return result
        full = exact.run()
        self.sequences, self.rings, self.exact = exact.sequences, exact.rings, exact.exact
        if full.blocked or len(full.rows) <= self.table_rows:
            return full
        return SimulationResult(result.rows, [])     # the table shows the capped walk

    def lanes(self, task) -> int:
        """A warp-lane task runs one process per warp (see the module docstring)."""
        return self.split.get(id(task), 1)

    def _ring_role(self, entry: SimulatedStep):
        role = _ROLE_BY_STAGE.get(entry.step.stage)
        ring = self.rings.get(id(entry.step.resource))
        return (ring, role) if ring is not None and role is not None else (None, None)

    def blocked(self, task, entry: SimulatedStep) -> bool:
        ring, role = self._ring_role(entry)
        return ring is not None and bool(ring.blocked(task, role, entry.lane))

    def on_step(self, task, entry: SimulatedStep) -> None:
        ring, role = self._ring_role(entry)
        if ring is not None:
            ring.step(task, role, entry.lane)

    # -- reporting (used by TaskManager.print_and_verify) -----------------------------------
    def blocked_message(self, task, entry: SimulatedStep) -> str:
        step = entry.step
        where = (f"schedule step #{step.id}"
                 + (f", warp lane {entry.lane}" if entry.lane is not None else "")
                 + (f", iteration {entry.iteration}" if entry.iteration is not None else "")
                 + (f", tile {entry.tile}" if step.work_loop_slot is None
                    and task.schedule.work_tile_loop is not None else "")
                 + (f", {format_location(step.location)}" if step.location is not None else ""))
        text = (f"{task.describe()}: {step.resource.name} {step.stage.name} {step.call_index} "
                f"is blocked! ({where})")
        ring, role = self._ring_role(entry)
        if ring is None:
            return text
        positions = ring.blocked(task, role, entry.lane)
        stages = ", ".join(f"stage {p % ring.stages} phase {(p // ring.stages) % 2}"
                           for p in positions)
        need = ("a commit of " if role == "wait" else "a release freeing ")
        return f"{text}\n    needs {need}{stages}; {ring.state()}"

    def too_shallow(self, blocked) -> list[str]:
        """:meth:`Ring.too_shallow` for each blocked ``(task, entry)`` of a walk: a certain deadlock
        whatever the trip counts."""
        found = []
        for task, entry in blocked:
            ring, role = self._ring_role(entry)
            reason = ring.too_shallow(task, role, entry.lane) if ring is not None else None
            if reason is not None and reason not in found:
                found.append(reason)
        return found

    def imbalances(self) -> list[str]:
        out = []
        for ring in self.rings.values():
            tasks = [t for t in self.manager.tasks
                     if any(s.resource is ring.resource for s in t.schedule.steps)]
            if all(self.exact[id(t)] for t in tasks):
                out += ring.imbalances()
        return out


def _exact(schedule, max_iterations) -> bool:
    loop = schedule.domain_loop
    count = loop.static_trip_count if loop is not None else 0
    return count is not None and (max_iterations is None or count <= max_iterations)


def is_credit_stage(stage: ScheduleStage) -> bool:
    return stage in _ROLE_BY_STAGE
