"""Task-local value routing checks (R1-R4).

A route ``[#s].var -> [#d].param`` says: step ``s`` writes task-local ``var`` and step
``d`` reads it as its routed input ``param``.  Per task:

R1  writers: the source step is a consumer work (plain or auxiliary) on one of the
    task's src resources, and ``var`` is one of its outputs.
R2  destinations: the destination is a work step -- producer work on a dst resource or
    consumer work on a src resource -- that declares ``param`` as a routed input, and it
    comes after the source (no backwards routes).
R3  every required routed input of every work step has exactly one route, from one
    variable.
R4  the route's source is the most recent earlier writer of ``var`` in the linear order
    Head + Loop (once) + Tail; a route that skips a later write is an "extra" edge, the
    write it skipped gives the "missing" edge (no loop-carry).

Slots are printed as ``#<step> <resource>.<label> [<section> call <n>].<variable>``.
Captured schedules satisfy R2-R4 by construction (tokens are checked when passed);
these checks protect raw schedule lists and hand-built schedules, and R1/R2 also check
the task's declared roles.
"""
from __future__ import annotations

from tsjit.ts.verify.findings import Finding, error

__all__ = ["check_route_writers", "check_route_destinations", "check_routes_complete",
           "check_routes_most_recent", "slot"]

_FIX = "Route the token of the most recent consumer work that writes it (capture the schedule " \
       "with @schedule and pass tokens instead of building steps by hand)."


def slot(step, name: str) -> str:
    """Slot coordinates ``#3 src.load [Loop call 0].item``."""
    return (f"#{step.id} {step.resource.name}.{step.label or step.stage.name} "
            f"[{step.section} call {step.call_index}].{name}")


def _edge(route) -> str:
    return f"{slot(route.source, route.variable.name)} -> {slot(route.dest, route.param)}"


def _in(items, item) -> bool:
    return any(i is item for i in items)


def _report(check: str, task, kind: str, lines: list[str], fix: str) -> list[Finding]:
    if not lines:
        return []
    body = "\n".join(f"    {line}" for line in lines)
    return [error(check, f"{task.describe()}, schedule {task.schedule.name!r}: {kind}:\n{body}"
                         f"\n  {fix}")]


def check_route_writers(manager) -> list[Finding]:
    """R1: route sources are consumer-work outputs on src resources."""
    out = []
    for task in manager.tasks:
        bad = []
        for route in task.schedule.routes:
            src = route.source
            if not (src.stage.is_work and src.stage.is_consumer):
                bad.append(f"extra edge {_edge(route)}: the writer is a {src.stage.name}, not a "
                           f"consumer work")
            elif not _in(src.outputs, route.variable):
                bad.append(f"extra edge {_edge(route)}: step #{src.id} does not write "
                           f"{route.variable.name!r}")
            elif not _in(task.src_resources, src.resource):
                bad.append(f"extra edge {_edge(route)}: writer resource {src.resource.name!r} "
                           f"is not in src_resources")
        out += _report("R1", task, "routes from a slot that is not a consumer-work output of a "
                       "src resource", bad, f"Add the writer's resource to src_resources, or "
                       f"route a consumer work's token. {_FIX}")
    return out


def check_route_destinations(manager) -> list[Finding]:
    """R2: route destinations are declared inputs of work on the right resources."""
    out = []
    for task in manager.tasks:
        bad = []
        for route in task.schedule.routes:
            dest = route.dest
            if not dest.stage.is_work:
                bad.append(f"extra edge {_edge(route)}: destination is a {dest.stage.name}")
                continue
            wanted = task.dst_resources if dest.stage.is_producer else task.src_resources
            side = "dst_resources" if dest.stage.is_producer else "src_resources"
            if not _in(wanted, dest.resource):
                bad.append(f"extra edge {_edge(route)}: {dest.stage.name} on "
                           f"{dest.resource.name!r}, which is not in {side}")
            if dest.spec is not None and route.param not in dest.spec.input_params:
                bad.append(f"extra edge {_edge(route)}: {dest.resource.name}.{dest.label} has "
                           f"no routed input {route.param!r} (inputs: "
                           f"{', '.join(dest.spec.input_params) or 'none'})")
            if route.source.id >= dest.id:
                bad.append(f"extra edge {_edge(route)}: routed backwards (the read at "
                           f"#{dest.id} comes before the write at #{route.source.id})")
        out += _report("R2", task, "routes into slots that cannot receive them", bad, _FIX)
    return out


def check_routes_complete(manager) -> list[Finding]:
    """R3: each required input has exactly one route."""
    out = []
    for task in manager.tasks:
        incoming: dict[tuple, list] = {}
        for route in task.schedule.routes:
            incoming.setdefault((route.dest.id, route.param), []).append(route)
        bad = []
        for step in task.schedule.steps:
            if not step.is_work or step.spec is None:
                continue
            for param in step.spec.input_params:
                routes = incoming.get((step.id, param), [])
                if not routes and param not in step.spec.optional_inputs:
                    bad.append(f"missing edge <writer of {param!r}> -> {slot(step, param)}: no "
                               f"value reaches this input")
                elif len(routes) > 1:
                    sources = ", ".join(slot(r.source, r.variable.name) for r in routes)
                    bad.append(f"{slot(step, param)} has {len(routes)} incoming routes "
                               f"({sources}); exactly one variable may feed an input")
        out += _report("R3", task, "routed inputs without exactly one route", bad,
                       "Pass exactly one token to each routed input (a consumer work earlier "
                       "in the schedule must write it).")
    return out


def check_routes_most_recent(manager) -> list[Finding]:
    """R4: each route comes from the most recent earlier writer (linear order)."""
    out = []
    for task in manager.tasks:
        steps = task.schedule.steps
        bad = []
        for route in task.schedule.routes:
            writers = [s for s in steps[:route.dest.id] if _in(s.outputs, route.variable)]
            expected = writers[-1] if writers else None
            if expected is route.source:
                continue
            bad.append(f"extra edge {_edge(route)}")
            if expected is not None:
                bad.append(f"missing edge {slot(expected, route.variable.name)} -> "
                           f"{slot(route.dest, route.param)} (the most recent earlier write)")
        out += _report("R4", task, "routes that do not come from the most recent write "
                       "(Head + Loop + Tail order, no loop-carry)", bad, _FIX)
    return out
