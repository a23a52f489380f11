"""Pipeline groups: several pipelined resources that share the barriers of one side.

A :class:`PipelineGroup` ``(name, members, mode)`` is a barrier-only resource.  Its members are
ordinary pipelined resources (each with its own :class:`~tsjit.ts.pipeline.PipelineConfig`, data
and work methods); the group decides which of their mbarriers are shared:

``Merge``       N producers -> one consumer.  Per-member full barriers, one shared empty barrier:
                the consumer waits on each member (``ab.smem_a.wait()``, ``ab.smem_b.wait()``) and
                releases once, ``ab.release()``, which frees the stage for every producer.  The
                members' consumer cursor is the group's (``state_src``).
``Fork``        one producer -> N consumers.  One shared full barrier, per-member empty barriers:
                the producer acquires every member (the first member's acquire arms the shared
                full barrier with the stage's bytes, the others only wait their own empty
                barrier) and commits once, ``ab.commit()``; each consumer waits and releases its
                own member.
``FusedMerge``  N producers -> one consumer with a shared full *and* a shared empty barrier:
                each member's producer arms / arrives on the shared full barrier with its own
                bytes and arrivals (per-member views), the consumer waits once, ``ab.wait()``,
                and releases once, ``ab.release()``.

Barriers: S stages per array; Merge and Fork use N + 1 arrays ((N + 1) x S mbarriers, 8 bytes
each), FusedMerge 2 arrays, where N separate rings use 2 x N x S (:attr:`PipelineGroup.barriers_saved`).
``SmemAllocator.add_pipeline_group`` reserves them; the arrays are laid out in
:meth:`PipelineGroup.barrier_arrays` order.

Validation (rule PG, ``VerificationError(check="PG")`` at construction, naming the group, the
members and the field, and saying what to change):

* at least two distinct pipelined members, each in at most one group;
* kind homogeneity: the collapsed side (the consumer side of Merge / FusedMerge, the producer side
  of Fork) has one kind (threads, TMA, UMMA, CLC); the other side may mix; members that differ on
  both sides cannot share a barrier; a mode contradicting the members' topology is named with the
  mode that fits;
* config merging: equal ``num_stages``, ``advance_on_wait``, ``advance_on_acquire``, interleave
  strides, ``cta_layout_vmnk``; among the TMA members ``mcast_mode_mn`` and
  ``num_bytes_per_warp_per_cta`` (they mean nothing to a thread producer); the collapsed
  side's group sizes and signalling equal; Merge sums the bytes (:attr:`PipelineGroup.num_bytes`),
  Fork requires equal bytes (one copy fills the stage every consumer reads).

Schedule rules (:mod:`tsjit.ts.group_schedule`): a grouped member is passed to a ``@schedule`` as
``group.member`` (a :class:`GroupMember`; the bare member is rejected, rule S8); the collapsed
operation is only the group's, and the group accepts nothing else.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass

from tsjit.errors import UsageTypeError, VerificationError
from tsjit.ts.diagnostics import definition_location
from tsjit.ts.pipeline import PipelineConfig
from tsjit.ts.protocol import BarrierKind, SideKind, ring, row
from tsjit.ts.memory_resource import MemoryResource
from tsjit.ts.schedule import format_location

__all__ = ["PipelineGroupMode", "PipelineGroup", "GroupMember", "group_of", "BarrierArray"]

FULL, EMPTY = BarrierKind.Full, BarrierKind.Empty


class PipelineGroupMode(enum.Enum):
    """Which side of a :class:`PipelineGroup` shares its barriers (see the module docstring)."""

    Merge = "Merge"
    Fork = "Fork"
    FusedMerge = "FusedMerge"

    @property
    def collapsed_side(self) -> str:
        """``"consumer"`` (Merge, FusedMerge: one consumer) or ``"producer"`` (Fork: one producer)."""
        return "producer" if self is PipelineGroupMode.Fork else "consumer"

    @property
    def shared_barriers(self) -> frozenset:
        """The barrier kinds the members share."""
        return {PipelineGroupMode.Merge: frozenset({EMPTY}), PipelineGroupMode.Fork: frozenset({FULL}),
                PipelineGroupMode.FusedMerge: frozenset({FULL, EMPTY})}[self]

    @property
    def group_operations(self) -> tuple:
        """The operations a schedule calls on the group itself (the collapsed ones)."""
        return {PipelineGroupMode.Merge: ("release",), PipelineGroupMode.Fork: ("commit",),
                PipelineGroupMode.FusedMerge: ("try_wait", "wait", "release")}[self]

    @property
    def shares_consumer_state(self) -> bool:
        """The members' consumer cursor is the group's (Merge, FusedMerge)."""
        return self is not PipelineGroupMode.Fork


@dataclass(frozen=True)
class BarrierArray:
    """One array of ``stages`` mbarriers of a group: ``owner`` is the member whose own barriers
    they are, or the group for a shared array; ``count`` the arrivals completing one phase."""

    owner: object
    kind: BarrierKind
    stages: int
    count: int

    @property
    def name(self) -> str:
        return f"{self.owner.name}.{self.kind.value}"


def _kind_name(kind: SideKind) -> str:
    return {SideKind.Threads: "thread", SideKind.Tma: "TMA", SideKind.Umma: "UMMA", SideKind.Clc: "CLC"}[kind]


class GroupMember:
    """``group.member``: how a grouped member is passed to a ``@schedule`` (rule S8).

    Reading another attribute reads the member's (``ab.smem_a.pipeline_config``)."""

    __slots__ = ("group", "member")

    def __init__(self, group: "PipelineGroup", member: MemoryResource):
        object.__setattr__(self, "group", group)
        object.__setattr__(self, "member", member)

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.member, name)

    def __setattr__(self, name, value):
        raise UsageTypeError(f"{self.group.name}.{self.member.name} is a reference to a grouped member; set "
                             f"{name!r} on the member resource itself")

    def __repr__(self) -> str:
        return f"<{self.group.name}.{self.member.name}: member of pipeline group {self.group.name!r}>"


