"""Parsing a Python function's source into an ``ast`` with absolute positions.

:class:`ParsedFunction` holds the function's ``ast.FunctionDef`` (line numbers are the
file's own, columns are the file's own), its globals, its closure variables and a
SHA-256 digest of its source.  Parsing is cached per function object.

:func:`source_text` returns the exact source text of a function or class (for dependency
digests); a class is found in its file's ``ast`` (parsed once per file version), not by
``inspect.getsource``, which re-parses the whole file on every call.
"""
from __future__ import annotations

import ast
import hashlib
import inspect
import linecache
import os
import sys
import textwrap
import types
from dataclasses import dataclass, field

from tsjit.errors import CompilationError, SourceLocation


@dataclass
class ParsedFunction:
    """A parsed device function.

    Attributes:
        fn: the Python function object.
        node: its ``ast.FunctionDef`` with absolute line/column numbers.
        filename: absolute path of the defining file.
        globals: the function's module globals.
        closure: free variables captured from enclosing functions (name -> value).
        digest: SHA-256 hex digest of the source text.
        source: the dedented source text.
    """

    fn: object
    node: ast.FunctionDef
    filename: str
    globals: dict
    closure: dict
    digest: str
    source: str
    signature: inspect.Signature = field(default=None)

    def location(self, node: ast.AST | None = None) -> SourceLocation:
        """Where ``node`` (default: the ``def``) is; the column counts characters (``ast`` counts
        UTF-8 bytes)."""
        node = node or self.node
        line = getattr(node, "lineno", self.node.lineno)
        return SourceLocation(self.filename, line, character_column(self.filename, line,
                                                                    getattr(node, "col_offset", 0)),
                              self.node.name)


def character_column(filename: str, line: int, byte_offset: int) -> int:
    """The 0-based character column of UTF-8 ``byte_offset`` in line ``line`` of ``filename``."""
    text = linecache.getline(filename, line)
    if not text or text.isascii():
        return byte_offset
    return len(text.encode("utf-8")[:byte_offset].decode("utf-8", errors="ignore"))


_CACHE: dict[object, ParsedFunction] = {}


