"""tsjit.frontend.source.parse_function reads a function's ``def`` from linecache by its code object's
line span, carried to the end of the indented block, without tokenizing; it must give the same tree as
``inspect.getsourcelines`` whatever the body ends with."""
from __future__ import annotations

import ast
import importlib.util
import inspect
import textwrap

import pytest

from tsjit.frontend import source

BODIES = {
    "a last global": "def f(x):\n    y = x\n    global G\n",
    "a last pass after a return": "def f(x):\n    return x\n    pass\n",
    "dead code after a return": "def f(x):\n    return x\n    y = x + 1\n    y = y * 2\n",
    "a docstring only": 'def f(x):\n    """only a docstring"""\n',
    "a trailing comment and a blank line": "def f(x):\n    y = x\n\n    # the end\n    z = y\n",
    "a multi-line signature and a decorator": "@staticmethod\ndef f(x,\n      y=2):\n    return (x +\n            y)\n",
    "an if False block last": "def f(x):\n    y = x\n    if False:\n        y = 2\n",
}


@pytest.mark.parametrize("name", list(BODIES))
def test_parsed_def_is_the_whole_block(tmp_path, name):
    text = BODIES[name]
    path = tmp_path / f"m_{abs(hash(name))}.py"
    path.write_text("import os\n\n\nclass Holder:\n" + textwrap.indent(text, "    ") + "\n\nAFTER = 1\n")
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    fn = inspect.unwrap(vars(module.Holder)["f"].__func__ if name.endswith("decorator") else module.Holder.f)
    parsed = source.parse_function(fn)
    lines, first = inspect.getsourcelines(fn)
    expected = ast.parse(textwrap.dedent("".join(lines))).body[0]
    assert ast.dump(parsed.node) == ast.dump(expected)
    assert parsed.node.lineno == first + (1 if name.endswith("decorator") else 0)
    assert parsed.node.col_offset == 4


def test_a_module_edited_and_reloaded_is_read_again(tmp_path):
    """linecache holds the lines a first parse read; a reloaded module's functions come from the new file."""
    import importlib
    import os
    import sys
    path = tmp_path / "edited_module.py"
    path.write_text("def f(x):\n    return x + 1\n")
    sys.path.insert(0, str(tmp_path))
    try:
        module = importlib.import_module("edited_module")
        assert isinstance(source.parse_function(module.f).node.body[0].value, ast.BinOp)
        path.write_text("def f(x):\n    return -x\n")
        os.utime(path, (os.path.getatime(path), os.path.getmtime(path) + 5))
        importlib.invalidate_caches()
        module = importlib.reload(module)
        assert isinstance(source.parse_function(module.f).node.body[0].value, ast.UnaryOp)
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("edited_module", None)
