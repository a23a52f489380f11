"""The default KV tiles of tsjit.ops.attention per problem (issue 16): long key sequences of head_dim 128 take
160-key tiles with O staged in Q under a causal mask (``LONG_KV_CONFIG``), 176-key tiles with O staged in a single
Q stage without one (``LONG_KV_FULL_CONFIG``), everything else the head_dim's ``DEFAULT_CONFIG``."""
import pytest

from tsjit.examples.attention_config import (DEFAULT_CONFIG, DEFAULT_O_IN_Q, DEFAULT_Q_STAGES, LONG_KV_CONFIG,
                                             LONG_KV_FULL_CONFIG, BLOCK_NS, default_kv_tiles)


def test_long_key_sequences_of_head_dim_128_take_160_key_tiles_with_o_in_q_under_a_causal_mask():
    threshold, block_n, stages = LONG_KV_CONFIG[128]
    assert block_n in BLOCK_NS and (block_n, stages) != DEFAULT_CONFIG[128]
    assert default_kv_tiles(128, threshold, True) == (block_n, stages, True, DEFAULT_Q_STAGES[128])
    assert default_kv_tiles(128, 16384, True, causal=True) == (block_n, stages, True, DEFAULT_Q_STAGES[128])


def test_long_key_sequences_without_a_mask_take_176_key_tiles_and_one_q_stage():
    threshold, block_n, stages, q_stages = LONG_KV_FULL_CONFIG[128]
    assert block_n in BLOCK_NS and q_stages == 1
    assert default_kv_tiles(128, threshold, True, causal=False) == (block_n, stages, True, 1)
    assert default_kv_tiles(128, threshold - 1, True, causal=False) == DEFAULT_CONFIG[128] + (False, 2)


@pytest.mark.parametrize("head_dim,seqlen_k,eligible", [(128, 4096, True), (128, 8191, True), (128, 16384, False),
                                                        (64, 16384, True), (256, 16384, True)])
@pytest.mark.parametrize("causal", [False, True])
def test_other_problems_keep_the_head_dims_default(head_dim, seqlen_k, eligible, causal):
    assert default_kv_tiles(head_dim, seqlen_k, eligible, causal) == DEFAULT_CONFIG[head_dim] + (
        DEFAULT_O_IN_Q[head_dim], DEFAULT_Q_STAGES[head_dim])
