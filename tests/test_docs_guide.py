"""docs/task_scheduling.md stays true: its program, saved as scale.py, runs as the guide says
(``TSJIT_INTERPRET=1 python scale.py``), verifies SAFE and prints "exact"; the StageInfo fields it lists exist."""
import dataclasses
import os
import pathlib
import re
import subprocess
import sys

from tsjit import ts

ROOT = pathlib.Path(__file__).resolve().parents[1]
GUIDE = (ROOT / "docs" / "task_scheduling.md").read_text()


def test_the_guides_program_runs_as_written_on_the_cpu_interpreter(tmp_path):
    block = GUIDE.split("```python\n", 1)[1].split("```", 1)[0]
    (tmp_path / "scale.py").write_text(block)
    env = dict(os.environ, TSJIT_INTERPRET="1", TSJIT_CACHE_DIR=str(tmp_path / "cache"),
               PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    result = subprocess.run([sys.executable, "scale.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "-> SAFE" in result.stdout and result.stdout.rstrip().endswith("exact"), result.stdout[-2000:]


def test_the_guides_stage_info_table_names_real_fields():
    table = GUIDE.split("| field | meaning |", 1)[1].split("\n\n", 1)[0]
    named = set(re.findall(r"`(\w+)`", "\n".join(line.split("|")[1] for line in table.splitlines()[2:])))
    fields = {f.name for f in dataclasses.fields(ts.StageInfo)}
    assert named and named <= fields, sorted(named - fields)
    assert fields <= named, f"StageInfo fields the guide does not describe: {sorted(fields - named)}"
