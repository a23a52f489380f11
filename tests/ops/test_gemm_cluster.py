"""2-CTA clusters of the library GEMM without a GPU (issue 15, :mod:`tsjit.ops.gemm_cluster`): every cluster
configuration family compiles for sm_90a with 0 spills with both assemblers (where installed), multicasts its
shared operand, declares a (2, 1, 1) cluster in its launch contract, and its Task Scheduling program is proven
SAFE by the exhaustive checker; bad cluster shapes are named errors; the cost model's candidates, the choice
tuples and ``explain`` carry the cluster.  (Numerics: tests/gpu/test_ops_matmul_cluster_gpu.py, on the GPU and
the CPU interpreter.)"""
import pytest

import tsjit
from tsjit.errors import UsageValueError
from tsjit.lang.epilogue import FusedEpilogue
from tsjit.ops import configs, realign
from tsjit.ops.gemm_cluster import check_cluster, cluster_arguments
from tsjit.ops.gemm_program import compile_program

from tests.ops.test_gemm_configs import assert_assemblers_keep_it_unspilled, record_verdicts


CONFIGS = [
    # (BM, BN, schedule, x_major, y_major, batched, fused, out_dtype)
    (128, 256, "cluster_m2", "K", "K", False, FusedEpilogue(), tsjit.BFloat16),
    (128, 256, "cluster_m2", "MN", "MN", False, FusedEpilogue(), tsjit.BFloat16),
    (128, 128, "cluster_m2", "MN", "MN", False, FusedEpilogue(bias="col", activation="relu"), tsjit.BFloat16),
    (128, 256, "cluster_n2", "MN", "MN", False, FusedEpilogue(bias="col", activation="relu"), tsjit.BFloat16),
    (128, 128, "cluster_m2", "K", "K", True, FusedEpilogue(alpha=True, beta=True, bias="row",
                                                            activation="gelu_tanh", residual=True), tsjit.BFloat16),
    (128, 192, "cluster_m2", "K", "K", False, FusedEpilogue(), tsjit.BFloat16),
    (128, 256, "cluster_n2", "K", "MN", False, FusedEpilogue(), tsjit.BFloat16),
    (128, 128, "cluster_n2", "MN", "K", True, FusedEpilogue(activation="silu"), tsjit.BFloat16),
    (128, 128, "cluster_n2", "K", "K", False, FusedEpilogue(bias="col"), tsjit.Float32),     # direct epilogue
]


@pytest.mark.parametrize("bm,bn,schedule,x_major,y_major,batched,fused,out_dtype", CONFIGS)
def test_cluster_config_compiles_without_spills_and_verifies_safe(monkeypatch, tmp_path, bm, bn, schedule, x_major,
                                                                  y_major, batched, fused, out_dtype):
    verdicts = record_verdicts(monkeypatch)
    problem = configs.Problem(4096, 4096, 4096, x_major=x_major, y_major=y_major, tma_output=out_dtype.itemsize == 2,
                              out_bytes=out_dtype.itemsize, plain_epilogue=fused.is_identity)
    cfg = configs.make_config(problem, bm, bn, 1, schedule)
    assert (cfg.cluster_m, cfg.cluster_n) == configs.CLUSTER_SCHEDULES[schedule] and cfg.schedule == "cooperative"
    k = compile_program(cfg, x_major=x_major, y_major=y_major, batched=batched, fused=fused, out_dtype=out_dtype)
    assert verdicts == ["SAFE"]
    assert k.metadata["launch_requirements"].cluster == (2, 1, 1)
    assert ".multicast::cluster" in k.ptx and f"m64n{bn}k16.f32.bf16.bf16" in k.ptx
    assert_assemblers_keep_it_unspilled(k, tmp_path)


def test_single_cta_configs_do_not_multicast():
    cfg = configs.make_config(configs.Problem(4096, 4096, 4096), 128, 256, 1)
    assert (cfg.cluster_m, cfg.cluster_n) == (1, 1) and cluster_arguments(cfg) == ()
    k = compile_program(cfg)
    assert ".multicast::cluster" not in k.ptx and k.metadata["launch_requirements"].cluster in (None, (1, 1, 1))


def test_cluster_with_an_evict_first_operand():
    """A one-row-of-tiles product streams Y with evict-first loads (configs.stream_policies); cluster_n2 passes
    both policies and the cluster through the kernel's trailing arguments."""
    from tsjit.ops.gemm_pingpong import compile_config, extra_arguments
    cfg = configs.make_config(configs.Problem(128, 8192, 4096), 128, 128, 1, "cluster_n2")
    assert extra_arguments(cfg) == ("", "evict_first", 2, "x") == cluster_arguments(cfg)
    k = compile_config(cfg)
    assert ".multicast::cluster" in k.ptx and "L2::cache_hint" in k.ptx
    assert k.metadata["launch_requirements"].cluster == (2, 1, 1) and k.metadata["spill_stores_bytes"] == 0


@pytest.mark.parametrize("args,match", [
    ((2, "y", 128, 128, 4, "K", "K"), "split-K"),
    ((2, "x", 64, 128, 1, "K", "K"), "BM = 128"),
    ((2, "y", 128, 192, 1, "K", "MN"), "64-column"),
    ((4, "y", 128, 128, 1, "K", "K"), "2 CTAs"),
    ((2, "z", 128, 128, 1, "K", "K"), "2 CTAs"),
])
def test_bad_cluster_shapes_are_named(args, match):
    with pytest.raises(tsjit.CompilationError, match=match):
        check_cluster(*args)
    check_cluster(1, "y", 64, 16, 8, "MN", "MN")        # no cluster: anything goes


