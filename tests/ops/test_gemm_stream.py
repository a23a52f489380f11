"""The streamed operand of a memory-bound GEMM (issue 15, CPU evidence): configs.stream_policies gives evict-first
TMA loads to a large operand the grid reads once and to nothing else; make_config and the launch arguments carry
the policies; the configurations compile for sm_90a with 0 spills with every installed assembler, the hint on
exactly the streamed operand's loads, and their Task Scheduling program is proven SAFE."""
import dataclasses

import pytest

from tsjit.ops import configs
from tsjit.ops.gemm_pingpong import compile_config, extra_arguments

from ops.test_gemm_configs import assert_assemblers_keep_it_unspilled, record_verdicts

FIRST = "evict_first"


def test_a_swapped_small_m_product_streams_the_weights():
    for M, N, K in [(1, 4096, 4096), (16, 28672, 4096), (64, 4096, 14336), (64, 14336, 4096)]:
        cfg = configs.choose(configs.Problem(N, M, K, tma_output=M > 1))[0]     # swapped: D = (N, M), X = B^T
        assert (cfg.x_policy, cfg.y_policy) == (FIRST, ""), (M, N, K, cfg)


def test_operands_read_by_several_tiles_or_small_stay_normal():
    assert configs.stream_policies(configs.Problem(4096, 4096, 4096), 128, 256) == ("", "")
    reads = configs.STREAM_MAX_READS
    assert configs.stream_policies(configs.Problem(4096, 64 * reads + 1, 4096), 64, 64) == ("", "")  # read too often
    assert configs.stream_policies(configs.Problem(127, 255, 64), 128, 256) == ("", "")      # both read once, small
    assert configs.stream_policies(configs.Problem(128, 4096, 4096), 128, 64) == ("", FIRST)  # one tile tall: Y once
    assert configs.stream_policies(configs.Problem(64 * configs.STREAM_MAX_ROW_READS + 1, 4096, 4096), 64, 64) == ("", "")
    assert configs.stream_policies(configs.Problem(400, 1024, 4096), 64, 64) == ("", "")      # Y 2.5x X: not dominant
    assert configs.stream_policies(configs.Problem(4096, 64 * reads, 4096), 64, 64) == (FIRST, "")
    assert configs.stream_policies(configs.Problem(64 * reads, 4096, 4096), 64, 64) == ("", FIRST)
    assert configs.stream_policies(configs.Problem(1024, 64, 1024), 64, 64) == ("", "")      # X 2 MiB: small



def test_a_dominant_weight_streams_under_up_to_eight_tile_rows():
    """Y read by 3-8 tile rows (128-row tiles, M = 384-1024) streams when it is at least 4x X; K-heavy square-ish
    products (X as large as Y) and 16 tile rows do not."""
    for M in (384, 512, 1024):
        assert configs.stream_policies(configs.Problem(M, 28672, 4096), 128, 256) == ("", FIRST)
    assert configs.stream_policies(configs.Problem(1024, 4096, 14336), 128, 256) == ("", FIRST)    # 4x exactly
    assert configs.stream_policies(configs.Problem(2048, 4096, 4096), 128, 256) == ("", "")        # 16 rows
    assert configs.stream_policies(configs.Problem(512, 512, 8192), 128, 64) == ("", "")            # X as large
    assert configs.stream_policies(configs.Problem(1024, 2048, 4096), 128, 128) == ("", "")         # 2x only


def test_only_cooperative_configs_carry_policies_and_pass_them_to_the_kernel():
    problem = configs.Problem(4096, 64, 4096)
    cooperative = configs.make_config(problem, 64, 64, 1)
    assert cooperative.x_policy == FIRST and extra_arguments(cooperative) == (FIRST, "")
    assert "X loads evict_first" in cooperative.describe()
    deferred = configs.make_config(problem, 64, 64, 1, "deferred")
    assert (deferred.x_policy, deferred.y_policy) == ("", "") and extra_arguments(deferred) == ()
    assert extra_arguments(dataclasses.replace(cooperative, x_policy="")) == ()




@pytest.mark.parametrize("problem,choice", [
    (configs.Problem(4096, 64, 4096), (64, 64, 1)),                               # 64 x 4096 x 4096 swapped
    (configs.Problem(4096, 16, 14336, tma_output=False), (64, 16, 2)),            # 16 x 4096 x 14336, split-K
    (configs.Problem(28672, 1, 4096, tma_output=False), (128, 16, 1)),            # 1 x 28672 x 4096
    (configs.Problem(128, 4096, 14336, tma_output=False), (128, 64, 2)),          # Y streamed, split-K
])
def test_streaming_configs_compile_without_spills_and_verify_safe(monkeypatch, tmp_path, problem, choice):
    verdicts = record_verdicts(monkeypatch)
    cfg = configs.make_config(problem, *choice)
    assert cfg.x_policy or cfg.y_policy
    k = compile_config(cfg)
    assert verdicts == ["SAFE"]
    loads = [line.strip() for line in k.ptx.splitlines() if "cp.async.bulk.tensor.2d.shared::cluster" in line]
    hinted = [line for line in loads if ".L2::cache_hint" in line]
    assert len(loads) == 2 and len(hinted) == 1, loads
    # X's map is the kernel's first parameter, Y's the second: the hinted load reads the streamed one's
    maps = [line.split("[")[2].split(",")[0] for line in loads]
    streamed = 0 if cfg.x_policy else 1
    assert hinted[0] == loads[streamed] and maps[0] != maps[1]
    assert f"createpolicy.fractional.L2::{FIRST}.b64" in k.ptx
    assert_assemblers_keep_it_unspilled(k, tmp_path)
