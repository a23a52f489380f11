"""tsjit.ops.matmul without a GPU (issue 15, CPU evidence): the configuration heuristic is
deterministic and picks the small-M / split-K configurations where they pay; every configuration
family it can produce compiles for sm_90a with 0 spills with every assembler installed (nvPTXCompiler,
ptxas, nvJitLink), the default one keeping setmaxnreg (no C7504 note; USETMAXREG in the SASS of the large
default, where cuobjdump exists), and its Task Scheduling program is proven SAFE by the exhaustive checker; the
fused epilogue is part of the cache key."""
import re

import pytest

import tsjit
from tsjit.backend.assemble import assemble, available_tools
from tsjit.lang.epilogue import FusedEpilogue
from tsjit.ops import configs
from tsjit.ops.gemm_program import compile_program

from blackwell.toolchain import assert_register_split_kept


def _choose(M, N, K, **kw):
    swapped = configs.choose_roles(M, N)
    P, Q = (N, M) if swapped else (M, N)
    return swapped, configs.choose(configs.Problem(P, Q, K, tma_output=not swapped, **kw))[0]


def test_choice_is_deterministic():
    assert _choose(512, 512, 8192) == _choose(512, 512, 8192)


def test_large_square_uses_the_full_tile_without_split():
    swapped, cfg = _choose(8192, 8192, 8192)
    assert not swapped and (cfg.block_m, cfg.block_n, cfg.splits, cfg.epilogue) == (128, 256, 1, "tma")


def test_small_m_swaps_operands_and_uses_a_narrow_tile():
    swapped, cfg = _choose(16, 4096, 4096)
    assert swapped and cfg.block_n <= 32


def test_a_64_wide_d_is_one_tile_wide():
    for N in (4096, 14336, 28672):
        swapped, cfg = _choose(64, N, 4096)
        assert swapped and cfg.block_n >= 64


def test_k_heavy_few_tile_shape_splits_k():
    _, cfg = _choose(384, 384, 16384)
    assert cfg.splits >= 4 and cfg.epilogue == "direct"


def test_every_split_has_at_least_the_minimum_k_tiles():
    for K in (64, 300, 1000, 4096, 16384):
        _, cfg = _choose(256, 256, K)
        assert configs.ceil_div(K, 64) >= cfg.splits * (configs.MIN_K_TILES_PER_SPLIT if cfg.splits > 1 else 1)


def test_shared_memory_budget_holds_for_all_candidates():
    for bm in configs.BLOCK_MS:
        for bn in configs.BLOCK_NS:
            for epi, staged in (("tma", min(bn, 128)), ("direct", 0)):
                stages = configs.stages_for(bm, bn, epi, staged, 2)
                assert (bm + bn) * 64 * 2 * stages + bm * staged * 2 <= configs.SMEM_BUDGET


def test_explain_names_roles_config_and_runners_up():
    problem = configs.Problem(4096, 16, 4096, tma_output=False)
    cfg, ranked = configs.choose(problem)
    text = configs.explain_choice(problem, True, cfg, ranked)
    assert "swapped" in text and f"{cfg.block_m}x{cfg.block_n}" in text and "runners-up" in text


def test_explain_says_why_a_224_wide_tile():
    problem = configs.Problem(512, 14336, 4096)
    cfg, ranked = configs.choose(problem)
    text = configs.explain_choice(problem, False, cfg, ranked)
    assert cfg.block_n == 224 and "256 tiles (1.94 waves on 132 SMs), against 128x256's 224 (1.70)" in text, text


def record_verdicts(monkeypatch):
    """The exhaustive checker's verdicts of every TaskManager built from now on (the disk cache off)."""
    from tsjit.ts import task_manager
    seen = []
    original = task_manager.TaskManager.print_and_verify

    def recording(self, *args, **kwargs):
        out = original(self, *args, **kwargs)
        seen.append(self.exhaustive_result.verdict)
        return out

    monkeypatch.setattr(task_manager.TaskManager, "print_and_verify", recording)
    monkeypatch.setenv("TSJIT_DISABLE_CACHE", "1")
    return seen


