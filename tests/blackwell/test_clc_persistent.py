"""CLC dynamic persistent scheduling lowered for sm_100a: the ClcFetchAsync ring, the scheduler task with the
queue self-edge, try_cancel / query_cancel in the WorkQueue's work bodies; verified SAFE by the exhaustive
checker and assembled by ptxas.  On sm_90a the ring is refused with the static alternative."""
import numpy as np
import pytest

import tsjit
from tsjit.examples import bw_clc_copy
from tsjit.ts.verify import exhaustive

F32 = np.zeros(4096, np.float32)


def test_clc_copy_verifies_and_assembles_for_sm100a(monkeypatch):
    seen = []
    original = exhaustive.check_all_interleavings
    monkeypatch.setattr(exhaustive, "check_all_interleavings",
                        lambda *a, **k: seen.append(original(*a, **k)) or seen[-1])
    compiled = tsjit.compile(bw_clc_copy.clc_copy, F32, F32, 16, 256, 4, target="sm_100a")
    assert [r.verdict for r in seen] == ["SAFE"]
    ptx = compiled.ptx
    assert "clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes.b128" in ptx
    assert "clusterlaunchcontrol.query_cancel.is_canceled.pred.b128" in ptx
    assert "clusterlaunchcontrol.query_cancel.get_first_ctaid::x.b32.b128" in ptx
    assert "mbarrier.arrive.expect_tx" in ptx


def test_clc_ring_on_sm90a_says_it_needs_sm100a():
    with pytest.raises(tsjit.CompilationError) as err:
        tsjit.compile(bw_clc_copy.clc_copy, F32, F32, 16, 256, 4, target="sm_90a")
    assert "'tiles'" in str(err.value) and "ClcFetchAsync" in str(err.value) and "sm_100a" in str(err.value)
