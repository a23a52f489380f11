"""Issue 9 §3, host side: a TSJIT_DEBUG=1 hang record in host memory becomes the LaunchError of the
driver call that fails after the trap, worded like the checker's deadlock report (no GPU needed:
the records are written here the way the device writes them)."""
import ctypes

import pytest

import tsjit
from tsjit import abi
from tsjit.runtime import driver, hang_report

SITES = [
    {"task": "task 'load' (warp 0)", "operation": "'smem' ProducerAcquire at schedule step #1 (copy.py:91)",
     "resource": "smem", "barrier": "smem.empty"},
    {"task": "task 'store' (warps 1-4)", "operation": "'smem' ConsumerWait at schedule step #1 (copy.py:99)",
     "resource": "smem", "barrier": "smem.full"},
]


def _record(**fields):
    row = dict.fromkeys(abi.HANG_FIELDS, 0)
    row.update(magic=abi.HANG_MAGIC, budget_ns=2_000_000_000, waited_ns=2_000_400_000, stage=-1, iteration=-1,
               loop_offset=-1)
    row.update(fields)
    return [row[name] for name in abi.HANG_FIELDS]


@pytest.fixture
def buffer():
    words = (ctypes.c_int64 * (hang_report.BUFFER_BYTES // 8))()
    host = ctypes.addressof(words)
    hang_report.watch(host, "tma_copy_ts", SITES)
    yield words
    hang_report.unwatch(host)


def _write(words, slot, row):
    width = len(abi.HANG_FIELDS)
    words[slot * width:(slot + 1) * width] = row


def test_record_becomes_the_message_of_the_failing_driver_call(buffer):
    _write(buffer, 0, _record(site=1, cta_x=3, warp=2, lane=0, stage=0, iteration=0, loop_offset=3, phase=0, sm=17))
    _write(buffer, 1, _record(site=0, cta_x=3, warp=0, stage=0, iteration=2, loop_offset=11, phase=0, sm=17))
    with pytest.raises(tsjit.LaunchError) as err:
        driver.check((719,), "cuCtxSynchronize")
    text = str(err.value)
    assert text.startswith("kernel 'tma_copy_ts' hung (TSJIT_DEBUG=1): 2 wait(s) outlived the 2000 ms budget")
    assert ("blocked: task 'store' (warps 1-4) warp 2 of CTA (3, 0, 0) at 'smem' ConsumerWait at schedule step #1 "
            "(copy.py:99) (stage 0, iteration 0, loop offset 3): waits for smem.full[0] to complete the phase of "
            "parity 0; waited 2000 ms on SM 17") in text
    assert "task 'load' (warp 0) warp 0 of CTA (3, 0, 0) at 'smem' ProducerAcquire" in text and "iteration 2" in text
    assert "matching commit" in text  # the checker's advice
    assert "(the driver: cuCtxSynchronize failed: CUresult 719" in text


def test_same_wait_in_several_ctas_is_one_line(buffer):
    for slot in range(6):
        _write(buffer, slot, _record(site=1, cta_x=slot, warp=1, stage=0, iteration=0, phase=0))
    text = hang_report.pending_report()
    assert text.count("blocked:") == 1
    assert "warp 1 of CTAs (0, 0, 0), (1, 0, 0), (2, 0, 0), (3, 0, 0) and 2 more" in text


def test_incomplete_record_is_not_reported(buffer):
    row = _record(site=1)
    row[0] = 0  # the magic word is written last: without it the slot is incomplete
    _write(buffer, 0, row)
    assert hang_report.pending_report() is None
    with pytest.raises(tsjit.LaunchError) as err:
        driver.check((719,), "cuCtxSynchronize")
    assert "hung" not in str(err.value)


def test_wait_outside_a_ts_program_names_the_mbarrier(buffer):
    hang_report.unwatch(ctypes.addressof(buffer))
    hang_report.watch(ctypes.addressof(buffer), "plain", [{"task": "", "operation": "tsjit.mbarrier_wait",
                                                           "resource": "", "barrier": "mbarrier"}])
    _write(buffer, 0, _record(site=0, cta_y=1, warp=5, phase=1))
    text = hang_report.pending_report()
    assert "blocked: warp 5 of CTA (0, 1, 0) at tsjit.mbarrier_wait: waits for mbarrier to complete the phase " \
           "of parity 1" in text


def test_full_record_says_more_waits_may_have_timed_out(buffer):
    for slot in range(abi.HANG_MAX_RECORDS):
        _write(buffer, slot, _record(site=1, cta_x=slot, warp=1, stage=0, iteration=0, phase=0))
    assert f"at least {abi.HANG_MAX_RECORDS} (the first recorded) wait(s)" in hang_report.pending_report()
