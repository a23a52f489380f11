"""A compile depends only on its inputs (issue 9, "nothing stale"): compiling one configuration of a TS
example must not change what a later compile of another configuration of it does in the same process.

Found on ``tma_copy_bw`` (2026-12-01): the race checker's scan of work bodies for asynchronous reads
(ts/verify/async_reads.py) looked ``tsjit.tma_store`` up in the ``tsjit`` module's dict, where a lazy
(PEP 562) name appears only once something has used it.  The first compile of a process saw no TMA store
at all; every later one saw the store but not the ``bulk_wait_group`` retiring it under
``if tsjit.elect_one():`` and raised ``[race] on 'smem' stage 0``.

Every TS example in tsjit/examples is compiled here with two configurations per kernel, in one process
(in both orders) and in processes that compile only one configuration of each kernel (each process with
its own empty kernel cache); each PTX must equal the latter's.  Run as a script, this file compiles the named configurations in order and
prints ``name<TAB>sha256 of the PTX`` (or ``name<TAB>ERROR ...``) per line."""
import hashlib
import os
import subprocess
import sys
import tempfile
import types

import numpy as np
import pytest

import tsjit


def _targets() -> dict:
    """name -> (kernel, compile arguments[, compile options]): two configurations of every TS kernel of
    tsjit/examples (but attention's, whose compiles take minutes here, and interpret_bugs', planted bugs)."""
    import tsjit
    from tsjit.examples import bw_clc_copy, bw_gemm, gemm
    from tsjit.examples import (ts_async, ts_copy, ts_fork, ts_merge_copy, ts_merge_gemm, ts_merge_resadd, ts_pdl,
                                ts_persistent, ts_tma_copy)
    f32, i16, i32 = (lambda n: np.zeros(n, np.float32)), (lambda n: np.zeros(n, np.int16)), np.int32

    def bw(box, stages, in_flight):
        spec = tsjit.tensormap_spec(tsjit.Float32, box)
        return ts_tma_copy.tma_copy_bw, (spec, spec, 100, 4, box[0], box[1], stages, in_flight)

    def tma_ts(box, stages):
        spec = tsjit.tensormap_spec(tsjit.Float32, box)
        return ts_tma_copy.tma_copy_ts, (spec, np.zeros((256, 256), np.float32), 16, 4, box[0], box[1], stages)

    targets = {
        "tma_copy_bw/a": bw((32, 256), 4, 1), "tma_copy_bw/b": bw((16, 256), 2, 1),
        "tma_copy_bw_in_flight/a": bw((8, 64), 3, 2), "tma_copy_bw_in_flight/b": bw((16, 256), 8, 4),
        "tma_copy_ts/a": tma_ts((64, 64), 4), "tma_copy_ts/b": tma_ts((32, 32), 3),
        "copy_ts/a": (ts_copy.copy_ts, (i16(64), i16(64), 64, 4)),
        "copy_ts/b": (ts_copy.copy_ts, (f32(100), f32(100), 100, 2)),
        "copy_ts_vectorized/a": (ts_copy.copy_ts_vectorized, (i16(64), i16(64), 64, 4)),
        "copy_ts_vectorized/b": (ts_copy.copy_ts_vectorized, (f32(100), f32(100), 100, 3)),
        "persistent_copy/a": (ts_persistent.persistent_copy, (f32(64), f32(64), 8, 64, 2048, 4)),
        "persistent_copy/b": (ts_persistent.persistent_copy, (f32(64), f32(64), 8, 64, 256, 2)),
        "varlen_copy/a": (ts_persistent.varlen_copy, (f32(64), np.zeros(5, i32), np.zeros((4, 16), np.float32), 4, 4)),
        "varlen_copy/b": (ts_persistent.varlen_copy, (f32(64), np.zeros(5, i32), np.zeros((4, 16), np.float32), 4, 2)),
        "scale_producer/a": (ts_pdl.scale_producer, (f32(64), f32(64), 64, 8)),
        "scale_producer/b": (ts_pdl.scale_producer, (f32(64), f32(64), 64, 2)),
        "scale_consumer/a": (ts_pdl.scale_consumer, (f32(64), f32(64), 64, 8)),
        "scale_consumer/b": (ts_pdl.scale_consumer, (f32(64), f32(64), 64, 2)),
        "merge_copy/a": (ts_merge_copy.merge_copy, ts_merge_copy.compile_args()),
        "merge_copy/b": (ts_merge_copy.merge_copy, ts_merge_copy.compile_args(box=(16, 64), stages=2, grouped=False)),
        "fork_gemm_act/a": (ts_fork.fork_gemm_act, ts_fork.compile_args()),
        "fork_gemm_act/b": (ts_fork.fork_gemm_act, ts_fork.compile_args(stages=2, grouped=False)),
        "merge_gemm/a": (ts_merge_gemm.merge_gemm, ts_merge_gemm.compile_args()),
        "merge_gemm/b": (ts_merge_gemm.merge_gemm, ts_merge_gemm.compile_args(stages=3, grouped=False)),
        "merge_gemm_resadd/a": (ts_merge_resadd.merge_gemm_resadd, ts_merge_resadd.compile_args()),
        "merge_gemm_resadd/b": (ts_merge_resadd.merge_gemm_resadd,
                                ts_merge_resadd.compile_args(stages=2, grouped=False)),
    }
    spec = tsjit.tensormap_spec
    bf16 = tsjit.BFloat16
    for name, stages, epilogue in (("gemm_ts/a", 3, "tma"), ("gemm_ts/b", 4, "direct")):
        targets[name] = (gemm.gemm_ts, (spec(bf16, (gemm.BM, gemm.BK), swizzle="128B"),
                                        spec(bf16, (256, gemm.BK), swizzle="128B"), tsjit.spec((256, 256), bf16),
                                        spec(bf16, (64, 64), swizzle="128B"), 256, 256, 256, 256, stages, 8, 1,
                                        epilogue, "K"))
    for name, tile, warps in (("clc_copy/a", 1024, 4), ("clc_copy/b", 256, 2)):
        targets[name] = (bw_clc_copy.clc_copy, (f32(64), f32(64), 4, tile, warps), {"target": "sm_100a"})
    for name, k, target in (("gemm_tutorial3/a", 256, "sm_90a"), ("gemm_tutorial3/b", 512, "sm_100a")):
        targets[name] = (bw_gemm.gemm_tutorial3, (spec(bf16, (bw_gemm.BM, bw_gemm.BK), swizzle="128B"),
                                                  spec(bf16, (bw_gemm.BN, bw_gemm.BK), swizzle="128B"),
                                                  tsjit.spec((256, 512), bf16), k), {"target": target})
    for kind, kernel in (("pingpong", ts_async.pingpong_scale), ("interleaved", ts_async.interleaved_scale),
                         ("asyncload", ts_async.asyncload_scale)):
        targets[f"{kind}_scale/a"] = (kernel, (f32(64), f32(64), 64, 1024))
        targets[f"{kind}_scale/b"] = (kernel, (f32(64), f32(64), 64, 256))
    return targets


