"""The deferred-epilogue GEMM configuration without a GPU (issue 15, CPU evidence): each
configuration family compiles for sm_90a with 0 spills with both assemblers (where installed), its
Task Scheduling program is proven SAFE by the exhaustive checker, the deferred store sits between the
MMA group's commit and its wait (so it runs under the MMAs), and misuse is refused with errors naming
the parameter.  (A heavy fused epilogue -- alpha, beta, bias, gelu and a residual together -- spills
68 bytes with nvJitLink next to the second accumulator; the heuristic offers the deferred program for
plain epilogues only, as it does ping-pong.)"""
import re

import pytest

import tsjit
from tsjit.errors import UsageValueError
from tsjit.lang.epilogue import FusedEpilogue
from tsjit.ops import configs
from tsjit.ops.gemm_deferred import gemm_deferred
from tsjit.ops.gemm_pingpong import compile_config, kernel_for, threads_for
from tsjit.ops.gemm_program import compile_program

from tests.ops.test_gemm_configs import assert_assemblers_keep_it_unspilled, record_verdicts


CONFIGS = [
    # (BM, BN, TMA output, x_major, y_major, batched, fused)
    (128, 128, True, "K", "K", False, FusedEpilogue()),
    (128, 128, True, "MN", "MN", False, FusedEpilogue(bias="col", activation="relu")),
    (128, 64, False, "K", "MN", True, FusedEpilogue()),
    (128, 128, False, "MN", "K", False, FusedEpilogue(bias="row")),
    (64, 128, True, "K", "K", False, FusedEpilogue(activation="silu")),
]


@pytest.mark.parametrize("block_m,block_n,tma,x_major,y_major,batched,fused", CONFIGS)
def test_deferred_config_compiles_without_spills_and_verifies_safe(monkeypatch, tmp_path, block_m, block_n, tma,
                                                                   x_major, y_major, batched, fused):
    verdicts = record_verdicts(monkeypatch)
    problem = configs.Problem(4096, 4096, 4096, tma_output=tma, x_major=x_major, y_major=y_major)
    cfg = configs.make_config(problem, block_m, block_n, 1, schedule="deferred")
    assert cfg.schedule == "deferred" and cfg.epilogue == ("tma" if tma else "direct")
    assert kernel_for(cfg) is gemm_deferred and threads_for(cfg) == 128 * (1 + block_m // 64)
    k = compile_config(cfg, x_major=x_major, y_major=y_major, batched=batched, fused=fused)
    assert verdicts == ["SAFE"]
    # the deferred store runs after a K step's commit and before its wait_group(1): under the MMAs
    body = k.ptx
    store = r"cp\.async\.bulk\.tensor\.\dd\.global\.shared" if tma else r"st\.global"
    assert re.search(r"wgmma\.commit_group\.sync\.aligned;(?:(?!wgmma\.wait_group).)*?" + store
                     + r"(?:(?!wgmma\.commit_group).)*?wgmma\.wait_group\.sync\.aligned\s+1;", body, re.S)
    assert_assemblers_keep_it_unspilled(k, tmp_path)


def test_wide_or_split_deferred_configs_are_refused_naming_the_parameter():
    problem = configs.Problem(4096, 4096, 4096)
    with pytest.raises(UsageValueError, match="BN <= 128"):
        configs.make_config(problem, 128, 256, 1, schedule="deferred")
    with pytest.raises(UsageValueError, match="split-K 2"):
        configs.make_config(problem, 128, 128, 2, schedule="deferred")
    wide = configs.GemmConfig(128, 256, 4, "tma", 128, 1)
    with pytest.raises(tsjit.CompilationError, match="BN <= 128"):
        compile_program(wide, kernel=gemm_deferred)
