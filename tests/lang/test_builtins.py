"""Device-language builtins: thread hierarchy, barriers, warp shuffles and votes,
atomics and ``device_print``; each checked in the IR and in the sm_90a PTX."""
import re

import pytest

import tsjit
from tsjit import BFloat16, Boolean, Float16, Float32, Float64, Int8, Int16, Int32, Int64, Uint32, Uint64

from frontend.compiling import build, calls, instructions, kernel_ir, ptx_ops


def name(v):
    return getattr(v, "name", str(v))


# -- thread hierarchy --------------------------------------------------------------------------
@tsjit.kernel
def hierarchy(out):
    tx, ty, tz = tsjit.thread_idx()
    bx, by, bz = tsjit.block_idx()
    dims = tsjit.block_dim()
    grid = tsjit.grid_dim()
    out[0] = tx + ty + tz
    out[1] = bx + by + bz
    out[2] = dims.x * dims.y * dims.z
    out[3] = grid.x + grid.y + grid.z
    out[4] = tsjit.warp_idx()
    out[5] = tsjit.lane_idx()


@pytest.fixture(scope="module")
def hierarchy_compiled():
    return build(hierarchy, tsjit.spec(8, Int32))


@pytest.mark.parametrize("register", ["tid", "ctaid", "ntid", "nctaid"])
def test_index_triples_read_their_special_registers(hierarchy_compiled, register):
    for axis in "xyz":
        assert f"llvm.nvvm.read.ptx.sreg.{register}.{axis}" in calls(hierarchy_compiled.llir)
        assert f"%{register}.{axis}" in hierarchy_compiled.ptx


def test_lane_idx_reads_laneid(hierarchy_compiled):
    assert "%laneid" in hierarchy_compiled.ptx


def test_warp_idx_is_the_linear_thread_index_over_32_made_uniform(hierarchy_compiled):
    body = kernel_ir(hierarchy_compiled.llir)
    assert re.search(r"ashr i32 %\S+, 5", body)
    assert "llvm.nvvm.shfl.sync.idx.i32" in calls(hierarchy_compiled.llir)
    assert ptx_ops(hierarchy_compiled.ptx, "shfl.sync") == ["shfl.sync.idx.b32"]


@tsjit.kernel
def dim3_attributes(out):
    out[tsjit.thread_idx().x] = tsjit.block_idx().y * tsjit.grid_dim().z + tsjit.block_dim().x


def test_dim3_attributes():
    compiled = build(dim3_attributes, tsjit.spec(8, Int32))
    for register in ("%tid.x", "%ctaid.y", "%nctaid.z", "%ntid.x"):
        assert register in compiled.ptx


# -- barriers ----------------------------------------------------------------------------------
@tsjit.kernel
def barriers(out, BARRIER: tsjit.Constexpr[int]):
    tsjit.syncthreads()
    tsjit.named_barrier_sync(BARRIER, 64)
    tsjit.named_barrier_arrive(BARRIER + 1, 128)
    tsjit.syncwarp()
    tsjit.syncwarp(0x0000FFFF)
    tsjit.threadfence()
    out[0] = 1


def test_barriers_emit_bar_instructions():
    compiled = build(barriers, tsjit.spec(1, Int32), 3)
    ptx = compiled.ptx
    assert re.search(r"\bbar\.sync\s+0;", ptx) or re.search(r"\bbarrier\.sync\.aligned\s+0;", ptx)
    assert re.search(r"\bbar(rier)?\.sync(\.aligned)?\s+3, 64;", ptx)
    assert re.search(r"\bbar(rier)?\.arrive(\.aligned)?\s+4, 128;", ptx)
    assert re.search(r"\bbar\.warp\.sync\s+-1;", ptx) and re.search(r"\bbar\.warp\.sync\s+65535;", ptx)
    assert "fence.sc.gpu" in ptx and "fence.sc.sys" not in ptx


@tsjit.kernel
def release_acquire_fence(out):
    tsjit.threadfence("acq_rel")
    out[0] = 1


@tsjit.kernel
def unknown_fence(out):
    tsjit.threadfence("release")
    out[0] = 1


def test_threadfence_acq_rel_and_a_bad_order():
    ptx = build(release_acquire_fence, tsjit.spec(1, Int32)).ptx
    assert "fence.acq_rel.gpu" in ptx and "fence.sc" not in ptx
    with pytest.raises(tsjit.CompilationError, match="order must be 'sc' or 'acq_rel'"):
        build(unknown_fence, tsjit.spec(1, Int32))


