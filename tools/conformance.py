"""Generate ``docs/conformance.md``: tsjit against the API reference of the Task Scheduling
``resources`` module, row by row, from the tests.

Every row of the 2026-12-01 conformance audit's host-API tables (sections A1-A9 and §1.1-§1.10) that the audit
marked DIFFERENT, PARTIAL or MISSING gets a status here:

* ``works``: a test marked ``@pytest.mark.conformance(section, item)`` exercises the reference's
  form and passed;
* ``different``: the marker carries ``reason=...`` (tsjit deliberately does it another way) and its
  test, which pins the documented alternative or error, passed;
* ``deferred``: the row belongs to another issue (:data:`DEFERRED`, one line each);
* ``FAILING`` / ``not covered``: a marked test failed, or no test is marked for the row.

Usage (from the repository root)::

    python tools/conformance.py [--report ../shared/reports/2026-12-01-conformance.md] \\
        [--output docs/conformance.md]

It runs ``tests/ts/reference`` once under pytest (GPU tests skip without a device) and exits 1
when a row is FAILING or not covered, or a marker names an item the audit does not have.
"""
from __future__ import annotations

import argparse
import datetime
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
#: the audit, in the project's shared folder next to the checkout (../shared, or ../../shared from a worktree).
DEFAULT_REPORT = next((p for p in (ROOT.parent / "shared", ROOT.parent.parent / "shared")
                       if p.is_dir()), ROOT.parent / "shared") / "reports" / "2026-12-01-conformance.md"
DEFAULT_OUTPUT = ROOT / "docs" / "conformance.md"
TESTS = ROOT / "tests" / "ts" / "reference"

#: rows another issue owns: (section, item) -> one-line reason.
I12, I14 = "issue 12", "issue 14 (Blackwell)"
DEFERRED = {
    ("A1", "field producer_signaling_threads"): f"CtaLeader signalling on clusters is {I12}",
    ("A1", "field consumer_signaling_threads"): f"CtaLeader signalling on clusters is {I12}",
    ("A1", "field consumer_wait_signaling_threads"): f"split-consumer signalling is lowered with {I12}",
    ("A6", "pipeline_group"): f"PipelineGroup (Merge / Fork / FusedMerge) is {I12}",
    ("A6", "property state_src"): f"Merge groups' shared consumer state comes with PipelineGroup, {I12}",
    ("A7", "WorkQueue wrapping ClcDynamicPersistentTileScheduler"): f"the CLC lowering is {I14}",
    ("§1.2", "last-iter loop peeling"): f"one reading of FirstIter / LastIter / Every is {I12} §1",
    ("§1.2", "when_true(tok, key=) / when_false"): f"the checker's when_true(key=) is {I12}",
    ("§1.4", "create_clc_fetch_async_pipeline_cfg"): f"the CLC lowering is {I14}",
    ("§1.4", "CtaLeader"): f"leader signalling is {I12} §2",
    ("§1.4", "consumer_wait_signaling_threads"): f"split-consumer signalling is {I12} §2",
    ("§1.4", "warp-lane vs domain-lane interleave"): f"false deadlocks of interleaved rings are {I12}",
    ("§1.4", "mcast_mode_mn"): f"multicast consumer counts in the checker and the lowering are {I12} §2",
    ("§1.5", "create_clc_dynamic_persistent_tile_scheduler_params(params, response_ptr)"):
        f"the factory takes the params object (A2); CLC clusters and lowering are {I14}",
    ("§1.5", "wq.get_and_advance_work_tile()"): f"the CLC response decode is {I14}",
    ("§1.5", "wq.fetch_work_tile()"): f"clusterlaunchcontrol.try_cancel is {I14}",
    ("§1.5", "WorkQueue self-edge {wq: [wq]}"): f"verifies; its CLC lowering is {I14}",
    ("§1.8", "add_tmem_ptr(alloc)"): f"TMEM addresses (tcgen05.alloc) are {I14}",
    ("§1.8", "TmemAllocator"): f"tcgen05.alloc / dealloc builtins are {I14}",
    ("§1.9", "smem_allocator, tmem_allocator, tmem_ptr_i32"):
        f"tmem_ptr_i32 reaches StageInfo.context; TMEM allocation itself is {I14}",
    ("§1.9", "run_only_on_cta_id=k"): f"lowered with leader signalling, {I12} §2",
    ("§1.10", "PipelineGroupMode"): f"PipelineGroup is {I12} §3",
    ("§1.10", "SignalingThreads (IntFlag)"): f"the enum lives in the protocol table, {I12}",
    ("§1.10", "CooperativeGroup(Agent.{Thread, Warp, ThreadBlock, ThreadBlockCluster}, size)"):
        f"arrival counts by agent come from the protocol table, {I12}",
}
for _item in ("PipelineGroup(name, members, mode)", "PipelineGroupMode.Merge", "PipelineGroupMode.Fork", "FusedMerge",
              "kind homogeneity", "config merging", "group.member refs", "collapsed-op placement",
              "SmemAllocator.add_pipeline_group", "Merge consumer state sharing (state_src)"):
    DEFERRED[("§1.6", _item)] = f"PipelineGroup is {I12} §3"


