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
