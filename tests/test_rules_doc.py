"""docs/rules.md stays true: its tables list exactly the rule ids tsjit's source can raise.

The ids are read from the source, not from a list kept here: the first argument of the finding
constructors (``error``, ``warning``, ``Finding``, ``_report``, the TaskManager's ``_fail``), the rule
argument of ``schedule_error`` and ``VerificationError``, any ``check=`` / ``rule=`` keyword, the
``("W0", check_function)`` entries of the TaskManager's check table, and ``[S11]``-style tags written
into message text.  A new rule without a row, or a row for an id the code never raises, fails."""
import ast
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]
RULES = (ROOT / "docs" / "rules.md").read_text()
RULE_ID = re.compile(r"^[A-Z]{1,4}[0-9]{0,2}$")
TAG = re.compile(r"\[([A-Z]{1,4}[0-9]{1,2})\]")
#: callee name -> index of the positional argument that is the rule id
RULE_ARGUMENT = {"error": 0, "warning": 0, "Finding": 0, "_report": 0, "_fail": 0,
                 "schedule_error": 1, "VerificationError": 1}


def _constant(node):
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and RULE_ID.match(node.value):
        return node.value
    return None


def raised_rule_ids() -> dict:
    """``rule id -> first "path:line"`` of every rule id the package's source can raise."""
    found: dict = {}
    for path in sorted((ROOT / "tsjit").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            candidates = []
            if isinstance(node, ast.Call):
                name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
                index = RULE_ARGUMENT.get(name)
                if index is not None and len(node.args) > index:
                    candidates.append(node.args[index])
                candidates += [k.value for k in node.keywords if k.arg in ("check", "rule")]
            elif isinstance(node, ast.Tuple) and len(node.elts) == 2 and isinstance(node.elts[1], ast.Attribute) \
                    and node.elts[1].attr.startswith("check_"):
                candidates.append(node.elts[0])
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                for tag in TAG.findall(node.value):
                    found.setdefault(tag, f"{path.relative_to(ROOT)}:{node.lineno}")
            for candidate in candidates:
                rule = _constant(candidate)
                if rule is not None:
                    found.setdefault(rule, f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def documented_rule_ids() -> set:
    return set(re.findall(r"^\| `([A-Z0-9]+)` \|", RULES, flags=re.MULTILINE))


def test_every_rule_the_code_raises_has_a_row():
    raised = raised_rule_ids()
    missing = {rule: where for rule, where in raised.items() if rule not in documented_rule_ids()}
    assert not missing, f"rule ids raised but not in docs/rules.md: {missing}"


def test_every_row_is_a_rule_the_code_raises():
    invented = documented_rule_ids() - set(raised_rule_ids())
    assert not invented, f"docs/rules.md lists ids no code raises: {sorted(invented)}"


def test_the_collector_sees_each_kind_of_raise_site():
    """The scan is what keeps the table honest: it must see a finding, a ScheduleError, a construction
    VerificationError, a check-table entry and a message tag (R5 and S15 were once missing from the README)."""
    raised = raised_rule_ids()
    for rule in ("C0", "R5", "X", "S13", "S15", "S11", "T3", "P3", "PG", "Q1", "PDL1", "R1"):
        assert rule in raised, rule
    assert len(raised) >= 54


def test_readme_check_list_links_the_rules_table():
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Task Scheduling checks", 1)[1].split("\n## ", 1)[0]
    assert "docs/rules.md" in section
