"""Random scalar kernels for the frontend fuzz test (``test_fuzz.py``).

:func:`kernel_source` writes one kernel module from a small grammar of the Python subset tsjit
compiles: arithmetic on mixed dtypes (ints of every width, the float types, Boolean), comparisons,
``if``/``elif``/``else``, ``while`` and ``for`` (run-time ``range`` and ``tsjit.range_constexpr``)
with ``break``/``continue``, conditional expressions, ``and``/``or``/``not``, membership tests,
``tsjit.math`` calls, casts, ``tsjit.const_expr`` branches on a ``Constexpr`` parameter, loads and
stores, ``device_print`` (format arguments and f-strings) and, now and then, a construct tsjit
does not support (:data:`UNSUPPORTED`: ``yield``, ``with``, ``try``, sets of device values,
division by a constant zero, iterating a device array, ...) or that sits at its edge
(:data:`EDGE_CASES`).  Every kernel is reproducible from ``(seed, index)``.

The kernel's signature is always ``kernel(x, y, n: tsjit.Int32, C: tsjit.Constexpr[int])`` with
``x``/``y`` 1-D arrays of :data:`ARRAY_LENGTH` elements of the dtypes named in the module's
``X_DTYPE``/``Y_DTYPE``, and ``C`` given by ``C_VALUE``.

``python tests/frontend/fuzz_kernels.py SEED INDEX`` prints one kernel (to reproduce a failure).
"""
from __future__ import annotations

import random
import sys

ARRAY_LENGTH = 32
_INT_DTYPES = ("Int8", "Int16", "Int32", "Int64", "Uint8", "Uint16", "Uint32", "Uint64")
_FLOAT_DTYPES = ("Float16", "BFloat16", "Float32", "Float64")
_ARRAY_DTYPES = ("Float32", "Int32", "Float16", "Int64", "Uint32", "Float64", "Int8", "BFloat16", "Uint8")
_UNARY_MATH = ("exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin", "cos", "floor", "ceil", "abs")
_INT_OPS = ("+", "-", "*", "//", "%", "&", "|", "^", "<<", ">>")
_FLOAT_OPS = ("+", "-", "*", "/", "//", "%", "**")
_COMPARE_OPS = ("<", "<=", ">", ">=", "==", "!=")

#: constructs outside the supported subset; each must end in a located CompilationError (or compile).
UNSUPPORTED = (
    "yield v0",
    "with open('f') as handle:\n    y[i] = 1",
    "try:\n    y[i] = 1\nexcept Exception:\n    pass",
    "s = {x[i], x[i]}\ny[i] = len(s)",
    "y[i] = x[i] // 0",
    "y[i] = x[i] % 0",
    "for item in x:\n    y[i] = item",
    "y[i] = max(*x)",
    "print(v0)",
    "del v0",
    "global GLOBAL_NAME",
    "import math",
    "assert v0 > 0",
    "y[i] = str(v0)",
    "y[i] = int(x[i])",
    "y[i] = undefined_name",
    "y[i, i] = 1",
    "y[i] = len(x[i])",
    "text = f'{x[i]}'\ntsjit.static_print(text + 'x')",
    "tsjit.syncwarp(1 << 40)",
    "y[i] = x[i] << 99",
    "acc = []\nfor j in range(n):\n    acc.append(x[j % 32])\ny[i] = acc[0]",
    "for j in tsjit.range_constexpr(10 ** 7):\n    y[i] = j",
    "lst = [1, 2]\nif x[i] > 0:\n    lst[0] = x[i]\ny[i] = lst[0]",
    "y[i] = x[i] if tsjit.const_expr(x[i] > 0) else 1",
    "y[i] = {x[i]: 1}[0]",
    "y[i] = x",
    "y[i] = [v for v in x][0]",
    "class Local:\n    pass",
    "y[i] = 2 ** 10 ** 8",
    "y[i] = 'ab' * 10 ** 9",
    "y[i] = x[i].nosuchattr",
    "y[i] = tsjit.math.exp(x[i], 2)",
    "y[i] = x[1.5]",
    "v0 = x[i]\nwhile v0:\n    v0 = v0 - 1\n    yield v0",
)

