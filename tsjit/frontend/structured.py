"""What a lowering may ask of the compiler: structured control flow, inlined work, the launch contract.

The Task Scheduling lowering (:mod:`tsjit.ts.lowering`, :mod:`tsjit.ts.lower_pipeline`,
:mod:`tsjit.ts.lower_debug`) builds code only through :class:`Structured`; it never holds an
``IRBuilder`` and never writes the generator's or the kernel module's state itself:

* ``if_then(cond, body)``: ``body()`` runs where ``cond`` holds (side effects only);
* ``guard(cond, scope, body)``: the same, merging the bindings of ``scope`` afterwards (phis);
* ``arms(...)``: an ``if / elif`` chain without ``else`` (the task dispatch);
* ``counted_loop(start, end, step, scope, body)``: ``for iv in range(start, end, step)``;
* ``while_loop(condition, scope, body)``;
* ``inline_work(fn, args, kwargs)``: compile a device function inline (a work body);
* ``require_launch(threads=, cluster=)`` and ``reserve_shared(nbytes, align)``: the launch contract;
* ``at_source(location)``: what is emitted inside carries ``location`` as its source line.

The loops are :func:`loop` / :func:`counted_loop`, the same routines the frontend's ``for`` and
``while`` statements use (:mod:`.control`): one loop builder for the whole compiler.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

from tsjit.backend import emit
from tsjit.errors import CompilationError
from tsjit.frontend import ssa
from tsjit.frontend.frame import current_generator
from tsjit.lang import dtypes as dt
from tsjit.lang.values import Value, as_value, cast_to, compare, constant

__all__ = ["Structured", "context", "loop", "counted_loop", "loop_bounds", "LoopState", "LoopExit"]


@dataclass
class LoopState:
    """A loop whose header is being built: the block entering it and the header phis of its carried
    variables (:class:`~.ssa.LoopPhi`)."""

    preheader: object
    records: list


@dataclass
class LoopExit:
    """Where a loop left off: the bindings at the header (what the exit sees), the exit block, the
    header's conditional block (None when the condition was false at compile time) and the
    ``break`` edges the body returned."""

    header_scope: dict
    exit_block: object
    cond_block: object
    breaks: list = field(default_factory=list)


def loop(gen, scope: dict, carried: set, *, label: str, condition, body, advance=None, unroll=None,
         latch_block: bool = True) -> LoopExit:
    """Emit a run-time loop at the builder's position: the one loop builder of the compiler.

    Blocks ``<label>.header`` (phis of the ``carried`` names of ``scope``, rebound in place), then
    ``<label>.body`` / ``<label>.exit`` and ``<label>.latch``.

    Args:
        gen: the :class:`~.codegen.CodeGenerator`.
        scope: the bindings before the loop; the carried names are rebound to their header phis.
        carried: names of ``scope`` the body may rebind (they get header phis).
        condition: ``condition(scope, state)`` emits the header's test and returns it (a Boolean
            Value, or a compile-time bool: False emits no body).
        body: ``body(scope, state)`` emits the body into the ``<label>.body`` block and returns
            ``(latch_edges, break_edges)`` (:class:`~.ssa.Edge` lists; an empty latch list means the
            body never reaches the next iteration).
        advance: ``advance(latch_block)``, emitted in the latch before the phis are completed
            (a counted loop's increment).
        unroll: an ``llvm.loop.unroll.count`` hint for the back edge, or None.
        latch_block: merge the latch edges in a ``<label>.latch`` block (the frontend's loops); False
            lets a single fall-through edge branch back from the body's last block itself (the TS
            loops, whose bodies have no ``continue``).

    Returns:
        :class:`LoopExit`; the builder is left in the body's last block or the exit block (the
        caller positions it at ``exit_block`` and merges the exits).
    """
    b = gen.builder
    preheader = b.block
    header = gen.new_block(f"{label}.header")
    b.branch(header)
    b.position_at_end(header)
    state = LoopState(preheader, ssa.loop_header_phis(b, scope, carried, preheader))
    test = condition(scope, state)
    if not isinstance(test, Value):
        if not test:
            exit_block = gen.new_block(f"{label}.exit")
            b.branch(exit_block)
            header_scope = dict(scope)
            b.position_at_end(exit_block)
            return LoopExit(header_scope, exit_block, None)
        test = constant(True)
    header_scope = dict(scope)
    body_block, exit_block = gen.new_block(f"{label}.body"), gen.new_block(f"{label}.exit")
    b.cbranch(cast_to(test, dt.Boolean).ir, body_block, exit_block)
    cond_block = b.block
    b.position_at_end(body_block)
    latch_edges, breaks = body(scope, state)
    if latch_edges:
        if not latch_block and len(latch_edges) == 1 and latch_edges[0].open and latch_edges[0].block is b.block:
            latch, latch_scope = b.block, latch_edges[0].scope
        else:
            latch = gen.new_block(f"{label}.latch")
            latch_scope = ssa.merge_scopes(b, latch_edges, latch, names={r.name for r in state.records})
        if advance is not None:
            advance(latch)
        ssa.complete_loop_phis(b, state.records, latch_scope, latch)
        branch = b.branch(header)
        if unroll:
            gen.km.loop_unroll_hints.append((branch, int(unroll)))
    return LoopExit(header_scope, exit_block, cond_block, list(breaks))


def loop_bounds(start, end, step, what: str = "range()") -> tuple:
    """``(index dtype, start, end, step)`` of a counted loop, the bounds converted to the index type:
    Int32, or (Uint)Int64 when a bound is a 64-bit Value.

    Raises:
        CompilationError: a bound is neither an int nor an integer Value (no location; the caller adds it).
    """
    index_dtype = dt.Int32
    for v in (start, end, step):
        if isinstance(v, Value):
            if not v.dtype.is_int:
                raise CompilationError(f"{what} needs integers, got {v.dtype.name}")
            if v.dtype.bits == 64:
                index_dtype = dt.Int64 if v.dtype.is_signed else dt.Uint64
        elif not isinstance(v, int):
            raise CompilationError(f"{what} needs integers, got {type(v).__name__}")
    return (index_dtype,) + tuple(cast_to(as_value(v, index_dtype), index_dtype) for v in (start, end, step))


def counted_loop(gen, scope: dict, carried: set, bounds: tuple, step, body, *, iv_name: str, label: str = "loop",
                 unroll=None, latch_block: bool = True) -> LoopExit:
    """``for iv in range(start, end, step)`` through :func:`loop`.

    ``bounds`` is :func:`loop_bounds`' result; ``step`` the step as given (a compile-time int gives a
    one-way comparison, a run-time step picks ``<`` or ``>`` by its sign).  ``body(iv, scope, state)``
    returns ``(latch_edges, break_edges)`` as in :func:`loop`; the induction variable is a header phi
    named ``iv_name``, incremented in the latch.
    """
    index_dtype, start_v, end_v, step_v = bounds
    b = gen.builder
    induction = {}

    def condition(_scope, state):
        iv = b.phi(start_v.ir.type, name=iv_name)
        iv.add_incoming(start_v.ir, state.preheader)
        induction["phi"], induction["value"] = iv, Value(iv, index_dtype)
        if isinstance(step, int):
            return compare("<" if step > 0 else ">", induction["value"], end_v)
        up = compare("<", induction["value"], end_v)
        down = compare(">", induction["value"], end_v)
        return Value(b.select(compare(">", step_v, 0).ir, up.ir, down.ir), dt.Boolean)

    def advance(latch):
        iv = induction["phi"]
        iv.add_incoming(b.add(iv, step_v.ir, name=f"{iv_name}.next"), latch)

    return loop(gen, scope, carried, label=label, condition=condition,
                body=lambda inner, state: body(induction["value"], inner, state), advance=advance, unroll=unroll,
                latch_block=latch_block)


class Structured:
    """The compiler as a lowering sees it (see the module docstring).  Get one with :func:`context`."""

    def __init__(self, gen):
        self._gen = gen

    # -- facts ---------------------------------------------------------------------------------
    @property
    def target_name(self) -> str:
        """The target being compiled for (``sm_90a``, ...)."""
        return self._gen.km.target.name

    @property
    def smem_bytes(self) -> int:
        """Dynamic shared memory the kernel has reserved so far, in bytes."""
        return self._gen.km.smem_bytes

    @property
    def reachable(self) -> bool:
        """Whether code emitted now runs (False after the current block has ended)."""
        return not self._gen.dead

    # -- control flow --------------------------------------------------------------------------
    def if_then(self, condition: Value, body, label: str = "then", done_label: str = "done") -> None:
        """Emit ``body()`` so that it runs only where ``condition`` (a Boolean Value) holds (blocks
        ``label`` and ``done_label``); for code with side effects only, no bindings are merged."""
        gen, b = self._gen, self._gen.builder
        then, done = gen.new_block(label), gen.new_block(done_label)
        b.cbranch(condition.ir, then, done)
        b.position_at_end(then)
        body()
        b.branch(done)
        b.position_at_end(done)

    def guard(self, condition: Value, scope: dict, body, label: str = "guard") -> None:
        """``if condition: body(inner)`` where ``inner`` is a copy of ``scope``; afterwards ``scope``
        holds the merge of both paths (phis at ``<label>.end``)."""
        gen, b = self._gen, self._gen.builder
        then_block, skip_block = gen.new_block(f"{label}.then"), gen.new_block(f"{label}.skip")
        b.cbranch(condition.ir, then_block, skip_block)
        before = dict(scope)
        b.position_at_end(then_block)
        inner = dict(scope)
        body(inner)
        edges = [ssa.Edge(b.block, inner), ssa.Edge(skip_block, before)]
        join = gen.new_block(f"{label}.end")
        scope.update(ssa.merge_scopes(b, edges, join))

    def arms(self, arms, join_label: str) -> None:
        """``if c0: body0() elif c1: body1() ...`` (no else): ``arms`` are ``(condition, label, body)``
        where ``condition()`` emits the arm's test (evaluated only when the earlier arms did not run);
        each body runs in block ``label`` and continues at ``join_label`` when it falls through."""
        gen, b = self._gen, self._gen.builder
        join = gen.new_block(join_label)
        for condition, label, body in arms:
            test = condition()
            then, skip = gen.new_block(label), gen.new_block(f"{label}.skip")
            b.cbranch(test.ir, then, skip)
            b.position_at_end(then)
            body()
            if not gen.dead:
                b.branch(join)
            gen.dead = False
            b.position_at_end(skip)
        b.branch(join)
        b.position_at_end(join)

    def counted_loop(self, start, end, step, scope: dict, body, *, label: str = "loop", iv_name: str = "iv",
                     unroll=None) -> tuple:
        """``for iv in range(start, end, step)``, every name of ``scope`` carried; ``body(iv, inner)``
        emits one iteration into ``inner`` (a copy of the header's bindings).  Afterwards ``scope`` holds
        the header's bindings (what the loop's exit sees).  Returns the converted ``(start, end, step)``
        (a compile-time int step stays an int).

        Raises:
            CompilationError: a bound is not an integer.
        """
        gen = self._gen
        bounds = loop_bounds(start, end, step, "a counted loop")

        def emit_body(iv, inner, _state):
            inner = dict(inner)
            body(iv, inner)
            return ([ssa.Edge(gen.builder.block, inner)] if not gen.dead else []), []
        exit_ = counted_loop(gen, scope, set(scope), bounds, step, emit_body, iv_name=iv_name, label=label,
                             unroll=unroll, latch_block=False)
        self._leave(exit_, scope)
        _, start_v, end_v, step_v = bounds
        return start_v, end_v, step if isinstance(step, int) else step_v

    def while_loop(self, condition, scope: dict, body, *, label: str = "loop") -> None:
        """``while condition(scope): body(inner)``, every name of ``scope`` carried (as
        :meth:`counted_loop`); ``condition`` returns a Boolean Value or a compile-time bool."""
        gen = self._gen

        def emit_body(inner, _state):
            inner = dict(inner)
            body(inner)
            return ([ssa.Edge(gen.builder.block, inner)] if not gen.dead else []), []
        exit_ = loop(gen, scope, set(scope), label=label, condition=lambda s, _state: condition(s), body=emit_body,
                     latch_block=False)
        self._leave(exit_, scope)

    def _leave(self, exit_: LoopExit, scope: dict) -> None:
        self._gen.builder.position_at_end(exit_.exit_block)
        self._gen.dead = False
        scope.clear()
        scope.update(exit_.header_scope)

    # -- work ----------------------------------------------------------------------------------
    def inline_work(self, fn, args: list, kwargs: dict | None = None, call_site=None):
        """Compile device function ``fn`` inline with ``args`` / ``kwargs`` (its result object);
        errors name ``call_site`` (a SourceLocation) as the caller when given."""
        try:
            return self._gen.inline(fn, list(args), dict(kwargs or {}), None)
        except CompilationError as exc:
            raise exc.with_caller(call_site) if call_site is not None else exc

    def ptx_comment(self, text: str) -> None:
        """Emit ``// text`` into the PTX: an empty side-effecting inline-asm statement (one line)."""
        self._gen.km.inline_asm(emit.VOID, f"// {text}", "", [])

    # -- the launch contract -------------------------------------------------------------------
    def require_launch(self, *, threads: int | None = None, cluster: tuple | None = None,
                       threads_at_entry: bool = False) -> None:
        """Declare what the launch must provide: exactly ``threads`` threads per CTA (with
        ``threads_at_entry`` also as ``.maxntid``, which ``setmaxnreg`` needs, PTX ISA §11.4) and a
        ``cluster`` shape (also as ``.reqnctapercluster``, §11.5)."""
        km = self._gen.km
        if threads is not None:
            km.launch_requirements = km.launch_requirements.merged(threads=threads)
            if threads_at_entry:
                km.annotate("maxntidx", threads)
        if cluster is not None:
            km.launch_requirements = km.launch_requirements.merged(cluster=tuple(cluster))
            for axis, extent in zip("xyz", cluster):
                km.annotate(f"cluster_dim_{axis}", extent)

    @contextlib.contextmanager
    def at_source(self, location):
        """Instructions emitted inside the ``with`` block carry ``location`` (a
        :class:`~tsjit.errors.SourceLocation`, e.g. a schedule step's ``r.acquire()`` line) as their
        source line, so reports (an interpreter deadlock, a debug print) name it."""
        km = self._gen.km
        saved, km.statement = km.statement, (_FixedSource(location), None)
        try:
            yield
        finally:
            km.statement = saved

    def reserve_shared(self, nbytes: int, align: int = 16) -> int:
        """Reserve ``nbytes`` of the kernel's dynamic shared-memory block; returns the byte offset."""
        return self._gen.km.reserve_shared(nbytes, align)


@dataclass(frozen=True)
class _FixedSource:
    """Stands for the parsed source in ``KernelModule.statement``: every node is at ``where``."""

    where: object

    def location(self, node):
        return self.where


def context(what: str) -> Structured:
    """The :class:`Structured` interface of the kernel being compiled.

    Raises:
        CompilationError: no ``@tsjit.kernel`` is being compiled (``what`` names the call).
    """
    gen = current_generator()
    if gen is None or not emit.active():
        raise CompilationError(f"{what} must be called inside a @tsjit.kernel function")
    return Structured(gen)
