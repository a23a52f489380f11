"""The ping-pong GEMM configuration without a GPU (issue 15, CPU evidence): every ping-pong
configuration family compiles for sm_90a with 0 spills with every assembler installed (the default one keeping
setmaxnreg), its
Task Scheduling program is proven SAFE by the exhaustive checker, the turns are the named barriers
of tsjit.lang.turns, the shared-memory budget holds, and misuse is refused with errors naming the
parameter."""
import re

import pytest

import tsjit
from tsjit.lang.epilogue import FusedEpilogue
from tsjit.ops import configs
from tsjit.ops.gemm_pingpong import (THREADS, compile_config, gemm_pingpong, gemm_pingpong_shared, kernel_for,
                                     threads_for)
from tsjit.ops.gemm_program import gemm_program

from tests.ops.test_gemm_configs import assert_assemblers_keep_it_unspilled, record_verdicts

def _pingpong(block_n, tma=True, schedule="pingpong", block_m=128, **problem):
    return configs.make_config(configs.Problem(4096, 4096, 4096, tma_output=tma, **problem), block_m, block_n, 1,
                               schedule=schedule)


CONFIGS = [
    # (schedule, BM, BN, TMA output, x_major, y_major, batched, fused): the ring-per-warpgroup variant with fused
    # epilogues; the shared-ring variant (the heuristic's ping-pong candidates) with the plain epilogue it is a
    # candidate for (a fused epilogue spills there: see test_shared_ring_with_fused_epilogue_is_not_a_candidate)
    ("pingpong", 128, 256, True, "K", "K", False, FusedEpilogue()),
    ("pingpong", 128, 256, True, "K", "MN", False, FusedEpilogue(bias="col", activation="relu")),
    ("pingpong", 128, 192, True, "MN", "K", False, FusedEpilogue(alpha=True, beta=True, bias="row",
                                                                 activation="gelu_tanh", residual=True)),
    ("pingpong", 128, 128, False, "K", "MN", False, FusedEpilogue(bias="col", residual=True)),
    ("pingpong-shared", 128, 256, True, "MN", "MN", False, FusedEpilogue()),
    ("pingpong-shared", 128, 192, False, "K", "MN", True, FusedEpilogue()),
    ("pingpong-shared", 256, 128, True, "K", "MN", False, FusedEpilogue()),
    ("pingpong-shared", 256, 128, False, "MN", "K", True, FusedEpilogue()),
]


@pytest.mark.parametrize("schedule,block_m,block_n,tma,x_major,y_major,batched,fused", CONFIGS)
def test_pingpong_config_compiles_without_spills_and_verifies_safe(monkeypatch, tmp_path, schedule, block_m, block_n,
                                                                   tma, x_major, y_major, batched, fused):
    verdicts = record_verdicts(monkeypatch)
    cfg = _pingpong(block_n, tma, schedule, block_m, x_major=x_major, y_major=y_major)
    assert cfg.schedule == schedule and cfg.epilogue == ("tma" if tma else "direct")
    assert cfg.mma_lag == (2 if schedule == "pingpong-shared" else 1)
    k = compile_config(cfg, x_major=x_major, y_major=y_major, batched=batched, fused=fused)
    assert f"m64n{block_n}k16.f32.bf16.bf16" in k.ptx
    assert verdicts == ["SAFE"]
    # the turns (tsjit.lang.turns): warpgroup 1's first arrive on named barrier 3, then bar.sync on 3 + w and
    # bar.arrive on 4 - w, all counting both warpgroups (256 threads); the cooperative program has none
    assert re.search(r"bar\.arrive\s+3, 256;", k.ptx)
    assert re.search(r"bar\.sync\s+%r\d+, 256;", k.ptx) and re.search(r"bar\.arrive\s+%r\d+, 256;", k.ptx)
    first = (schedule, block_n, x_major, y_major) == ("pingpong", 256, "K", "K")
    assert_assemblers_keep_it_unspilled(k, tmp_path, sass=first)            # SASS: the first configuration


def test_shared_ring_with_fused_epilogue_is_not_a_candidate():
    plain = configs.Problem(4096, 4096, 4096)
    fused = configs.Problem(4096, 4096, 4096, plain_epilogue=False)
    fp8 = configs.Problem(4096, 4096, 4096, in_bytes=1)
    assert any(len(c) == 4 and c[3] == "pingpong-shared" for c in configs.candidates(plain))
    for problem in (fused, fp8):
        assert all(len(c) == 3 or c[3] in configs.CLUSTER_SCHEDULES for c in configs.candidates(problem))


def test_heuristic_keeps_cooperative_where_pingpong_measured_slower():
    # measured on the H200 (BENCHMARKS.md, ping-pong section): ping-pong below cooperative at every probed shape
    for M, N, K in ((2048, 2048, 2048), (4096, 4096, 4096), (3000, 5000, 1000), (1024, 14336, 4096),
                    (512, 4096, 14336), (8192, 8192, 8192)):
        cfg, ranked = configs.choose(configs.Problem(M, N, K))
        assert cfg.schedule == "cooperative"
        assert any(len(entry) == 5 for entry in ranked)          # ping-pong was estimated, and lost


