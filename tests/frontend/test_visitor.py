"""The visitor's structure: handler tables honour subclass overrides, and loop bookkeeping of
nested run-time loops stays per loop."""
import ast

from llvmlite import ir

import tsjit
from tsjit import Int32
from tsjit.backend import emit
from tsjit.backend.targets import get_target
from tsjit.frontend import codegen
from tsjit.frontend.frame import Frame, active_generator
from tsjit.frontend.source import parse_function

from .compiling import compile_error

def _visit_with(cls, fn):
    """Visit ``fn``'s body (no parameters) with generator class ``cls`` in a fresh module."""
    parsed = parse_function(fn)
    km = emit.KernelModule("k", get_target("sm_90a"))
    function = ir.Function(km.module, ir.FunctionType(emit.VOID, []), name="k")
    km.function = function
    km.builder = ir.IRBuilder(function.append_basic_block("entry"))
    with emit.activate(km):
        gen = cls(km)
        gen.frames.append(Frame(parsed, {}, is_kernel=True))
        with active_generator(gen):
            gen.visit_body(parsed.node.body)
    return gen


def _two_statements():
    x = 1 + 2
    y = x * 5


def test_subclass_statement_and_expression_overrides_are_dispatched():
    class Tracing(codegen.CodeGenerator):
        def __init__(self, km):
            self.assigned, self.binops = [], []
            super().__init__(km)

        def stmt_assign(self, node):
            self.assigned.append(node.targets[0].id)
            super().stmt_assign(node)

        def expr_binop(self, node):
            result = super().expr_binop(node)
            self.binops.append(result)
            return result

    gen = _visit_with(Tracing, _two_statements)
    assert gen.assigned == ["x", "y"]
    assert gen.binops == [3, 15]
    assert gen.frame.scope == {"x": 3, "y": 15}


def test_every_table_entry_names_a_handler_method():
    for table in (codegen.STMT_HANDLERS, codegen.EXPR_HANDLERS):
        for kind, name in table.items():
            assert issubclass(kind, ast.AST)
            assert callable(getattr(codegen.CodeGenerator, name, None)), name


@tsjit.kernel
def assigned_in_outer_loop_after_inner_loop(out, n):
    for i in range(n):
        for j in range(n):
            t = j
        u = i
    out[0] = u


@tsjit.kernel
def assigned_in_inner_loop(out, n):
    for i in range(n):
        for j in range(n):
            t = j
    out[0] = t


def test_outer_loop_local_keeps_its_hint_after_an_inner_loop():
    err = compile_error(assigned_in_outer_loop_after_inner_loop, tsjit.spec(4, Int32), 8)
    assert "`u` is not defined" in str(err)
    assert "only inside a run-time loop" in str(err)


def test_inner_loop_local_has_the_hint_after_both_loops():
    err = compile_error(assigned_in_inner_loop, tsjit.spec(4, Int32), 8)
    assert "`t` is not defined" in str(err)
    assert "only inside a run-time loop" in str(err)
