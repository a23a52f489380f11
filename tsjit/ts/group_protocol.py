"""The barrier protocol of pipeline-group members: which barrier, whose cursor, which actions.

A member's operations are its own :class:`~tsjit.ts.pipeline.PipelineConfig`'s actions
(:func:`tsjit.ts.protocol.actions`), with three differences the lowering
(:mod:`tsjit.ts.lower_pipeline`) and the interleaving model
(:mod:`tsjit.ts.verify.exhaustive_model`) both take from here:

* **barriers** (:func:`barrier_array`): a barrier kind the group's mode shares lives in one array
  owned by the group (its count from :meth:`~tsjit.ts.group.PipelineGroup.barrier_arrays`: the
  collapsed side's count, or for a FusedMerge full barrier the sum of the members' producer
  counts); the other kind is the member's own;
* **cursors** (:func:`cursor_owner`): a Merge / FusedMerge member's consumer *closing* (release)
  cursor is the group's (``state_src``); its opening (wait) cursor and every producer cursor are
  the member's own;
* **fan-out** (:func:`member_actions`): a collapsed operation (``group.release()`` ...) was expanded
  into one step per member (``Step.fanout_index``).  The first step performs the operation's
  barrier actions; a later one keeps only its member's own cursor moves (a Fork commit advances
  every member's producer cursor, a FusedMerge wait every member's waiting cursor); after the
  shared closing cursor moved, a member's opening cursor follows it (``Advance`` by 0 with
  ``open_follows``).  A Fork's
  secondary members' acquires only wait their own empty barrier: the primary's arms the shared
  full barrier.

Non-members pass through unchanged: ``barrier_array(r, kind) == (r, ring(r).count(kind))``.
"""
from __future__ import annotations

from tsjit.ts.group import PipelineGroupMode, group_of
from tsjit.ts.protocol import Advance, ArmTx, Arrive, BarrierKind, CommitUmma, Cursor, Probe, WaitParity, ring

__all__ = ["barrier_array", "cursor_owner", "member_actions", "barrier_owners"]


def barrier_array(resource, kind: BarrierKind) -> tuple[object, int]:
    """``(owner, count)`` of the ``kind`` barriers ``resource``'s operations use: ``owner`` (the
    resource, or its group for a shared kind) identifies the array; ``count`` is the arrivals that
    complete one phase."""
    group = group_of(resource)
    if group is None:
        return resource, ring(resource.pipeline_config, resource).count(kind)
    _, array = group.array(resource, kind)
    return array.owner, array.count


def cursor_owner(resource, producer: bool, cursor: Cursor = Cursor.Close) -> object:
    """Whose ``cursor`` (open: acquire / wait, close: commit / release) a ``resource`` operation of this
    side moves: a Merge / FusedMerge member's consumer *closing* cursor is the group's (``state_src``:
    one release per stage); every other cursor is the member's own (a member's wait opens its own
    barrier, and ``advance_on_wait`` advances each member's waiting cursor once)."""
    group = group_of(resource)
    if group is not None and not producer and cursor is Cursor.Close and group.shares_consumer_state:
        return group
    return resource


_SIGNALS = (Probe, WaitParity, ArmTx, Arrive, CommitUmma)


def member_actions(step, actions: tuple) -> tuple:
    """The actions ``step`` performs (module docstring); ``actions`` are its config's actions."""
    resource = step.resource
    group = group_of(resource)
    if group is None:
        return actions
    producer = step.stage.is_producer
    if step.fanout_index:                        # a later step of a collapsed operation's fan-out
        out = []
        for action in actions:
            if isinstance(action, _SIGNALS):
                continue                         # the first step of the fan-out signalled
            if isinstance(action, Advance) and cursor_owner(resource, producer, action.cursor) is not resource:
                if action.open_follows:          # the shared cursor moved: this member's opening one follows
                    out.append(Advance(action.cursor, 0, open_follows=True))
                continue
            out.append(action)
        return tuple(out)
    if group.mode is PipelineGroupMode.Fork and producer and resource is not group.primary:
        return tuple(a for a in actions if not isinstance(a, ArmTx))
    return actions


def barrier_owners(resources) -> list:
    """The owners of barrier storage among ``resources``: each ungrouped pipelined resource, and each
    member's group once (in first-appearance order)."""
    out: list = []
    for resource in resources:
        owner = group_of(resource) or resource
        if all(o is not owner for o in out):
            out.append(owner)
    return out
