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
| doc only | x | - | **MISSING** | outside A1-A9 |
"""


def test_audit_rows_are_the_non_working_rows_of_a1_to_a9(tmp_path):
    report = tmp_path / "audit.md"
    report.write_text(REPORT)
    assert [(s, i, st) for s, i, st, _ in tool.audit_rows(report)] == [
        ("A1", "field b", "MISSING"), ("A1", "field c", "PARTIAL"), ("A1", "field d", "DIFFERENT"),
        ("A6", "pipeline_group", "MISSING")]


def test_statuses_come_from_markers_outcomes_and_the_deferred_list(tmp_path):
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
    assert problems == ["A1 'field d': not covered"]
    collector.outcomes["t.py::test_b"] = "failed"
    _, problems = tool.render(tool.audit_rows(report), collector, "abc")
    assert "A1 'field b': FAILING" in problems
