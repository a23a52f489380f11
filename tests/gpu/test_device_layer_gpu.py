"""Hopper device layer on the GPU: TMA load/store with mbarrier completion, PDL ordering between
two kernels, cluster DSMEM exchange.  Fresh random data, poisoned outputs.  Also under the CPU
interpreter (``gpu_or_interpret``), the PDL chain at a reduced size."""
import numpy as np
import pytest

from tsjit import env
from tsjit.examples import tma_basic

pytestmark = pytest.mark.gpu_or_interpret


@pytest.mark.parametrize("shape,box", [((300, 200), (32, 64)), ((64, 64), (64, 64)), ((129, 36), (16, 8))])
def test_tma_roundtrip_scales_every_element(shape, box):
    got, ref = tma_basic.run_tma_roundtrip(*shape, box=box)
    np.testing.assert_array_equal(got, ref.astype(np.float32))


def test_pdl_consumer_reads_producer_output():
    got, ref = tma_basic.run_pdl_chain(4096) if env.interpret() else tma_basic.run_pdl_chain()
    np.testing.assert_allclose(got, ref, rtol=1e-6)


def test_cluster_dsmem_exchange():
    got, ref = tma_basic.run_cluster_exchange(4 if env.interpret() else 8)
    np.testing.assert_array_equal(got, ref)
