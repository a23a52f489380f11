"""The exhaustive deadlock / race checker (issue 6): timings and the mutation test.

Host-only (no GPU).  Prints and writes ``benchmarks/checker_results.md``:

1. per tutorial-like schedule (``tests/ts/verify/verify_schedules.py``): verdict, states
   explored and milliseconds (best of 3) with partial-order reduction, and the same search
   without it;
2. the schedules of the real examples, taken from their TaskManager while
   ``tsjit.compile`` builds them for sm_90a (skipped when the compile toolchain is absent);
3. the programs of the issue 12 §2 audit: the 8-task, 8-stage chain with and without
   try_acquire / try_wait probes, clusters (symmetric reduction or every CTA), split A/B loads
   and asynchronous wgmma reads, each with its broken twin;
4. the mutation test: every tutorial schedule with one synchronisation step deleted or
   moved; mutants, rejected by the full TaskManager, rejected by the exhaustive checker
   alone, accepted but harmless (with the reason), milliseconds.

    PYTHONPATH=. python benchmarks/checker.py
"""
from __future__ import annotations

import os
import platform
import subprocess
import sys
import time
import warnings
from datetime import date

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "ts", "verify"))

from mutations import mutation_table  # noqa: E402
from tsjit.ts.verify.exhaustive import check_all_interleavings  # noqa: E402
from verify_schedules import gemm, grid_stride_copy, persistent_copy, tma_copy  # noqa: E402

FULL_SEARCH_CAP = 2_000_000


def _best(tasks, graph, options, repeats=3, **kw):
    best, result = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        result = check_all_interleavings(tasks, graph,
                                         smem_allocator=options.get("smem_allocator"), **kw)
        best = min(best, time.perf_counter() - start)
    return result, best * 1000


def timing_rows() -> list:
    programs = [("grid-stride copy (1 task)", grid_stride_copy()),
                ("TMA copy (4 tasks, 4 stages)", tma_copy(4)),
                ("TMA copy (4 tasks, 6 stages)", tma_copy(6)),
                ("persistent copy, skip_if (2 tasks, 3 variants)", persistent_copy()),
                ("GEMM TMA -> 2 warpgroups, 4 stages, 2 tiles x 8", gemm(4)),
                ("GEMM TMA -> 2 warpgroups, 5 stages, 2 tiles x 8", gemm(5)),
                ("GEMM TMA -> 2 warpgroups, 6 stages, 2 tiles x 8", gemm(6)),
                ("GEMM TMA -> 2 warpgroups, 6 stages, 2 tiles x 16", gemm(6, 16))]
    rows = []
    for name, program in programs:
        tasks, graph, options = program.build()
        reduced, ms = _best(tasks, graph, options)
        full, full_ms = _best(tasks, graph, options, repeats=1, reduce=False,
                              max_states=FULL_SEARCH_CAP)
        full_states = f"{full.states}" + (" (cap)" if full.capped else "")
        rows.append((name, reduced.verdict, reduced.states, ms, full_states, full_ms))
    return rows


def example_rows() -> list:
    """The real examples' schedules, captured from their TaskManager during a compile."""
    try:
        import tsjit
        from tsjit.examples import gemm as gemm_example
        from tsjit.examples import ts_tma_copy
        from tsjit.ts import task_manager
    except Exception as err:  # no compile toolchain: leave the section out
        return [("(examples not compiled: " + str(err)[:60] + ")", "", 0, 0.0)]
    captured = []
    original = task_manager.TaskManager.print_and_verify

    def capture(self):
        original(self)
        captured.append(self)
    task_manager.TaskManager.print_and_verify = capture
    os.environ["TSJIT_DISABLE_CACHE"] = "1"
    rows = []
    try:
        a = tsjit.tensormap_spec(tsjit.BFloat16, (gemm_example.BM, gemm_example.BK),
                                 swizzle="128B")
        b = tsjit.tensormap_spec(tsjit.BFloat16, (256, gemm_example.BK), swizzle="128B")
        c_map = tsjit.tensormap_spec(tsjit.BFloat16, (64, 64), swizzle="128B")
        jobs = [("tsjit/examples/gemm.py, 4 stages", lambda: tsjit.compile(
            gemm_example.gemm_ts, a, b, tsjit.spec((1024, 1024), tsjit.BFloat16), c_map,
            1024, 1024, 1024, 256, 4, 8, 1, "tma"))]
        for label, kernel, args in ts_tma_copy.demo_compile_targets():
            jobs.append((f"tsjit/examples/ts_tma_copy.py: {label}",
                         lambda kernel=kernel, args=args: tsjit.compile(kernel, *args)))
        for label, job in jobs:
            captured.clear()
            try:
                job()
            except Exception as err:
                rows.append((label + f" (compile failed: {type(err).__name__})", "", 0, 0.0))
                continue
            manager = captured[-1]
            start = time.perf_counter()
            result = check_all_interleavings(manager.tasks, manager.resource_dependency_graph,
                                             smem_allocator=manager.smem_allocator)
            rows.append((label, result.verdict, result.states,
                         (time.perf_counter() - start) * 1000))
    finally:
        task_manager.TaskManager.print_and_verify = original
    return rows


