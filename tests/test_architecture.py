"""The package's shape: no import cycles, imports only downward, no hidden imports.

The import graph of ``tsjit/`` is read from the source with ``ast`` (no module is imported),
with one edge per ``import`` statement.  Imports inside functions count too: a cycle or a layer
crossing hidden in a function is still one in the design; they are only a way to load something
later.  The layer rules are DESIGN.md's:

* ``tsjit.ts`` never reaches ``tsjit.runtime`` or the package face ``tsjit`` (directly or through
  other modules); ``tsjit.runtime`` never reaches ``tsjit.ts``;
* every package imports only from the layers below it (``backend`` imports nothing above it):
  errors < env < lang.dtypes < abi < backend < lang < frontend < {ts, runtime}.

``test_ts_imports_without_llvmlite_or_cuda`` checks the same thing at run time: ``import
tsjit.ts`` in a fresh interpreter in which llvmlite and cuda-bindings cannot be imported.
"""
from __future__ import annotations

import ast
import functools
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "tsjit"

#: what each part of the package may import (besides itself and the stdlib / third-party packages).
_BASE = {"tsjit.errors", "tsjit.env", "tsjit.lang.dtypes", "tsjit.abi"}
ALLOWED = {
    "tsjit.errors": set(),
    "tsjit.env": {"tsjit.errors"},
    "tsjit.lang.dtypes": {"tsjit.errors"},  # host data too (numpy only): the ABI and the model use it
    "tsjit.abi": {"tsjit.errors", "tsjit.env", "tsjit.lang.dtypes"},
    "tsjit.backend": _BASE,
    "tsjit.lang": _BASE | {"tsjit.backend"},
    "tsjit.frontend": _BASE | {"tsjit.backend", "tsjit.lang"},
    "tsjit.ts": _BASE | {"tsjit.backend", "tsjit.lang", "tsjit.frontend"},
    "tsjit.runtime": _BASE | {"tsjit.backend", "tsjit.lang", "tsjit.frontend"},
    # the CPU interpreter runs what the frontend and the TS lowering emit, on the runtime's arrays
    "tsjit.interpret": _BASE | {"tsjit.backend", "tsjit.lang", "tsjit.frontend", "tsjit.ts", "tsjit.runtime"},
}

#: imports inside functions that are not lazy loads of a heavy dependency, each with the reason it
#: is still there.  Every other import inside a function must say why on its line (``# lazily: ...``).
KNOWN_FUNCTION_IMPORTS = {
}


