"""Check R5: a token that names a ring stage is not used after that stage was released.

A consumer work that returns its ``stage_info.stage_idx`` (or ``stage_info.barrier``, or
arithmetic on them) hands out a *stage token*: the schedule routes it to a later work, whose body
typically indexes the ring's tiles with it (``self.ring.tiles[stage]``).  The stage belongs to the
consumer only until its ``release()``: the release lets the producer refill the slot, and after
the last release of a domain loop the stage holds whatever the ring's bookkeeping leaves there
(usually the last tile only, read once instead of once per tile).  So a work that reads a stage
token after the release that freed the token's stage reads a stage it no longer owns::

    with ts.domain_loop(start, end, step):
        r.wait()
        stage = r.take()            # stage token of wait #i
        r.release()                 # frees wait #i's stage
    s.reduce(stage)                 # R5: uses it after the release, after the loop

Releases are FIFO: the k-th ``release()`` of a task frees the stage its k-th ``wait()`` opened
(a release that lags the wait by one, ``with d.every(1, start=1): r.release()``, frees the
previous stage, so a token of the current one stays valid until the next trip).  The check runs
each task's schedule as the exhaustive checker expands it (:mod:`exhaustive_expand`: every
variant, the same trip counts) and counts waits and releases per ring; the within-iteration
variant of the mistake is also a race that X reports, this rule names it in either place.

Which tokens are stage tokens is read from the work body's ``return`` (:func:`stage_returns`):
an expression made of the stage-info's ``stage_idx`` / ``barrier``, arithmetic, casts
(``tsjit.Int32(...)``) and locals assigned from those; a routed input returned unchanged
(``return stage``) passes its origin on.  A value *loaded* from the stage (a subscript, any other
call) is data in registers and may live on after the release: it is never a stage token.  When a
body's source is not available nothing is a stage token (no finding, never a false one).

The use must read the ring through the token (:func:`reads_through`): the destination work's body
names the routed input, and its resource is the ring or holds it in a field the body names
(``Sums(ring=ring)`` reading ``self.ring.tiles[stage]``).  A token handed to a work whose resource
has no reference to the ring (in this configuration) is not a read of the stage.
"""
from __future__ import annotations

import ast

from tsjit.ts.enums import ScheduleStage
from tsjit.ts.verify.async_reads import body_statements
from tsjit.ts.verify.exhaustive_expand import expand_task, program_variants, trip_counts
from tsjit.ts.verify.findings import Finding, error
from tsjit.ts.verify.work_fields import fields_named

__all__ = ["check_stage_token_lifetimes", "stage_returns", "reads_through"]

#: StageInfo fields that name the stage itself (not data in it)
_STAGE_FIELDS = frozenset({"stage_idx", "barrier"})
#: the mark of "derived from this work's own stage" in an origin set
STAGE = "<stage>"


def _origins(node, names: dict) -> frozenset:
    """Where expression ``node`` takes a stage from: ``STAGE`` and routed-input names."""
    if isinstance(node, ast.Name):
        return names.get(node.id, frozenset())
    if isinstance(node, ast.Attribute):
        if node.attr in _STAGE_FIELDS and isinstance(node.value, ast.Name) \
                and names.get(node.value.id) == frozenset({"<stage_info>"}):
            return frozenset({STAGE})
        return frozenset()
    if isinstance(node, ast.BinOp):
        return _origins(node.left, names) | _origins(node.right, names)
    if isinstance(node, ast.UnaryOp):
        return _origins(node.operand, names)
    if isinstance(node, ast.IfExp):
        return _origins(node.body, names) | _origins(node.orelse, names)
    if isinstance(node, ast.Call) and len(node.args) == 1 and not node.keywords:
        callee = node.func.attr if isinstance(node.func, ast.Attribute) else \
            node.func.id if isinstance(node.func, ast.Name) else ""
        if callee == "int" or callee[:1].isupper():      # a cast: tsjit.Int32(stage), int(stage)
            return _origins(node.args[0], names)
    return frozenset()                                   # a load, a call, a constant: data


def stage_returns(function, returns: tuple, input_params: tuple) -> dict:
    """``{returned variable name: origins}`` of a consumer work ``function(self, stage_info,
    *inputs)``: which of its ``returns`` carry its own stage (``STAGE``) or a routed input's
    (the input's name); variables carrying neither are absent.  ``{}`` without source."""
    statements = body_statements(function) if function is not None and \
        hasattr(function, "__code__") else []
    code = getattr(function, "__code__", None)
    if not statements or code is None or code.co_argcount < 2 or not returns:
        return {}
    names: dict = {code.co_varnames[1]: frozenset({"<stage_info>"})}
    names.update({p: frozenset({p}) for p in input_params})
    for _ in range(3):                      # locals assigned from stage fields (a short fixpoint)
        for statement in statements:
            for node in ast.walk(statement):
                if isinstance(node, ast.Assign) and len(node.targets) == 1 \
                        and isinstance(node.targets[0], ast.Name):
                    found = _origins(node.value, names)
                    name = node.targets[0].id
                    if found and names.get(name) != frozenset({"<stage_info>"}):
                        names[name] = names.get(name, frozenset()) | found
    out: dict = {}
    for statement in statements:
        for node in ast.walk(statement):
            if not isinstance(node, ast.Return) or node.value is None:
                continue
            values = node.value.elts if isinstance(node.value, ast.Tuple) and len(returns) > 1 \
                else [node.value]
            if len(values) != len(returns):
                continue
            for name, value in zip(returns, values):
                found = _origins(value, names)
                if found:
                    out[name] = out.get(name, frozenset()) | found
    return out