def audit_rows() -> list:
    """The issue 12 §2 audit programs: (name, expected verdict, verdict, states, ms, note)."""
    from broken.counts import clc_ring, multicast, split_loads, umma_pair
    from test_probe_collapse import chain
    from test_wgmma_async_reads import _program as wgmma_program
    programs = [
        ("8-task, 8-stage chain, 8 trips, no probes", chain(probes=False), "SAFE"),
        ("8-task, 8-stage chain, 8 trips, try_wait / try_acquire probes", chain(), "SAFE"),
        ("2-CTA UMMA pair, MMA task on the leader", umma_pair(256)(), "SAFE"),
        ("2-CTA UMMA pair, MMA task on both CTAs (broken)", umma_pair(256, producer_cta=None)(),
         "UNSAFE"),
        ("2-CTA CLC ring, consumer_group 256", clc_ring(256)(), "SAFE"),
        ("2-CTA CLC ring, consumer_group 128 (broken)", clc_ring(128)(), "UNSAFE"),
        ("2 x 2 multicast (1, 1), consumer_group 12", multicast(12)(), "SAFE"),
        ("split A/B loads, num_bytes_per_warp_per_cta", split_loads()(), "SAFE"),
        ("split A/B loads without per-warp bytes (broken)", split_loads(per_warp=None)(), "UNSAFE"),
        ("wgmma staging aliased with A/B, written after wait_group(0)", wgmma_program(), "SAFE"),
        ("wgmma staging written before the last group retires (broken)",
         wgmma_program(signal_after_retire=False), "UNSAFE"),
    ]
    rows = []
    for name, program, expected in programs:
        tasks, graph, options = program.build()
        result, ms = _best(tasks, graph, options)
        note = "; ".join(n for n in result.notes if "every CTA" in n)
        rows.append((name, expected, result.verdict, result.states, ms, note))
    return rows


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, cwd=HERE, timeout=10).stdout.strip() or "?"
    except Exception:
        return "?"


def main() -> None:
    warnings.simplefilter("ignore")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    lines = [f"# Exhaustive checker (issues 6, 12) -- {date.today()}, commit {_commit()}", "",
             f"Machine: {os.cpu_count()} CPU cores (load average {load:.1f} at the start: "
             f"the cores are shared, so times are upper bounds), Python "
             f"{platform.python_version()}, "
             f"{platform.processor() or platform.machine()}; host-only, no GPU.  "
             f"Reproduce: `PYTHONPATH=. python benchmarks/checker.py`.", "",
             "## Timing on the tutorial schedules", "",
             "Partial-order reduction on (the default) vs every interleaving (`reduce=False`, "
             f"capped at {FULL_SEARCH_CAP} states). ms = best of 3 for the reduced search.", "",
             "| schedule | verdict | states | ms | states without POR | ms without POR |",
             "|---|---|---|---|---|---|"]
    for name, verdict, states, ms, full_states, full_ms in timing_rows():
        lines.append(f"| {name} | {verdict} | {states} | {ms:.1f} | {full_states} | "
                     f"{full_ms:.0f} |")
    lines += ["", "## The real examples (schedules captured during `tsjit.compile` for sm_90a)",
              "", "| schedule | verdict | states | ms |", "|---|---|---|---|"]
    for name, verdict, states, ms in example_rows():
        lines.append(f"| {name} | {verdict} | {states} | {ms:.1f} |")
    lines += ["", "## Issue 12 §2 audit programs", "",
              "Every row verified by `check_all_interleavings` alone (ms = best of 3).  *every "
              "CTA*: the cluster is modelled CTA by CTA (no symmetric reduction), and why.", "",
              "| program | expected | verdict | states | ms | cluster model |",
              "|---|---|---|---|---|---|"]
    for name, expected, verdict, states, ms, note in audit_rows():
        lines.append(f"| {name} | {expected} | {verdict} | {states} | {ms:.1f} | "
                     f"{note or 'symmetric / one CTA'} |")
    rows, mutants = mutation_table()
    lines += ["", "## Mutation test", "",
              "Each mutant deletes one synchronisation step (pipeline op, try probe, work-queue "
              "epilogue step) or moves it to another position of its entry list.  *rejected*: "
              "the full TaskManager raises; *rejected by X alone*: `check_all_interleavings` "
              "alone finds a deadlock / race / count mismatch.", "",
              "| schedule | mutants | rejected | rejected by X alone | accepted (harmless) | ms |",
              "|---|---|---|---|---|---|"]
    for name, count, rejected, by_x, harmless, ms in rows:
        lines.append(f"| {name} | {count} | {rejected} | {by_x} | {count - rejected} "
                     f"({harmless}) | {ms:.0f} |")
    total = sum(r[1] for r in rows)
    lines += ["", f"Total: {total} mutants, {sum(r[2] for r in rows)} rejected, "
                  f"{sum(r[3] for r in rows)} rejected by the exhaustive checker alone.", "",
              "Mutants the exhaustive checker proves SAFE (each is harmless on the GPU; the "
              "structural checks still reject most of them as non-canonical):", ""]
    reasons: dict = {}
    for m in mutants:
        if m.exhaustive != "UNSAFE":
            reasons.setdefault(m.harmless_reason or "UNEXPLAINED", []).append(
                f"{m.program}: {m.label} ({'accepted' if m.verdict == 'accepted' else m.check})")
    for reason, labels in reasons.items():
        lines.append(f"* {reason}:")
        lines += [f"  - {label}" for label in labels]
    text = "\n".join(lines) + "\n"
    print(text)
    with open(os.path.join(HERE, "checker_results.md"), "w", encoding="utf-8") as handle:
        handle.write(text)


if __name__ == "__main__":
    main()
