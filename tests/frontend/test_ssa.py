"""SSA construction: scalar locals live in registers (phis at joins and loop headers),
never in ``alloca`` slots, and each loop body is compiled once."""
import re

import tsjit
from tsjit import Float32

from .compiling import blocks, build, instructions

F32 = tsjit.spec(64, Float32)


@tsjit.func
def bounded(v, limit):
    if v > limit:
        return limit
    return v


@tsjit.kernel
def scalar_heavy(x, out, n, step):
    tx, ty, _ = tsjit.thread_idx()
    acc = 0.0
    count = 0
    low, high = 0.0, 0.0
    p = x.ptr
    for i in range(0, n, step):
        v = p[i]
        if v < low:
            low = v
        elif v > high:
            high = v
        else:
            count += 1
        acc = acc + bounded(v, 10.0)
        if acc > 1000.0:
            break
    j = 0
    while j < n and acc > 0.0:
        acc = acc * 0.5
        j += 1
        if j == ty:
            continue
        p = p + 1
    flag = acc > 1.0 or count == 0
    out[tx] = (acc if flag else low) + high + count + p[0]


def test_scalar_locals_never_use_alloca():
    compiled = build(scalar_heavy, F32, F32, 64, 2)
    assert "alloca" not in compiled.llir
    assert "alloca" not in compiled.ptx and ".local" not in compiled.ptx
    assert compiled.metadata["stack_frame_bytes"] == 0
    assert len(instructions(compiled.llir, "phi")) > 10


@tsjit.kernel
def carry_token(x, out, n):
    phase = 0
    unchanged = tsjit.thread_idx().x
    for i in range(n):
        local = x[i] * 2.0
        out[unchanged] = local
        phase = phase ^ 1
    out[0] = Float32(phase)


def test_token_carried_across_iterations_is_one_phi():
    compiled = build(carry_token, F32, F32, 64)
    header = blocks(compiled.llir)["loop.header"]
    phis = [line for line in header if " = phi " in line]
    assert len([p for p in phis if p.startswith('%"phase')]) == 1
    assert sorted(re.match(r'%"(\w+)', p).group(1) for p in phis) == ["i", "phase"]  # no phi for the rest
    (phase,) = [p for p in phis if p.startswith('%"phase')]
    assert phase.startswith('%"phase" = phi i32 [0, %"entry"]')


@tsjit.kernel
def carry_tuple_and_pointer(x, out, n):
    a, b = 0, 1
    p = out.ptr
    for i in range(n):
        a, b = b, a + b
        p = p + 1
        p[0] = Float32(a)


def test_tuple_and_pointer_carried_through_a_loop():
    compiled = build(carry_tuple_and_pointer, F32, F32, 16)
    header = [line for line in blocks(compiled.llir)["loop.header"] if " = phi " in line]
    kinds = {re.match(r'%"(\w+)', p).group(1): p.split()[3] for p in header}
    assert kinds == {"a": "i32", "b": "i32", "p": "ptr", "i": "i32"}
    (a_phi,) = [p for p in header if p.startswith('%"a"')]
    assert '[%"b", %"loop.latch"]' in a_phi  # the swap needs no copies


@tsjit.kernel
def two_changed_one_kept(x, out, n):
    a = 1.0
    b = 2.0
    c = 3.0
    if n > 0:
        a = x[0]
        b = x[1]
    out[0] = a + b + c


def test_join_has_one_phi_per_changed_variable():
    compiled = build(two_changed_one_kept, F32, F32, 3)
    phis = instructions(compiled.llir, "phi")
    assert sorted(p.split()[0] for p in phis) == ['%"a"', '%"b"']


VISITS = []


def visited(value):
    VISITS.append(1)
    return value


@tsjit.kernel
def nested_loops(x, out, n):
    total = 0.0
    for i in range(n):
        for j in range(n):
            k = 0
            while k < j:
                total += visited(x[i + j + k])
                k += 1
    out[0] = total


def test_loop_bodies_are_compiled_once():
    VISITS.clear()
    compiled = build(nested_loops, F32, F32, 4)
    assert VISITS == [1]
    assert len([label for label in blocks(compiled.llir) if label.startswith("loop.header")]) == 3
    total_phis = [p for p in instructions(compiled.llir, "phi") if p.startswith('%"total')]
    assert len(total_phis) == 3  # one per loop header; nothing else needs to merge `total`


@tsjit.kernel
def defined_in_loop_only(x, out, n):
    for i in range(n):
        scratch = x[i] + 1.0
        out[i] = scratch


def test_variable_local_to_a_loop_body_gets_no_phi():
    compiled = build(defined_in_loop_only, F32, F32, 8)
    phis = instructions(compiled.llir, "phi")
    assert [p.split()[0] for p in phis] == ['%"i"']
