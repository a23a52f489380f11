"""The reference's cluster signalling forms, run as written (issue 10 §1 rows that issue 12 §2 built):
``SignalingThreads.CtaLeader`` on a consumer side, ``consumer_wait_signaling_threads``,
``Task(run_only_on_cta_id=0)`` and ``mcast_mode_mn``.  Each program runs on the CPU interpreter (or
the GPU) on fresh random data into a poisoned destination and must copy exactly."""
import numpy as np
import pytest

from ts.lowering import multicast_programs as mp
from ts.lowering import split_consumer_programs as sc

conformance = pytest.mark.conformance


@conformance("A1", "field consumer_signaling_threads")
@conformance("A1", "field consumer_wait_signaling_threads")
@conformance("§1.4", "CtaLeader")
@conformance("§1.4", "consumer_wait_signaling_threads")
@conformance("§1.9", "run_only_on_cta_id=k")
def test_split_consumer_waits_on_every_cta_and_releases_on_the_leader(monkeypatch):
    monkeypatch.setenv("TSJIT_INTERPRET", "1")
    got, expected = sc.run(64, 32, 16, 2, 1)
    assert np.array_equal(got, expected)


@conformance("§1.4", "mcast_mode_mn")
def test_multicast_copy_releases_to_the_peer_cta(monkeypatch):
    monkeypatch.setenv("TSJIT_INTERPRET", "1")
    got, expected = mp.run(64, 32, 16, 2, 1)
    assert np.array_equal(got, expected)
