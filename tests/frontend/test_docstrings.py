"""Docstring coverage of the frontend: at least 90% of its public definitions (module-level functions
and classes, and the public methods of public classes, ``stmt_*`` / ``expr_*`` handlers included)
have a docstring, measured with ``ast`` over ``tsjit/frontend``."""
import ast
from pathlib import Path

import tsjit.frontend

FRONTEND = Path(tsjit.frontend.__file__).parent
MINIMUM = 0.90


def public_definitions(path: Path):
    """(qualified name, has a docstring) of each public function/class in ``path``; a method counts
    when its class is public, and names starting with ``_`` are private."""
    found = []

    def walk(body, prefix):
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                if node.name.startswith("_"):
                    continue
                found.append((prefix + node.name, ast.get_docstring(node) is not None))
                if isinstance(node, ast.ClassDef):
                    walk(node.body, prefix + node.name + ".")

    walk(ast.parse(path.read_text()).body, f"{path.stem}.")
    return found


def test_public_definitions_finds_methods_and_skips_private_names():
    source = FRONTEND / "codegen.py"
    names = dict(public_definitions(source))
    assert "codegen.CodeGenerator.stmt_assign" in names and "codegen.CodeGenerator.expr_call" in names
    assert not any(name.rsplit(".", 1)[1].startswith("_") for name in names)


def test_frontend_docstring_coverage_is_at_least_90_percent():
    definitions = [d for path in sorted(FRONTEND.glob("*.py")) for d in public_definitions(path)]
    assert len(definitions) > 100
    missing = [name for name, documented in definitions if not documented]
    coverage = 1 - len(missing) / len(definitions)
    assert coverage >= MINIMUM, f"{coverage:.0%} of frontend definitions have docstrings; add them to {missing}"


def test_every_statement_and_expression_handler_is_documented():
    from tsjit.frontend import codegen
    names = set(codegen.STMT_HANDLERS.values()) | set(codegen.EXPR_HANDLERS.values())
    undocumented = sorted(n for n in names if not (getattr(codegen.CodeGenerator, n).__doc__ or "").strip())
    assert not undocumented, f"handlers without a docstring: {undocumented}"


def test_mixins_declare_the_generator_members_they_use():
    """Each mixin's class docstring names every ``self.<member>`` it uses that the mixin does not define."""
    for path, cls in ((FRONTEND / "control.py", "ControlFlowMixin"), (FRONTEND / "calls.py", "CallMixin")):
        tree = ast.parse(path.read_text())
        [node] = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls]
        own = {n.name for n in node.body if isinstance(n, ast.FunctionDef)}
        used = {sub.attr for sub in ast.walk(node) if isinstance(sub, ast.Attribute)
                and isinstance(sub.value, ast.Name) and sub.value.id == "self"}
        doc = ast.get_docstring(node) or ""
        undeclared = sorted(name for name in used - own if f"``{name}``" not in doc)
        assert not undeclared, f"{cls} uses {undeclared} without declaring them in its docstring"