@tsjit.kernel
def dynamic_named_barrier(out, barrier, threads):
    tsjit.named_barrier_sync(barrier, threads)
    out[0] = 1


def test_named_barrier_with_run_time_operands():
    compiled = build(dynamic_named_barrier, tsjit.spec(1, Int32), 1, 64)
    assert "llvm.nvvm.barrier.cta.sync.aligned.count" in calls(compiled.llir)


# -- shuffles ----------------------------------------------------------------------------------
@tsjit.kernel
def all_shuffles(x, out):
    lane = tsjit.lane_idx()
    v = x[lane]
    a = tsjit.shuffle(v, 0)
    b = tsjit.shuffle_down(v, 1)
    c = tsjit.shuffle_up(v, 2)
    d = tsjit.shuffle_xor(v, 16, width=16)
    out[lane] = a + b + c + d


SHUFFLE_KINDS = ["shfl.sync.idx", "shfl.sync.down", "shfl.sync.up", "shfl.sync.bfly"]


@pytest.mark.parametrize("dtype, per_shuffle", [
    (Int32, 1), (Uint32, 1), (Float32, 1), (Int8, 1), (Int16, 1), (Float16, 1), (BFloat16, 1),
    (Int64, 2), (Uint64, 2), (Float64, 2),
], ids=name)
def test_every_shuffle_kind_for_every_width(dtype, per_shuffle):
    compiled = build(all_shuffles, tsjit.spec(32, dtype), tsjit.spec(32, dtype))
    ops = ptx_ops(compiled.ptx, "shfl.sync")
    for kind in SHUFFLE_KINDS:
        assert sum(op.startswith(kind) for op in ops) == per_shuffle, (kind, ops)
    suffix = "f32" if dtype is Float32 else "i32"
    assert calls(compiled.llir).count(f"llvm.nvvm.shfl.sync.idx.{suffix}") == per_shuffle


@tsjit.kernel
def shuffle_by_a_float_offset(x, out):
    i = tsjit.thread_idx().x
    out[i] = tsjit.shuffle_down(x[i], x.shape[0] / 64)


def test_a_float_shuffle_offset_is_refused_like_a_float_index():
    with pytest.raises(tsjit.CompilationError, match=r"shuffle's lane / offset operand must be an integer, "
                                                     r"got Float32.*use // for integer division"):
        build(shuffle_by_a_float_offset, tsjit.spec(32, Float32), tsjit.spec(32, Float32))


def test_shuffle_clamp_and_width_operands():
    compiled = build(all_shuffles, tsjit.spec(32, Int32), tsjit.spec(32, Int32))
    shuffles = [line for line in instructions(compiled.llir, "call") if "shfl.sync" in line]
    assert shuffles[0].endswith("i32 0, i32 31)")  # idx: source lane 0, clamp 0x1f
    assert shuffles[1].endswith("i32 1, i32 31)")  # down
    assert shuffles[2].endswith("i32 2, i32 0)")  # up: clamp 0
    assert shuffles[3].endswith("i32 16, i32 4127)")  # bfly, width 16: (32 - 16) << 8 | 0x1f


def test_64_bit_shuffle_moves_both_halves():
    compiled = build(all_shuffles, tsjit.spec(32, Float64), tsjit.spec(32, Float64))
    body = kernel_ir(compiled.llir)
    assert "bitcast double" in body and re.search(r"lshr i64 %\S+, 32|ashr i64 %\S+, 32", body)
    assert re.search(r"shl i64 %\S+, 32", body)


def test_16_bit_float_shuffles_travel_as_bits():
    compiled = build(all_shuffles, tsjit.spec(32, BFloat16), tsjit.spec(32, BFloat16))
    body = kernel_ir(compiled.llir)
    assert body.count("bitcast bfloat") == 4 and body.count("to bfloat") >= 4


# -- votes -------------------------------------------------------------------------------------
@tsjit.kernel
def votes(x, out, ballots):
    lane = tsjit.lane_idx()
    v = x[lane]
    if tsjit.vote_all(v > 0.0):
        out[0] = True
    out[1] = tsjit.vote_any(v < 0.0)
    ballots[lane] = tsjit.vote_ballot(v == 0.0, mask=0xFFFF)


