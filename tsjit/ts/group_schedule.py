"""Pipeline groups in schedules: member references, operation placement, and the fan-out.

Capture (called by :mod:`tsjit.ts.capture`):

* :func:`schedule_argument` -- a grouped member is passed as ``group.member`` (a
  :class:`~tsjit.ts.group.GroupMember`); passing the bare member is rule S8 (its barriers belong
  to the group, so the schedule must say which group they are reached through);
* :func:`check_operation` -- the collapsed operation is only the group's (Merge: ``release``; Fork:
  ``commit``; FusedMerge: ``wait`` / ``try_wait`` / ``release``), and the group accepts no other
  (rule T5, the reference's group access rules, raised at the call's line);
* :func:`expand_group_steps` -- when the capture finishes, each step on a group becomes one step
  per member (its *fan-out*: ``Step.via_group`` is the group, ``Step.fanout_index`` the member's
  position), so every check and the lowering see per-member operations; the protocol (which
  barrier, whose cursor, which fan-out step signals) is :mod:`tsjit.ts.group_protocol`'s.  A Merge
  release must follow a wait on every member, a Fork commit an acquire of every member (the one
  operation frees / fills every member's stage).
"""
from __future__ import annotations

from tsjit.ts.diagnostics import schedule_error
from tsjit.ts.enums import ScheduleStage
from tsjit.ts.group import GroupMember, PipelineGroup, PipelineGroupMode, group_of
from tsjit.ts.schedule import Step

__all__ = ["schedule_argument", "check_operation", "expand_group_steps"]


def schedule_argument(schedule_name: str, param: str, value):
    """``value`` as a schedule argument: a :class:`GroupMember` becomes its member; a bare grouped
    member raises ScheduleError (S8)."""
    if isinstance(value, GroupMember):
        return value.member
    group = group_of(value)
    if group is not None:
        raise schedule_error(
            f"@schedule {schedule_name}: argument {param!r} is {value.name!r}, a member of pipeline group "
            f"{group.name!r} ({group.mode.name}); its barriers belong to the group. Pass it as "
            f"{group.name}.{value.name} (and the group itself for the collapsed "
            f"{'/'.join(group.mode.group_operations)}()).", "S8")
    return value


def check_operation(resource, op: str) -> None:
    """Raise ScheduleError when pipeline operation ``op`` may not be called on ``resource`` (a group,
    or a grouped member)."""
    if isinstance(resource, PipelineGroup):
        allowed = resource.mode.group_operations
        if op not in allowed:
            members = ", ".join(f"{resource.name}.{m.name}" for m in resource.members)
            raise schedule_error(
                f"{resource.name}.{op}(): a {resource.mode.name} group only takes "
                f"{' / '.join(a + '()' for a in allowed)}, the operation its members share; call {op}() on the "
                f"member it is for ({members}).", "T5")
        return
    group = group_of(resource)
    if group is not None and op in group.mode.group_operations:
        raise schedule_error(
            f"{resource.name}.{op}(): {resource.name!r} is a member of {group.mode.name} group {group.name!r}, "
            f"whose members share this operation's barrier. Call {group.name}.{op}() once instead (it "
            f"{_collapsed_effect(group, op)}).", "T5")


def _collapsed_effect(group: PipelineGroup, op: str) -> str:
    names = ", ".join(m.name for m in group.members)
    if op == "release":
        return f"frees the stage of every member: {names}"
    if op == "commit":
        return f"fills the stage every member's consumer reads: {names}"
    return f"waits once on the full barrier all of {names} signal"


def _needs_before(group: PipelineGroup, stage: ScheduleStage):
    """The member operation a collapsed operation needs earlier in the schedule, or None."""
    if group.mode is PipelineGroupMode.Merge and stage is ScheduleStage.ConsumerRelease:
        return ScheduleStage.ConsumerWait
    if group.mode is PipelineGroupMode.Fork and stage is ScheduleStage.ProducerCommit:
        return ScheduleStage.ProducerAcquire
    return None


def expand_group_steps(root: list, steps: list, schedule_name: str) -> tuple[list, list]:
    """Replace every step on a group by its per-member fan-out (module docstring); returns the new
    ``(root, steps)`` with ids and call indices renumbered in program order.

    Raises:
        ScheduleError (T5): a Merge release without an earlier wait on some member, or a Fork commit
            without an earlier acquire of some member.
    """
    if not any(isinstance(s.resource, PipelineGroup) for s in steps):
        return root, steps
    replaced: dict = {}
    for position, step in enumerate(steps):
        group = step.resource
        if not isinstance(group, PipelineGroup):
            continue
        needed = _needs_before(group, step.stage)
        for member in group.members:
            if needed is not None and not any(s.resource is member and s.stage is needed for s in steps[:position]):
                op = needed.op_name
                raise schedule_error(
                    f"schedule {schedule_name!r}: {group.name}.{step.stage.op_name}() "
                    f"{_collapsed_effect(group, step.stage.op_name)}, but the schedule never calls "
                    f"{group.name}.{member.name}.{op}() before it. Add {group.name}.{member.name}.{op}() "
                    f"before {group.name}.{step.stage.op_name}().", "T5", step.location)
        replaced[id(step)] = [Step(id=-1, resource=member, stage=step.stage, label=None, section=step.section,
                                   call_index=0, location=step.location, guards=step.guards,
                                   work_loop_slot=step.work_loop_slot, via_group=group, fanout_index=k)
                              for k, member in enumerate(group.members)]

    def rebuild(nodes) -> list:
        out = []
        for node in nodes:
            if isinstance(node, Step):
                out += replaced.get(id(node), [node])
            else:
                node.body = tuple(rebuild(node.body))
                out.append(node)
        return out

    new_root = rebuild(root)
    new_steps = [n for s in steps for n in replaced.get(id(s), [s])]
    counters: dict = {}
    for index, step in enumerate(new_steps):
        step.id = index
        key = (id(step.resource), step.stage, step.section)
        step.call_index = counters.get(key, 0)
        counters[key] = step.call_index + 1
    return new_root, new_steps