class _Store:
    """A resource whose work bodies issue TMA stores (only the syntax matters to work_events)."""

    in_flight = 1

    def elected(self, stage_info):
        if tsjit.elect_one():
            tsjit.tma_store(None, None, (0, 0))
            tsjit.bulk_commit_group()
            tsjit.bulk_wait_group(self.in_flight, read=True)

    def lane_zero(self, stage_info):
        if tsjit.thread_idx().x == 0:
            tsjit.tma_store(None, None, (0, 0))
            tsjit.bulk_commit_group()
            tsjit.bulk_wait_group(0, read=True)

    def elected_with_else(self, stage_info):
        if tsjit.elect_one():
            tsjit.tma_store(None, None, (0, 0))
            tsjit.bulk_commit_group()
            tsjit.bulk_wait_group(0, read=True)
        else:
            tsjit.syncwarp()


def _events(method, resource):
    from tsjit.ts.verify.async_reads import work_events
    step = types.SimpleNamespace(function=method, resource=resource, constexpr_kwargs={}, spec=None)
    return [(e.kind, e.pending) for e in work_events(step)]


@pytest.mark.parametrize("loaded", [False, True])
def test_async_reads_resolve_lazy_tsjit_names_whether_loaded_or_not(monkeypatch, loaded):
    """``tsjit.tma_store`` is found whether or not something in this process loaded the lazy name."""
    for name in ("tma_store", "bulk_commit_group", "bulk_wait_group", "elect_one"):
        if loaded:
            getattr(tsjit, name)
        else:
            monkeypatch.delitem(vars(tsjit), name, raising=False)
    store = _Store()
    store.in_flight = 3
    assert _events(_Store.elected, store) == [("issue", None), ("commit", None), ("wait", 3)]


