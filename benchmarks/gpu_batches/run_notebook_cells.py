"""Run the code cells of tutorial notebooks as plain Python, one fresh process per notebook.

For machines without a Jupyter kernel (the H200 image has no nbclient/ipykernel): each
notebook's code cells are concatenated in order (IPython ``%`` / ``!`` lines dropped) and run
with ``python3`` from the repository root; a notebook passes when the process exits 0.

    python3 benchmarks/gpu_batches/run_notebook_cells.py tutorials/09_*.ipynb ...
"""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time


def script_of(path: str) -> str:
    cells = json.load(open(path))["cells"]
    lines = []
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