def reads_through(step, param: str, ring) -> bool:
    """Whether work ``step`` may read ``ring``'s stage with its routed input ``param``: its body
    names ``param``, and ``step``'s resource is ``ring`` or holds it in a field the body may name
    (:func:`tsjit.ts.verify.work_fields.fields_named`).  False without the body's source."""
    statements = body_statements(step.function) if step.function is not None and \
        hasattr(step.function, "__code__") else []
    if not any(isinstance(node, ast.Name) and node.id == param
               for statement in statements for node in ast.walk(statement)):
        return False
    resource = step.resource
    if resource is ring:
        return True
    holders = [name for name, value in getattr(resource, "__dict__", {}).items() if value is ring]
    if not holders:
        return False
    names = fields_named(step.function, resource)
    return names is None or any(name in names for name in holders)


def _when(es, trips: int) -> str:
    if es.iteration is None:
        return "after the domain loop" if es.step.section.name == "Tail" else "before the domain loop"
    if trips > 1 and es.iteration == trips - 1:
        return "in the last iteration"
    return "in the first iteration" if es.iteration == 0 else f"in iteration {es.iteration}"


def _message(task, use, param, origin, trips: int) -> str:
    ring, (define, variable), release, _ = origin
    once = ""
    if define.iteration is not None and use.iteration is None:
        once = (f"; {use.step.display_call} runs once, after the loop, on the last trip's stage "
                f"instead of once per trip")
    return (f"{task.describe()}: stage token {variable.name!r} of {ring.name!r} is used after its "
            f"stage was released.\n"
            f"  {define.step.describe()} returns the stage ({_when(define, trips)}); "
            f"{release.step.describe()} releases that stage ({_when(release, trips)}); then "
            f"{use.step.describe()} reads the token as {param!r} ({_when(use, trips)}): the stage "
            f"is no longer the consumer's, the producer may refill it under the read{once}.\n"
            f"  Use the token before the release: move {use.step.display_call} between "
            f"{define.step.display_call} and {release.step.display_call} (inside the loop when the "
            f"stage is taken there), or move the release after that use.")


def _violations(task, expanded, routes):
    """``(use, param, origin)`` for each first use of a released stage token in ``expanded``."""
    waits: dict = {}          # id(ring) -> waits run so far
    releases: dict = {}       # id(ring) -> the ExpandedSteps of its releases, in order
    held: dict = {}           # (id(step), id(variable)) -> [(ring, (es, variable), wait index)]
    specs: dict = {}
    for es in expanded:
        step, ring = es.step, es.step.resource
        if step.stage is ScheduleStage.ConsumerWait:
            waits[id(ring)] = waits.get(id(ring), 0) + 1
        elif step.stage is ScheduleStage.ConsumerRelease:
            releases.setdefault(id(ring), []).append(es)
        if not step.is_work:
            continue
        inputs: dict = {}
        for route in routes.get(id(step), ()):
            carried = held.get((id(route.source), id(route.variable)), [])
            inputs[route.param] = carried
            for origin_ring, define, index in carried:
                freed = releases.get(id(origin_ring), [])
                if len(freed) > index and reads_through(step, route.param, origin_ring):
                    yield es, route.param, (origin_ring, define, freed[index], index)
        if step.stage.is_consumer and step.outputs and step.spec is not None:
            if id(step) not in specs:
                specs[id(step)] = stage_returns(step.function, step.spec.returns,
                                                step.spec.input_params)
            origins = specs[id(step)]
            for variable in step.outputs:
                carried = []
                for origin in origins.get(variable.name, ()):
                    if origin == STAGE:
                        if waits.get(id(ring), 0) > 0:
                            carried.append((ring, (es, variable), waits[id(ring)] - 1))
                    else:
                        carried += inputs.get(origin, [])
                held[(id(step), id(variable))] = carried


def check_stage_token_lifetimes(manager) -> list[Finding]:
    """R5: no work reads a stage token after the release of its stage (module docstring)."""
    tasks = manager.tasks
    if not any(r.source.spec is not None for t in tasks for r in t.schedule.routes):
        return []
    counts = trip_counts(tasks, manager.options.dynamic_trip_count, [])
    out, seen = [], set()
    for variant in program_variants(tasks):
        for task in tasks:
            if not task.schedule.routes:
                continue
            routes: dict = {}
            for route in task.schedule.routes:
                routes.setdefault(id(route.dest), []).append(route)
            trips = counts.get(id(task), 0)
            expanded = expand_task(task, trips, variant)
            for use, param, origin in _violations(task, expanded, routes):
                key = (id(task), id(use.step), param)
                if key not in seen:
                    seen.add(key)
                    out.append(error("R5", _message(task, use, param, origin, trips)))
    return out
