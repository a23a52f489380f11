"""Run-time control flow: ``if/elif/else``, ``for ... in range``, ``tsjit.range(unroll=)``,
``while``, ``break``, ``continue``, ``return`` from device functions, short-circuit
``and``/``or`` and conditional expressions."""
import re

import pytest

import tsjit
from tsjit import Float32, Int32, Int64

from .compiling import block_of, blocks, build, calls, instructions, ptx_ops

F32 = tsjit.spec(64, Float32)


def phi_variables(block_lines):
    """Variable names of the phis in a block (``%"total.1" = phi ...`` -> ``total``)."""
    return [re.match(r'%"(\w+)', line).group(1) for line in block_lines if " = phi " in line]


# -- if / elif / else --------------------------------------------------------------------------
@tsjit.kernel
def if_elif_else(x, out, n):
    tx = tsjit.thread_idx().x
    if tx < 1:
        v = 1.0
    elif tx < n:
        v = x[tx]
    elif tx == n:
        v = 3.0
    else:
        v = -x[tx]
    out[tx] = v


def test_if_elif_else_branches_and_merges_with_phis():
    compiled = build(if_elif_else, F32, F32, 8)
    assert len(instructions(compiled.llir, "icmp")) == 3
    assert len([b for b in instructions(compiled.llir, "br") if b.startswith("br i1")]) == 3
    phis = instructions(compiled.llir, "phi")
    assert len(phis) == 3  # one per join, each merging `v`
    assert all("phi float" in p for p in phis)
    assert ptx_ops(compiled.ptx, "st.global") == ["st.global.b32"]  # LLVM merged the arms' stores


@tsjit.kernel
def if_without_else(x, out):
    tx = tsjit.thread_idx().x
    v = x[tx]
    if v < 0.0:
        v = -v
    out[tx] = v


def test_if_without_else_merges_the_unchanged_value():
    compiled = build(if_without_else, F32, F32)
    (phi,) = instructions(compiled.llir, "phi")
    assert phi.startswith('%"v" = phi float') and "if.then" in phi and "if.else" in phi


@tsjit.kernel
def variable_defined_in_both_arms_only(x, out, n):
    if n > 0:
        t = 1
    else:
        t = 2
    out[0] = t


def test_python_numbers_from_both_arms_become_one_typed_phi():
    compiled = build(variable_defined_in_both_arms_only, tsjit.spec(1, Int32), tsjit.spec(1, Int32), 3)
    (phi,) = instructions(compiled.llir, "phi")
    assert phi.startswith('%"t" = phi i32 [1, ') and ", [2, " in phi


# -- for ... in range ---------------------------------------------------------------------------
@tsjit.kernel
def range_loops(x, out, n, step):
    total = 0.0
    for i in range(n):
        total += x[i]
    for i in range(2, n, 3):
        total += x[i]
    for i in range(n, 0, -2):
        total += x[i]
    for i in range(0, n, step):
        total += x[i]
    out[0] = total


@pytest.fixture(scope="module")
def range_ir():
    return build(range_loops, F32, F32, 64, 4).llir


def test_each_range_loop_has_a_header_with_an_induction_phi(range_ir):
    induction = [p for p in instructions(range_ir, "phi") if p.startswith('%"i')]
    assert len(induction) == 4
    assert induction[0].startswith('%"i" = phi i32 [0, ')
    assert induction[1].startswith('%"i.1" = phi i32 [2, ')


def test_constant_steps_are_added_and_compared_by_direction(range_ir):
    steps = [line.split(", ")[-1] for line in instructions(range_ir, "add") if ".next" in line]
    assert steps == ["1", "3", "4294967294", '%"step"']  # -2 as an i32 bit pattern
    predicates = [line.split()[3] for line in instructions(range_ir, "icmp")]
    assert predicates[:3] == ["slt", "slt", "sgt"]  # a negative step counts down


def test_dynamic_step_selects_the_comparison_by_its_sign(range_ir):
    selects = instructions(range_ir, "select")
    assert len(selects) == 1
    last_compares = [line.split()[3] for line in instructions(range_ir, "icmp")[3:]]
    assert sorted(last_compares) == ["sgt", "sgt", "slt"]  # i < end, i > end, step > 0


@tsjit.kernel
def range_over_int64(x, out, n):
    total = 0.0
    for i in range(n):
        total += x[i]
    out[0] = total


def test_range_over_an_int64_bound_counts_in_int64():
    compiled = build(range_over_int64, F32, F32, 2**40)
    assert instructions(compiled.llir, "phi")[-1].startswith('%"i" = phi i64')


