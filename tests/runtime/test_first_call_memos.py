"""A disk-cache hit in a fresh process does not search for the assembler (issue 10 §2): the ptxas that the
last search found is remembered in the cache directory with a fingerprint of everything the search reads,
and adopted only while that fingerprint is unchanged.  A changed file, environment or site-packages
directory makes the key come from a new search, so a stale memo never names the wrong toolchain."""
import functools
import json
import os

import pytest

from tsjit.backend import assemble as asm
from tsjit.runtime import specialize
from tsjit.runtime.cache import KernelCache


@pytest.fixture
def fake_ptxas(tmp_path, monkeypatch):
    """A ptxas 'found' by a search that counts its calls; a fresh process's discovery state; TSJIT_ASSEMBLER=ptxas."""
    tool = tmp_path / "bin" / "ptxas"
    tool.parent.mkdir()
    tool.write_text("#!/bin/sh\n")
    searches = []
    monkeypatch.setenv("TSJIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv(asm.ASSEMBLER_ENV, "ptxas")
    monkeypatch.setattr(asm, "_known_ptxas", [])

    def fresh_process(version="ptxas 13.0.88"):
        monkeypatch.setattr(asm, "_known_ptxas", [])
        monkeypatch.setattr(specialize, "_ptxas_memo_done", [])
        monkeypatch.setattr(asm, "_find_ptxas", functools.cache(lambda: searches.append(1) or (str(tool), version)))

    fresh_process()
    return tool, searches, fresh_process


def test_a_fresh_process_adopts_the_remembered_ptxas_without_searching(fake_ptxas):
    tool, searches, fresh_process = fake_ptxas
    assert specialize.assembler_key() == "ptxas 13.0.88" and searches == [1]   # first process: searched
    memo = KernelCache().read_memo("ptxas")
    assert memo["path"] == str(tool) and memo["fingerprint"] == asm.ptxas_fingerprint(str(tool))
    fresh_process(version="ptxas 99.0")   # a search would now say otherwise: it must not run
    assert specialize.assembler_key() == "ptxas 13.0.88" and searches == [1]
    assert asm._ptxas() == (str(tool), "ptxas 13.0.88")   # the compile uses the adopted tool too
    assert asm.prewarm() is None   # nothing left to discover


@pytest.mark.parametrize("change", ["file", "environment", "site-packages"])
def test_a_changed_fingerprint_searches_again_and_rewrites_the_memo(fake_ptxas, monkeypatch, tmp_path, change):
    tool, searches, fresh_process = fake_ptxas
    specialize.assembler_key()
    before = KernelCache().read_memo("ptxas")["fingerprint"]
    if change == "file":   # a reinstalled toolkit: the same path, another file
        tool.write_text("#!/bin/sh\n# 13.1\n")
        os.utime(tool, ns=(1, 1))
    elif change == "environment":
        monkeypatch.setenv("CUDA_HOME", str(tmp_path))
    else:   # pip installed or removed a wheel (e.g. nvidia-cuda-nvcc): its site-packages folder changed
        site_dir = tmp_path / "site"
        site_dir.mkdir()
        import site
        monkeypatch.setattr(site, "getsitepackages", lambda: [str(site_dir)])
        specialize.assembler_key()   # the memo with this (fake) site folder
        fresh_process()
        (site_dir / "nvidia_cuda_nvcc-13.1.0.dist-info").mkdir()
        os.utime(site_dir, ns=(2, 2))
        before = KernelCache().read_memo("ptxas")["fingerprint"]
    searches.clear()
    fresh_process(version="ptxas 13.1.0")
    assert specialize.assembler_key() == "ptxas 13.1.0" and searches == [1]   # searched, not adopted
    memo = KernelCache().read_memo("ptxas")
    assert memo["version"] == "ptxas 13.1.0" and memo["fingerprint"] != before


def test_a_corrupt_or_foreign_memo_is_ignored(fake_ptxas):
    tool, searches, fresh_process = fake_ptxas
    cache = KernelCache()
    cache.write_memo("ptxas", {"path": str(tool), "version": "ptxas 1.0", "fingerprint": ["something else"]})
    assert specialize.assembler_key() == "ptxas 13.0.88" and searches == [1]
    fresh_process()
    with open(os.path.join(cache.directory, "tsjit-memo-ptxas.json"), "w") as fh:
        fh.write("{not json")
    assert specialize.assembler_key() == "ptxas 13.0.88" and searches == [1, 1]
    assert json.loads(open(os.path.join(cache.directory, "tsjit-memo-ptxas.json")).read())["path"] == str(tool)


def test_nvjitlink_keys_write_no_ptxas_memo(tmp_path, monkeypatch):
    monkeypatch.setenv("TSJIT_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv(asm.ASSEMBLER_ENV, "nvjitlink")
    monkeypatch.setattr(asm, "_known_ptxas", [])
    monkeypatch.setattr(specialize, "_ptxas_memo_done", [])
    monkeypatch.setattr(asm, "_find_ptxas", functools.cache(lambda: pytest.fail("searched for ptxas")))
    monkeypatch.setattr(asm, "_wheel_nvjitlink", lambda: ((13, 5), "nvJitLink 13.5.37"))
    assert specialize.assembler_key() == "nvJitLink 13.5.37"
    assert KernelCache().read_memo("ptxas") is None



def _real_ptxas():
    found = asm._find_ptxas()
    if found[0] is None:
        pytest.skip(f"no ptxas here: {found[1]}")
    return found


def test_without_a_memo_the_search_overlaps_the_frontend_and_the_key_is_the_same(tmp_path, monkeypatch):
    import threading
    import time

    import numpy as np

    import tsjit

    real = _real_ptxas()
    monkeypatch.setenv("TSJIT_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv(asm.ASSEMBLER_ENV, "ptxas")
    searched_on = []

    def slow_search():
        searched_on.append(threading.current_thread().name)
        time.sleep(0.2)
        return real

    def fresh_process():
        monkeypatch.setattr(asm, "_known_ptxas", [])
        monkeypatch.setattr(specialize, "_ptxas_memo_done", [])
        monkeypatch.setattr(asm, "_find_ptxas", functools.cache(slow_search))

    @tsjit.kernel
    def scale(x, out, n):
        i = tsjit.thread_idx().x
        if i < n:
            out[i] = x[i] * 3.0

    x = np.zeros(32, np.float32)
    fresh_process()
    first = tsjit.compile(scale, x, x, 32)
    assert not first.metadata.from_cache and searched_on == ["tsjit-assembler-prewarm"]   # searched on the thread
    assert first.metadata.tool_version == real[1]
    os.remove(os.path.join(str(tmp_path), "tsjit-memo-ptxas.json"))   # the next process must search again
    fresh_process()
    scale._loaded.clear()
    again = tsjit.compile(scale, x, x, 32)
    assert again.metadata.from_cache and again.metadata.key == first.metadata.key   # found after the search
    fresh_process()   # now with the memo (written by the second search): no search at all
    scale._loaded.clear()
    searched_on.clear()
    third = tsjit.compile(scale, x, x, 32)
    assert third.metadata.from_cache and third.metadata.key == first.metadata.key and searched_on == []
