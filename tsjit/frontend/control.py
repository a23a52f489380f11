"""Control flow for the code generator: ``if``, ``for``, ``while``, ``break``, ``continue``,
``return``, short-circuit ``and``/``or`` and conditional expressions.

Compile-time conditions fold (only the taken arm is visited).  Run-time conditions emit
blocks; the bindings of the arms are merged with phis (:mod:`.ssa`).  A run-time loop's
carried variables are found from the AST before the body is visited, so the body is
visited exactly once.  Loops over Python iterables (``range_constexpr``, tuples) are
unrolled at compile time.
"""
from __future__ import annotations

import ast
from tsjit.errors import CompilationError
from tsjit.frontend import guards, ssa, structured
from tsjit.frontend.source import assigned_names
from tsjit.lang import dtypes as dt
from tsjit.lang.constexpr import DynamicRange
from tsjit.lang.values import Value, as_value, cast_to, compare, constant, is_constant


class _StaticBreak(Exception):
    pass


class _StaticContinue(Exception):
    pass


_END = object()


def _next_item(iterator, gen, node):
    try:
        return next(iterator, _END)
    except CompilationError as exc:
        raise exc.with_location(gen.location(node.iter)) from None


class _RuntimeRegion:
    def __init__(self, gen, kind: str, node):
        self.gen, self.kind, self.node = gen, kind, node

    def __enter__(self):
        frame = self.gen.frame
        bindings = dict(frame.parsed.closure)
        bindings.update(frame.scope)
        self.snapshot = guards.RegionSnapshot.take(self.kind, bindings)
        self.gen.regions.append(self.snapshot)
        return self

    def __exit__(self, exc_type, exc, tb):
        self.gen.regions.pop()
        if exc_type is None:
            try:
                guards.check_region_end(self.snapshot)
            except CompilationError as err:
                raise (err.with_location(self.gen.location(self.node)) if self.node is not None else err) from None
        return False


class LoopContext:
    """A run-time loop being compiled: where ``break``/``continue`` edges go."""

    static = False

    def __init__(self):
        self.breaks: list[ssa.Edge] = []
        self.continues: list[ssa.Edge] = []
        self.depth = 0


class StaticLoop:
    """A compile-time (unrolled) loop."""

    static = True

    def __init__(self, depth: int):
        self.depth = depth


def _item_store_names(body) -> set[str]:
    """Names ``x`` of item-assignment targets ``x[...] = ...`` / ``x[...][...] += ...`` in ``body``."""
    names = set()
    for stmt in body:
        for sub in ast.walk(stmt):
            if isinstance(sub, ast.Subscript) and isinstance(sub.ctx, ast.Store):
                base = sub.value
                while isinstance(base, ast.Subscript):
                    base = base.value
                if isinstance(base, ast.Name):
                    names.add(base.id)
    return names


def _as_condition(value) -> Value:
    if isinstance(value, Value):
        return cast_to(value, dt.Boolean)
    raise CompilationError("internal: compile-time condition reached branch emission")