@tsjit.kernel
def unrolled_loop(x, out, n, UNROLL: tsjit.Constexpr[int]):
    total = 0.0
    for i in tsjit.range(0, n, unroll=UNROLL):
        total += x[i]
    out[0] = total


def test_range_unroll_attaches_llvm_loop_unroll_count():
    compiled = build(unrolled_loop, F32, F32, 64, 4)
    latch_branch = [b for b in instructions(compiled.llir, "br") if "!llvm.loop" in b]
    assert len(latch_branch) == 1
    node = re.search(r"!llvm.loop (!\d+)", latch_branch[0]).group(1)
    loop_id = re.search(rf"^{node} = distinct !{{{node}, (!\d+)}}", compiled.llir, flags=re.M)
    assert loop_id, "the loop ID must be a distinct self-referential node"
    assert re.search(rf'^{loop_id.group(1)} = !{{ ?!"llvm.loop.unroll.count", i32 4 ?}}', compiled.llir,
                     flags=re.M)


def test_range_unroll_count_is_applied_by_llvm():
    once = build(unrolled_loop, F32, F32, 64, 1)
    four = build(unrolled_loop, F32, F32, 64, 4)
    assert len(ptx_ops(once.ptx, "ld.global")) == 1
    assert len(ptx_ops(four.ptx, "ld.global")) >= 4


# -- while, break, continue --------------------------------------------------------------------
@tsjit.kernel
def while_loop(x, out, n):
    i = 0
    total = 0.0
    while i < n:
        total += x[i]
        i += 1
    out[0] = total


def test_while_loop_carries_its_variables_in_phis():
    compiled = build(while_loop, F32, F32, 64)
    phis = instructions(compiled.llir, "phi")
    assert sorted(p.split()[0] for p in phis) == ['%"i"', '%"total"']
    assert block_of(compiled.llir, '%"i" = phi') == "loop.header"


@tsjit.kernel
def break_and_continue(x, out, n):
    total = 0.0
    count = 0
    for i in range(n):
        v = x[i]
        if v < 0.0:
            continue
        total += v
        if total > 100.0:
            break
        count += 1
    j = n
    while True:
        j -= 1
        if j < 0:
            break
        if x[j] == 0.0:
            continue
        total += 1.0
    out[0] = total + count


def test_break_and_continue_edges_reach_the_exit_and_the_latch():
    compiled = build(break_and_continue, F32, F32, 64)
    graph = blocks(compiled.llir)
    latch_phis = sorted(phi_variables(graph["loop.latch"]))
    assert latch_phis == ["count", "total"]  # continue and the fall-through edge join at the latch
    exit_joins = [label for label in graph if label.startswith("loop.exit.join")]
    assert len(exit_joins) == 2  # both loops have a break besides the normal exit
    assert phi_variables(graph[exit_joins[0]]) == ["total"]  # `count` is the header's on both exit edges


@tsjit.kernel
def while_true_with_return(out, n):
    i = 0
    while True:
        if i * i > n:
            out[0] = i
            return
        i += 1


def test_kernel_return_inside_a_loop_ends_the_thread():
    compiled = build(while_true_with_return, tsjit.spec(1, Int32), 50)
    (store,) = instructions(compiled.llir, "store")
    graph = blocks(compiled.llir)
    assert graph[block_of(compiled.llir, store)][-1] == "ret void"


# -- device functions --------------------------------------------------------------------------
@tsjit.func
def clamp(v, low, high):
    if v < low:
        return low
    elif v > high:
        return high
    return v


@tsjit.func
def clamp_twice(v):
    return clamp(v, 0.0, 1.0) + clamp(v * 2.0, 0.0, 1.0)


@tsjit.kernel
def call_device_functions(x, out):
    i = tsjit.thread_idx().x
    out[i] = clamp_twice(x[i])


def test_device_function_with_several_returns_merges_them_in_one_phi():
    compiled = build(call_device_functions, F32, F32)
    graph = blocks(compiled.llir)
    return_joins = [label for label in graph if label.startswith("clamp.ret")]
    assert len(return_joins) == 2  # clamp is inlined twice
    for label in return_joins:
        (phi,) = [line for line in graph[label] if " = phi " in line]
        assert phi.count("[") == 3  # low, high, v


def test_nested_device_functions_are_inlined_and_recorded():
    compiled = build(call_device_functions, F32, F32)
    assert all(name.startswith("llvm.") for name in calls(compiled.llir))
    dependencies = compiled.metadata["dependencies"]
    assert {name.rsplit(":", 1)[-1] for name in dependencies} >= {"clamp_twice", "clamp"}


