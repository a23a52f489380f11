"""PipelineGroup host API: members, modes, merged config, barrier arrays and their accounting."""
import pytest

from verify_schedules import Ring, async_config, tma_config

from tsjit.errors import UsageKeyError, UsageTypeError, VerificationError
from tsjit.ts import GroupMember, PipelineGroup, PipelineGroupMode, SmemAllocator
from tsjit.ts.protocol import BarrierKind

M = PipelineGroupMode


def rings(stages=4, n=2, kinds=("async", "tma", "tma")):
    out = []
    for i in range(n):
        cfg = async_config(stages) if kinds[i] == "async" else tma_config(stages, 4096 * (i + 1))
        out.append(Ring(name=f"m{i}", pipeline_config=cfg))
    return out


@pytest.mark.parametrize("mode,arrays", [(M.Merge, 3), (M.Fork, 3), (M.FusedMerge, 2)])
def test_barrier_count_is_n_plus_one_times_stages(mode, arrays):
    members = rings(kinds=("tma", "tma")) if mode is M.Fork else rings()
    if mode is M.Fork:
        members[1].pipeline_config = members[0].pipeline_config
    group = PipelineGroup("g", members, mode)
    assert group.num_barriers == arrays * 4
    assert group.barrier_bytes == 8 * arrays * 4
    assert group.separate_ring_barriers == 16
    assert group.barriers_saved == 16 - arrays * 4


def test_three_member_merge_uses_four_arrays():
    group = PipelineGroup("g", rings(n=3), M.Merge)
    assert group.num_barriers == (3 + 1) * 4 and group.barriers_saved == 24 - 16


def test_merge_arrays_are_member_fulls_then_shared_empty_with_counts():
    a, b = rings()
    group = PipelineGroup("g", [a, b], M.Merge)
    arrays = group.barrier_arrays()
    assert [(x.owner, x.kind) for x in arrays] == [(a, BarrierKind.Full), (b, BarrierKind.Full),
                                                  (group, BarrierKind.Empty)]
    assert [x.count for x in arrays] == [32, 1, 128]     # 32 producer threads, 1 TMA arming lane, 128 consumers


def test_fused_merge_full_counts_every_members_producer():
    a, b = rings()
    group = PipelineGroup("g", [a, b], M.FusedMerge)
    full, empty = group.barrier_arrays()
    assert (full.owner, full.count, empty.owner, empty.count) == (group, 33, group, 128)


def test_merge_sums_bytes_fork_keeps_them():
    a, b = rings(kinds=("tma", "tma"))
    assert PipelineGroup("g", [a, b], M.Merge).num_bytes == 4096 + 8192
    c, d = rings(kinds=("tma", "tma"))
    d.pipeline_config = c.pipeline_config
    assert PipelineGroup("f", [c, d], M.Fork).num_bytes == 4096


def test_member_reference_and_state_src():
    a, b = rings()
    group = PipelineGroup("g", [a, b], M.Merge)
    ref = group.m1
    assert isinstance(ref, GroupMember) and ref.member is b and ref.group is group
    assert ref.pipeline_config is b.pipeline_config
    assert group.member("m0").member is a and group.member(b).member is b
    assert a.state_src is group and b.pipeline_group is group
    with pytest.raises(AttributeError, match="'m0', 'm1'"):
        group.m2


def test_fork_members_keep_their_own_consumer_state():
    a, b = rings(kinds=("tma", "tma"))
    b.pipeline_config = a.pipeline_config
    group = PipelineGroup("f", [a, b], M.Fork)
    assert a.state_src is a and not group.shares_consumer_state


def test_member_of_two_groups_is_rejected():
    a, b = rings()
    PipelineGroup("g", [a, b], M.Merge)
    c = Ring(name="c", pipeline_config=async_config(4))
    with pytest.raises(VerificationError, match="'a'|already belongs to pipeline group 'g'") as err:
        PipelineGroup("h", [a, c], M.Merge)
    assert err.value.check == "PG" and "'h'" in str(err.value)