#: constructs at the edge of the subset that compile for some dtypes and are refused for others.
EDGE_CASES = (
    "y[i] = tsjit.Float16(1e300) + x[i]",
    "y[i] = (lambda a: a * 2)(x[i])",
    "y[i] = x[i] // tsjit.Int32(n - 7)",
    "y[i] = x[i] >> n",
    "y[i] = tsjit.Int32(tsjit.Float32(1e30))",
    "tsjit.device_print(f'{x[i]!r} {i:>4} {n=}')",
    "y[i] = 1 if x[i] in (x[0], x[1]) else 2",
    "y[i] = x[i] ** 1000001",
    "a, *rest = (x[i], x[i] + 1, 3)\ny[i] = a",
    "y[i] = sum(tuple(x[k] for k in tsjit.range_constexpr(4)))",
)


class _Writer:
    """Builds one kernel body; tracks which names hold which kind of value."""

    def __init__(self, rng: random.Random, x_dtype: str, y_dtype: str):
        self.rng = rng
        self.x_dtype, self.y_dtype = x_dtype, y_dtype
        self.lines: list[str] = []
        self.names: dict[str, str] = {}  # name -> "int" | "float" | "bool"
        self.counter = 0
        self.statements = 0

    # -- expressions ---------------------------------------------------------------------------
    def _kind_of_array(self, dtype: str) -> str:
        return "float" if dtype in _FLOAT_DTYPES else "int"

    def index(self) -> str:
        r = self.rng.random()
        if r < 0.5:
            return "i"
        if r < 0.8:
            return f"(i + {self.rng.randrange(1, 32)}) % {ARRAY_LENGTH}"
        return f"({self.expr('int', 1)}) % {ARRAY_LENGTH}"

    def literal(self, kind: str) -> str:
        rng = self.rng
        if kind == "bool":
            return rng.choice(("True", "False"))
        if kind == "int":
            return str(rng.choice((0, 1, 2, 3, 7, 16, 31, 255, -1, -5, 1000, 2 ** 31 - 1, 2 ** 40)))
        return rng.choice(("0.0", "1.0", "0.5", "-2.25", "3.0e4", "1e-3", "65504.0", "7.0"))

    def expr(self, kind: str, depth: int) -> str:
        rng = self.rng
        leaves = [name for name, k in self.names.items() if k == kind]
        if depth <= 0 or rng.random() < 0.25:
            choices = [self.literal(kind)] + leaves * 2
            if kind == "int":
                choices += ["i", "n", "C", "tsjit.thread_idx().y"]
            if self._kind_of_array(self.x_dtype) == kind:
                choices.append(f"x[{self.index() if depth > 0 else 'i'}]")
            if self._kind_of_array(self.y_dtype) == kind:
                choices.append("y[i]")
            if kind == "bool":
                choices += ["n > 3", "C == 2"]
            return rng.choice(choices)
        return getattr(self, f"_{kind}_expr")(depth - 1)

    def _int_expr(self, depth: int) -> str:
        rng = self.rng
        r = rng.random()
        if r < 0.45:
            op = rng.choice(_INT_OPS)
            right = str(rng.randrange(0, 8)) if op in ("<<", ">>") else self.expr("int", depth)
            if op in ("//", "%") and rng.random() < 0.5:
                right = str(rng.choice((1, 2, 3, -1, 7, 64)))
            return f"({self.expr('int', depth)} {op} {right})"
        if r < 0.6:
            return f"tsjit.{rng.choice(_INT_DTYPES)}({self.expr(rng.choice(('int', 'float', 'bool')), depth)})"
        if r < 0.7:
            return f"{rng.choice(('min', 'max'))}({self.expr('int', depth)}, {self.expr('int', depth)})"
        if r < 0.75:
            return f"abs({self.expr('int', depth)})"
        if r < 0.85:
            return f"({self.expr('int', depth)} if {self.expr('bool', depth)} else {self.expr('int', depth)})"
        if r < 0.9:
            return f"(-{self.expr('int', depth)})"
        if r < 0.95:
            return f"(~{self.expr('int', depth)})"
        return f"(C * {rng.randrange(1, 5)} + {self.expr('int', depth)})"

    def _float_expr(self, depth: int) -> str:
        rng = self.rng
        r = rng.random()
        if r < 0.4:
            op = rng.choice(_FLOAT_OPS)
            right = str(rng.choice((2, 3, 0.5))) if op == "**" else self.expr(rng.choice(("float", "float", "int")),
                                                                                  depth)
            return f"({self.expr('float', depth)} {op} {right})"
        if r < 0.55:
            return f"tsjit.math.{rng.choice(_UNARY_MATH)}({self.expr('float', depth)})"
        if r < 0.6:
            args = ", ".join(self.expr("float", depth) for _ in range(3))
            return f"tsjit.math.fma({args})"
        if r < 0.75:
            return f"tsjit.{rng.choice(_FLOAT_DTYPES)}({self.expr(rng.choice(('int', 'float', 'bool')), depth)})"
        if r < 0.85:
            return f"({self.expr('float', depth)} if {self.expr('bool', depth)} else {self.expr('float', depth)})"
        if r < 0.9:
            return f"{rng.choice(('min', 'max'))}({self.expr('float', depth)}, {self.expr('float', depth)})"
        return f"(-{self.expr('float', depth)})"

    def _bool_expr(self, depth: int) -> str:
        rng = self.rng
        r = rng.random()
        if r < 0.45:
            kind = rng.choice(("int", "float"))
            return f"({self.expr(kind, depth)} {rng.choice(_COMPARE_OPS)} {self.expr(kind, depth)})"
        if r < 0.6:
            return f"({self.expr('bool', depth)} {rng.choice(('and', 'or'))} {self.expr('bool', depth)})"
        if r < 0.7:
            return f"(not {self.expr('bool', depth)})"
        if r < 0.8:
            members = ", ".join(str(rng.randrange(-2, 40)) for _ in range(rng.randrange(0, 4)))
            container = rng.choice((f"({members},)" if members else "()", f"{{{members}}}" if members else "()",
                                    f"range({rng.randrange(0, 4)}, n, {rng.choice((1, 2, 3))})"))
            return f"({self.expr('int', depth)} {rng.choice(('in', 'not in'))} {container})"
        if r < 0.9:
            return f"({self.expr('int', depth)} {rng.choice(_COMPARE_OPS)} {self.expr('int', depth)} " \
                   f"{rng.choice(_COMPARE_OPS)} {self.expr('int', depth)})"
        return f"tsjit.Boolean({self.expr(rng.choice(('int', 'float')), depth)})"

    # -- statements ----------------------------------------------------------------------------
    def emit(self, indent: int, text: str) -> None:
        for line in text.splitlines():
            self.lines.append("    " * indent + line)
        self.statements += 1

    def new_name(self) -> str:
        self.counter += 1
        return f"v{self.counter}"

    def block(self, indent: int, depth: int, loop: str | None, count: int) -> None:
        for _ in range(count):
            self.statement(indent, depth, loop)

    def statement(self, indent: int, depth: int, loop: str | None) -> None:
        rng = self.rng
        r = rng.random()
        if self.statements > 60:
            r = 0.0  # keep kernels small: only simple statements from here on
        if r < 0.3 or depth <= 0:
            kind = rng.choice(("int", "float", "bool"))
            existing = [name for name, k in self.names.items() if k == kind]
            name = rng.choice(existing) if existing and rng.random() < 0.5 else self.new_name()
            self.emit(indent, f"{name} = {self.expr(kind, 2)}")
            self.names[name] = kind
        elif r < 0.4 and any(k in ("int", "float") for k in self.names.values()):
            existing = [name for name, k in self.names.items() if k in ("int", "float")]
            if existing:
                name = rng.choice(existing)
                op = rng.choice(("+=", "-=", "*=")) if self.names[name] == "float" else rng.choice(
                    ("+=", "-=", "*=", "^=", "|=", "&="))
                self.emit(indent, f"{name} {op} {self.expr(self.names[name], 1)}")
        elif r < 0.55:
            array, dtype = rng.choice((("x", self.x_dtype), ("y", self.y_dtype)))
            self.emit(indent, f"{array}[{self.index()}] = {self.expr(self._kind_of_array(dtype), 2)}")
        elif r < 0.67:
            self._if(indent, depth, loop)
        elif r < 0.72:
            self.emit(indent, f"if tsjit.const_expr(C {rng.choice(_COMPARE_OPS)} {rng.randrange(0, 5)}):")
            self._scoped(indent + 1, depth - 1, loop, 2)
            self.emit(indent, "else:")
            self._scoped(indent + 1, depth - 1, loop, 1)
        elif r < 0.82:
            self._for(indent, depth)
        elif r < 0.87:
            self._while(indent, depth)
        elif r < 0.92 and loop is not None:  # noqa: SIM114 - one branch per statement kind
            self.emit(indent, f"if {self.expr('bool', 1)}:")
            self.emit(indent + 1, rng.choice(("break", "continue")))
        elif r < 0.96:
            names = [name for name, k in self.names.items() if k != "bool"]
            if names and rng.random() < 0.5:
                name = rng.choice(names)
                spec = rng.choice(("", ":.3f", ":d", ":8.2e", ":x")) if self.names[name] == "int" else \
                    rng.choice(("", ":.3f", ":g"))
                self.emit(indent, f'tsjit.device_print(f"{name} = {{{name}{spec}}}")')
            else:
                self.emit(indent, f'tsjit.device_print("i = {{}}, v = {{}}", i, {self.expr("float", 1)})')
        elif r < 0.97:
            pair = [name for name, k in self.names.items() if k in ("int", "float")]
            if len(pair) >= 2:
                a, b = rng.sample(pair, 2)
                self.emit(indent, f"{a}, {b} = {b}, {a}")
                self.names[a], self.names[b] = self.names[b], self.names[a]
            else:
                self.emit(indent, f"y[i] = helper({self.expr('float', 1)}, {self.expr('int', 1)})")
        elif r < 0.98:
            self.emit(indent, f"y[i] = helper({self.expr('float', 1)}, {self.expr('int', 1)})")
        elif r < 0.99 and loop is None:
            self.emit(indent, f"if {self.expr('bool', 1)}:")
            self.emit(indent + 1, "return")
        else:
            self.emit(indent, f"y[i] = {self.expr(self._kind_of_array(self.y_dtype), 1)}")

    def _scoped(self, indent: int, depth: int, loop: str | None, count: int) -> None:
        """A nested block; names it introduces are not used after it (they may not exist there)."""
        before = dict(self.names)
        self.block(indent, depth, loop, max(1, self.rng.randrange(1, count + 1)))
        self.names = {name: kind for name, kind in self.names.items() if name in before}

    def _if(self, indent: int, depth: int, loop: str | None) -> None:
        rng = self.rng
        self.emit(indent, f"if {self.expr('bool', 2)}:")
        self._scoped(indent + 1, depth - 1, loop, 3)
        if rng.random() < 0.4:
            self.emit(indent, f"elif {self.expr('bool', 1)}:")
            self._scoped(indent + 1, depth - 1, loop, 2)
        if rng.random() < 0.5:
            self.emit(indent, "else:")
            self._scoped(indent + 1, depth - 1, loop, 2)

    def _for(self, indent: int, depth: int) -> None:
        rng = self.rng
        var = f"j{self.counter}"
        self.counter += 1
        header = rng.choice((f"range(n)", f"range({rng.randrange(0, 3)}, n, {rng.choice((1, 2))})",
                             f"tsjit.range_constexpr({rng.randrange(0, 4)})", f"range({rng.randrange(1, 6)})",
                             f"tsjit.range(0, n, unroll={rng.choice((1, 2, 4))})", f"range(C)",
                             f"(1, 2.5, {self.literal('int')})"))
        self.emit(indent, f"for {var} in {header}:")
        self.names[var] = "int" if "2.5" not in header else "float"
        self._scoped(indent + 1, depth - 1, "for", 3)
        self.names.pop(var, None)

    def _while(self, indent: int, depth: int) -> None:
        counter = f"w{self.counter}"
        self.counter += 1
        self.emit(indent, f"{counter} = 0")
        self.names[counter] = "int"
        self.emit(indent, f"while {counter} < n and {self.expr('bool', 1)}:")
        self.emit(indent + 1, f"{counter} += 1")
        self._scoped(indent + 1, depth - 1, "while", 3)