class ControlFlowMixin:
    # -- if ---------------------------------------------------------------------------------
    """Control-flow handlers of :class:`~.codegen.CodeGenerator` (``if``, loops, ``break``/``continue``,
    ``return``, ``and``/``or``, ``a if c else b``).

    A mixin: it relies on these members of the generator it is mixed into:
    ``frame`` (the innermost :class:`~.frame.Frame`: ``scope``, ``loops``, ``dynamic_depth``,
    ``dropped``, ``returns``, ``is_kernel``), ``builder``, ``km``, ``dead``,
    ``folder``, ``unroll_limit``, ``regions``, and the methods ``expr``, ``assign``, ``visit_body``,
    ``new_block``, ``location`` and ``error``.
    """
    def stmt_if(self, node: ast.If) -> None:
        """``if``/``elif``/``else``.  A compile-time condition compiles only the arm taken; a run-time one
        emits a conditional branch, compiles both arms and merges their bindings with phis (a name bound in
        only one arm has no value after the ``if``).
        """
        test = self.expr(node.test)
        folder = self.folder
        if not isinstance(test, Value):
            if folder is not None:
                folder.folded_if(node, bool(test))
            self.visit_body(node.body if test else node.orelse)
            return
        cond = _as_condition(test)
        frame = self.frame
        b = self.builder
        then_block, else_block = self.new_block("if.then"), self.new_block("if.else")
        b.cbranch(cond.ir, then_block, else_block)
        before = dict(frame.scope)
        edges, arms = [], []
        for block, body in ((then_block, node.body), (else_block, node.orelse)):
            b.position_at_end(block)
            frame.scope = dict(before)
            self.dead = False
            frame.dynamic_depth += 1
            if folder is not None:
                folder.open_block()
            try:
                with self.runtime_region("`if`", node):
                    self.visit_body(body)
            finally:
                frame.dynamic_depth -= 1
                if folder is not None:
                    arms.append(folder.close_block())
            if not self.dead:
                edges.append(ssa.Edge(b.block, frame.scope))
        if folder is not None:
            folder.runtime_if(node, *arms)
        self._join(edges, "if.end", before)

    def runtime_region(self, kind: str, node):
        """Context manager around code under a run-time condition or in a run-time loop body: compile-time
        lists/dicts/sets that exist before it must not change inside it (:mod:`.guards`)."""
        return _RuntimeRegion(self, kind, node)

    def _join(self, edges, name: str, before: dict) -> None:
        frame = self.frame
        if not edges:
            self.dead = True
            frame.scope = before
            return
        join = self.new_block(name)
        merged = ssa.merge_scopes(self.builder, edges, join)
        frame.dropped |= set().union(*(e.scope for e in edges)) - set(merged)
        frame.scope = merged
        self.dead = False

    def expr_ifexp(self, node: ast.IfExp):
        """``a if cond else b``: folded on a compile-time condition, else both operands are compiled in
        their own blocks and merged with a phi.
        """
        test = self.expr(node.test)
        if not isinstance(test, Value):
            return self.expr(node.body if test else node.orelse)
        cond = _as_condition(test)
        b = self.builder
        then_block, else_block = self.new_block("sel.then"), self.new_block("sel.else")
        b.cbranch(cond.ir, then_block, else_block)
        edges = []
        for block, sub in ((then_block, node.body), (else_block, node.orelse)):
            b.position_at_end(block)
            with self.runtime_region("conditional expression", node):
                value = self.expr(sub)
            edges.append(ssa.Edge(b.block, {"<ifexp>": value}))
        join = self.new_block("sel.end")
        return ssa.merge_scopes(b, edges, join)["<ifexp>"]

    def expr_boolop(self, node: ast.BoolOp):
        """Short-circuit ``and``/``or``: later operands are evaluated only when needed, also at run time.

        The result is an operand, as in Python (``x[i] or 2.5`` is ``x[i]`` when it is non-zero, else
        2.5), when the operands have one dtype; operands of different dtypes give the Boolean of the
        expression (``i > 0 and n``), which is what a condition needs."""
        is_and = isinstance(node.op, ast.And)
        result = self.expr(node.values[0])
        for sub in node.values[1:]:
            if not isinstance(result, Value):
                if bool(result) != is_and:  # decided at compile time
                    return result
                result = self.expr(sub)
                continue
            # Python's value semantics when both operands have one dtype: `a or b` is a if a else b,
            # `a and b` is a if not a else b (`x[i] or 2.0` is x[i] or 2.0, not a Boolean); operands
            # of different dtypes give the Boolean of that (what a condition needs).
            cond = cast_to(result, dt.Boolean)
            b = self.builder
            rhs_block, short_block = self.new_block("bool.rhs"), self.new_block("bool.short")
            join = self.new_block("bool.end")
            if is_and:
                b.cbranch(cond.ir, rhs_block, short_block)
            else:
                b.cbranch(cond.ir, short_block, rhs_block)
            lhs_edge = ssa.Edge(short_block, {"<bool>": result})
            b.position_at_end(rhs_block)
            with self.runtime_region("`and`/`or`", node):
                rhs = self.expr(sub)
            if not isinstance(rhs, Value) and not is_constant(rhs):
                raise self.error(sub, f"`{'and' if is_and else 'or'}` with a run-time value needs numbers on both "
                                      f"sides, got a {type(rhs).__name__} object")
            same_type = rhs.dtype is result.dtype if isinstance(rhs, Value) else (
                not isinstance(rhs, float) or result.dtype.is_float)
            if not same_type:
                lhs_edge.scope["<bool>"] = cond
                rhs = cast_to(rhs, dt.Boolean) if isinstance(rhs, Value) else constant(bool(rhs), dt.Boolean)
            rhs_edge = ssa.Edge(b.block, {"<bool>": rhs})
            result = ssa.merge_scopes(b, [lhs_edge, rhs_edge], join)["<bool>"]
        return result

    # -- loops ------------------------------------------------------------------------------
    def stmt_for(self, node: ast.For) -> None:
        """``for target in iterable``: over ``range(...)`` (a :class:`~tsjit.lang.constexpr.DynamicRange`) a
        run-time loop whose carried names get header phis; over any Python iterable (``range_constexpr``,
        a tuple) unrolled at compile time, bounded by the unroll limit.

        Raises:
            CompilationError: ``for ... else``, iteration over a run-time value, or a run-time loop
                variable that is not a single name.
        """
        if node.orelse:
            raise self.error(node, "`for ... else` is not supported in device code")
        iterable = self.expr(node.iter)
        if isinstance(iterable, DynamicRange):
            self._dynamic_for(node, iterable)
        elif isinstance(iterable, Value):
            raise self.error(node.iter, "cannot iterate over a run-time value; use range(...)")
        else:
            self._static_for(node, iterable)

    def _static_for(self, node: ast.For, iterable) -> None:
        frame = self.frame
        try:
            iterator = guards.bounded_iteration(iterable, self.unroll_limit, "this loop")
            first = next(iterator, _END)
        except CompilationError as exc:
            raise exc.with_location(self.location(node.iter)) from None
        frame.loops.append(StaticLoop(frame.dynamic_depth))
        try:
            item, index = first, 0
            while item is not _END:
                if self.folder is not None:
                    self.folder.unrolled_iteration(node, index, item)
                index += 1
                self.assign(node.target, item, node)
                try:
                    self.visit_body(node.body)
                except _StaticContinue:
                    self.dead = False
                except _StaticBreak:
                    self.dead = False
                    break
                item = _next_item(iterator, self, node)
        finally:
            frame.loops.pop()

    def _carried(self, body, extra_names=()) -> tuple[set, dict]:
        """The names a run-time loop carries (assigned in ``body``, or ``extra_names``, and bound
        before it) and their bindings before the loop (to find the opaque ones after the phis)."""
        frame = self.frame
        carried = (assigned_names(body) | set(extra_names)) & set(frame.scope)
        # `frag[i] = v` rebinds a value-semantics container (tsjit.Fragment): carry it too.
        carried |= {name for name in _item_store_names(body)
                    if getattr(type(frame.scope.get(name)), "__tsjit_value_semantics__", False)}
        return carried, {name: frame.scope[name] for name in carried}

    def _run_loop_body(self, body, ctx: LoopContext) -> set[str]:
        """Visit a run-time loop's body once; returns the names it assigns that did not exist before
        the loop (they have no value after it: the loop's exit marks them dropped)."""
        frame = self.frame
        loop_locals = assigned_names(body) - set(frame.scope)
        frame.loops.append(ctx)
        frame.dynamic_depth += 1
        ctx.depth = frame.dynamic_depth
        try:
            with self.runtime_region("loop", None):
                self.visit_body(body)
        finally:
            frame.dynamic_depth -= 1
            frame.loops.pop()
        return loop_locals

    def _check_opaque(self, node, opaque: dict, scopes) -> None:
        for name, obj in opaque.items():
            for scope in scopes:
                if name in scope and scope[name] is not obj:
                    raise self.error(node, f"`{name}` ({ssa.describe(obj)}) is rebound inside a run-time loop; "
                                           f"only run-time scalars can change from one iteration to the next (use "
                                           f"tsjit.range_constexpr to unroll the loop at compile time)")

    def _dynamic_for(self, node: ast.For, rng: DynamicRange) -> None:
        if not isinstance(node.target, ast.Name):
            raise self.error(node.target, "a run-time loop variable must be a single name")
        try:
            bounds = structured.loop_bounds(rng.start, rng.end, rng.step)
        except CompilationError as exc:
            hint = self._float_argument_bound(node.iter, rng)
            if hint:
                exc = CompilationError(f"{exc.message}; {hint}")
            raise exc.with_location(self.location(node.iter)) from None
        carried, before = self._carried(node.body)
        name = node.target.id
        loop_locals: set = set()
        exit_ = structured.counted_loop(
            self, self.frame.scope, carried, bounds, rng.step,
            lambda iv, scope, state: self._loop_body(node, scope, state, before, {name: iv}, loop_locals),
            iv_name=name, unroll=rng.unroll)
        self._exit_loop(exit_, loop_locals, name)

    def _float_argument_bound(self, call, rng) -> str | None:
        """What to pass instead, when a bound of ``range(...)`` is a kernel argument given a float."""
        if not isinstance(call, ast.Call) or not 1 <= len(call.args) <= 3 or call.keywords:
            return None
        values = [rng.end] if len(call.args) == 1 else [rng.start, rng.end, rng.step][:len(call.args)]
        arguments = self.frame.arguments
        for arg, value in zip(call.args, values):
            if (isinstance(arg, ast.Name) and isinstance(value, Value) and value.dtype.is_float
                    and arguments.get(arg.id) is value):
                return (f"kernel argument '{arg.id}' was passed a float, which makes it a device "
                        f"{value.dtype.name}; pass an int for '{arg.id}' (e.g. int({arg.id}) at the call)")
        return None

    def _loop_body(self, node, scope: dict, state, before: dict, bind: dict, loop_locals: set) -> tuple[list, list]:
        """The body of a run-time loop (:func:`.structured.loop`'s ``body``): visited once with
        ``bind`` added; returns its latch edges (fall-through and ``continue``) and ``break`` edges,
        and adds the names first bound in it to ``loop_locals``."""
        frame = self.frame
        frame.scope = scope
        scope.update(bind)
        phi_names = {r.name for r in state.records}
        opaque = {n: o for n, o in before.items() if n not in phi_names}
        ctx = LoopContext()
        if self.folder is not None:
            self.folder.open_block()
        try:
            loop_locals |= self._run_loop_body(node.body, ctx)
        finally:
            if self.folder is not None:
                self.folder.runtime_loop(node, self.folder.close_block())
        latch_edges = list(ctx.continues)
        if not self.dead:
            latch_edges.append(ssa.Edge(self.builder.block, frame.scope))
        self._check_opaque(node, opaque, [e.scope for e in latch_edges + ctx.breaks])
        return latch_edges, ctx.breaks

    def _exit_loop(self, exit_: "structured.LoopExit", loop_locals: set, loop_var=None) -> None:
        """Merge a run-time loop's exits (the header's closed edge and the ``break`` edges) after it."""
        frame = self.frame
        b = self.builder
        header_scope, exit_block = exit_.header_scope, exit_.exit_block
        if exit_.cond_block is None:  # the condition was false at compile time: no body, no exit merge
            frame.scope = header_scope
            return
        exit_edges = [ssa.Edge(exit_.cond_block, header_scope, open=False)] + exit_.breaks
        if len(exit_edges) == 1:
            b.position_at_end(exit_block)
            scope = dict(header_scope)
        else:
            tmp = self.new_block("loop.exit.join")
            # closed header edge goes to exit_block; route it through exit_block -> tmp
            b.position_at_end(exit_block)
            exit_edges[0] = ssa.Edge(exit_block, header_scope)
            scope = ssa.merge_scopes(b, exit_edges, tmp)
        if loop_var is not None:
            scope.pop(loop_var, None)
        frame.dropped |= set().union(*(e.scope for e in exit_edges)) - set(scope)
        frame.dropped |= loop_locals
        frame.scope = scope
        self.dead = False

    def stmt_while(self, node: ast.While) -> None:
        """``while cond``: a run-time loop (its carried names found from the body and the condition); a
        condition that is false at compile time emits no loop.

        Raises:
            CompilationError: ``while ... else``.
        """
        if node.orelse:
            raise self.error(node, "`while ... else` is not supported in device code")
        test_names = {n.id for n in ast.walk(node.test) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        carried, before = self._carried(node.body, test_names)
        loop_locals: set = set()

        def condition(_scope, _state):
            test = self.expr(node.test)
            if not isinstance(test, Value):
                if not test and self.folder is not None:
                    self.folder.comment("folded: while " + ast.unparse(node.test) + "  ->  no iteration")
                return bool(test)
            return _as_condition(test)
        exit_ = structured.loop(self, self.frame.scope, carried, label="loop", condition=condition,
                                body=lambda scope, state: self._loop_body(node, scope, state, before, {}, loop_locals))
        self._exit_loop(exit_, loop_locals)

    def stmt_break(self, node) -> None:
        """``break``: an edge to the loop's exit (a run-time loop) or the end of an unrolled loop."""
        self._loop_exit(node, "break")

    def stmt_continue(self, node) -> None:
        """``continue``: an edge to the loop's latch (a run-time loop) or the next unrolled iteration."""
        self._loop_exit(node, "continue")

    def _loop_exit(self, node, kind: str) -> None:
        frame = self.frame
        if not frame.loops:
            raise self.error(node, f"`{kind}` outside a loop")
        loop = frame.loops[-1]
        if loop.static:
            if frame.dynamic_depth > loop.depth:
                raise self.error(node, f"`{kind}` under a run-time condition inside a compile-time "
                                       f"(unrolled) loop is not supported; use a run-time loop (range) instead")
            raise _StaticBreak() if kind == "break" else _StaticContinue()
        edge = ssa.Edge(self.builder.block, dict(frame.scope))
        (loop.breaks if kind == "break" else loop.continues).append(edge)
        self.dead = True

    # -- return -----------------------------------------------------------------------------
    def stmt_return(self, node: ast.Return) -> None:
        """``return``: ends a kernel (which cannot return a value) or adds the returned object to the inlined
        function's return edges (merged at the call site).

        Raises:
            CompilationError: a kernel returns a value.
        """
        frame = self.frame
        value = self.expr(node.value) if node.value is not None else None
        if frame.is_kernel:
            if value is not None:
                raise self.error(node, "a kernel cannot return a value; write results to an output array")
            self.builder.ret_void()
            self.dead = True
            return
        frame.returns.append(ssa.Edge(self.builder.block, {"<return>": value}))
        self.dead = True


__all__ = ["ControlFlowMixin", "LoopContext", "StaticLoop"]