def audit_rows(report: pathlib.Path) -> list[tuple[str, str, str, str]]:
    """(section, item, audit status, section title) of every non-WORKS row of the host-API tables
    (A1-A9: the reference; §1.1-§1.10: the feature inventory's host side)."""
    rows, section, title = [], None, ""
    for line in report.read_text().splitlines():
        heading = re.match(r"### (A\d|§1\.\d+) (.*)", line)
        if heading:
            section, title = heading.group(1), heading.group(2)
            continue
        if line.startswith("### "):
            section = None
            continue
        if section is None or not line.startswith("| "):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        status = re.search(r"\*\*([A-Z-]+)\*\*", line)
        if status and status.group(1) in ("DIFFERENT", "PARTIAL", "MISSING"):
            rows.append((section, cells[0], status.group(1), title))
    return rows


class _Collector:
    """pytest plugin: conformance markers per test and each test's outcome."""

    def __init__(self):
        self.markers: dict = {}      # (section, item) -> [(nodeid, reason)]
        self.outcomes: dict = {}     # nodeid -> passed / failed / skipped

    def pytest_collection_modifyitems(self, items):
        for item in items:
            for mark in item.iter_markers("conformance"):
                section, name = mark.args
                self.markers.setdefault((section, name), []).append((item.nodeid, mark.kwargs.get("reason")))

    def pytest_runtest_logreport(self, report):
        previous = self.outcomes.get(report.nodeid)
        if report.failed:
            self.outcomes[report.nodeid] = "failed"
        elif report.skipped and previous is None:
            self.outcomes[report.nodeid] = "skipped"
        elif report.when == "call" and report.passed and previous != "failed":
            self.outcomes[report.nodeid] = "passed"


def _status(entries, outcomes) -> tuple[str, str]:
    results = [outcomes.get(nodeid, "not run") for nodeid, _ in entries]
    reasons = sorted({reason for _, reason in entries if reason})
    if any(r in ("failed", "not run") for r in results):
        return "FAILING", ""
    if all(r == "skipped" for r in results):
        return "GPU only", "its tests need a GPU (skipped here)"
    return ("different", "; ".join(reasons)) if reasons else ("works", "")


def render(rows, collector, commit: str) -> tuple[str, list[str]]:
    problems: list[str] = []
    known = {(section, item) for section, item, _, _ in rows}
    lines = ["# Conformance to the Task Scheduling `resources` reference", "",
             f"Generated by `tools/conformance.py` at commit `{commit}` on {datetime.date.today()}; do not edit "
             "by hand.  Each row is a host-API item the 2026-12-01 audit marked DIFFERENT, PARTIAL or MISSING "
             "(tables A1-A9 and §1.1-§1.10 of the audit); *now* says what tsjit does today and which tests show it "
             "(`tests/ts/reference/`, marked `@pytest.mark.conformance`).", "",
             "*works*: the reference's form works as written.  *different*: tsjit does it another way on "
             "purpose; the reason is the one line shown, and the test pins the alternative or the error that "
             "names it.  *deferred*: another issue owns the row.", ""]
    title_of = {}
    for section, _, _, title in rows:
        title_of.setdefault(section, title)
    for section in title_of:
        lines += [f"## {section} {title_of[section]}", "", "| item | audit | now | reason | tests |",
                  "|---|---|---|---|---|"]
        for sec, item, audited, _ in rows:
            if sec != section:
                continue
            entries = collector.markers.get((sec, item), [])
            if entries:
                status, reason = _status(entries, collector.outcomes)
                tests = ", ".join(sorted({f"`{n.split('::', 1)[0].rsplit('/', 1)[-1]}::"
                                          f"{n.split('::', 1)[1].split('[')[0]}`" for n, _ in entries}))
            elif (sec, item) in DEFERRED:
                status, reason, tests = "deferred", DEFERRED[(sec, item)], ""
            else:
                status, reason, tests = "not covered", "", ""
            if status in ("FAILING", "not covered"):
                problems.append(f"{sec} {item!r}: {status}")
            lines.append(f"| {item} | {audited} | **{status}** | {reason} | {tests} |")
        lines.append("")
    extra = sorted(set(collector.markers) - known)
    if extra:
        lines += ["## Also pinned (rows the audit found working)", ""]
        for sec, item in extra:
            status, reason = _status(collector.markers[(sec, item)], collector.outcomes)
            lines.append(f"- {sec} {item}: **{status}**{' (' + reason + ')' if reason else ''}")
        lines.append("")
    counts: dict = {}
    for line in lines:
        found = re.search(r"\| \*\*([A-Za-z ]+)\*\* \|", line)
        if found:
            counts[found.group(1)] = counts.get(found.group(1), 0) + 1
    lines += ["## Totals", "", ", ".join(f"{k}: {v}" for k, v in sorted(counts.items())), ""]
    return "\n".join(lines), problems


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--report", type=pathlib.Path, default=DEFAULT_REPORT)
    parser.add_argument("--output", type=pathlib.Path, default=DEFAULT_OUTPUT)
    args = parser.parse_args(argv)
    rows = audit_rows(args.report)
    import pytest  # the test runner is what produces the table
    collector = _Collector()
    code = pytest.main([str(TESTS), "-q", "-p", "no:cacheprovider"], plugins=[collector])
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip() or "?"
    text, problems = render(rows, collector, commit)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text)
    print(f"wrote {args.output} ({len(rows)} rows)")
    for problem in problems:
        print("  " + problem)
    return 1 if problems or code not in (0, 5) else 0


if __name__ == "__main__":
    sys.exit(main())
