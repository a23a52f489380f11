"""The folded source: the kernel as it was actually compiled, as Python text.

While the :class:`~.codegen.CodeGenerator` visits a kernel it feeds a :class:`FoldRecorder`
with what it compiled, statement by statement, and the recorder builds a new ``ast`` from it:

* an ``if`` on a compile-time condition (``tsjit.const_expr(...)``, a work body's
  ``stage.label == ...``) becomes the statements of the arm taken, after a comment naming
  the condition and the arm;
* a compile-time loop (``tsjit.range_constexpr``, a loop over a tuple) is unrolled: each
  iteration is a comment, an assignment of the loop variable (when its value prints as a
  literal) and the body's statements;
* a ``@tsjit.func`` call, a TS work body and a domain-loop end provider (all inlined) appear
  as the callee's compiled statements between ``# inline <name> ...`` and ``# end inline
  <name>`` comments, before the statement that made the call;
* run-time ``if`` / ``for`` / ``while`` stay as they are, with their bodies folded.

Statements are recorded by reference (the user's own nodes, not copies) and only while a
recorder is attached, so recording costs a list append per statement and nothing at all
when it is off.  :func:`render` prints the tree with ``astor``; comments are carried as
marker calls and turned into ``#`` lines after printing.
"""
from __future__ import annotations

import ast
import re


_COMMENT = "__tsjit_folded_comment__"
_COMMENT_LINE = re.compile(rf"^(\s*){_COMMENT}\((.*)\)$", re.M)


class FoldRecorder:
    """Builds the folded ``ast`` of one kernel as the code generator visits it.

    Attributes:
        body: the statement list being filled (the innermost open block).
    """

    def __init__(self):
        self._blocks: list[list[ast.stmt]] = [[]]
        self._snippets: dict[int, str] = {}   # id(node) -> its text: an unrolled body repeats its nodes

    def _snippet(self, node) -> str:
        text = self._snippets.get(id(node))
        if text is None:
            text = self._snippets[id(node)] = _text(node)
        return text

    @property
    def body(self) -> list:
        """The innermost open statement list."""
        return self._blocks[-1]

    def statement(self, node: ast.stmt) -> None:
        """Record a statement compiled as written (an assignment, a call, ``return``...)."""
        self.body.append(node)

    def inlined_return(self, node: ast.Return, function: str) -> None:
        """Record a ``return`` of an inlined function as a comment (the call site, recorded next,
        receives the value)."""
        value = "" if node.value is None else " " + self._snippet(node.value)
        self.comment(f"return{value}  (result of {function})")

    def comment(self, text: str) -> None:
        """Record a ``# text`` line at the current position."""
        self.body.append(ast.Expr(ast.Call(func=ast.Name(id=_COMMENT, ctx=ast.Load()),
                                           args=[ast.Constant(text.replace("\n", " "))], keywords=[])))

    def open_block(self) -> list:
        """Start a nested statement list (a run-time ``if`` arm, a loop body); returns it."""
        block: list[ast.stmt] = []
        self._blocks.append(block)
        return block

    def close_block(self) -> list:
        """Finish the innermost nested list and return it; an empty block gets a ``pass``."""
        block = self._blocks.pop()
        if not block:
            block.append(ast.Pass())
        return block

    def runtime_if(self, node: ast.If, then_body: list, else_body: list) -> None:
        """Record a run-time ``if`` with its folded arms."""
        self.body.append(ast.If(test=node.test, body=then_body,
                                orelse=[] if _is_pass(else_body) and not node.orelse else else_body))

    def runtime_loop(self, node, body: list) -> None:
        """Record a run-time ``for`` / ``while`` with its folded body."""
        if isinstance(node, ast.For):
            self.body.append(ast.For(target=node.target, iter=node.iter, body=body, orelse=[]))
        else:
            self.body.append(ast.While(test=node.test, body=body, orelse=[]))

    def folded_if(self, node: ast.If, taken: bool) -> None:
        """Record that compile-time ``if`` ``node`` folded to one arm (the statements follow)."""
        arm = "the `if` arm" if taken else ("the `else` arm" if node.orelse else "nothing (no `else`)")
        self.comment(f"folded: if {self._snippet(node.test)}  ->  {arm}")

    def unrolled_iteration(self, node: ast.For, index: int, item) -> None:
        """Record the start of iteration ``index`` (binding ``item``) of an unrolled loop."""
        self.comment(f"unrolled: for {self._snippet(node.target)} in {self._snippet(node.iter)}  [iteration {index}]")
        if isinstance(node.target, ast.Name) and _is_literal(item):
            self.body.append(ast.Assign(targets=[ast.Name(id=node.target.id, ctx=ast.Store())],
                                        value=ast.Constant(item)))
        else:
            self.comment(f"{self._snippet(node.target)} = {_short_repr(item)}")

    def inline_arguments(self, arguments: dict, call) -> None:
        """Record ``parameter = argument`` for each parameter an inlined call binds (``arguments``:
        parameter -> bound object): the call's own expression when ``call`` is an ``ast.Call`` with
        plain arguments, else the value when it prints as a literal, else a comment naming its type."""
        given = {}
        if isinstance(call, ast.Call) and not any(isinstance(a, ast.Starred) for a in call.args) \
                and all(k.arg is not None for k in call.keywords):
            given = dict(zip(arguments, call.args))
            given.update({k.arg: k.value for k in call.keywords})
        for name, value in arguments.items():
            if name in given:
                self.body.append(ast.Assign(targets=[ast.Name(id=name, ctx=ast.Store())], value=given[name]))
            elif _is_literal(value):
                self.body.append(ast.Assign(targets=[ast.Name(id=name, ctx=ast.Store())], value=ast.Constant(value)))
            else:
                self.comment(f"{name} = {_describe(value)}")

    def function(self, name: str, args: list[str]) -> ast.FunctionDef:
        """The kernel's folded definition: ``def name(args): <everything recorded>``."""
        fn = ast.FunctionDef(name=name, args=ast.arguments(
            posonlyargs=[], args=[ast.arg(arg=a) for a in args], vararg=None, kwonlyargs=[], kw_defaults=[],
            kwarg=None, defaults=[]), body=list(self._blocks[0]) or [ast.Pass()], decorator_list=[],
            returns=None, type_comment=None)
        fn.type_params = []
        return fn