@tsjit.func
def first_negative(x, n):
    for i in range(n):
        if x[i] < 0.0:
            return i
    return -1


@tsjit.kernel
def return_from_a_loop(x, out, n):
    out[0] = first_negative(x, n)


def test_return_from_inside_a_loop_of_a_device_function():
    compiled = build(return_from_a_loop, F32, tsjit.spec(1, Int32), 64)
    (join,) = [label for label in blocks(compiled.llir) if label.startswith("first_negative.ret")]
    (phi,) = [line for line in blocks(compiled.llir)[join] if " = phi " in line]
    assert phi.startswith('%"_return_" = phi i32') and "4294967295" in phi  # i or -1


@tsjit.func
def store_twice(out, v):
    out[0] = v
    out[1] = v


@tsjit.kernel
def device_function_without_return(out):
    store_twice(out, 7)


def test_device_function_without_return_value():
    compiled = build(device_function_without_return, tsjit.spec(2, Int32))
    assert [s.split(",")[0] for s in instructions(compiled.llir, "store")] == ["store i32 7"] * 2


# -- short circuit and conditional expressions -------------------------------------------------
@tsjit.kernel
def short_circuit(x, out, n):
    tx = tsjit.thread_idx().x
    if tx < n and x[tx] > 0.0:
        out[tx] = 1.0
    if tx >= n or x[tx + 64] < 0.0:
        out[tx] = 2.0


def test_and_or_evaluate_the_right_operand_in_its_own_block():
    compiled = build(short_circuit, tsjit.spec(128, Float32), F32, 64)
    graph = blocks(compiled.llir)
    loads = instructions(compiled.llir, "load")
    assert len(loads) == 2
    and_block = block_of(compiled.llir, loads[0])
    or_block = block_of(compiled.llir, loads[1])
    assert and_block.startswith("bool.rhs") and or_block.startswith("bool.rhs") and and_block != or_block
    entry_branch = graph["entry"][-1]
    assert entry_branch.startswith("br i1") and f'label %"{and_block}"' in entry_branch.split(",")[1]
    or_entry = [b for label, body in graph.items() for b in body if f'label %"{or_block}"' in b
                and b.startswith("br i1")]
    assert len(or_entry) == 1 and or_entry[0].endswith(f'label %"{or_block}"')  # rhs runs when lhs is false


@tsjit.kernel
def constant_short_circuit(x, out, FLAG: tsjit.Constexpr[bool]):
    if FLAG and x[0] > 0.0:
        out[0] = 1.0
    if FLAG or x[1] > 0.0:
        out[1] = 1.0


def test_compile_time_left_operand_decides_without_a_branch():
    compiled = build(constant_short_circuit, F32, F32, False)
    assert len(instructions(compiled.llir, "load")) == 1  # `False and ...` never loads x[0]
    assert not any(label.startswith("bool.") for label in blocks(compiled.llir))


@tsjit.kernel
def conditional_expression(x, out, n):
    tx = tsjit.thread_idx().x
    v = x[tx] if tx < n else 0.0
    w = 1 if n > 2 else 2
    out[tx] = v + w + (3 if n > 5 else 4) * 0


def test_conditional_expression_evaluates_only_the_chosen_arm():
    compiled = build(conditional_expression, F32, F32, 32)
    load = instructions(compiled.llir, "load")[0]
    assert block_of(compiled.llir, load).startswith("sel.then")
    phis = instructions(compiled.llir, "phi")
    assert [p.split()[3] for p in phis] == ["float", "i32", "i32"]


@tsjit.kernel
def compile_time_conditional_expression(out, N: tsjit.Constexpr[int]):
    out[0] = 10 if N > 2 else tsjit.thread_idx().x


def test_conditional_expression_on_a_constant_folds():
    compiled = build(compile_time_conditional_expression, tsjit.spec(1, Int64), 3)
    assert instructions(compiled.llir, "store")[0].startswith("store i64 10")
    assert not calls(compiled.llir)


@tsjit.kernel
def walrus_in_while(x, out, n):
    i = 0
    while (v := x[i]) > 0.0:
        i += 1
        if i >= n:
            break
    out[0] = v + (w := 2.0) * w


def test_assignment_expression_binds_in_the_kernel_scope():
    compiled = build(walrus_in_while, F32, F32, 64)
    load = instructions(compiled.llir, "load")
    assert len(load) == 1 and block_of(compiled.llir, load[0]) == "loop.header"
    (store,) = instructions(compiled.llir, "store")
    assert store.startswith("store float")
    (add,) = instructions(compiled.llir, "fadd")
    assert add.endswith("0x4010000000000000")  # (w := 2.0) * w folded to 4.0 at compile time
