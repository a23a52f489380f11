"""The AST visitor: Python kernel source -> LLVM IR.

One :class:`CodeGenerator` compiles one kernel.  It visits the kernel's ``ast``
statement by statement, evaluating expressions to *objects*: compile-time Python
values (ints, dtypes, resources, functions, ...) or run-time
:class:`~tsjit.lang.values.Value` / :class:`~tsjit.lang.memory.Pointer` /
:class:`~tsjit.lang.memory.Tensor` handles whose operators emit IR.

* A call to a ``@tsjit.func`` is inlined: its own ``ast`` is visited in a new frame.
* A call to anything else runs at compile time (builtins, resource constructors,
  ``@schedule`` functions, ``Task``/``TaskManager``), receiving the objects as arguments.
* An ``if`` whose condition is a compile-time value compiles only the taken arm; one on
  a run-time Boolean emits a branch and merges the arms' bindings (:mod:`.ssa`).
* A nested ``def`` or ``lambda`` becomes a real Python closure over the current bindings.

Statement and expression handlers are registered in tables of method names (no ``isinstance``
chains), resolved on the instance so a subclass can override a handler; control flow lives in
:mod:`.control`, calls in :mod:`.calls`.  While compiling, a :class:`~.folded.FoldRecorder`
records what was compiled (``CompiledKernel.folded_source``).
"""
from __future__ import annotations

import ast
import builtins
import operator
import sys

from tsjit.backend import emit
from tsjit.errors import CompilationError, TsjitError
from tsjit.frontend import calls, control, guards
from tsjit.frontend.attribute_errors import attribute_hint
from tsjit.frontend.dependencies import DependencyRecorder, RecordingMixin, attribute_chain
from tsjit.frontend.folded import FoldRecorder
from tsjit.frontend.frame import Frame
from tsjit.frontend.indexing_errors import named_container, none_index, not_an_element
from tsjit.lang import values as V
from tsjit.lang.builtins import DeviceField, DeviceText
from tsjit.lang.dtypes import DType
from tsjit.lang.memory import Tensor
from tsjit.lang.values import Value

_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
           ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
           ast.LShift: operator.lshift, ast.RShift: operator.rshift, ast.BitAnd: operator.and_,
           ast.BitOr: operator.or_, ast.BitXor: operator.xor, ast.MatMult: operator.matmul}
_CMPOPS = {ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
           ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Is: lambda a, b: guards.identity(a, b, negate=False),
           ast.IsNot: lambda a, b: guards.identity(a, b, negate=True),
           ast.In: lambda a, b: guards.membership(a, b, negate=False),
           ast.NotIn: lambda a, b: guards.membership(a, b, negate=True)}
_UNSUPPORTED_STMTS = {ast.With: "`with`", ast.AsyncWith: "`async with`", ast.Try: "`try`",
                      ast.Global: "`global`", ast.Nonlocal: "`nonlocal`", ast.ClassDef: "a class definition",
                      ast.Delete: "`del`", ast.Import: "`import`", ast.ImportFrom: "`import`",
                      ast.AsyncFor: "`async for`", ast.AsyncFunctionDef: "`async def`"}
#: Statements the control-flow handlers record themselves in the folded source (:mod:`.folded`).
_STRUCTURED_STMTS = (ast.If, ast.For, ast.While)


def _is_docstring(node) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)


if hasattr(ast, "TryStar"):
    _UNSUPPORTED_STMTS[ast.TryStar] = "`try`"
if hasattr(ast, "Match"):
    _UNSUPPORTED_STMTS[ast.Match] = "`match`"