CONFIGS = [
    # (BM, BN, splits, epilogue, staged, x_major, y_major, batched, fused)
    (128, 256, 1, "tma", 256, "K", "K", False, FusedEpilogue()),
    (128, 256, 1, "tma", 128, "K", "MN", False, FusedEpilogue(bias="col", activation="relu")),
    (128, 128, 1, "tma", 128, "MN", "K", False, FusedEpilogue(alpha=True, beta=True, bias="row",
                                                              activation="gelu_tanh", residual=True)),
    (64, 256, 1, "tma", 256, "MN", "MN", False, FusedEpilogue(activation="silu")),
    (64, 128, 4, "direct", 64, "K", "K", False, FusedEpilogue(bias="col", residual=True)),
    (128, 16, 2, "direct", 64, "K", "K", False, FusedEpilogue()),
    (64, 32, 1, "direct", 64, "MN", "K", False, FusedEpilogue(bias="row", activation="gelu_tanh")),
    (128, 128, 8, "direct", 64, "K", "MN", True, FusedEpilogue(alpha=True)),
    (128, 256, 1, "tma", 256, "K", "K", True, FusedEpilogue()),
    # the 11-stage 64 x 64 rings (configs.DEEP_RINGS) and a split-K 7
    (64, 64, 1, "tma", 64, "K", "MN", False, FusedEpilogue(bias="col", activation="relu")),
    (64, 64, 8, "direct", 64, "K", "K", False, FusedEpilogue()),
    (128, 64, 7, "direct", 64, "K", "K", False, FusedEpilogue(alpha=True)),
    # the 192-wide tile (plain epilogues only: configs.candidates)
    (128, 192, 1, "tma", 192, "K", "MN", False, FusedEpilogue()),
    # the 224-wide tile (K-major Y): seven 32-column TMA passes through two staging tiles, or direct stores
    (128, 224, 1, "tma", 32, "K", "K", False, FusedEpilogue()),
    (128, 224, 1, "tma", 32, "MN", "K", True, FusedEpilogue(bias="col", activation="relu")),
    (128, 224, 1, "direct", 64, "K", "K", False, FusedEpilogue()),
    (128, 224, 1, "tma", 32, "K", "K", False, FusedEpilogue(alpha=True, beta=True, bias="row", activation="gelu_tanh",
                                                             residual=True)),
]


ASSEMBLERS = [tool for tool in ("nvptxcompiler", "ptxas", "nvjitlink") if tool in available_tools()]


@pytest.mark.parametrize("bm,bn,splits,epilogue,staged,x_major,y_major,batched,fused", CONFIGS)
def test_config_compiles_without_spills_and_verifies_safe(monkeypatch, tmp_path, bm, bn, splits, epilogue, staged,
                                                          x_major, y_major, batched, fused):
    verdicts = record_verdicts(monkeypatch)
    stages = configs.stages_for(bm, bn, epilogue, staged if epilogue == "tma" else 0, 2)
    cfg = configs.GemmConfig(bm, bn, stages, epilogue, staged, splits)
    k = compile_program(cfg, x_major=x_major, y_major=y_major, batched=batched, fused=fused)
    assert f"m64n{bn}k16.f32.bf16.bf16" in k.ptx
    assert verdicts == ["SAFE"]
    assert_assemblers_keep_it_unspilled(k, tmp_path, sass=(bm, bn, splits) == (128, 256, 1))   # the large default


