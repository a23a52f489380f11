"""Run the code cells of tutorial notebooks as plain Python, one fresh process per notebook.

For machines without a Jupyter kernel (the H200 image has no nbclient/ipykernel): each
notebook's code cells are concatenated in order (IPython ``%`` / ``!`` lines dropped) and run
with ``python3`` from the repository root; a notebook passes when the process exits 0.  Where IPython is
missing (the H200 image), ``IPython.display`` is a stand-in whose ``display`` prints each object's repr (an
SVG's byte count), so a notebook's display cells run instead of failing the import.

    python3 benchmarks/gpu_batches/run_notebook_cells.py tutorials/09_*.ipynb ...
"""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time


#: prepended to every script: an ``IPython.display`` stand-in where IPython is not installed
_DISPLAY_SHIM = """
try:
    import IPython.display
except ImportError:
    import sys as _sys, types as _types
    _display = _types.ModuleType("IPython.display")
    class SVG:
        def __init__(self, data=None, filename=None):
            self.data = open(filename).read() if filename else data
        def __repr__(self):
            return f"<SVG, {len(self.data or '')} characters>"
    _display.SVG = SVG
    _display.display = lambda *objects, **_: [print(repr(o)) for o in objects]
    _ipython = _types.ModuleType("IPython")
    _ipython.display = _display
    _sys.modules.update({"IPython": _ipython, "IPython.display": _display})
"""


def script_of(path: str) -> str:
    cells = json.load(open(path))["cells"]
    lines = [_DISPLAY_SHIM]
    for cell in cells:
        if cell.get("cell_type") != "code":
            continue
        source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        lines.extend(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!")))
        lines.append("")
    return "\n".join(lines)


def main(paths: list[str]) -> int:
    failures = 0
    for path in paths:
        with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as handle:
            handle.write(script_of(path))
        start = time.perf_counter()
        try:
            result = subprocess.run([sys.executable, handle.name], capture_output=True, text=True, timeout=240)
            ok, tail = result.returncode == 0, (result.stdout + result.stderr)[-600:]
        except subprocess.TimeoutExpired:
            ok, tail = False, "timed out after 240 s"
        failures += not ok
        print(f"{path}: {'ok' if ok else 'FAILED'} ({time.perf_counter() - start:.1f} s)")
        if not ok:
            print("   " + tail.replace("\n", "\n   "))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