class CodeGenerator(control.ControlFlowMixin, calls.CallMixin, RecordingMixin):
    """Compiles Python function bodies into the active :class:`~tsjit.backend.emit.KernelModule`.

    Attributes:
        km: the module under construction.
        frames: the stack of functions being compiled (kernel first).
        recorder: every global, closure cell and attribute chain the compile resolved, with the
            digest of what it found (:mod:`.dependencies`; stored in the cache entry).
        unroll_limit: the most iterations of one compile-time loop or unpacking (:mod:`.guards`).
        regions: snapshots of the compile-time containers alive when each enclosing run-time
            ``if``/loop began (:class:`~.guards.RegionSnapshot`), innermost last.
        dead: whether the current block has ended (after ``return``/``break``/``continue``); the
            rest of a body is then skipped.
        folder: the :class:`~.folded.FoldRecorder` that builds the folded source, or ``None``.
        stmt_handlers, expr_handlers: node type -> bound handler method, from :data:`STMT_HANDLERS` /
            :data:`EXPR_HANDLERS` resolved on this instance (a subclass's overrides are used).
    """

    def __init__(self, km: emit.KernelModule, *, unroll_limit: int | None = None,
                 folder: FoldRecorder | None = None):
        self.km = km
        self.folder = folder
        self.frames: list[Frame] = []
        self.dead = False
        self.recorder = DependencyRecorder()
        self.unroll_limit = guards.resolve_unroll_limit(unroll_limit)
        self.regions: list = []
        # Bound handlers, looked up once per generator: a subclass's override wins (no per-node getattr).
        self.stmt_handlers = {kind: getattr(self, name) for kind, name in STMT_HANDLERS.items()}
        self.expr_handlers = {kind: getattr(self, name) for kind, name in EXPR_HANDLERS.items()}

    # -- plumbing -----------------------------------------------------------------------------
    @property
    def frame(self) -> Frame:
        """The innermost :class:`~.frame.Frame` (the function whose body is being visited)."""
        return self.frames[-1]

    @property
    def builder(self):
        """The ``llvmlite.ir.IRBuilder`` of the module under construction, positioned where code goes next."""
        return self.km.builder

    def location(self, node):
        """The :class:`~tsjit.errors.SourceLocation` of ``node`` in the innermost frame's source file."""
        return self.frame.parsed.location(node)

    def new_block(self, name: str):
        """Append a new basic block called ``name`` to the kernel function (the builder stays where it is)."""
        return self.km.function.append_basic_block(name)

    def error(self, node, message: str) -> CompilationError:
        """A :class:`~tsjit.errors.CompilationError` with ``message`` located at ``node`` (the caller raises it)."""
        return CompilationError(message, self.location(node))

    # -- statements ---------------------------------------------------------------------------
    def visit_body(self, statements) -> None:
        """Compile ``statements`` in order, stopping after one that ends the block (``return``, ``break``...)."""
        for stmt in statements:
            if self.dead:
                return
            self.visit_stmt(stmt)

    def visit_stmt(self, node) -> None:
        """Compile one statement through its handler in :data:`STMT_HANDLERS` (records it in the folded
        source when a :class:`~.folded.FoldRecorder` is attached).

        Raises:
            CompilationError: the statement kind is not device code (``with``, ``try``, ``class``...), or its
                handler failed; located at ``node`` unless the error already points deeper.
        """
        handler = self.stmt_handlers.get(type(node))
        self.km.statement = (self.frame.parsed, node)
        try:
            if handler is None:
                what = _UNSUPPORTED_STMTS.get(type(node), f"`{type(node).__name__}`")
                raise self.error(node, f"{what} is not supported in device code")
            handler(node)
            if self.folder is not None:
                self._record_folded(node)
        except CompilationError as exc:
            raise exc.with_location(self.location(node)) from None
        except RecursionError:
            raise self.error(node, "this code nests too deeply to compile (a recursion that does not end at "
                                   "compile time, or expressions nested hundreds deep); simplify it") from None

    def _record_folded(self, node) -> None:
        if type(node) in _STRUCTURED_STMTS or _is_docstring(node):
            return  # control flow records itself; docstrings compile to nothing
        if isinstance(node, ast.Return) and not self.frame.is_kernel:
            self.folder.inlined_return(node, self.frame.parsed.node.name)
        else:
            self.folder.statement(node)

    def stmt_expr(self, node: ast.Expr) -> None:
        """An expression statement: evaluate it for its effects (a docstring compiles to nothing)."""
        if _is_docstring(node):
            return
        self.expr(node.value)

    def stmt_pass(self, node) -> None:
        """``pass``: nothing to emit."""
        pass

    def stmt_assign(self, node: ast.Assign) -> None:
        """``a = b = value``: evaluate ``value`` once and bind it to every target (:meth:`assign`)."""
        value = self.expr(node.value)
        for target in node.targets:
            self.assign(target, value, node)

    def stmt_annassign(self, node: ast.AnnAssign) -> None:
        """``x: T = value``: when ``T`` is a tsjit dtype the value is converted to it (``cast_to``);
        a bare annotation without a value compiles to nothing.
        """
        if node.value is None:
            return
        value = self.expr(node.value)
        annotation = self.expr(node.annotation)
        if isinstance(annotation, DType):
            value = V.cast_to(value, annotation)
        self.assign(node.target, value, node)

    def stmt_augassign(self, node: ast.AugAssign) -> None:
        """``target op= value`` for a name, an item (``x[i] += v``) or an attribute target.

        Raises:
            CompilationError: the target is of another kind (e.g. a starred expression).
        """
        op = _BINOPS[type(node.op)]
        if isinstance(node.target, ast.Name):
            current = self.lookup(node.target.id, node.target)
            self.assign(node.target, self.apply(op, current, self.expr(node.value), node), node)
        elif isinstance(node.target, ast.Subscript):
            container = self.expr(node.target.value)
            key = self.subscript_key(node.target.slice)
            current = container[key]
            self.store_item(node.target, container, key, self.apply(op, current, self.expr(node.value), node), node)
        elif isinstance(node.target, ast.Attribute):
            obj = self.expr(node.target.value)
            current = getattr(obj, node.target.attr)
            setattr(obj, node.target.attr, self.apply(op, current, self.expr(node.value), node))
        else:
            raise self.error(node, "unsupported augmented-assignment target")

    def assign(self, target, value, node) -> None:
        """Bind ``value`` to ``target``: a name (in the frame's scope), a tuple/list pattern (unpacked,
        ``*rest`` allowed), an item (:meth:`store_item`) or an attribute of a compile-time object.

        Raises:
            CompilationError: the number of values does not match the pattern, or the target cannot be
                assigned.
        """
        if isinstance(target, ast.Name):
            self.frame.scope[target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            items = self.unpack(value, target)
            starred = [i for i, t in enumerate(target.elts) if isinstance(t, ast.Starred)]
            if starred:
                k = starred[0]
                after = len(target.elts) - k - 1
                if len(items) < len(target.elts) - 1:
                    raise self.error(target, f"not enough values to unpack (got {len(items)})")
                groups = list(items[:k]) + [items[k:len(items) - after]] + list(items[len(items) - after:])
                for t, v in zip(target.elts, groups):
                    self.assign(t.value if isinstance(t, ast.Starred) else t,
                                tuple(v) if isinstance(t, ast.Starred) else v, node)
                return
            if len(items) != len(target.elts):
                raise self.error(target, f"cannot unpack {len(items)} values into {len(target.elts)} names")
            for t, v in zip(target.elts, items):
                self.assign(t, v, node)
        elif isinstance(target, ast.Subscript):
            container = self.expr(target.value)
            self.store_item(target, container, self.subscript_key(target.slice), value, node)
        elif isinstance(target, ast.Attribute):
            obj = self.expr(target.value)
            try:
                setattr(obj, target.attr, value)
            except (AttributeError, TypeError) as exc:
                raise self.error(target, f"cannot set attribute `{target.attr}`: {exc}") from None
        else:
            raise self.error(target, f"cannot assign to {type(target).__name__}")

    def store_item(self, target: ast.Subscript, container, key, value, node) -> None:
        """``container[key] = value``.  A value-semantics container (``tsjit.Fragment``) is not
        mutated: the expression it came from (a name) is rebound to ``container.with_item(key, value)``,
        so SSA merges and loop phis see the change."""
        if getattr(type(container), "__tsjit_value_semantics__", False):
            self.assign(target.value, container.with_item(key, value), node)
            return
        guards.check_mutation(self.regions, container, "item assignment")
        try:
            container[key] = value
        except CompilationError as exc:
            raise named_container(exc, target.value, container) from None
        except TypeError as exc:
            raise self.error(target, f"cannot assign into {type(container).__name__}: {exc}") from None

    def stmt_assert(self, node: ast.Assert) -> None:
        """``assert cond, msg`` on a compile-time condition: a failed assertion stops the compile.

        Raises:
            CompilationError: the condition is a run-time value, or it is false (with ``msg``).
        """
        test = self.expr(node.test)
        if isinstance(test, Value):
            raise self.error(node, "`assert` needs a compile-time condition; for a run-time check use an "
                                   "`if` with tsjit.device_print")
        if not test:
            msg = self.expr(node.msg) if node.msg is not None else "assertion failed"
            raise self.error(node, f"compile-time assertion failed: {msg}")

    def stmt_raise(self, node: ast.Raise) -> None:
        """``raise`` in device code stops the compile with the exception's text (a compile-time error).

        Raises:
            CompilationError: always; also when the ``raise`` sits under a run-time condition.
        """
        if self.frame.dynamic_depth:
            raise self.error(node, "`raise` under a run-time condition is not supported in device code")
        exc = self.expr(node.exc) if node.exc is not None else None
        raise self.error(node, f"{type(exc).__name__ if isinstance(exc, BaseException) else 'error'}: {exc}")

    def stmt_functiondef(self, node: ast.FunctionDef) -> None:
        """A nested ``def`` becomes a compile-time Python closure over the current bindings (:meth:`make_closure`)."""
        self.frame.scope[node.name] = self.make_closure(node)

    # -- expressions --------------------------------------------------------------------------
    def expr(self, node):
        """Evaluate expression ``node`` to an object (a compile-time value or a run-time handle) through its
        handler in :data:`EXPR_HANDLERS`; other kinds go to :meth:`eval_python`.

        Raises:
            CompilationError: the expression is not valid device code (located at ``node``).
        """
        handler = self.expr_handlers.get(type(node))
        try:
            if handler is None:
                return self.eval_python(node)
            return handler(node)
        except CompilationError as exc:
            raise exc.with_location(self.location(node)) from None

    def lookup(self, name: str, node, record: bool = True):
        """The object ``name`` is bound to: local, closure cell, module global, then builtin.  A
        non-local is recorded as a dependency (``record=False``: the caller records a longer chain)."""
        frame = self.frame
        if name in frame.scope:
            return frame.scope[name]
        if name in frame.parsed.closure:
            value = frame.parsed.closure[name]
        elif name in frame.parsed.globals:
            value = frame.parsed.globals[name]
        elif hasattr(builtins, name):
            value = getattr(builtins, name)
        else:
            raise self.error(node, f"name `{name}` is not defined here" + self._undefined_hint(name))
        if record:
            self.record_name(name, (), value, node)
        return value

    def _undefined_hint(self, name: str) -> str:
        if name in self.frame.dropped:
            return (f" (`{name}` is assigned in only one branch of a run-time `if`, or only inside a run-time "
                    f"loop, so it has no value after it; assign it before the `if`/loop)")
        if name in getattr(sys.modules.get("tsjit"), "__all__", ()):   # `range_constexpr(...)` without `tsjit.`
            return f"; did you mean tsjit.{name}?"
        return ""

    def expr_name(self, node: ast.Name):
        """A name: its binding (:meth:`lookup`)."""
        return self.lookup(node.id, node)

    def expr_constant(self, node: ast.Constant):
        """A literal: the Python value itself (it becomes IR only where a run-time value needs it)."""
        return node.value

    def expr_tuple(self, node: ast.Tuple):
        """A tuple display, ``*iterable`` items unpacked (bounded by the unroll limit)."""
        items = []
        for elt in node.elts:
            if isinstance(elt, ast.Starred):
                items.extend(self.unpack(self.expr(elt.value), elt))
            else:
                items.append(self.expr(elt))
        return tuple(items)

    def unpack(self, value, node) -> tuple:
        """``tuple(value)`` for ``a, b = value`` / ``f(*value)``, bounded by the unroll limit."""
        return tuple(guards.bounded_iteration(value, self.unroll_limit, "unpacking"))

    def expr_attribute(self, node: ast.Attribute):
        """``obj.attr``.  A chain rooted at a non-local (``pkg.helpers.scale``) is resolved and recorded as one
        dependency of the cache entry; otherwise ``obj`` is evaluated first.

        Raises:
            CompilationError: the object has no such attribute.
        """
        chain = attribute_chain(node)
        if chain is not None and chain[0] not in self.frame.scope:  # `pkg.helpers.scale`: one record
            links, root = [], node
            while isinstance(root, ast.Attribute):
                links.append(root)
                root = root.value
            obj = self.lookup(root.id, root, record=False)
            for link in reversed(links):
                obj = self._get_attribute(obj, link)
            self.record_name(chain[0], chain[1], obj, node)
            return obj
        return self._get_attribute(self.expr(node.value), node)

    def _get_attribute(self, obj, node: ast.Attribute):
        try:
            value = getattr(obj, node.attr)
        except AttributeError as exc:
            hint = getattr(exc, "hint", None) or attribute_hint(obj, node.attr)   # tsjit.math lists its functions
            raise self.error(node, f"{self._type_name(obj)} has no attribute `{node.attr}`"
                             + (f"; {hint}" if hint else "")) from None
        explain = getattr(type(value), "__tsjit_not_a_value__", None)   # e.g. a TS TaskLocalVariable
        if explain is not None:
            raise self.error(node, explain(value))
        return value

    @staticmethod
    def _type_name(obj) -> str:
        if isinstance(obj, Value):
            return f"a {obj.dtype.name} value"
        if isinstance(obj, type(ast)):
            return f"module `{obj.__name__}`"
        return f"`{type(obj).__name__}` object"

    def subscript_key(self, node):
        """The index object of a subscript: a ``slice``, a tuple of keys, or the evaluated expression."""
        if isinstance(node, ast.Slice):
            parts = [self.expr(p) if p is not None else None for p in (node.lower, node.upper, node.step)]
            return slice(*parts)
        if isinstance(node, ast.Tuple):
            return tuple(self.subscript_key(e) for e in node.elts)
        return self.expr(node)

    def expr_subscript(self, node: ast.Subscript):
        """``container[key]`` (tensor element loads, tuple items, compile-time lookups).

        Raises:
            CompilationError: the container cannot be indexed with that key.
        """
        container = self.expr(node.value)
        key = self.subscript_key(node.slice)
        if key is None or (isinstance(key, tuple) and any(k is None for k in key)):
            raise self.error(node, none_index(node.value, node.slice, key, self.frame.scope.get("self")))
        try:
            return container[key]
        except CompilationError as exc:
            raise named_container(exc, node.value, container) from None
        except (TypeError, IndexError, KeyError) as exc:
            raise self.error(node, f"cannot index {self._type_name(container)}: {exc}") from None

    def apply(self, op, left, right, node):
        """``op(left, right)`` with compile-time errors turned into located messages: division by zero,
        a size beyond :mod:`.guards`' limits, a type mismatch.

        Raises:
            CompilationError: the operation fails (located at ``node``).
        """
        try:
            guards.check_compile_time_size(op, left, right)
            return op(left, right)
        except CompilationError:
            raise
        except ZeroDivisionError as exc:
            raise self.error(node, f"division by zero in compile-time arithmetic ({exc})") from None
        except (TypeError, ValueError, OverflowError, MemoryError) as exc:
            raise self.error(node, f"{type(exc).__name__}: {exc}" if isinstance(exc, MemoryError) else f"{exc}") \
                from None

    def expr_binop(self, node: ast.BinOp):
        """``left op right``: Python arithmetic on compile-time values, IR through ``Value``'s operators otherwise.

        Raises:
            CompilationError: an operand is an array (``x[i] * s`` with ``x`` of rank 2): the message names
                the array, its rank and the indices an element needs.
        """
        left, right = self.expr(node.left), self.expr(node.right)
        for side, value in ((node.left, left), (node.right, right)):
            if isinstance(value, Tensor):
                raise self.error(side, not_an_element(side, value))
        return self.apply(_BINOPS[type(node.op)], left, right, node)

    def expr_unaryop(self, node: ast.UnaryOp):
        """``-x``, ``+x``, ``~x`` and ``not x`` (``not`` of a run-time value is a Boolean negation)."""
        operand = self.expr(node.operand)
        if isinstance(node.op, ast.Not):
            return V.logical_not(operand)
        op = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Invert: operator.invert}[type(node.op)]
        return self.apply(lambda a, _: op(a), operand, None, node)

    def expr_compare(self, node: ast.Compare):
        """A comparison chain ``a < b <= c``: the parts joined with :meth:`logical_and`, each operand evaluated once."""
        left = self.expr(node.left)
        result = None
        for op, comparator in zip(node.ops, node.comparators):
            right = self.expr(comparator)
            part = self.apply(_CMPOPS[type(op)], left, right, node)
            result = part if result is None else self.logical_and(result, part)
            left = right
        return result

    def logical_and(self, a, b):
        """``a and b`` of two comparison results: folded when either is a compile-time value, else a Boolean ``&``."""
        if not isinstance(a, Value):
            return b if a else a
        if not isinstance(b, Value):
            return a if b else b
        return V.binary("&", V.cast_to(a, V.dt.Boolean), V.cast_to(b, V.dt.Boolean))

    def expr_call(self, node: ast.Call):
        """A call: the callee and its arguments (``*args``/``**kwargs`` unpacked) are evaluated, then
        :meth:`call` decides what the call means."""
        func = self.expr(node.func)
        args = []
        for a in node.args:
            if isinstance(a, ast.Starred):
                args.extend(self.unpack(self.expr(a.value), a))
            else:
                args.append(self.expr(a))
        kwargs = {}
        for kw in node.keywords:
            if kw.arg is None:
                kwargs.update(self.expr(kw.value))
            else:
                kwargs[kw.arg] = self.expr(kw.value)
        return self.call(func, args, kwargs, node)

    def expr_namedexpr(self, node: ast.NamedExpr):
        """``(name := value)``: binds ``name`` and yields ``value``."""
        value = self.expr(node.value)
        self.assign(node.target, value, node)
        return value

    def expr_lambda(self, node: ast.Lambda):
        """A ``lambda`` becomes a compile-time Python closure over the current bindings (:meth:`make_closure`)."""
        return self.make_closure(node)

    def expr_joinedstr(self, node: ast.JoinedStr):
        """An f-string: text when every field is a compile-time value, else a
        :class:`~tsjit.lang.builtins.DeviceText` that ``tsjit.device_print`` prints at run time."""
        pieces = []
        for part in node.values:
            if isinstance(part, ast.Constant):
                pieces.append(part.value)
                continue
            value = self.expr(part.value)
            spec = self.expr(part.format_spec) if part.format_spec is not None else ""
            if not isinstance(spec, str):
                raise self.error(part, "the format spec of an f-string field must be compile-time text")
            if isinstance(value, Value):
                pieces.append(DeviceField(value, spec))
                continue
            converter = {ord("r"): repr, ord("s"): str, ord("a"): ascii}.get(part.conversion)
            try:
                pieces.append(format(converter(value) if converter else value, spec))
            except CompilationError:
                raise
            except (TypeError, ValueError) as exc:
                raise self.error(part, f"cannot format {self._type_name(value)}: {exc}") from None
        if all(isinstance(p, str) for p in pieces):
            return "".join(pieces)
        return DeviceText(tuple(pieces))

    def expr_unsupported(self, node):
        """``yield``, ``yield from`` and ``await``: device code is neither a generator nor a coroutine.

        Raises:
            CompilationError: always, saying what to write instead.
        """
        what = {ast.Yield: "`yield`", ast.YieldFrom: "`yield from`", ast.Await: "`await`"}[type(node)]
        raise self.error(node, f"{what} is not supported in device code: a kernel or @tsjit.func runs once per "
                               f"thread and cannot be a generator or coroutine; write results to an array, or "
                               f"return a tuple")

    def eval_python(self, node):
        """Evaluate an expression this visitor has no handler for (comprehensions, f-strings, dict/list
        displays) as Python over the current bindings; device values inside still build IR."""
        frame = self.frame
        self.record_references(node)
        try:
            code = compile(ast.fix_missing_locations(ast.Expression(body=node)), frame.parsed.filename, "eval")
            # a traceback through this line names the kernel (or device function), not `<module>`
            code = code.replace(co_name=frame.parsed.node.name, co_qualname=frame.parsed.node.name)
        except SyntaxError as exc:
            raise self.error(node, f"this expression is not supported in device code ({exc.msg})") from None
        # One dict for globals and locals: a comprehension is a nested scope that sees only the
        # globals of ``eval`` (before Python 3.12), and it must see the kernel's bindings too.
        namespace = dict(frame.parsed.globals)
        namespace.update(frame.parsed.closure)
        namespace.update(frame.scope)
        try:
            return eval(code, namespace)  # noqa: S307 - user kernel code
        except TsjitError:
            raise
        except Exception as exc:  # user compile-time code failed
            raise self.error(node, f"{type(exc).__name__}: {exc}") from None