def parse_function(fn) -> ParsedFunction:
    """Parse ``fn`` (a plain Python function) once and return its :class:`ParsedFunction`.

    Raises:
        CompilationError: the source cannot be found (functions typed into a REPL or built with
            ``exec``) or is not a single ``def``.
    """
    cached = _CACHE.get(fn)
    if cached is not None:
        return cached
    lines, first_line, filename, module = _source_lines(fn)
    raw = "".join(lines)
    source = textwrap.dedent(raw)
    indent = len(lines[0]) - len(lines[0].lstrip()) if lines else 0
    where = SourceLocation(os.path.abspath(filename), first_line, indent, fn.__name__)
    if module is None:
        try:
            module = _parse_at(source, first_line)
        except SyntaxError as exc:
            at = SourceLocation(where.filename, exc.lineno or first_line, indent, fn.__name__)
            raise CompilationError(f"cannot parse the source of {fn.__qualname__}: {exc.msg}", at) from None
    fdefs = [n for n in module.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    if len(fdefs) == 1 and isinstance(fdefs[0], ast.AsyncFunctionDef):
        at = SourceLocation(where.filename, fdefs[0].lineno, indent, fn.__name__)
        raise CompilationError(f"{fn.__qualname__} is an `async def`; a kernel or device function must be a "
                               f"plain `def` (device code has no coroutines): remove `async`", at)
    if len(fdefs) != 1:
        raise CompilationError(f"{fn.__qualname__} must be a plain `def` function", where)
    node = fdefs[0]
    if indent:
        for sub in ast.walk(node):
            if hasattr(sub, "col_offset"):
                sub.col_offset += indent
                if getattr(sub, "end_col_offset", None) is not None:
                    sub.end_col_offset += indent
    closure = {}
    if getattr(fn, "__closure__", None):
        for name, cell in zip(fn.__code__.co_freevars, fn.__closure__):
            try:
                closure[name] = cell.cell_contents
            except ValueError:  # empty cell
                pass
    parsed = ParsedFunction(
        fn=fn, node=node, filename=os.path.abspath(filename), globals=fn.__globals__, closure=closure,
        digest=hashlib.sha256(raw.encode()).hexdigest(), source=source,
        signature=inspect.signature(fn))
    _CACHE[fn] = parsed
    return parsed


def _parse_at(source: str, first_line: int) -> ast.Module:
    # blank lines first: the nodes get the file's line numbers without a pass over the tree
    return ast.parse("\n" * (first_line - 1) + source)


def _source_lines(fn) -> tuple[list[str], int, str, ast.Module | None]:
    """(lines, first line number, file name, parsed module or ``None``) of ``fn``'s ``def``, decorators
    included.

    First from ``linecache`` by the code object's line span (:func:`source_text`) carried on to the end
    of the ``def``'s indented block (:func:`_block_end`: statements that compile to no instruction, such
    as a last ``global`` or ``pass``, are not in the span), which needs no tokenizer pass
    (``inspect.getsourcelines`` tokenizes the block: 0.3 ms per work method of the TS GEMM against 0.1),
    kept when it parses to one ``def`` of ``fn``'s name; else
    ``inspect`` (a wrapped function, a docstring-only body whose span ends at the ``def`` line, a
    file that is not in ``linecache``, e.g. one imported from a zip archive), parsed by the caller.

    Raises:
        CompilationError: the source cannot be found (functions typed into a REPL or built with ``exec``).
    """
    code = getattr(fn, "__code__", None)
    text = None
    if isinstance(code, types.CodeType) and not hasattr(fn, "__wrapped__") and source_text(fn) is not None:
        file_lines = linecache.getlines(code.co_filename)
        end = _block_end(file_lines, code.co_firstlineno, _last_line(code))
        text = "".join(file_lines[code.co_firstlineno - 1:end])
    if text is not None:
        lines = text.splitlines(keepends=True)
        try:
            module = _parse_at(textwrap.dedent(text), code.co_firstlineno)
        except SyntaxError:
            module = None
        if module is not None and len(module.body) == 1 and getattr(module.body[0], "name", None) == code.co_name:
            return lines, code.co_firstlineno, code.co_filename, module
    try:
        lines, first_line = inspect.getsourcelines(fn)
        return lines, first_line, inspect.getsourcefile(fn) or inspect.getfile(fn), None
    except (OSError, TypeError) as exc:
        raise CompilationError(
            f"cannot read the source of {getattr(fn, '__qualname__', fn)!r} ({exc}); tsjit compiles "
            f"functions defined in a file or notebook cell") from None


def _block_end(lines: list[str], first: int, last: int) -> int:
    """The 1-based last line of the block of the ``def`` that starts at or after line ``first``
    (decorators first): ``last``, or the last later line indented deeper than the ``def`` before the
    first that is not (blank and comment-only lines do not end it and are not counted)."""
    index = first - 1
    while index < len(lines) and not lines[index].lstrip().startswith(("def ", "async def ")):
        index += 1
    if index >= len(lines):
        return last
    indent = len(lines[index]) - len(lines[index].lstrip())
    end = last
    for number in range(last + 1, len(lines) + 1):
        text = lines[number - 1]
        stripped = text.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if len(text) - len(text.lstrip()) <= indent:
            break
        end = number
    return end


_MODULE_TREES: dict[str, tuple[list, dict]] = {}


def source_text(obj) -> str | None:
    """The source text of a function (``def`` or ``lambda`` line block) or class, decorators
    included, read through ``linecache``; ``None`` when it has none (builtins, ``exec``, REPL).

    A class's text is located by its ``__qualname__`` in its module file's ``ast``; the parsed
    tree is cached per file and reused while ``linecache`` holds the same lines.  ``linecache`` is
    checked against the file first (``checkcache``, one ``stat``): a file edited and its module reloaded
    in the same process gives the new text, so the kernel's cache key changes with it.
    """
    if inspect.isclass(obj):
        return _class_source(obj)
    code = getattr(obj, "__code__", None)
    if not isinstance(code, types.CodeType):
        return None
    linecache.checkcache(code.co_filename)   # a file edited since linecache read it (as inspect does)
    lines = linecache.getlines(code.co_filename)
    if not lines:
        return None
    # From the first line (the first decorator's) to the last line any instruction of it, or of the
    # code nested in it, spans: the text that defines what it does, read without tokenizing.
    last = _last_line(code)
    first = code.co_firstlineno
    if first < 1 or last > len(lines):
        return None
    return "".join(lines[first - 1:last])


def _last_line(code: types.CodeType) -> int:
    last = code.co_firstlineno
    if hasattr(code, "co_positions"):  # Python >= 3.11: (line, end line, column, end column)
        ends = (end for _, end, _, _ in code.co_positions())
    else:
        ends = (line for _, _, line in code.co_lines())
    for end_line in ends:
        if end_line is not None and end_line > last:
            last = end_line
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            last = max(last, _last_line(const))
    return last


def _class_source(cls) -> str | None:
    module = sys.modules.get(getattr(cls, "__module__", None) or "")
    filename = getattr(module, "__file__", None)
    if not filename or "<locals>" in cls.__qualname__:
        return _class_source_by_methods(cls)
    linecache.checkcache(filename)
    lines = linecache.getlines(filename)
    if not lines:
        return None
    cached = _MODULE_TREES.get(filename)
    if cached is None or cached[0] is not lines:
        try:
            tree = ast.parse("".join(lines))
        except (SyntaxError, ValueError):
            return None
        spans: dict = {}

        def walk(body, prefix):
            for node in body:
                if isinstance(node, ast.ClassDef):
                    qualname = prefix + node.name
                    first = min([node.lineno] + [d.lineno for d in node.decorator_list])
                    spans.setdefault(qualname, (first, node.end_lineno))
                    walk(node.body, qualname + ".")
        walk(tree.body, "")
        cached = _MODULE_TREES[filename] = (lines, spans)
    span = cached[1].get(cls.__qualname__)
    if span is None:
        return None
    return "".join(lines[span[0] - 1:span[1]])


def _class_source_by_methods(cls) -> str | None:
    """A class defined inside a function: ``inspect.getsource`` (rare, so its cost does not matter)."""
    try:
        return inspect.getsource(cls)
    except (OSError, TypeError, IndexError):
        return None


def assigned_names(statements) -> set[str]:
    """Names a list of statements may (re)bind, not looking into nested ``def``/``lambda``/comprehensions.

    Used to decide which variables a loop carries before visiting its body once.
    """
    found: set[str] = set()

    class Finder(ast.NodeVisitor):
        def visit_Name(self, node):
            if isinstance(node.ctx, ast.Store):
                found.add(node.id)

        def visit_FunctionDef(self, node):
            found.add(node.name)

        def visit_AsyncFunctionDef(self, node):
            found.add(node.name)

        def visit_ClassDef(self, node):
            found.add(node.name)

        def visit_Lambda(self, node):
            pass

        def visit_ListComp(self, node):
            pass

        visit_SetComp = visit_DictComp = visit_GeneratorExp = visit_ListComp

        def visit_NamedExpr(self, node):
            found.add(node.target.id)
            self.generic_visit(node)

    finder = Finder()
    for stmt in statements:
        finder.visit(stmt)
    return found