@pytest.mark.parametrize("members,match", [
    (lambda: [Ring(name="a", pipeline_config=async_config(4))], "at least two"),
    (lambda: [Ring(name="a", pipeline_config=async_config(4)), Ring(name="b")], "no pipeline_config"),
    (lambda: [Ring(name="a", pipeline_config=async_config(4)), Ring(name="a", pipeline_config=async_config(4))],
     "two members named 'a'"),
])
def test_member_list_rules(members, match):
    with pytest.raises(VerificationError, match=match):
        PipelineGroup("g", members(), M.Merge)


def test_same_resource_twice_is_rejected():
    a = Ring(name="a", pipeline_config=async_config(4))
    with pytest.raises(VerificationError, match="twice"):
        PipelineGroup("g", [a, a], M.Merge)


@pytest.mark.parametrize("field,value", [("advance_on_wait", True), ("interleave_stride", 2),
                                         ("cta_layout_vmnk", (1, 2, 1, 1))])
def test_config_fields_must_agree(field, value):
    a = Ring(name="a", pipeline_config=async_config(4))
    b = Ring(name="b", pipeline_config=async_config(4, **{field: value}))
    with pytest.raises(VerificationError) as err:
        PipelineGroup("g", [a, b], M.Merge)
    assert err.value.check == "PG" and "'a'" in str(err.value) and "'b'" in str(err.value)


def test_tma_only_fields_ignore_thread_members():
    a = Ring(name="a", pipeline_config=async_config(4))             # mcast_mode_mn default (1, 1)
    b = Ring(name="b", pipeline_config=tma_config(4, 4096))         # mcast_mode_mn None
    PipelineGroup("g", [a, b], M.Merge)
    c = Ring(name="c", pipeline_config=tma_config(4, 4096, num_bytes_per_warp_per_cta=4096))
    d = Ring(name="d", pipeline_config=tma_config(4, 4096))
    with pytest.raises(VerificationError, match="num_bytes_per_warp_per_cta"):
        PipelineGroup("h", [c, d], M.Merge)


def test_fork_producer_sizes_must_agree():
    a = Ring(name="a", pipeline_config=tma_config(4, 4096, producers=1))
    b = Ring(name="b", pipeline_config=tma_config(4, 4096, producers=2))
    with pytest.raises(VerificationError, match="producer_group size"):
        PipelineGroup("f", [a, b], M.Fork)


def test_argument_types():
    a, b = rings()
    with pytest.raises(UsageTypeError, match="PipelineGroupMode"):
        PipelineGroup("g", [a, b], "Merge")
    with pytest.raises(UsageTypeError, match="list"):
        PipelineGroup("g", a, M.Merge)


def test_allocator_reserves_group_barriers_once_instead_of_member_rings():
    a, b = rings()
    group = PipelineGroup("g", [a, b], M.Merge)
    allocator = SmemAllocator()
    assert allocator.add_barriers(a) == 96
    allocator.add_resource(b)
    assert allocator.add_pipeline_group(group) == 96
    allocator.compute_layout()
    assert allocator.barrier_bytes == 96 and allocator.has_barriers(a) and allocator.has_barriers(group)
    base = allocator.barrier_offset(group)
    assert allocator.barrier_offsets(a) == (base, base + 64)
    assert allocator.barrier_offsets(b) == (base + 32, base + 64)
    with pytest.raises(UsageKeyError, match="barrier_offsets"):
        allocator.barrier_offset(a)
    assert "g.barriers" in allocator.usage_report()


def test_fork_member_offsets_share_the_full_array():
    a, b = rings(kinds=("tma", "tma"))
    b.pipeline_config = a.pipeline_config
    group = PipelineGroup("f", [a, b], M.Fork)
    allocator = SmemAllocator()
    allocator.add_pipeline_group(group)
    allocator.compute_layout()
    assert allocator.barrier_offsets(a) == (0, 32) and allocator.barrier_offsets(b) == (0, 64)


def test_add_pipeline_group_takes_a_group():
    with pytest.raises(UsageTypeError, match="PipelineGroup"):
        SmemAllocator().add_pipeline_group(Ring(name="a", pipeline_config=async_config(4)))