def group_of(resource) -> "PipelineGroup | None":
    """The :class:`PipelineGroup` ``resource`` is a member of, or None."""
    return getattr(resource, "pipeline_group", None)


class PipelineGroup(MemoryResource):
    """A barrier-only resource sharing one side's mbarriers among ``members`` (module docstring).

    Args:
        name: the group's name (errors, printouts, the barrier report).
        members: two or more pipelined resources (a list or tuple), each in no other group.
        mode: a :class:`PipelineGroupMode`.

    Attributes:
        members: the member resources, in the given order (the first is a Fork's primary member:
            its acquire arms the shared full barrier).
        mode: the mode.
        num_stages: the members' common ring depth S.
        num_bytes: Merge / FusedMerge: the sum of the members' transaction bytes per stage;
            Fork: the common bytes of one stage.

    A member is reached as ``group.<member name>`` or ``group.member(name)`` (a
    :class:`GroupMember`).

    Raises:
        UsageTypeError: ``members`` is not a list of resources, or ``mode`` not a PipelineGroupMode.
        VerificationError (PG): a rule of the module docstring, naming the group, the members and the
            field, and what to change.
    """

    is_barrier = True

    def __init__(self, name: str, members, mode: PipelineGroupMode):
        MemoryResource.__init__(self, name=name)
        where = format_location(definition_location())   # a kernel-body call: the kernel line
        if not isinstance(name, str) or not name:
            raise UsageTypeError(f"PipelineGroup name must be a non-empty str, got {name!r} ({where})")
        if isinstance(members, MemoryResource) or not isinstance(members, (list, tuple)):
            raise UsageTypeError(f"pipeline group {name!r}: members must be a list of pipelined resources, got "
                                 f"{type(members).__name__} ({where})")
        if not isinstance(mode, PipelineGroupMode):
            raise UsageTypeError(f"pipeline group {name!r}: mode must be a PipelineGroupMode (Merge, Fork or "
                                 f"FusedMerge), got {mode!r} ({where})")
        self.members = tuple(members)
        self.mode = mode
        self._where = where
        _check_members(self)
        _check_kinds(self)
        _check_configs(self)
        for member in self.members:
            object.__setattr__(member, "pipeline_group", self)

    # -- members ------------------------------------------------------------------------------------
    def member(self, key) -> GroupMember:
        """The :class:`GroupMember` of a member given by name or as the resource."""
        for m in self.members:
            if m is key or m.name == key:
                return GroupMember(self, m)
        raise UsageTypeError(f"pipeline group {self.name!r} has no member {getattr(key, 'name', key)!r}; its "
                             f"members are {', '.join(repr(m.name) for m in self.members)}")

    def __getattr__(self, name: str):
        if name.startswith("_") or name in ("members", "mode"):
            raise AttributeError(name)
        for m in self.__dict__.get("members", ()):
            if m.name == name:
                return GroupMember(self, m)
        members = ", ".join(repr(m.name) for m in self.__dict__.get("members", ()))
        raise AttributeError(f"pipeline group {self.__dict__.get('name')!r} has no member or attribute {name!r}; "
                             f"its members are {members}")

    def index(self, member) -> int:
        """Position of ``member`` in :attr:`members`."""
        return next(i for i, m in enumerate(self.members) if m is member)

    @property
    def primary(self) -> MemoryResource:
        """The first member (a Fork's acquire of it arms the shared full barrier)."""
        return self.members[0]

    # -- merged configuration -------------------------------------------------------------------------
    @property
    def num_stages(self) -> int:
        return self.members[0].pipeline_config.num_stages

    @property
    def num_bytes(self) -> int:
        byte_counts = [m.pipeline_config.num_bytes for m in self.members]
        return byte_counts[0] if self.mode is PipelineGroupMode.Fork else sum(byte_counts)

    @property
    def shares_consumer_state(self) -> bool:
        return self.mode.shares_consumer_state

    # -- barriers -----------------------------------------------------------------------------------------
    def barrier_arrays(self) -> tuple:
        """The group's :class:`BarrierArray` s in shared-memory order: the full arrays, then the empty ones
        (a shared array once, owned by the group; else one per member, in member order)."""
        out = []
        for kind in (FULL, EMPTY):
            rings = [ring(m.pipeline_config, m) for m in self.members]
            if kind in self.mode.shared_barriers:
                if kind is FULL and self.mode is PipelineGroupMode.FusedMerge:
                    count = sum(r.full_count for r in rings)      # every member's producer arrives
                else:
                    count = rings[0].count(kind)                 # equal on the collapsed side
                out.append(BarrierArray(self, kind, self.num_stages, count))
            else:
                out += [BarrierArray(m, kind, self.num_stages, r.count(kind)) for m, r in zip(self.members, rings)]
        return tuple(out)

    def array(self, member, kind: BarrierKind) -> tuple[int, BarrierArray]:
        """``(position, array)`` of the ``kind`` barriers ``member`` uses."""
        owner = self if kind in self.mode.shared_barriers else member
        for position, array in enumerate(self.barrier_arrays()):
            if array.owner is owner and array.kind is kind:
                return position, array
        raise UsageTypeError(f"{getattr(member, 'name', member)!r} is not a member of pipeline group {self.name!r}")

    @property
    def num_barriers(self) -> int:
        """mbarriers of the group: (N + 1) x S for Merge / Fork, 2 x S for FusedMerge."""
        return len(self.barrier_arrays()) * self.num_stages

    @property
    def barrier_bytes(self) -> int:
        """Shared memory of the group's barriers: 8 bytes per mbarrier."""
        return 8 * self.num_barriers

    @property
    def separate_ring_barriers(self) -> int:
        """mbarriers the members would use as separate rings: 2 x N x S."""
        return 2 * len(self.members) * self.num_stages

    @property
    def barriers_saved(self) -> int:
        """mbarriers the group saves against separate rings."""
        return self.separate_ring_barriers - self.num_barriers

    def __repr__(self) -> str:
        members = ", ".join(m.name for m in self.__dict__.get("members", ()))
        return f"PipelineGroup(name={self.name!r}, mode={self.mode.name}, members=[{members}])"


