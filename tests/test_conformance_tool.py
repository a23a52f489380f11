"""tools/conformance.py: audit rows parsed from the report's tables, statuses from markers and outcomes."""
import importlib.util
import pathlib

_PATH = pathlib.Path(__file__).resolve().parent.parent / "tools" / "conformance.py"
_spec = importlib.util.spec_from_file_location("conformance_tool", _PATH)
tool = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tool)

REPORT = """# audit
### A1 PipelineConfig (seed)

| item | spec says | tsjit name | status | evidence |
|---|---|---|---|---|
| field a | x | `a` | **WORKS** | ok |
| field b | x | `b` | **MISSING** | no |
| field c | x | `c` | **PARTIAL** | half |
| field d | x | `d` | **DIFFERENT** | other |

### A6 MemoryResource (seed)

| item | spec says | tsjit name | status | evidence |
|---|---|---|---|---|
| pipeline_group | x | - | **MISSING** | no |

### §0 Reference caveats

| item | spec says | tsjit name | status | evidence |
|---|---|---|---|---|
| doc only | x | - | **MISSING** | a caveat row |

### §2.1 Capture-time grammar (ScheduleError)

| item | spec says | tsjit name | status | evidence |
|---|---|---|---|---|
| S1 | x | - | **PARTIAL** | a checker row: not the host API |
"""


def test_audit_rows_are_the_non_working_rows_of_the_host_api_tables(tmp_path):
    report = tmp_path / "audit.md"
    report.write_text(REPORT)
    assert [(s, i, st) for s, i, st, _ in tool.audit_rows(report)] == [
        ("A1", "field b", "MISSING"), ("A1", "field c", "PARTIAL"), ("A1", "field d", "DIFFERENT"),
        ("A6", "pipeline_group", "MISSING"), ("§0", "doc only", "MISSING")]


def test_statuses_come_from_markers_outcomes_and_the_deferred_list(tmp_path, monkeypatch):
    monkeypatch.setitem(tool.DEFERRED, ("A6", "pipeline_group"), "PipelineGroup is another issue")
    report = tmp_path / "audit.md"
    report.write_text(REPORT)
    collector = tool._Collector()
    collector.markers = {("A1", "field b"): [("t.py::test_b", None)],
                         ("A1", "field c"): [("t.py::test_c", "on purpose")]}
    collector.outcomes = {"t.py::test_b": "passed", "t.py::test_c": "passed"}
    text, problems = tool.render(tool.audit_rows(report), collector, "abc")
    assert "| field b | MISSING | **works** |  | `t.py::test_b` |" in text
    assert "| field c | PARTIAL | **different** | on purpose | `t.py::test_c` |" in text
    assert "| pipeline_group | MISSING | **deferred** | PipelineGroup" in text
    assert problems == ["A1 'field d': not covered", "§0 'doc only': not covered"]
    collector.outcomes["t.py::test_b"] = "failed"
    _, problems = tool.render(tool.audit_rows(report), collector, "abc")
    assert "A1 'field b': FAILING" in problems


_COLLECT = r"""
import json, sys, pytest
sys.path.insert(0, sys.argv[1])
import conformance as tool
collector = tool._Collector()
code = pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", str(tool.TESTS)], plugins=[collector])
print("MARKERS " + json.dumps([[s, i, entries] for (s, i), entries in collector.markers.items()]))
"""


def test_docs_conformance_md_is_generated_from_the_current_markers():
    """Every row of docs/conformance.md cites exactly the tests now marked for it, with the reasons they
    carry: a marker added, moved or reworded without regenerating the file (tools/conformance.py) fails."""
    import json
    import re
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-c", _COLLECT, str(_PATH.parent)], capture_output=True, text=True,
                         cwd=_PATH.parent.parent, timeout=300)
    line = next(l for l in out.stdout.splitlines() if l.startswith("MARKERS "))
    marked = {}
    for section, item, entries in json.loads(line[len("MARKERS "):]):
        tests = {f"{n.split('::', 1)[0].rsplit('/', 1)[-1]}::{n.split('::', 1)[1].split('[')[0]}" for n, _ in entries}
        marked[(section, item)] = (tests, "; ".join(sorted({r for _, r in entries if r})))
    doc = (_PATH.parent.parent / "docs" / "conformance.md").read_text()
    section, rows = None, {}
    for text in doc.splitlines():
        heading = re.match(r"## (A\d|§0|§1\.\d+|§4) ", text)
        if heading or text.startswith("## "):
            section = heading.group(1) if heading else None
            continue
        cells = [c.strip() for c in text.strip().strip("|").split("|")]
        if section is None or not text.startswith("| ") or len(cells) != 5 or cells[0] == "item":
            continue
        rows[(section, cells[0])] = (set(re.findall(r"`([^`]+)`", cells[4])), cells[2], cells[3])
    for key, (tests, reason) in marked.items():
        if key not in rows:   # a marker for a row the audit found working is listed under "Also pinned"
            assert f"- {key[0]} {key[1]}: " in doc, f"{key}: marked but not in docs/conformance.md; regenerate it"
            continue
        cited, status, shown = rows[key]
        assert cited == tests, f"{key}: docs/conformance.md cites {sorted(cited)}, the markers {sorted(tests)}"
        if status == "**different**":
            assert shown == reason, f"{key}: reason {shown!r} in the file, {reason!r} in the markers"
    for key, (cited, status, _) in rows.items():
        assert not cited or key in marked, f"{key}: docs/conformance.md cites {sorted(cited)}, no test is marked"