def render(fn: ast.FunctionDef, header: str = "") -> str:
    """Python text of the folded function ``fn`` (printed with ``astor``), comments restored,
    prefixed by the ``header`` comment lines."""
    text = _print(fn)
    text = _COMMENT_LINE.sub(lambda m: f"{m.group(1)}# {ast.literal_eval(m.group(2))}", text)
    lines = [f"# {line}" for line in header.splitlines()]
    return "\n".join(lines + [text]) if lines else text


def _is_pass(body: list) -> bool:
    return len(body) == 1 and isinstance(body[0], ast.Pass)


def _is_literal(value) -> bool:
    if isinstance(value, bool) or value is None:
        return True
    if isinstance(value, (int, float, str)):
        return len(repr(value)) <= 80
    return False


def _describe(value) -> str:
    label = getattr(value, "label", None)
    name = getattr(value, "name", None)
    kind = type(value).__name__
    if isinstance(label, str):
        return f"<{kind} label={label!r}>"
    if isinstance(name, str):
        return f"<{kind} {name!r}>"
    return f"<{kind}>"


def _short_repr(value) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _print(node) -> str:
    # One line per statement (astor's default pretty-printer wraps long lines, which would split
    # the comment markers).
    try:
        import astor  # lazily: only printing needs it, and compiling must work where astor is absent (the H200 image)
    except ImportError:  # no astor: the standard library prints the same tree (TSJIT_DUMP_DIR keeps working)
        return ast.unparse(ast.fix_missing_locations(node)) + "\n"
    return astor.to_source(node, pretty_source="".join)


def _text(node) -> str:
    return ast.unparse(node)  # a short snippet for a comment: without astor's defensive parentheses


__all__ = ["FoldRecorder", "render"]