#: Statement node type -> name of the handler method.  Dispatch goes through ``getattr`` on the
#: instance (see :meth:`CodeGenerator.__init__`), so a subclass that overrides a handler is used.
STMT_HANDLERS = {
    ast.Expr: "stmt_expr", ast.Pass: "stmt_pass", ast.Assign: "stmt_assign", ast.AnnAssign: "stmt_annassign",
    ast.AugAssign: "stmt_augassign", ast.Assert: "stmt_assert", ast.Raise: "stmt_raise",
    ast.FunctionDef: "stmt_functiondef", ast.If: "stmt_if", ast.For: "stmt_for", ast.While: "stmt_while",
    ast.Break: "stmt_break", ast.Continue: "stmt_continue", ast.Return: "stmt_return",
}
#: Expression node type -> name of the handler method; an unlisted type falls back to
#: :meth:`CodeGenerator.eval_python`.
EXPR_HANDLERS = {
    ast.Name: "expr_name", ast.Constant: "expr_constant", ast.Tuple: "expr_tuple",
    ast.Attribute: "expr_attribute", ast.Subscript: "expr_subscript", ast.BinOp: "expr_binop",
    ast.UnaryOp: "expr_unaryop", ast.Compare: "expr_compare", ast.Call: "expr_call", ast.Lambda: "expr_lambda",
    ast.NamedExpr: "expr_namedexpr", ast.JoinedStr: "expr_joinedstr", ast.Yield: "expr_unsupported",
    ast.YieldFrom: "expr_unsupported", ast.Await: "expr_unsupported", ast.BoolOp: "expr_boolop",
    ast.IfExp: "expr_ifexp",
}
