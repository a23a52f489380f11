"""README.md stays true to the tree: its tutorial list names every notebook in ``tutorials/``, and its first
kernel runs as written (on the CPU interpreter)."""
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_readme_lists_every_tutorial_notebook():
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Tutorials", 1)[1].split("\n## ", 1)[0]
    notebooks = sorted(path.name for path in (ROOT / "tutorials").glob("*.ipynb"))
    assert notebooks, "tutorials/ has no notebook"
    missing = [name for name in notebooks if f"`{name}`" not in section]
    assert not missing, f"README.md's Tutorials section does not list {missing}: add a line `- `NAME`: what it shows.`"
    listed = re.findall(r"`(\w+\.ipynb)`", section)
    assert sorted(listed) == notebooks, f"README.md lists notebooks that tutorials/ does not have: " \
                                        f"{sorted(set(listed) - set(notebooks))}"


def test_readme_first_kernel_runs_as_written_on_the_cpu_interpreter(tmp_path):
    """The 'A first kernel' block, saved as first.py and run with TSJIT_INTERPRET=1 as the README says."""
    import os
    import subprocess
    import sys
    readme = (ROOT / "README.md").read_text()
    block = readme.split("## A first kernel", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    (tmp_path / "first.py").write_text(block)
    env = dict(os.environ, TSJIT_INTERPRET="1", TSJIT_CACHE_DIR=str(tmp_path / "cache"),
               PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    result = subprocess.run([sys.executable, "first.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    first = result.stdout.splitlines()[0]      # the compile's register count and PTX size, then the first values
    assert re.fullmatch(r"\d+ registers; \d+ lines of PTX in compiled\.ptx", first), result.stdout[-500:]
    assert len(re.findall(r"\d\.\d+", result.stdout.splitlines()[-1])) == 4, result.stdout[-500:]
