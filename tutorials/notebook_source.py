"""Source cells of the tutorial notebooks: the code a notebook teaches, pasted into the notebook itself.

The notebooks are stored without outputs, so code shown only by ``print(inspect.getsource(...))`` is
invisible to a reader who opens the file.  A cell spec ``("source", "tsjit.examples.ts_copy: GmemSource,
copy_ts.fn")`` is written by the builders as a markdown cell holding the source of each named object
(fenced ``python``), and its spec is kept in the cell's metadata (``tsjit_source``) so that
``tests/test_tutorials.py`` can check that the pasted code is still the code that runs.
"""
from __future__ import annotations

import importlib
import inspect

import nbformat

__all__ = ["render", "source_cell", "SOURCE_KEY"]

#: the cell metadata key that records which objects a source cell shows
SOURCE_KEY = "tsjit_source"


def _objects(spec: str) -> tuple[str, list[tuple[str, object]]]:
    module_name, _, names = spec.partition(":")
    module = importlib.import_module(module_name.strip())
    found = []
    for name in (n.strip() for n in names.split(",") if n.strip()):
        obj = module
        for part in name.split("."):
            obj = getattr(obj, part)
        found.append((name[:-3] if name.endswith(".fn") else name, obj))
    return module_name.strip(), found


def render(spec: str) -> str:
    """The markdown text of the source cell for ``spec`` (``"module: name, name.attr, ..."``)."""
    module_name, found = _objects(spec)
    path = module_name.replace(".", "/") + ".py"
    names = ", ".join(f"`{name}`" for name, _ in found)
    code = "\n\n".join(inspect.getsource(obj).rstrip() for _, obj in found)
    return f"From `{path}`: {names}\n\n```python\n{code}\n```"


def source_cell(spec: str):
    """A markdown notebook cell showing the source of ``spec``'s objects, its spec in the metadata."""
    cell = nbformat.v4.new_markdown_cell(render(spec))
    cell.metadata[SOURCE_KEY] = spec
    return cell