# -- validation (rule PG) ---------------------------------------------------------------------------------
def _fail(group: PipelineGroup, text: str, fix: str) -> VerificationError:
    return VerificationError(f"pipeline group {group.name!r} ({group.mode.name}, {group._where}): {text}\n  {fix}",
                             check="PG")


def _check_members(group: PipelineGroup) -> None:
    if len(group.members) < 2:
        raise _fail(group, f"has {len(group.members)} member(s); a group shares barriers among at least two "
                           f"pipelined resources.", "Give it two or more members, or use the resource's own ring.")
    for i, m in enumerate(group.members):
        if not isinstance(m, MemoryResource):
            raise UsageTypeError(f"pipeline group {group.name!r}: members[{i}] is a {type(m).__name__}, not a "
                                 f"MemoryResource ({group._where})")
        if isinstance(m, PipelineGroup) or m.is_work_queue:
            raise _fail(group, f"member {m.name!r} is a {type(m).__name__}; members are pipelined data resources.",
                        f"Remove {m.name!r} from the members.")
        if not isinstance(m.pipeline_config, PipelineConfig):
            raise _fail(group, f"member {m.name!r} has no pipeline_config; a group shares pipeline barriers.",
                        f"Give {m.name!r} a PipelineConfig (a create_*_pipeline_cfg factory), or remove it.")
        if any(o is m for o in group.members[:i]):
            raise _fail(group, f"lists member {m.name!r} twice.", f"List {m.name!r} once.")
        if any(o.name == m.name for o in group.members[:i]):
            raise _fail(group, f"has two members named {m.name!r}; group.<name> must find one.",
                        "Give every member its own name.")
        other = group_of(m)
        if other is not None:
            raise _fail(group, f"member {m.name!r} already belongs to pipeline group {other.name!r}.",
                        f"A resource's barriers belong to one group: remove {m.name!r} from one of them.")


