"""Turn the exhaustive search's events into reports a person can act on.

Every report names the task(s), the resource, the schedule step (stage, label, step id,
source line) and the ring stage, and carries the shortest interleaving that reaches it
(breadth-first order).  Deadlocks list *every* blocked process with the op it waits in,
the barrier phase it waits for and that barrier's state, plus the credit state of every
ring (replayed along the interleaving); races name both accesses and the bytes; arrival
and byte-count violations name the barrier, the expected and the delivered counts.
Reports are deduplicated: one per distinct blocked set / access pair / violating step.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from tsjit.ts import protocol
from tsjit.ts.verify.exhaustive_search import arrive_on, path_to

__all__ = ["Report", "build_reports", "format_interleaving"]

MAX_PATH_LINES = 60
#: deadlocked configurations reported in full per variant (the first are the shortest).
MAX_DEADLOCK_REPORTS = 2


@dataclass
class Report:
    """One finding of the exhaustive checker.

    ``kind``: ``deadlock``, ``race``, ``arrivals``, ``bytes``, ``pdl`` or ``stuck``;
    ``message``: the full text; ``tasks`` / ``resources``: names for tests and tools;
    ``path``: the interleaving as printable lines.
    """

    kind: str
    message: str
    tasks: tuple = ()
    resources: tuple = ()
    path: list = field(default_factory=list)
    key: tuple = ()


def _copy_kind(copy) -> str:
    """What a (non-UMMA) copy is: the CLC ``try_cancel`` response of a ClcFetchAsync ring, else a TMA copy."""
    config = getattr(copy.access.step.resource, "pipeline_config", None) if copy.access is not None else None
    try:
        clc = protocol.row(config).producer is protocol.SideKind.Clc
    except (AttributeError, KeyError, TypeError):
        clc = False
    return "CLC try_cancel response" if clc else "TMA copy"


def _label(model, key) -> str:
    if key[0] == "c":
        copy = model.copies[key[1]]
        proc = model.procs[copy.process]
        if copy.umma:
            what = (f"the MMAs reading {copy.access.step.resource.name!r} stage "
                    f"{model.program.regions.keys[copy.access.region][1]}" if copy.access is not None
                    else "the MMAs")
            return f"{proc.name}: tcgen05.commit completes ({what} are done)"
        return f"{proc.name}: {_copy_kind(copy)} of {copy.access.step.resource.name!r} stage " \
               f"{model.program.regions.keys[copy.access.region][1]} lands ({copy.nbytes} B)"
    return None


def _short(op) -> str:
    if op.step is None:
        what = f"{op.resource.name!r} producer tail wait"
    else:
        what = f"#{op.step.id} {op.step.display_call} {op.step.stage.name}"
    where = [f"stage {op.slot}"] if op.slot is not None else []
    if op.tile is not None:
        where.append(f"tile {op.tile}")
    if op.iteration is not None:
        where.append(f"it {op.iteration}")
    return f"{what} [{', '.join(where)}]" if where else what


def format_interleaving(model, path) -> list:
    """Numbered lines, one per transition; long paths keep their head and tail."""
    lines = []
    for n, (state, key) in enumerate(path, 1):
        text = _label(model, key)
        if text is None:
            proc = model.procs[key[1]]
            text = f"{proc.name}: {_short(model.ops[key[1]][state[key[1]]])}"
        lines.append(f"{n:>5}. {text}")
    if len(lines) > MAX_PATH_LINES:
        head, tail = MAX_PATH_LINES // 3, MAX_PATH_LINES - MAX_PATH_LINES // 3
        lines = lines[:head] + [f"       ... {len(lines) - head - tail} transitions ..."] \
            + lines[-tail:]
    return lines


def _barrier_state(model, state, b: int) -> str:
    base = 2 * model.P + 3 * b
    parity, pending, tx = state[base], state[base + 1], state[base + 2]
    barrier = model.program.barriers[b]
    text = (f"{barrier.name} is in phase parity {parity} with {pending} of {barrier.count} "
            f"arrivals pending")
    return text + (f" and {tx} transaction bytes outstanding" if tx else "")


def _credits(model, path) -> list:
    """Per ring: phases completed and per-process op counts, replayed along ``path``."""
    if not path:
        return []
    bars = list(path[0][0][2 * model.P:2 * model.P + 3 * model.B])
    flips = [0] * model.B
    counts: dict = {}
    for state, key in path:
        if key[0] == "c":
            copy = model.copies[key[1]]
            done = [0]
            arrive_on(bars, copy.barrier, copy.arrivals, -copy.nbytes, model.counts[copy.barrier], done)
            flips[copy.barrier] += done[0]
            continue
        op = model.ops[key[1]][state[key[1]]]
        if op.kind in ("acquire", "commit", "wait", "release"):
            entry = counts.setdefault(id(op.resource), [op.resource, {}])
            per = entry[1].setdefault(model.procs[key[1]].name, {})
            per[op.kind] = per.get(op.kind, 0) + 1
        for b, n, tx in op.arrivals:
            done = [0]
            arrive_on(bars, b, n, tx, model.counts[b], done)
            flips[b] += done[0]
    lines = []
    for resource, per in counts.values():
        cfg = resource.pipeline_config
        full = sum(flips[b.id] for b in model.program.barriers
                   if b.resource is resource and b.kind == "full")
        empty = sum(flips[b.id] for b in model.program.barriers
                    if b.resource is resource and b.kind == "empty")
        ops = "; ".join(f"{name} " + ", ".join(f"{k} {v}" for k, v in sorted(c.items()))
                        for name, c in per.items())
        waits = [c.get("wait", 0) for c in per.values() if "wait" in c]
        acquires = sum(c.get("acquire", 0) for c in per.values())
        outstanding = full - min(waits) if waits else full
        free = cfg.num_stages + empty - acquires
        slots = f"{free} free slots" if free >= 0 else \
            f"no free slot ({-free} acquire(s) more than the stages plus the releases)"
        lines.append(f"  credits of {resource.name!r} ({cfg.pipeline_type.value}, "
                     f"{cfg.num_stages} stages): {full} full phases completed (commits), "
                     f"{outstanding} not yet waited by every consumer; {empty} empty phases "
                     f"completed (releases), {slots}; {ops}")
    return lines


#: what an empty interleaving means, per kind of finding
_AT_START = {
    "deadlock": "none: the deadlock is there at kernel start; every task's first barrier operation "
                "already waits, so no task can take a single step.",
    "race": "none needed: both accesses come at kernel start, before either task's first barrier "
            "operation, so nothing orders them; make one task wait (wait() or acquire() on a ring the "
            "other commits or releases after its access) before its access.",
    "other": "none: it happens at kernel start, before any task's first barrier operation.",
}


def _path_block(model, result, state, key=None, kind: str = "other") -> list:
    path = path_to(result, state)
    if key is not None:
        path = path + [(state, key)]
    lines = format_interleaving(model, path)
    if not path:
        return path, [f"  shortest interleaving: {_AT_START[kind]}"]
    return path, [f"  shortest interleaving ({len(path)} transitions):"] + lines


def _deadlock(model, result, event, variant) -> Report:
    state = event.state
    lines, tasks, resources = [], [], []
    for i, proc in enumerate(model.procs):
        pc = state[i]
        if pc >= len(model.ops[i]):
            lines.append(f"  finished: {proc.describe()}")
            continue
        op = model.ops[i][pc]
        tasks.append(proc.task.name)
        resources.append(op.resource.name)
        lines.append(f"  blocked: {proc.describe()} at {op.describe()}: waits for "
                     f"{model.program.barriers[op.guard].name} to complete the phase of "
                     f"parity {op.parity}; {_barrier_state(model, state, op.guard)}")
    path, block = _path_block(model, result, state, kind="deadlock")
    credit = _credits(model, path)
    head = (f"deadlock ({variant}): {len(tasks)} task(s) blocked, none can proceed.")
    fix = ("  Each blocked wait needs a commit/release (or TMA bytes) that no task will still "
           "deliver: check that every wait has a matching commit, every acquire a matching "
           "release, equal trip counts, and arrival counts that match the tasks' warps.")
    if any(p.cta is not None for p in model.procs):
        fix += ("\n  In a cluster a barrier counts the arrivals of every CTA its releases or "
                "commits come from: a task those CTAs need must run there (run_only_on_cta_id), "
                "and a wait only the leader's barrier can pass belongs on the leader.")
    message = "\n".join([head] + lines + credit + [fix] + block)
    return Report("deadlock", message, tuple(tasks), tuple(dict.fromkeys(resources)), block,
                  ("deadlock",) + tuple(lines))


def _access_text(model, who, access, how="") -> str:
    step = access.step
    where = []
    if access.tile is not None:
        where.append(f"tile {access.tile}")
    if access.iteration is not None:
        where.append(f"iteration {access.iteration}")
    ctx = f" ({', '.join(where)})" if where else ""
    verb = "writes" if access.mode == "write" else "reads"
    return f"{who} {verb} it{how}: {step.describe()}{ctx}{access.in_flight}"


def _race_pairs(model, event):
    """Conflicting (new access, active access) pairs of a race event."""
    state, data = event.state, event.data
    regions = model.program.regions
    i, pc = data["process"], data["op"]
    if pc < 0:
        new = [(a, None) for a in model.procs[i].initial_segment] + \
              [(c.access, c) for c in model.procs[i].initial_spawns if c.access is not None]
        procs = [data["other"]]
        copies = []
        active_segments = {data["other"]: model.procs[data["other"]].initial_segment}
    else:
        op = model.ops[i][pc]
        new = [(a, None) for a in op.segment] + [(c.access, c) for c in op.spawns if c.access is not None]
        procs = [j for j in range(model.P) if j != i]
        copies = [model.copies[c] for c in data["copies"] if model.copies[c].access is not None]
        active_segments = {j: ([model.procs[j].initial_segment] +
                               [o.segment for o in model.ops[j]])[state[j]] for j in procs}
    for access, copy in new:
        for j in procs:
            for other in active_segments[j]:
                if (access.mode == "write" or other.mode == "write") and \
                        regions.conflicts(access.region, other.region):
                    yield (i, access, copy), (j, other, None)
        for c in copies:
            if c.process == i and copy is not None:
                continue         # a process's own copies never race each other
            if (access.mode == "write" or c.access.mode == "write") and \
                    regions.conflicts(access.region, c.access.region):
                yield (i, access, copy), (c.process, c.access, c)


def _released_before(model, proc: int, access):
    """The release op of ``access``'s ring that ``proc`` ran before the access, in the same loop
    iteration and tile (a read after its own release: nothing keeps the stage), else None."""
    if access.mode != "read":
        return None
    ring = model.program.regions.keys[access.region][0]
    ops = model.ops[proc]
    at = next((k for k, o in enumerate(ops) if any(x is access for x in o.segment)  # opened by op k
               or any(c.access is access for c in o.spawns)), None)
    if at is None:
        return None
    return next((o for o in reversed(ops[:at + 1]) if o.kind == "release" and o.resource is ring
                 and o.iteration == access.iteration and o.tile == access.tile), None)


def _race(model, result, event, variant, seen) -> list:
    out = []
    regions = model.program.regions
    for (i, a, ca), (j, b, cb) in _race_pairs(model, event):
        key = frozenset([(model.procs[i].name, a.step.id, a.mode),
                         (model.procs[j].name, b.step.id, b.mode)])
        if key in seen:
            continue
        seen.add(key)
        pi, pj = model.procs[i], model.procs[j]
        bytes_text = regions.byte_range_text(a.region, b.region)
        def note(copy):
            if copy is None:
                return ""
            return " (MMAs still reading until their tcgen05.commit lands)" if copy.umma \
                else f" ({_copy_kind(copy)} in flight)"
        who = "two tasks access it with no barrier ordering them." if i != j else \
            (f"task {pi.task.name!r} accesses it while an asynchronous operation it issued itself is still "
             f"in flight (no wait on the barrier that operation completes on comes between them).")
        lines = [f"race on {regions.name(b.region)} ({bytes_text}), {variant}: {who}",
                 "  " + _access_text(model, pi.describe(), a, note(ca)),
                 "  " + _access_text(model, pj.describe(), b, note(cb)),
                 "  Order them through the pipeline: the writer must finish before the "
                 "commit/TMA bytes the reader waits for, and the reader before the release "
                 "the writer acquires; aliased buffers need such an order too."]
        if a.step.resource is b.step.resource and a.step.stage.is_producer and \
                b.step.stage.is_producer and pi.task is not pj.task:
            lines.append(f"  Both tasks fill {a.step.resource.name!r}: when each fills its own part "
                         f"of the stage (split A/B loads), declare num_bytes_per_warp_per_cta in its "
                         f"PipelineConfig; otherwise let one task fill the stage.")
        for who, access in ((i, a), (j, b)):
            release = _released_before(model, who, access)
            if release is not None:
                lines.append(f"  Task {model.procs[who].task.name!r} reads {release.resource.name!r} after "
                             f"releasing that stage in the same iteration ({release.step.describe()}): the "
                             f"release lets the producer refill it under the read (on an UMMA ring, the "
                             f"tcgen05.commit release covers only the MMAs issued before it).  Release after "
                             f"the work that reads the stage.")
        if a.in_flight or b.in_flight:
            lines.append("  The read is asynchronous: retire it (wgmma.wait_group / bulk_wait_group "
                         "with fewer groups pending) before the release or commit that lets the "
                         "writer in, or release the previous stage instead of this one.")
        _, block = _path_block(model, result, event.state, event.transition, kind="race")
        resources = (a.step.resource.name, b.step.resource.name,
                     regions.keys[a.region][0].name, regions.keys[b.region][0].name)
        out.append(Report("race", "\n".join(lines + block), (pi.task.name, pj.task.name),
                          tuple(dict.fromkeys(resources)), block, ("race", key)))
    return out


def _count_violation(model, result, event, variant) -> Report:
    data = event.data
    barrier = model.program.barriers[data["barrier"]]
    res = barrier.resource
    if event.kind == "arrivals":
        proc = model.procs[data["process"]]
        op = model.ops[data["process"]][data["op"]]
        side = "producer_group" if barrier.kind == "full" else "consumer_group"
        text = (f"arrival count mismatch on {barrier.name} ({variant}): the barrier expects "
                f"{barrier.count} arrivals per phase ({res.name}.pipeline_config.{side}.size), "
                f"but {proc.describe()} arrives {data['delivered']} times at {op.describe()} "
                f"while only {data['pending']} were still pending: the phase completes before "
                f"all of its threads have arrived, so the other side can take stage "
                f"{barrier.slot} while they still use it.\n  Set {side} to the number of "
                f"arrivals one phase really gets (threads, or warps with one elected lane).")
        task_name = proc.task.name
    else:
        copy = model.copies[data["copy"]]
        proc = model.procs[copy.process]
        text = (f"TMA byte count mismatch on {barrier.name} ({variant}): the stage was armed "
                f"for {data['armed']} more bytes but {proc.describe()}'s copy from "
                f"{copy.access.step.describe()} delivers {data['delivered']}: the phase "
                f"completes while bytes are still landing, and consumers read a partial "
                f"stage.\n  Set {res.name}.pipeline_config.num_bytes to the bytes all TMA "
                f"copies of one stage deliver (num_bytes_per_warp_per_cta x CTAs x warps).")
        task_name = proc.task.name
    _, block = _path_block(model, result, event.state, event.transition)
    return Report(event.kind, "\n".join([text] + block), (task_name,), (res.name,), block,
                  (event.kind, task_name, barrier.name))


def _pdl(model, result, event, variant) -> Report:
    proc = model.procs[event.data["process"]]
    op = model.ops[event.data["process"]][event.data["op"]]
    text = (f"PDL launch ordering violation ({variant}): {proc.describe()} can run "
            f"{op.describe()} (griddepcontrol.launch_dependents) before any task has run "
            f"wait_griddep.\n  Call the PdlWaitBarrier's wait_griddep() before the launch "
            f"(in the same task, or in a task the launching task waits on), or pass "
            f"assume_pdl_wait_completed=True when the wait is emitted outside the schedules.")
    _, block = _path_block(model, result, event.state, event.transition)
    return Report("pdl", "\n".join([text] + block), (proc.task.name,),
                  (op.resource.name,), block, ("pdl", proc.name, op.step.id))


def build_reports(model, result, variant: str) -> list:
    """Deduplicated Reports for one searched variant (see the module docstring)."""
    reports: list = []
    seen_deadlocks, seen_races, seen_other = set(), set(), set()
    for proc in model.procs:
        if proc.stuck is not None and proc.task.name not in seen_other:
            seen_other.add(proc.task.name)
            queue = proc.stuck
            reports.append(Report("stuck", (
                f"{proc.describe()} never leaves its work tile loop ({variant}): its per-tile "
                f"body has no {queue.name!r} ConsumerWork 'get_and_advance_work_tile', so it "
                f"works on the same tile forever while the other tasks move on.\n  End every "
                f"tile with the queue epilogue: [{queue.name}.try_wait()], {queue.name}.wait(), "
                f"{queue.name}.get_and_advance_work_tile(), {queue.name}.release()."),
                (proc.task.name,), (queue.name,), key=("stuck", proc.task.name)))
    for event in result.events:
        if event.kind == "deadlock":
            key = tuple((i, event.state[i]) for i in range(model.P)
                        if event.state[i] < len(model.ops[i]))
            if key not in seen_deadlocks:
                seen_deadlocks.add(key)
                if len(seen_deadlocks) <= MAX_DEADLOCK_REPORTS:
                    reports.append(_deadlock(model, result, event, variant))
        elif event.kind == "race":
            reports += _race(model, result, event, variant, seen_races)
        else:
            if event.kind == "bytes":
                key = (event.kind, model.copies[event.data["copy"]].access.step.id)
            else:
                op = model.ops[event.data["process"]][event.data["op"]]
                key = (event.kind, model.procs[event.data["process"]].name,
                       op.step.id if op.step is not None else op.resource.name)
            if key in seen_other:
                continue
            seen_other.add(key)
            if event.kind == "pdl":
                reports.append(_pdl(model, result, event, variant))
            else:
                reports.append(_count_violation(model, result, event, variant))
    return reports