def assert_assemblers_keep_it_unspilled(k, tmp_path, sass: bool = False):
    """0 spills with every assembler installed (the default one's cubin is ``k``'s), and where the program
    splits registers the default assembler keeps the split: no setmaxnreg note in ``assembler_notes`` and, with
    ``sass`` (cuobjdump: 0.5 s a cubin), USETMAXREG in the SASS (tests/blackwell/toolchain.py).  ptxas honours
    setmaxnreg only where it knows the register count at entry, the launch's budget (65536 / threads, a
    multiple of 8): a kernel that needs fewer registers (44 for the 128 x 16 tile) has them ignored by every
    assembler ("(C7508) ... unable to determine register count at entry") and needs no split."""
    threads = int(re.search(r"\.maxntid (\d+)", k.ptx).group(1))
    if "setmaxnreg.inc.sync.aligned.u32" in k.ptx and k.metadata["registers"] == 65536 // threads // 8 * 8:
        assert not [note for note in k.metadata["assembler_notes"] if "setmaxnreg" in note], k.metadata["tool"]
        if sass:
            assert_register_split_kept(k.cubin, tmp_path)
    for tool in ASSEMBLERS:                  # the same PTX through every assembler installed
        asm = k.metadata if tool == k.metadata["tool"] else \
            vars(assemble(k.ptx, "sm_90a", kernel_name=k.metadata["kernel_name"], tool=tool))
        assert (asm["spill_stores_bytes"], asm["spill_loads_bytes"], asm["stack_frame_bytes"]) == (0, 0, 0), tool


def test_fp32_output_direct_epilogue_compiles_without_spills():
    cfg = configs.GemmConfig(128, 128, 6, "direct", 64, 1)
    k = compile_program(cfg, out_dtype=tsjit.Float32, fused=FusedEpilogue(bias="col", activation="silu"))
    assert k.metadata["spill_stores_bytes"] == 0 and k.metadata["spill_loads_bytes"] == 0


def test_user_epilogue_function_is_in_the_cache_key():
    @tsjit.func
    def double(y, row, col):
        return y * 2.0

    @tsjit.func
    def triple(y, row, col):
        return y * 3.0

    a, b = FusedEpilogue(function=double), FusedEpilogue(function=triple)
    assert a.__tsjit_key__() != b.__tsjit_key__()
    cfg = configs.GemmConfig(128, 128, 6, "tma", 128, 1)
    assert "0f40400000" in compile_program(cfg, fused=b).ptx        # the 3.0 of triple


def test_unknown_activation_is_a_compilation_error():
    with pytest.raises(tsjit.CompilationError, match="activation"):
        FusedEpilogue(activation="tanh")


# measured on the H200 (BENCHMARKS.md, issue 15, helper i15-gemm, 2026-12-01 batches 1-3): for each probed
# shape the fastest forced configuration as (BM, BN, split-K, stages), and the ratio vs cuBLAS it reached;
# the runner-up configurations measured there were slower by the margin given
MEASURED_WINNERS = {
    (3000, 5000, 1000): ((128, 256, 1, 3), 0.797),      # 128x256 4 stages 0.782, 128x128 0.606
    (2048, 2048, 2048): ((128, 256, 1, 4), 0.994),      # 3 stages 0.970-0.983, 128x128 0.988
    (4096, 4096, 4096): ((128, 256, 1, 4), 0.998),      # 3 stages 0.983, 128x128 0.959
    # 2026-12-03, i15m job 1 (gemm_mid_probe.py --table tiles): 128x224 fills the waves that 128x256 leaves partial
    (1024, 14336, 4096): ((128, 224, 1, 4), 0.975),     # 128x128 6 stages 0.951, 128x256 0.887, 224 direct 0.888
    (512, 28672, 4096): ((128, 224, 1, 4), 0.990),      # 128x128 0.967, 128x256 0.896
    (512, 14336, 4096): ((128, 224, 1, 4), 1.138),      # 128x256 1.024, 128x128 0.982
    (256, 28672, 4096): ((128, 224, 1, 4), 1.115),      # 128x256 1.013
    (2048, 14336, 4096): ((128, 256, 1, 4), 1.002),     # 128x224 0.980 (both fill their waves)
    (4096, 14336, 4096): ((128, 256, 1, 4), 0.997),     # 128x224 0.974
    (384, 384, 16384): ((128, 64, 7, 8), 0.897),        # split-K 6 0.849-0.869, 64x128 K7 0.832
    (256, 256, 16384): ((64, 64, 8, 11), 0.914),        # 8 stages 0.867-0.873, 14: 0.902, 4: 0.698
    (128, 4096, 4096): ((64, 64, 1, 11), 0.950),        # 8 stages 0.82-0.90, 13: 0.978 (batch 3); 128x64 K2 0.845-0.893
    (512, 512, 8192): ((128, 64, 4, 8), 0.945),         # 64x128 K4 0.915, 128x128 K8 0.762
    # 2026-12-02, i15s (swapped; configs.unsplit_stream): split-K 2 0.86-0.93 (18.7-19.9 us), unsplit 18.3-18.4 us
    # (0.93-0.94; 13 stages measured alike: 18.1-18.4)
    (64, 4096, 4096): ((64, 64, 1, 11), 0.937),
    # 2026-12-02 (benchmarks/gemm_session_probe.py): 128x256 3 stages 1.770; at 3000x5000x1000 128x192 0.823 against
    # the heuristic's 0.830, at 1024x14336x4096 0.920 against 0.962
    (1000, 3000, 777): ((128, 192, 1, 4), 1.928),
}


