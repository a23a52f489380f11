"""README.md stays true to the tree: its tutorial list names every notebook in ``tutorials/``."""
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