def test_async_reads_events_follow_the_resource_of_each_step():
    """Two resources of one class with different fields: each step's wait keeps its own count."""
    first, second = _Store(), _Store()
    first.in_flight, second.in_flight = 1, 4
    assert _events(_Store.elected, first)[-1] == ("wait", 1)
    assert _events(_Store.elected, second)[-1] == ("wait", 4)


def test_async_reads_branches_other_than_a_lone_elect_one_stay_conditional():
    """``if tid == 0`` and ``if elect_one(): ... else: ...`` may not run the wait: it retires nothing."""
    assert _events(_Store.lane_zero, _Store()) == [("issue", None)]
    assert _events(_Store.elected_with_else, _Store()) == [("issue", None)]


def _compile_all(names) -> None:
    import tsjit
    targets = _targets()
    for name in names:
        kernel, args, *options = targets[name]
        try:
            digest = hashlib.sha256(tsjit.compile(kernel, *args, **(options or [{}])[0]).ptx.encode()).hexdigest()
        except Exception as error:      # reported to the test, which names the configuration
            digest = f"ERROR {type(error).__name__}: {str(error).splitlines()[0]}"
        print(f"{name}\t{digest}", flush=True)


def _run(names) -> dict:
    """Compile ``names`` in order in one new process with an empty kernel cache: name -> PTX digest."""
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, TSJIT_CACHE_DIR=cache)
        env.pop("TSJIT_INTERPRET", None)
        done = subprocess.run([sys.executable, __file__, *names], env=env, capture_output=True, text=True,
                              timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return dict(line.split("\t", 1) for line in done.stdout.splitlines() if "\t" in line)


def _compare(fresh: dict, orders: dict) -> None:
    errors = {n: d for n, d in fresh.items() if d.startswith("ERROR")}
    assert not errors, f"compiles failed in a fresh process: {errors}"
    for order, got in orders.items():
        stale = {n: got.get(n) for n in fresh if got.get(n) != fresh[n]}
        assert not stale, f"{order}: these compiles differ from a fresh process's: {stale}"


def test_tma_copy_bw_second_configuration_compiles_as_in_a_fresh_process():
    """The reported case: configuration a then b in one process, and b then a, against a and b each alone."""
    from concurrent.futures import ThreadPoolExecutor
    pair = ["tma_copy_bw/a", "tma_copy_bw/b"]
    with ThreadPoolExecutor(2) as pool:
        alone_a, alone_b, forward, backward = pool.map(_run, [pair[:1], pair[1:], pair, pair[::-1]])
    _compare({**alone_a, **alone_b}, {"a then b": forward, "b then a": backward})


def test_every_ts_example_compiles_as_in_a_fresh_process():
    """Each configuration's PTX, compiled right after another configuration of the same kernel (in one
    process with all of them, in both orders), equals its PTX from a process that compiled no other
    configuration of that kernel (one process for every kernel's first configurations, one for the rest)."""
    from concurrent.futures import ThreadPoolExecutor
    names = sorted(_targets())          # "kernel/a", "kernel/b" next to each other
    firsts, seconds = [n for n in names if n.endswith("/a")], [n for n in names if not n.endswith("/a")]
    with ThreadPoolExecutor(2) as pool:
        alone_a, alone_b, forward, backward = pool.map(_run, [firsts, seconds, names, names[::-1]])
    _compare({**alone_a, **alone_b}, {"forward order": forward, "backward order": backward})


if __name__ == "__main__":
    _compile_all(sys.argv[1:])
