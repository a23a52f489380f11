"""tsjit.clc: clusterlaunchcontrol.try_cancel (plain and multicast) and query_cancel compile and assemble for
sm_100a; a misaligned response slot is a CompilationError before LLVM runs."""
import numpy as np
import pytest

import tsjit
from tsjit import clc

from lang.compiling import build

OUT = np.zeros(8, np.int32)


@tsjit.kernel
def steal_one(out, MULTICAST: tsjit.Constexpr):
    response = tsjit.shared_array(tsjit.Uint8, (16,), align=16)
    bar = tsjit.shared_array(tsjit.Int64, (1,))
    if tsjit.thread_idx().x == 0:
        tsjit.mbarrier_init(bar.ptr, 1)
        tsjit.fence_mbarrier_init()
    tsjit.syncthreads()
    if tsjit.thread_idx().x == 0:
        tsjit.mbarrier_arrive_expect_tx(bar.ptr, clc.RESPONSE_BYTES)
        clc.try_cancel(response, bar.ptr, multicast=MULTICAST)
    tsjit.mbarrier_wait(bar.ptr, 0)
    canceled, first = clc.query_cancel(response)
    if tsjit.thread_idx().x == 0:
        out[0] = tsjit.Int32(canceled)
        out[1] = first.x


@pytest.mark.parametrize("multicast", [False, True])
def test_try_cancel_and_query_assemble(multicast):
    ptx = build(steal_one, OUT, MULTICAST=multicast, target="sm_100a").ptx
    assert "clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes" in ptx
    assert ("multicast::cluster::all" in ptx) == multicast
    assert "clusterlaunchcontrol.query_cancel.is_canceled.pred.b128" in ptx
    assert "clusterlaunchcontrol.query_cancel.get_first_ctaid::x.b32.b128" in ptx


@tsjit.kernel
def misaligned(out):
    response = tsjit.shared_array(tsjit.Uint8, (32,), align=16)
    clc.query_cancel(response.ptr + 4)


def test_response_slot_must_be_16_byte_aligned():
    with pytest.raises(tsjit.CompilationError) as err:
        tsjit.compile(misaligned, OUT, target="sm_100a")
    assert "16-byte aligned" in err.value.message


def test_clc_on_sm90a_names_the_target():
    with pytest.raises(tsjit.CompilationError) as err:
        tsjit.compile(steal_one, OUT, MULTICAST=False, target="sm_90a")
    assert "tsjit.clc.try_cancel" in err.value.message and "sm_100a" in err.value.message