@pytest.mark.parametrize("shape", sorted(MEASURED_WINNERS))
def test_heuristic_picks_the_measured_winner(shape):
    (bm, bn, splits, stages), _ = MEASURED_WINNERS[shape]
    _, cfg = _choose(*shape)
    assert (cfg.block_m, cfg.block_n, cfg.splits, cfg.stages, cfg.schedule) == (bm, bn, splits, stages,
                                                                                 "cooperative")


def test_unsplit_stream_only_for_narrow_short_k_products():
    """configs.unsplit_stream overrides the model's 64 x 64 split-K 2 only for a D at most 64 wide, at most 64 K
    tiles, one wave of split CTAs and tiles filling at least 45% of the SMs (the measured case)."""
    assert configs.unsplit_stream(configs.Problem(4096, 64, 4096), (64, 64, 2)) == (64, 64, 1)
    assert configs.unsplit_stream(configs.Problem(4096, 64, 14336), (64, 64, 2)) is None      # long K: split wins
    assert configs.unsplit_stream(configs.Problem(2048, 64, 4096), (64, 64, 2)) is None       # 32 tiles: too few
    assert configs.unsplit_stream(configs.Problem(8192, 64, 4096), (64, 64, 2)) is None       # two waves split
    assert configs.unsplit_stream(configs.Problem(2048, 128, 4096), (64, 64, 2)) is None      # D wider than 64
    assert configs.unsplit_stream(configs.Problem(4096, 64, 4096), (128, 64, 2)) is None
    ranked = configs.choose(configs.Problem(4096, 64, 4096, tma_output=False))[1]
    assert ranked[0][1:] == (64, 64, 1) and any(entry[1:] == (64, 64, 2) for entry in ranked[1:])


def test_192_wide_tiles_only_for_plain_16_bit_products():
    """128 x 192 tiles are candidates for 16-bit inputs with a plain epilogue (what was measured; a bias + ReLU
    epilogue on its 192-column staging pass spills 8 bytes with nvJitLink), never on 64-row tiles."""
    def widths(**kw):
        return {c[:2] for c in configs.candidates(configs.Problem(1000, 3000, 777, **kw))}
    assert (128, 192) in widths() and (64, 192) not in widths()
    assert all(bn != 192 for _, bn in widths(plain_epilogue=False, epilogue_loads=1))
    assert all(bn != 192 for _, bn in widths(in_bytes=1))


def test_resignation_tally_adds_two_atomics(monkeypatch):
    """gemm_splitk.TALLY_WORD (probes only): the tallying build counts resignations and whole-tile sums with two
    more atomic adds; the default build has none of them."""
    from tsjit.ops import gemm_splitk
    monkeypatch.setenv("TSJIT_DISABLE_CACHE", "1")
    cfg = configs.make_config(configs.Problem(384, 384, 16384, tma_output=True), 128, 64, 7)
    plain = compile_program(cfg).ptx.count("atom.")
    monkeypatch.setattr(gemm_splitk, "TALLY_WORD", (1 << 14) - 1)
    assert compile_program(cfg).ptx.count("atom.") == plain + 2
