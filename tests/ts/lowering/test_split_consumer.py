"""A well-formed split consumer in a 2-CTA cluster verifies and lowers as the model runs it (issue 12 §2;
:mod:`.split_consumer_programs`): the waiter waits on every CTA, the leader's releaser releases every
CTA's stage once ``done`` (every CTA's waiter commits to the leader's barrier) says all have read theirs.
Its broken twin -- the releaser without ``done`` -- is refused by B1 with the fix spelled out."""
from __future__ import annotations

import warnings

import pytest

import tsjit

from . import split_consumer_programs as sc
from .protocol_readback import (barrier_names, canonical, init_counts, ir_barrier_events, model_events,
                               model_program, ring_prefixes)

STAGES = 3
_KEEP: list = []
_BROKEN: list = [False]


def _kept(src_map, dst, num_tiles, BOX_M: tsjit.Constexpr[int], BOX_N: tsjit.Constexpr[int],
          STAGES: tsjit.Constexpr[int]):
    manager = sc.build(src_map, dst, num_tiles, BOX_M, BOX_N, STAGES, broken=_BROKEN[0], first=0, step=1)
    _KEEP.append(manager)
    manager.setup_resources_and_tasks()
    manager.run()


def _compile(monkeypatch, broken=False):
    monkeypatch.setenv("TSJIT_DISABLE_CACHE", "1")
    _KEEP.clear()
    _BROKEN[0] = broken
    compiled = tsjit.compile(tsjit.kernel(_kept), *sc.specs(256, 8, 8), 4, 8, 8, STAGES, target="sm_90a")
    return compiled, _KEEP[0]


def test_split_consumer_verifies_safe_with_every_cta_modelled(monkeypatch):
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # no VerificationWarning either
        _, manager = _compile(monkeypatch)
    result = manager.exhaustive_result
    assert result.verdict == "SAFE", result.format()
    assert any("every CTA of the 2-CTA cluster" in note for note in result.notes)
    processes = [p for v in result.variants for p in v.processes]
    assert any(p.startswith("waiter@CTA1") for p in processes)
    assert not any(p.startswith("releaser@CTA1") for p in processes)     # run_only_on_cta_id=0


def test_unordered_release_is_refused_with_the_split_consumer_fix(monkeypatch):
    with pytest.raises(tsjit.VerificationError) as err:
        _compile(monkeypatch, broken=True)
    text = str(err.value)
    assert err.value.check == "B1"
    assert "'releaser'" in text and "'waiter'" in text and "'tiles'" in text
    assert "done.wait()" in text and "{done: [tiles]}" in text and "before tiles.release()" in text


def test_every_ctas_barrier_sequence_equals_the_model(monkeypatch):
    """As many trips as the model runs (``num_tiles`` = 2 S + 1, both rings wrap twice): the waits, and the
    arrivals with the CTA each lands on, of every task on every CTA."""
    compiled, manager = _compile(monkeypatch)
    program, trips = model_program(manager)
    assert trips > 2 * STAGES
    threads = sc.THREADS
    params = {"num_tiles": trips}
    events = {rank: ir_barrier_events(compiled.llir, threads, cta_rank=rank, params=params) for rank in (0, 1)}
    order, prefixes = ring_prefixes(manager, "tiles")
    names = barrier_names(events[0], STAGES, order)
    counts = init_counts(events[0], names)
    for barrier in program.barriers:
        if barrier.cta in (None, 0):
            assert counts[f"{prefixes[barrier.resource.name]}{barrier.kind}[{barrier.slot}]"] == barrier.count
    seen = set()
    for process in program.processes:
        first = 32 * process.task.warp_start
        lowered = canonical(events[process.cta], range(first, first + 32 * process.task.num_warps), names,
                            own_rank=process.cta)
        assert lowered == model_events(process, program.barriers, prefixes=prefixes, with_cta=True), process.name
        seen.add((process.task.name, process.cta))
    assert seen == {("load", 0), ("load", 1), ("waiter", 0), ("waiter", 1), ("releaser", 0)}
    # the releaser on CTA 1 does nothing (run_only_on_cta_id=0)
    releaser = range(32 * (1 + sc.WAIT_WARPS), sc.THREADS)
    assert not any(e[0] != "init" for tid in releaser for e in events[1][tid])


def test_split_consumer_lowering_is_not_the_plain_consumer(monkeypatch):
    """The waiter's wait is on every CTA and no release is in it; the release is the leader's, to both CTAs."""
    compiled, _ = _compile(monkeypatch)
    assert ".reqnctapercluster 2, 1, 1" in compiled.ptx and "%cluster_ctarank" in compiled.ptx
    # the release (a consumer's): a CTA-scope release fence, then relaxed remote arrives
    assert "mbarrier.arrive.relaxed.cluster.shared::cluster" in compiled.ptx and "fence.release.cta" in compiled.ptx