def test_votes():
    compiled = build(votes, tsjit.spec(32, Float32), tsjit.spec(2, Boolean), tsjit.spec(32, Uint32))
    assert ptx_ops(compiled.ptx, "vote.sync") == ["vote.sync.all.pred", "vote.sync.any.pred",
                                                  "vote.sync.ballot.b32"]
    ballot = [c for c in instructions(compiled.llir, "call") if "vote.ballot" in c][0]
    assert "i32 65535" in ballot


# -- atomics -----------------------------------------------------------------------------------
@tsjit.kernel
def global_atomics(ints, uints, floats, doubles, longs, old):
    tx = tsjit.thread_idx().x
    old[0] = tsjit.atomic_add(ints.ptr + tx, 1)
    old[1] = tsjit.atomic_max(tsjit.address_of(ints, 2), tx)
    old[2] = tsjit.atomic_min(ints.ptr, -tx)
    old[3] = tsjit.atomic_cas(ints.ptr + 3, 0, tx)
    old[4] = Int32(tsjit.atomic_max(uints.ptr, 7))
    old[5] = Int32(tsjit.atomic_min(uints.ptr, 7))
    old[6] = Int32(tsjit.atomic_add(floats.ptr, 0.5))
    old[7] = Int32(tsjit.atomic_add(doubles.ptr, 0.5))
    old[8] = Int32(tsjit.atomic_add(longs.ptr, 1))
    old[9] = Int32(tsjit.atomic_cas(longs.ptr, 1, 2))


@pytest.fixture(scope="module")
def atomics_compiled():
    return build(global_atomics, tsjit.spec(4, Int32), tsjit.spec(4, Uint32), tsjit.spec(4, Float32),
                 tsjit.spec(4, Float64), tsjit.spec(4, Int64), tsjit.spec(16, Int32))


def test_atomic_rmw_operations_in_ir(atomics_compiled):
    rmw = [line.split()[3:5] for line in instructions(atomics_compiled.llir, "atomicrmw")]
    assert rmw == [["add", "ptr"], ["max", "ptr"], ["min", "ptr"], ["umax", "ptr"], ["umin", "ptr"],
                   ["fadd", "ptr"], ["fadd", "ptr"], ["add", "ptr"]]
    assert len(instructions(atomics_compiled.llir, "cmpxchg")) == 2


def test_atomics_on_global_memory_in_ptx(atomics_compiled):
    ops = ptx_ops(atomics_compiled.ptx, "atom")
    for expected in ("add.u32", "max.s32", "min.s32", "max.u32", "min.u32", "add.f32", "add.f64", "add.u64",
                     "cas.b32", "cas.b64"):
        assert any(op.startswith("atom") and ".global" in op and op.endswith(expected) for op in ops), expected


@tsjit.kernel
def shared_atomics(out):
    counters = tsjit.shared_array(Int32, 4)
    sums = tsjit.shared_array(Float32, 4)
    tx = tsjit.thread_idx().x
    tsjit.atomic_add(counters.ptr, 1)
    tsjit.atomic_max(counters.ptr + 1, tx)
    tsjit.atomic_min(counters.ptr + 3, tx)
    tsjit.atomic_cas(tsjit.address_of(counters, 2), 0, tx)
    tsjit.atomic_add(sums.ptr, 1.5)
    tsjit.syncthreads()
    out[tx] = Float32(counters[0]) + sums[0]


def test_atomics_on_shared_memory():
    compiled = build(shared_atomics, tsjit.spec(32, Float32))
    ops = ptx_ops(compiled.ptx, "atom")
    assert all(".shared" in op for op in ops) and len(ops) == 5
    assert {op.rsplit(".", 2)[-2] + "." + op.rsplit(".", 1)[-1] for op in ops} == {
        "add.u32", "max.s32", "min.s32", "cas.b32", "add.f32"}


# -- device_print and misc ---------------------------------------------------------------------
@tsjit.kernel
def printing(x, n):
    tx = tsjit.thread_idx().x
    if tx == 0:
        tsjit.device_print("x[0] = {}, n = {}, big = {}, flag = {}", x[0], n, tsjit.Int64(1) << 40, n > 3)
        tsjit.device_print("100% done")