def test_a_pingpong_choice_tuple_makes_its_config():
    choice = (256, 128, 1, "pingpong-shared")
    problem = configs.Problem(4096, 4096, 4096)
    cfg = configs.make_config(problem, *choice)
    assert configs.choice_of(cfg) == choice and configs.describe_choice(choice) == "256x128 pingpong-shared"
    assert configs.estimate(problem, *choice) > 0


def test_explain_says_why_pingpong_was_not_chosen():
    for problem, words in ((configs.Problem(4096, 4096, 4096), "best ping-pong"),
                           (configs.Problem(4096, 4096, 4096, plain_epilogue=False), "fused epilogue")):
        cfg, ranked = configs.choose(problem)
        assert words in configs.explain_choice(problem, False, cfg, ranked)
    problem = configs.Problem(4096, 4096, 4096)
    cfg = configs.make_config(problem, 256, 128, 1, "pingpong-shared")
    text = configs.explain_choice(problem, False, cfg, configs.choose(problem)[1])
    assert "ping-pong" in text.splitlines()[2] and "named barriers" in text


def test_explain_says_why_pingpong_loses():
    """2048^3: 128 work tiles on 132 SMs, one per CTA, so a ping-pong has no next tile to hide an epilogue under;
    4096^3 (4 tiles per CTA): its warpgroups take turns on the tensor cores and the shared ring stalls per tile."""
    for shape, words in (((2048, 2048, 2048), "one per CTA, so no epilogue hides"),
                         ((4096, 4096, 4096), "4 work tiles per CTA, but one warpgroup issues at a time")):
        problem = configs.Problem(*shape)
        cfg, ranked = configs.choose(problem)
        line = next(row for row in configs.explain_choice(problem, False, cfg, ranked).splitlines()
                    if row.startswith("schedule:"))
        assert cfg.schedule == "cooperative" and words in line, line


@pytest.mark.parametrize("schedule", ["pingpong", "pingpong-shared"])
def test_pingpong_shared_memory_budget_holds(schedule):
    for block_n in (64, 128, 192, 256):
        for tma in (True, False):
            cfg = _pingpong(block_n, tma, schedule)
            rings = (2 if schedule == "pingpong" else 1) * cfg.stages * (64 + block_n) * 64 * 2
            staging = 128 * cfg.staged_columns * 2 if cfg.epilogue == "tma" else 0
            assert cfg.stages >= 2 and rings + staging <= configs.SMEM_BUDGET, (block_n, tma, cfg)
            assert block_n % cfg.staged_columns == 0


def test_the_cooperative_program_takes_no_turns():
    k = compile_config(configs.make_config(configs.Problem(4096, 4096, 4096), 128, 128, 1))
    assert not re.search(r"bar\.(sync|arrive)\s+[^;]*, 256;", k.ptx)


def test_pingpong_config_picks_its_kernel_threads_and_load_rows():
    cfg = _pingpong(128)
    assert kernel_for(cfg) is gemm_pingpong and threads_for(cfg) == THREADS == 384 and cfg.load_rows == 64
    coop = configs.make_config(configs.Problem(4096, 4096, 4096), 128, 128, 1)
    assert kernel_for(coop) is gemm_program and threads_for(coop) == 384 and coop.load_rows == 128
    assert "ping-pong" in cfg.describe() and "ping-pong" not in coop.describe()
    shared = _pingpong(256, schedule="pingpong-shared")
    assert kernel_for(shared) is gemm_pingpong_shared and threads_for(shared) == 384 and shared.load_rows == 64
    assert "shared ring" in shared.describe()


@pytest.mark.parametrize("schedule,bm,bn,splits", [("pingpong", 64, 128, 1), ("pingpong", 128, 128, 2),
                                                   ("pingpong", 128, 96, 1), ("pingpong", 128, 32, 1),
                                                   ("pingpong", 256, 128, 1), ("pingpong-shared", 256, 256, 1),
                                                   ("pingpong-shared", 192, 128, 1)])
def test_pingpong_make_config_refuses_what_it_cannot_run(schedule, bm, bn, splits):
    with pytest.raises(ValueError, match=schedule):
        configs.make_config(configs.Problem(4096, 4096, 4096), bm, bn, splits, schedule=schedule)


@pytest.mark.parametrize("schedule", ["pingpong", "pingpong-shared"])
@pytest.mark.parametrize("field,value,match", [("block_m", 64, "BM"), ("splits", 2, "SPLITS")])
def test_pingpong_kernel_refuses_other_tiles_and_split_k(field, value, match, schedule):
    import dataclasses
    cfg = dataclasses.replace(_pingpong(128, schedule=schedule), **{field: value})
    with pytest.raises(tsjit.CompilationError, match=match):
        compile_config(cfg)