def test_make_config_refuses_a_cluster_it_cannot_build():
    problem = configs.Problem(4096, 4096, 4096)
    with pytest.raises(UsageValueError, match="cluster_n2"):
        configs.make_config(problem, 64, 128, 1, "cluster_n2")
    with pytest.raises(UsageValueError, match="split-K"):
        configs.make_config(problem, 128, 128, 2, "cluster_m2")


def test_cluster_candidates_and_choice_round_trip():
    problem = configs.Problem(4096, 4096, 4096)
    clusters = [c for c in configs.candidates(problem) if len(c) > 3 and c[3] in configs.CLUSTER_SCHEDULES]
    assert (128, 256, 1, "cluster_m2") in clusters and (128, 128, 1, "cluster_n2") in clusters
    for choice in clusters:
        cfg = configs.make_config(problem, *choice)
        assert configs.choice_of(cfg) == choice and "2-CTA cluster" in cfg.describe()
    assert configs.describe_choice((128, 128, 1, "cluster_m2")) == "128x128 cluster_m2"
    assert not [c for c in configs.candidates(configs.Problem(4096, 4096, 4096, in_bytes=1)) if len(c) > 3
                and c[3] in configs.CLUSTER_SCHEDULES]                    # fp8: not measured, not a candidate
    fused = configs.Problem(4096, 4096, 4096, plain_epilogue=False, epilogue_loads=1)   # 128 x 256 m2 would spill
    assert (128, 256, 1, "cluster_m2") not in set(configs.candidates(fused))
    assert (128, 256, 1, "cluster_n2") in set(configs.candidates(fused))
    one_tile_row = configs.Problem(128, 4096, 4096)
    assert all(c[3] != "cluster_m2" for c in configs.candidates(one_tile_row) if len(c) > 3)


def test_a_cluster_saves_l2_traffic_in_the_estimate():
    """The same tile with a cluster loads half the shared operand per CTA: never a higher estimate where the
    tile count is even along the clustered dimension."""
    problem = configs.Problem(8192, 14336, 4096)
    single = configs.estimate(problem, 128, 128, 1)
    assert configs.estimate(problem, 128, 128, 1, "cluster_m2") <= single
    assert configs.estimate(problem, 128, 128, 1, "cluster_n2") <= single


def test_explain_says_whether_a_cluster_was_chosen():
    problem = configs.Problem(4096, 4096, 4096)
    cfg, ranked = configs.choose(problem)
    text = configs.explain_choice(problem, False, cfg, ranked)
    assert "cluster:" in text
    forced = configs.make_config(problem, 128, 128, 1, "cluster_m2")
    text = configs.explain_choice(problem, False, forced, ranked)
    assert "2-CTA cluster 2x1" in text and "multicast" in text
    fp8 = configs.Problem(4096, 4096, 4096, in_bytes=1)
    cfg, ranked = configs.choose(fp8)
    assert "cluster: none (not a candidate: fp8 inputs)" in configs.explain_choice(fp8, False, cfg, ranked)


def test_misaligned_rows_choose_the_cluster_where_it_saves_more_than_a_copy(monkeypatch):
    """Rows 16- but not 128-byte aligned (3000 x 5000 x 1000, K-major, 2000-byte rows): the single-CTA 128 x 256
    choice becomes its cluster_m2 twin with the 4-stage ring, no copy, and a reason; the same configuration as the
    first compile-and-verify case above (0 spills, SAFE).  Kept as it was: aligned rows, only X's rows misaligned
    (the cluster multicasts Y), a fused epilogue, an MN-major Y, and a cluster gain too small to beat Y's copy."""
    def decide(problem, x_misaligned=True, y_misaligned=True):
        config, _ = configs.choose(problem)
        return config, realign.misaligned_choice(problem, config, problem.P * problem.K, problem.Q * problem.K,
                                                 x_misaligned, y_misaligned)
    problem = configs.Problem(3000, 5000, 1000)
    single, (config, copies, why) = decide(problem)
    assert (single.cluster_m, single.stages) == (1, 3)
    assert (config.cluster_m, config.cluster_n, config.stages, config.staged_columns, copies) == (2, 1, 4, 128, "")
    assert "cluster_m2" in why and "no copy" in why and config.estimate_us > single.estimate_us
    tested = configs.make_config(configs.Problem(4096, 4096, 4096), 128, 256, 1, "cluster_m2")
    assert (tested.stages, tested.staged_columns, tested.epilogue) == (config.stages, config.staged_columns, "tma")
    assert decide(problem, False, False)[1] == (single, "", "")
    single, (config, copies, why) = decide(problem, True, False)
    assert config is single and copies == realign.realign_choice(problem, single, 3000000, 5000000, True, False)
    for other in (configs.Problem(3000, 5000, 1000, plain_epilogue=False, epilogue_loads=1),
                  configs.Problem(3000, 5000, 1000, y_major="MN")):
        single, (config, _, why) = decide(other)
        assert config is single and why == ""
    monkeypatch.setattr(realign, "MISALIGNED_CLUSTER_GAIN", 0.0)
    single, (config, copies, why) = decide(problem)
    assert config is single and copies == "y" and "beats the 2-CTA cluster_m2" in why