def test_device_print_calls_vprintf_with_a_packed_argument_buffer():
    compiled = build(printing, tsjit.spec(4, Float16), 3)
    assert calls(compiled.llir) == ["llvm.nvvm.read.ptx.sreg.tid.x", "llvm.nvvm.read.ptx.sreg.tid.y",
                                    "llvm.nvvm.read.ptx.sreg.tid.z", "vprintf", "vprintf"]
    assert re.search(r'c"x\[0\] = %f, n = %d, big = %lld, flag = %u\\0a\\00"', compiled.llir, flags=re.I)
    assert re.search(r'c"100%% done\\0a\\00"', compiled.llir, flags=re.I)  # a literal % is escaped for printf
    assert instructions(compiled.llir, "fpext")  # a Float16 argument is passed as a double
    assert re.search(r"^\.extern \.func\s+\(\.param \.b32 func_retval0\) vprintf$", compiled.ptx, flags=re.M)
    assert len(re.findall(r"\bcall(\.uni)? \(retval0\), vprintf,", compiled.ptx)) == 2


def test_device_print_buffer_is_the_only_alloca():
    compiled = build(printing, tsjit.spec(4, Float32), 3)
    allocas = instructions(compiled.llir, "alloca")
    assert len(allocas) == 1 and "{double, i32, i64, i32}" in allocas[0]


@tsjit.kernel
def clocks_and_clusters(out):
    start = tsjit.clock64()
    out[0] = tsjit.cluster_ctarank() + tsjit.cluster_size()
    out[1] = Int32(tsjit.clock64() - start)


def test_clock64_and_cluster_registers():
    compiled = build(clocks_and_clusters, tsjit.spec(2, Int32))
    for register in ("%clock64", "%cluster_ctarank", "%cluster_nctarank"):
        assert register in compiled.ptx


# -- the array-and-indices form of address_of, atomics and cp_async (newcomer 7, items 3, 9, 10) ---
@tsjit.kernel
def address_mistakes(x, out, CASE: tsjit.Constexpr[int]):
    r = tsjit.thread_idx().x
    buf = tsjit.shared_array(Float32, (2, 64), align=128)
    if tsjit.const_expr(CASE == 0):
        tsjit.atomic_add(tsjit.address_of(out[r]), x[r])          # item 3: the element, not the array
    elif tsjit.const_expr(CASE == 1):
        tsjit.atomic_add(out, r, x[r])                             # item 9: the array and index, unpacked
    elif tsjit.const_expr(CASE == 2):
        tsjit.atomic_add(out[r], x[r])                             # the element as the pointer
    else:
        tsjit.cp_async(buf[1, r * 4], tsjit.address_of(x, r * 4), 16)   # item 10: dst is an element


@pytest.mark.parametrize("case, message", [
    (0, r"address_of takes the array and its indices: address_of\(out, i\); it got a Float32 value"),
    (1, r"atomic_add\(\) takes 2 positional arguments but 3 were given\. It is called as atomic_add\(ptr, value\), "
        r"where ptr is a pointer: ptr = tsjit\.address_of\(out, i\)"),
    (2, r"atomic_add needs a pointer: atomic_add\(ptr, value\) with ptr = tsjit\.address_of\(t, i\).*got a Float32"),
    (3, r"`dst` must be a shared-memory pointer, got a Float32 element.*tsjit\.address_of\(buf, s, e\)"),
])
def test_an_element_where_an_address_is_needed_names_address_of(case, message):
    with pytest.raises(tsjit.CompilationError, match=message):
        build(address_mistakes, tsjit.spec(256, Float32), tsjit.spec(64, Float32), case)


@pytest.mark.parametrize("call", [lambda: tsjit.thread_idx(), lambda: tsjit.shared_array(tsjit.Float32, (4,))])
def test_a_builtin_called_in_plain_python_says_to_call_it_in_a_kernel(call):
    with pytest.raises(tsjit.CompilationError) as err:
        call()
    message = str(err.value)
    assert "ran in plain Python" in message and "@tsjit.kernel function's body" in message, message


@tsjit.kernel
def flag_poll(flag, out):
    p = tsjit.address_of(flag, 0)
    seen = p.load(volatile=True)
    while seen == 0:
        seen = p.load(volatile=True)
    tsjit.address_of(out, 0).store(seen, volatile=True)


def test_volatile_loads_stay_in_the_polling_loop():
    """Pointer.load(volatile=True) is a relaxed atomic load (``ld.relaxed``): the wait loop reloads the flag
    every turn (a plain load there was hoisted out of the loop, so the loop never saw the flag change)."""
    compiled = build(flag_poll, tsjit.spec((4,), Int32), tsjit.spec((4,), Int32))
    loads = ptx_ops(compiled.ptx, "ld.relaxed")
    assert len(loads) == 2 and all(".global" in op for op in loads), loads
    assert len(ptx_ops(compiled.ptx, "st.relaxed")) == 1