def kernel_source(seed: int, index: int, *, unsupported_rate: float = 0.12) -> str:
    """The source of fuzz kernel ``index`` of run ``seed``: a module defining ``kernel`` and the
    ``X_DTYPE``/``Y_DTYPE``/``C_VALUE`` it is compiled with."""
    rng = random.Random(f"tsjit-fuzz-{seed}-{index}")
    x_dtype, y_dtype = rng.choice(_ARRAY_DTYPES), rng.choice(_ARRAY_DTYPES)
    writer = _Writer(rng, x_dtype, y_dtype)
    writer.emit(1, "i = tsjit.thread_idx().x")
    writer.names["v0"] = "int"
    writer.emit(1, "v0 = i + n")
    writer.block(1, 3, None, rng.randrange(2, 7))
    if rng.random() < unsupported_rate:
        lines = writer.lines
        # between two top-level statements (never inside a block, never before an else/elif)
        places = [k for k in range(2, len(lines) + 1) if k == len(lines) or (
            not lines[k].startswith("     ") and not lines[k].lstrip().startswith(("else", "elif")))]
        position = rng.choice(places)
        chosen = rng.choice(UNSUPPORTED + EDGE_CASES).splitlines()
        writer.lines[position:position] = ["    " + line for line in chosen]
    body = "\n".join(writer.lines)
    return (f'"""fuzz kernel {index} of seed {seed}."""\nimport tsjit\n\nX_DTYPE = "{x_dtype}"\n'
            f'Y_DTYPE = "{y_dtype}"\nC_VALUE = {rng.randrange(0, 5)}\nGLOBAL_NAME = 1\n\n\n'
            f"@tsjit.func\ndef helper(a, b):\n    if b > 2:\n        return a * 2.0\n    return a - b\n\n\n"
            f"@tsjit.kernel\ndef kernel(x, y, n: tsjit.Int32, C: tsjit.Constexpr[int]):\n{body}\n")