def _modules() -> dict[str, pathlib.Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


MODULES = _modules()


def _resolve(name: str) -> str | None:
    """The tsjit module an imported name belongs to (the longest module prefix), or None."""
    while name:
        if name in MODULES:
            return name
        name = name.rpartition(".")[0]
    return None


@functools.cache
def _imports(module: str, path: pathlib.Path) -> tuple:
    """``(target module, line, inside a function, line text)`` for each import of ``module``
    (tsjit modules, and any module imported inside a function)."""
    return tuple(_walk_imports(module, path))


def _walk_imports(module: str, path: pathlib.Path):
    source = path.read_text()
    lines = source.splitlines()

    def walk(node, in_function: bool):
        for child in ast.iter_child_nodes(node):
            inside = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                continue  # annotations only, never executed
            names = []
            if isinstance(child, ast.Import):
                names = [alias.name for alias in child.names]
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
                    for _ in range(child.level - 1):
                        package = package.rpartition(".")[0]
                    base = f"{package}.{base}" if base else package
                names = [f"{base}.{alias.name}" for alias in child.names]
            for name in names:
                target = _resolve(name)
                if target is not None or inside:
                    yield target or name, child.lineno, inside, lines[child.lineno - 1]
            yield from walk(child, inside)

    yield from walk(ast.parse(source), False)


def _is_type_checking(test) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


@functools.cache
def _graph() -> dict[str, frozenset[str]]:
    return {module: frozenset(target for target, _, _, _ in _imports(module, path)
                              if target in MODULES and target != module)
            for module, path in MODULES.items()}


def _layer(module: str) -> str | None:
    for layer in sorted(ALLOWED, key=len, reverse=True):
        if module == layer or module.startswith(layer + "."):
            return layer
    return None


def _reachable(graph, start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for nxt in graph[todo.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def _cycles(graph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []

    def connect(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(graph)))
    for v in sorted(graph):
        if v not in index:
            connect(v)
    return found


def test_the_graph_sees_the_package():
    graph = _graph()
    assert len(MODULES) > 50
    assert "tsjit.lang.values" in graph["tsjit.lang.math"]
    assert "tsjit.frontend.frame" in graph["tsjit.frontend.calls"]
    assert "tsjit.ts.lowering" in graph["tsjit.ts.task_manager"]  # an import inside a function


def test_no_import_cycles():
    cycles = _cycles(_graph())
    assert not cycles, "import cycles (break them by moving the shared piece down): " + "; ".join(
        " <-> ".join(c) for c in cycles)


def test_cycle_finder_finds_a_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_layer_imports_only_downward(layer):
    wrong = []
    for module, path in MODULES.items():
        if _layer(module) != layer:
            continue
        for target, line, _, _ in _imports(module, path):
            target_layer = _layer(target) if target in MODULES else None
            if target in MODULES and target_layer != layer and target_layer not in ALLOWED[layer]:
                wrong.append(f"{path.relative_to(ROOT)}:{line} imports {target}")
    assert not wrong, f"{layer} may import only {sorted(ALLOWED[layer]) or 'nothing of tsjit'}:\n" + \
        "\n".join(wrong)


def test_ts_never_reaches_runtime_and_runtime_never_reaches_ts():
    graph = _graph()
    for module in MODULES:
        reached = _reachable(graph, module)
        if _layer(module) == "tsjit.ts":
            bad = sorted(m for m in reached if m == "tsjit" or _layer(m) == "tsjit.runtime")
            assert not bad, f"{module} reaches {bad} (the TS model must not load the runtime)"
        if _layer(module) == "tsjit.runtime":
            bad = sorted(m for m in reached if _layer(m) == "tsjit.ts")
            assert not bad, f"{module} reaches {bad} (the runtime knows no schedules)"


def test_imports_inside_functions_say_why():
    unexplained = []
    for module, path in MODULES.items():
        if module.startswith("tsjit.examples"):
            continue  # examples are user code
        relative = str(path.relative_to(ROOT))
        for target, line, inside, text in _imports(module, path):
            if inside and "# lazily:" not in text and (relative, target) not in KNOWN_FUNCTION_IMPORTS:
                unexplained.append(f"{relative}:{line}: {text.strip()}")
    assert not unexplained, ("imports inside functions: move them to the top of the module, or say on the "
                             "line why they load late (`# lazily: <reason>`):\n" + "\n".join(unexplained))


_BLOCKED_IMPORT_CHECK = textwrap.dedent("""
    import importlib.abc, sys

    class Blocked(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] == "llvmlite" or name == "cuda" or name.startswith("cuda."):
                raise ImportError(f"{name} is blocked for this test")
            return None

    sys.meta_path.insert(0, Blocked())
    import tsjit.ts
    import tsjit.ts.task_manager, tsjit.ts.verify, tsjit.ts.memory, tsjit.ts.pdl, tsjit.ts.work_queue
    from tsjit.ts import TaskManager, WorkQueue, PdlWaitBarrier, SmemAllocator, PipelineConfig
    loaded = sorted(m for m in sys.modules if m.startswith(("tsjit.runtime", "tsjit.backend",
                                                            "llvmlite", "cuda")))
    print("LOADED", loaded)
""")


def test_ts_imports_without_llvmlite_or_cuda():
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", _BLOCKED_IMPORT_CHECK], capture_output=True, text=True,
                          env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "LOADED []" in done.stdout, done.stdout


_FACE_CHECK = textwrap.dedent("""
    import sys, time
    start = time.perf_counter()
    import tsjit
    elapsed_ms = (time.perf_counter() - start) * 1e3
    heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("llvmlite", "cuda", "numpy")
                   or m.startswith(("tsjit.runtime", "tsjit.backend", "tsjit.frontend", "tsjit.lang")))
    print("HEAVY", heavy)
""")


def test_import_tsjit_loads_nothing_heavy():
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", _FACE_CHECK], capture_output=True, text=True, env=env,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert "HEAVY []" in done.stdout, done.stdout


def test_every_public_name_of_the_face_resolves():
    import tsjit
    from tsjit.lang import dtypes, math
    from tsjit.runtime import kernel
    missing = [name for name in tsjit.__all__ if not hasattr(tsjit, name)]
    assert not missing
    assert tsjit.kernel is kernel.kernel and tsjit.Float32 is dtypes.Float32 and tsjit.math is math
    assert set(tsjit.__all__) <= set(dir(tsjit))
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        tsjit.no_such_name


def test_help_lists_the_api():
    import pydoc

    import tsjit
    text = pydoc.render_doc(tsjit, renderer=pydoc.plaintext)
    for name in ("kernel(", "compile(", "shared_array(", "shuffle_xor(", "syncthreads(", "TensorMap",
                 "DeviceArray", "static_print("):
        assert name in text, name


#: the TS lowering (DESIGN.md: "ts/lower/ turns a verified program into code through the frontend"):
#: the only part of tsjit.ts that may load the code generator when it is imported.
TS_LOWERING = ("tsjit.ts.lowering", "tsjit.ts.lower_pipeline", "tsjit.ts.lower")


def test_only_the_ts_lowering_loads_the_code_generator_at_import():
    """Statically, for every module of tsjit.ts (the runtime check above imports only some): what its
    top-level imports reach holds no backend or frontend module unless it is the TS lowering."""
    top_level = {module: frozenset(target for target, _, inside, _ in _imports(module, path)
                                   if target in MODULES and target != module and not inside)
                 for module, path in MODULES.items()}
    lowering = {m for m in MODULES if m.startswith(TS_LOWERING)}
    assert "tsjit.ts.lowering" in lowering
    wrong = {}
    for module in MODULES:
        if _layer(module) != "tsjit.ts" or module in lowering:
            continue
        reached = _reachable(top_level, module)
        bad = sorted(m for m in reached if _layer(m) in ("tsjit.backend", "tsjit.frontend"))
        if bad:
            wrong[module] = bad
    assert not wrong, f"TS model modules load the code generator at import time (DESIGN.md): {wrong}"




#: what builds control flow behind the structured interface (tsjit.frontend.structured): an llvmlite
#: IRBuilder or a block of the kernel function.  tsjit.ts asks Structured instead (issue 12 §1).
RAW_CONTROL_FLOW = frozenset({"builder", "cbranch", "branch", "position_at_end", "position_at_start",
                              "position_before", "position_after", "append_basic_block", "new_block",
                              "goto_block", "goto_entry_block", "phi", "switch"})


def _raw_control_flow(path: pathlib.Path, root: pathlib.Path = ROOT) -> list[str]:
    """``file:line: what`` for each raw control-flow construct in the code of ``path`` (strings and
    comments do not count): an attribute of :data:`RAW_CONTROL_FLOW`, the name ``IRBuilder``, and
    llvmlite's ``if_then`` / ``if_else`` (a context manager, or given an llvmlite value ``x.ir``);
    Structured's ``if_then`` takes a Value and a body."""
    tree = ast.parse(path.read_text())
    managed = {id(item.context_expr) for node in ast.walk(tree) if isinstance(node, ast.With) for item in node.items}
    hits = []
    for node in ast.walk(tree):
        where = f"{path.relative_to(root)}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Attribute) and node.attr in RAW_CONTROL_FLOW:
            hits.append(f"{where}: .{node.attr}")
        elif isinstance(node, ast.Name) and node.id == "IRBuilder":
            hits.append(f"{where}: IRBuilder")
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in ("if_then", "if_else")):
            if id(node) in managed:
                hits.append(f"{where}: with .{node.func.attr}")
            elif node.args and isinstance(node.args[0], ast.Attribute) and node.args[0].attr == "ir":
                hits.append(f"{where}: .{node.func.attr}(<llvmlite value>)")
    return hits


def test_ts_builds_no_raw_control_flow():
    """Every module of tsjit.ts, not a fixed list of lowering files (lower_tmem.py called
    ``km.builder.if_then`` while the list named four others), reaches no IRBuilder and no basic block."""
    paths = sorted((PACKAGE / "ts").rglob("*.py"))
    assert PACKAGE / "ts" / "lower_tmem.py" in paths
    hits = [hit for path in paths for hit in _raw_control_flow(path)]
    assert not hits, f"tsjit.ts builds control flow without tsjit.frontend.structured: {hits}"


def test_the_raw_control_flow_scan_finds_builder_calls(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def f(km, ctx, c, body, b):\n    ctx.if_then(c, body)  # km.builder in a comment\n"
                   "    with km.builder.if_then(c.ir):\n        pass\n    b.cbranch(c, x, y)\n"
                   "    with b.if_else(c.ir) as (then, otherwise):\n        pass\n    b.if_then(c.ir)\n")
    found = sorted(_raw_control_flow(bad, tmp_path))
    assert found == ["bad.py:3: .builder", "bad.py:3: with .if_then", "bad.py:5: .cbranch",
                     "bad.py:6: with .if_else", "bad.py:8: .if_then(<llvmlite value>)"]
