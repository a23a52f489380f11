"""On the H200 (and under the CPU interpreter, reduced sizes): the multicast-peer release and the split
consumer in a 2-CTA cluster (issue 12 §2), exact copies into poisoned outputs from fresh random inputs.

* :mod:`.multicast_programs`: both CTAs multicast their half of each tile into both CTAs; each consumer warp
  releases to both CTAs' empty barriers (lane j to multicast peer j).  A wrong peer rank or a missing lane
  leaves a stage unreleased (hang) or lets it be refilled while the peer still reads it (wrong rows).
* :mod:`.split_consumer_programs`: every CTA waits on its own stage, the leader alone releases every CTA's
  stage once the ``done`` ring says all waiters have read theirs.
"""
import numpy as np
import pytest

from tsjit import env

from . import multicast_programs as mp
from . import split_consumer_programs as sc

pytestmark = pytest.mark.gpu_or_interpret

SHAPES = [(4096, 64, 32, 3, 66), (512, 128, 16, 2, 3), (64, 32, 32, 4, 1), (2048, 64, 64, 1, 8)]


def _sized(rows, cols, box_m, stages, clusters):
    """The GPU shape, or a small one under the interpreter (at most 4 tiles per CTA, 2 clusters)."""
    if not env.interpret():
        return rows, cols, box_m, stages, clusters
    box_m, cols = min(box_m, 16), min(cols, 32)
    return 2 * box_m * min(rows // (2 * box_m), 4), cols, box_m, stages, min(clusters, 2)


@pytest.mark.parametrize("rows,cols,box_m,stages,clusters", SHAPES)
def test_multicast_peer_release_copy_is_exact(rows, cols, box_m, stages, clusters):
    got, expected = mp.run(*_sized(rows, cols, box_m, stages, clusters))
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("rows,cols,box_m,stages,clusters", SHAPES)
def test_split_consumer_copy_is_exact(rows, cols, box_m, stages, clusters):
    got, expected = sc.run(*_sized(rows, cols, box_m, stages, clusters))
    np.testing.assert_array_equal(got, expected)