def compile_one(path: str) -> dict:
    """Import the kernel module at ``path`` and compile its kernel for sm_90a (no GPU needed).

    Returns ``{"outcome": ..., "detail": ...}``; the outcome is ``"compiled"``, ``"located"`` (a
    CompilationError at file:line:col of ``path`` rendered with its line and a caret),
    ``"unlocated"`` (a CompilationError without that) or ``"exception"`` (anything else).
    """
    import importlib.util
    import os
    import traceback

    import tsjit
    path = os.path.abspath(path)
    try:
        spec = importlib.util.spec_from_file_location(f"tsjit_fuzz_{os.path.basename(path)[:-3]}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        x = tsjit.spec(ARRAY_LENGTH, getattr(tsjit, module.X_DTYPE))
        y = tsjit.spec(ARRAY_LENGTH, getattr(tsjit, module.Y_DTYPE))
        compiled = tsjit.compile(module.kernel, x, y, 7, C=module.C_VALUE, target="sm_90a")
        if not compiled.cubin:
            return {"outcome": "exception", "detail": "no cubin came out"}
        return {"outcome": "compiled", "detail": ""}
    except tsjit.CompilationError as err:
        rendered = str(err).splitlines()
        where = err.location
        located = (where is not None and where.filename == path and where.source_line() is not None
                   and any(line.strip() == "^" for line in rendered[1:3]))
        return {"outcome": "located" if located else "unlocated", "detail": str(err)}
    except BaseException:  # noqa: BLE001 - the fuzz test reports whatever escaped
        return {"outcome": "exception", "detail": traceback.format_exc()}


def worker(paths: list[str]) -> None:
    """Compile each kernel file in turn, writing one JSON line before (``start``) and after
    (``outcome``) each, flushed, so a parent can tell which kernel hung or crashed the process."""
    import json

    import tsjit  # noqa: F401 - loaded before the first kernel is announced, so its time is not counted
    for path in paths:
        print(json.dumps({"start": path}), flush=True)
        print(json.dumps(dict(compile_one(path), path=path)), flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "--worker":
        worker(sys.argv[2:])
    else:
        print(kernel_source(int(sys.argv[1]), int(sys.argv[2])))
