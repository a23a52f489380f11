"""The default KV tiles of tsjit.ops.attention per problem (issue 16): long key sequences of head_dim 128 take
160-key tiles with O staged in Q (``LONG_KV_CONFIG``), everything else the head_dim's ``DEFAULT_CONFIG``."""
import pytest

from tsjit.examples.attention_config import (DEFAULT_CONFIG, DEFAULT_O_IN_Q, LONG_KV_CONFIG, BLOCK_NS,
                                             default_kv_tiles)


def test_long_key_sequences_of_head_dim_128_take_160_key_tiles_with_o_in_q():
    threshold, block_n, stages = LONG_KV_CONFIG[128]
    assert block_n in BLOCK_NS and (block_n, stages) != DEFAULT_CONFIG[128]
    assert default_kv_tiles(128, threshold, True) == (block_n, stages, True)
    assert default_kv_tiles(128, 16384, True) == (block_n, stages, True)


@pytest.mark.parametrize("head_dim,seqlen_k,eligible", [(128, 4096, True), (128, 8191, True), (128, 16384, False),
                                                        (64, 16384, True), (256, 16384, True)])
def test_other_problems_keep_the_head_dims_default(head_dim, seqlen_k, eligible):
    assert default_kv_tiles(head_dim, seqlen_k, eligible) == DEFAULT_CONFIG[head_dim] + (DEFAULT_O_IN_Q[head_dim],)
