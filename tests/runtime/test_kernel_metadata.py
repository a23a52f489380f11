"""``CompiledKernel.metadata`` is a typed, frozen :class:`KernelMetadata`, readable by name too,
and the on-disk cache entry stores and restores it field by field."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import tsjit
from tsjit.abi import LaunchRequirements
from tsjit.runtime.metadata import KernelMetadata


def _scale(x, y, n, alpha: tsjit.Float32):
    i = tsjit.block_idx().x * tsjit.block_dim().x + tsjit.thread_idx().x
    if i < n:
        y[i] = x[i] * alpha


def _compile(fn=_scale):
    x = np.zeros(64, np.float32)
    return tsjit.compile(tsjit.kernel(fn, max_threads=128), x, x, 64, 2.0, target="sm_90a")


def test_metadata_is_a_typed_record_readable_by_name(monkeypatch, tmp_path):
    monkeypatch.setenv("TSJIT_CACHE_DIR", str(tmp_path))
    meta = _compile().metadata
    assert isinstance(meta, KernelMetadata) and not meta.from_cache
    names = [f.name for f in dataclasses.fields(KernelMetadata)]
    assert list(meta) == names and len(meta) == len(names)
    assert all(meta[name] is getattr(meta, name) for name in names)
    assert meta["registers"] == meta.registers > 0 and meta.get("no_such_field") is None
    assert isinstance(meta.launch_requirements, LaunchRequirements) and meta.launch_requirements.max_threads == 128
    with pytest.raises(KeyError, match="no_such_field.*registers"):  # a tsjit.UsageKeyError naming the fields
        meta["no_such_field"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        meta.registers = 1


def test_the_cache_entry_stores_and_restores_every_field(monkeypatch, tmp_path):
    monkeypatch.setenv("TSJIT_CACHE_DIR", str(tmp_path))
    compiled = _compile()
    again = _compile()  # a new Kernel object: no in-memory memo, so the disk entry is read
    assert again.metadata.from_cache and again.cubin == compiled.cubin
    assert again.metadata == compiled.metadata.replaced(from_cache=True)
    assert isinstance(again.metadata.launch_requirements, LaunchRequirements)


@pytest.mark.parametrize("document", [None, [], {}, {"kernel_name": ""}, {"kernel_name": "k"},
                                      {"kernel_name": "k", "target": "sm_90a", "key": "0", "bogus": 1,
                                       "launch_requirements": "garbage"}])
def test_a_malformed_entry_is_a_miss_or_ignores_what_it_does_not_know(document):
    meta = KernelMetadata.from_json(document)
    if isinstance(document, dict) and {"kernel_name", "target", "key"} <= document.keys():
        assert meta.kernel_name == "k" and meta.from_cache and meta.launch_requirements == LaunchRequirements()
        assert "bogus" not in meta.to_json()
    else:
        assert meta is None