def _check_kinds(group: PipelineGroup) -> None:
    """Kind homogeneity on the collapsed side; the mode must fit the members' topology."""
    mode = group.mode
    kinds = {side: [getattr(row(m.pipeline_config), side) for m in group.members] for side in ("producer", "consumer")}
    listing = {side: ", ".join(f"{m.name!r}: {_kind_name(k)}" for m, k in zip(group.members, kinds[side]))
               for side in kinds}
    mixed = {side for side, ks in kinds.items() if len(set(ks)) > 1}
    if mixed == {"producer", "consumer"}:
        raise _fail(group, f"its members differ in both producer kind ({listing['producer']}) and consumer kind "
                           f"({listing['consumer']}), so neither side can share barriers.",
                    "Group members with one common producer kind (Fork) or one common consumer kind (Merge).")
    side = mode.collapsed_side
    if side in mixed:
        fits = "Merge" if side == "producer" else "Fork"
        raise _fail(group, f"a {mode.name} group shares its {side} side, but the members' {side} kinds differ "
                           f"({listing[side]}); one shared barrier cannot be signalled by both kinds.",
                    f"The members have one {'consumer' if side == 'producer' else 'producer'} kind: use "
                    f"PipelineGroupMode.{fits}, or give the members one {side} kind.")


#: fields every member must agree on: (attribute, what it is)
_COMMON_FIELDS = (("num_stages", "ring depth"), ("advance_on_wait", "consumer advance point"),
                  ("advance_on_acquire", "producer advance point"), ("interleave_strides", "interleave strides"),
                  ("cta_layout_vmnk", "cluster layout"))
#: fields the members with a TMA producer must agree on (they mean nothing to the others)
_TMA_FIELDS = (("mcast_mode_mn", "TMA multicast mode"),
               ("num_bytes_per_warp_per_cta", "per-warp-per-CTA transaction bytes"))


def _disagreement(group, values, field: str, what: str, members=None):
    members = group.members if members is None else members
    if len({repr(v) for v in values}) <= 1:
        return
    shown = ", ".join(f"{m.name!r}: {v!r}" for m, v in zip(members, values))
    raise _fail(group, f"its members disagree on {field} ({what}): {shown}; shared barriers need one value.",
                f"Give every member the same {field} (e.g. {values[0]!r}).")


def _check_configs(group: PipelineGroup) -> None:
    configs = [m.pipeline_config for m in group.members]
    for field, what in _COMMON_FIELDS:
        _disagreement(group, [getattr(c, field) for c in configs], field, what)
    tma = [m for m in group.members if row(m.pipeline_config).producer_arms_tx]
    for field, what in _TMA_FIELDS:
        _disagreement(group, [getattr(m.pipeline_config, field) for m in tma], field, what, tma)
    if group.mode is PipelineGroupMode.Fork:
        _disagreement(group, [c.producer_group.size for c in configs], "producer_group size",
                      "arrivals on the shared full barrier")
        _disagreement(group, [c.producer_signaling_threads for c in configs], "producer_signaling_threads",
                      "who signals the shared full barrier")
        _disagreement(group, [c.num_bytes for c in configs], "num_bytes",
                      "a Fork's one copy fills the stage every consumer reads")
    else:
        _disagreement(group, [c.consumer_group.size for c in configs], "consumer_group size",
                      "arrivals on the shared empty barrier")
        _disagreement(group, [c.consumer_signaling_threads for c in configs], "consumer_signaling_threads",
                      "who releases the shared empty barrier")
