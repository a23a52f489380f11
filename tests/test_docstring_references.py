"""Docstrings and messages cite only what a user has: no "inventory §" of a design document that is
not shipped (issue 10 §3); check ids (P1, C0, ...) are explained in the messages themselves."""
import pathlib

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "tsjit"


def test_no_source_file_cites_the_unshipped_inventory():
    citing = [f"{path.relative_to(PACKAGE.parent)}:{number}" for path in sorted(PACKAGE.rglob("*.py"))
              for number, line in enumerate(path.read_text().splitlines(), 1) if "inventory" in line.lower()]
    assert citing == []
