"""tsjit.runtime.cache: one checksummed file per entry; every read problem is a miss."""
import hashlib
import multiprocessing
import os
import warnings

import pytest

from tsjit.errors import TsjitError
from tsjit.runtime import cache as cache_module
from tsjit.runtime.cache import CacheEntry, KernelCache

KEY = hashlib.sha256(b"kernel specialization").hexdigest()


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch):
    for name in ("TSJIT_CACHE_DIR", "TSJIT_DISABLE_CACHE", "TSJIT_ALWAYS_COMPILE"):
        monkeypatch.delenv(name, raising=False)


def make_entry(seed: int = 0) -> CacheEntry:
    cubin = os.urandom(512) + bytes([seed])
    return CacheEntry(cubin, {"kernel_name": "vadd", "target": "sm_90a", "registers": 32, "seed": seed},
                      ptx=".version 8.0\n// ptx text", llir="define ptx_kernel void @vadd() { ret void }")


def test_roundtrip_keeps_every_part(tmp_path):
    cache = KernelCache(tmp_path)
    entry = make_entry()
    assert cache.put(KEY, entry) is True
    loaded = cache.get(KEY)
    assert loaded.cubin == entry.cubin
    assert loaded.ptx == entry.ptx and loaded.llir == entry.llir
    assert loaded.metadata["kernel_name"] == "vadd" and loaded.metadata["registers"] == 32
    assert "created" in loaded.metadata


def test_optional_text_blobs_may_be_absent(tmp_path):
    cache = KernelCache(tmp_path)
    cache.put(KEY, CacheEntry(b"\x7fELF-cubin", {"kernel_name": "k"}))
    loaded = cache.get(KEY)
    assert loaded.cubin == b"\x7fELF-cubin" and loaded.ptx is None and loaded.llir is None


def test_missing_key_is_a_miss(tmp_path):
    assert KernelCache(tmp_path).get(KEY) is None
    assert KernelCache(tmp_path / "does-not-exist").get(KEY) is None


def test_file_header_has_magic_and_version(tmp_path):
    cache = KernelCache(tmp_path)
    cache.put(KEY, make_entry())
    data = open(cache.path_for(KEY), "rb").read()
    assert data.startswith(b"TSJITC1\0")
    assert int.from_bytes(data[8:12], "little") == cache_module.FORMAT_VERSION


def corrupt_variants(data: bytes):
    flipped = bytearray(data)
    flipped[len(data) // 2] ^= 0x01
    bad_magic = b"NOTTSJIT" + data[8:]
    return {"truncated": data[: len(data) // 3], "truncated_tiny": data[:5], "empty": b"",
            "bit_flip": bytes(flipped), "bad_magic": bad_magic, "garbage": os.urandom(300),
            "missing_checksum": data[:-32]}


@pytest.mark.parametrize("variant", ["truncated", "truncated_tiny", "empty", "bit_flip", "bad_magic",
                                     "garbage", "missing_checksum"])
def test_corrupt_entry_is_a_miss_and_is_removed(tmp_path, variant):
    cache = KernelCache(tmp_path)
    cache.put(KEY, make_entry())
    path = cache.path_for(KEY)
    good = open(path, "rb").read()
    with open(path, "wb") as handle:
        handle.write(corrupt_variants(good)[variant])
    assert cache.get(KEY) is None
    assert not os.path.exists(path)


def test_valid_checksum_over_bad_json_is_a_miss(tmp_path):
    meta = b"{not json"
    body = cache_module.HEADER.pack(cache_module.MAGIC, cache_module.FORMAT_VERSION, len(meta)) + meta
    cache = KernelCache(tmp_path)
    with open(cache.path_for(KEY), "wb") as handle:
        handle.write(body + hashlib.sha256(body).digest())
    assert cache.get(KEY) is None


def test_other_format_version_is_a_miss(tmp_path):
    cache = KernelCache(tmp_path)
    data = cache_module.encode_entry(make_entry())
    body = bytearray(data[:-32])
    body[8:12] = (99).to_bytes(4, "little")
    with open(cache.path_for(KEY), "wb") as handle:
        handle.write(bytes(body) + hashlib.sha256(bytes(body)).digest())
    assert cache.get(KEY) is None


@pytest.mark.skipif(os.name != "posix", reason="needs POSIX permission bits (chmod 0)")
@pytest.mark.file_permissions                   # as root: reruns without CAP_DAC_OVERRIDE (tests/conftest.py)
def test_unreadable_entry_is_a_miss(tmp_path):
    cache = KernelCache(tmp_path)
    cache.put(KEY, make_entry())
    os.chmod(cache.path_for(KEY), 0)
    try:
        assert cache.get(KEY) is None
    finally:
        os.chmod(cache.path_for(KEY), 0o600)


def test_put_replaces_an_existing_entry(tmp_path):
    cache = KernelCache(tmp_path)
    cache.put(KEY, make_entry(1))
    cache.put(KEY, make_entry(2))
    assert cache.get(KEY).metadata["seed"] == 2
    assert cache.info()["entries"] == 1


def test_malformed_key_is_rejected(tmp_path):
    cache = KernelCache(tmp_path)
    for key in ("../../etc/passwd", "ABCDEF0123456789", "short", ""):
        with pytest.raises(TsjitError, match="cache key"):
            cache.put(key, make_entry())


def test_metadata_that_is_not_json_raises(tmp_path):
    with pytest.raises(TsjitError, match="JSON"):
        KernelCache(tmp_path).put(KEY, CacheEntry(b"cubin", {"when": object()}))


def _concurrent_writer(directory, key, seed, barrier, results):
    from tsjit.runtime.cache import CacheEntry as Entry, KernelCache as Cache

    payload = bytes([seed]) * (256 * 1024)  # large enough that the writes overlap
    barrier.wait()
    ok = Cache(directory).put(key, Entry(payload, {"writer": seed}))
    results.put((seed, ok))


def test_concurrent_writers_of_one_key_all_succeed_leaving_one_valid_file(tmp_path):
    context = multiprocessing.get_context("spawn")
    barrier, results = context.Barrier(4), context.Queue()
    workers = [context.Process(target=_concurrent_writer, args=(str(tmp_path), KEY, seed, barrier, results))
               for seed in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
    assert [worker.exitcode for worker in workers] == [0, 0, 0, 0]
    outcomes = dict(results.get(timeout=5) for _ in workers)
    assert outcomes == {0: True, 1: True, 2: True, 3: True}
    assert os.listdir(tmp_path) == [KEY + ".tsjitc"]  # exactly one file, no temporaries
    entry = KernelCache(tmp_path).get(KEY)
    writer = entry.metadata["writer"]
    assert entry.cubin == bytes([writer]) * (256 * 1024)


def test_info_and_clear(tmp_path):
    cache = KernelCache(tmp_path)
    keys = [hashlib.sha256(bytes([i])).hexdigest() for i in range(3)]
    for key in keys:
        cache.put(key, make_entry())
    leftover = tmp_path / f".{keys[0]}.abc123_x.tmp"  # a temporary file of a writer that died
    leftover.write_bytes(cache_module.MAGIC + b"partial")
    old = os.stat(leftover).st_mtime - cache_module.STALE_TEMP_SECONDS - 5
    os.utime(leftover, (old, old))
    info = cache.info()
    assert info["directory"] == str(tmp_path)
    assert info["entries"] == 3
    assert info["total_bytes"] == sum(os.path.getsize(cache.path_for(key)) for key in keys)
    assert cache.clear() == 4
    assert cache.info()["entries"] == 0 and os.listdir(tmp_path) == []


def test_default_directory_comes_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("TSJIT_CACHE_DIR", str(tmp_path / "from-env"))
    cache = KernelCache()
    cache.put(KEY, make_entry())
    assert os.path.exists(tmp_path / "from-env" / (KEY + ".tsjitc"))


def test_disable_cache_turns_reads_and_writes_off(tmp_path, monkeypatch):
    cache = KernelCache(tmp_path)
    cache.put(KEY, make_entry())
    monkeypatch.setenv("TSJIT_DISABLE_CACHE", "1")
    assert cache.get(KEY) is None
    assert cache.put(hashlib.sha256(b"other").hexdigest(), make_entry()) is False
    assert cache.info()["enabled"] is False


def test_always_compile_misses_but_still_writes(tmp_path, monkeypatch):
    monkeypatch.setenv("TSJIT_ALWAYS_COMPILE", "1")
    cache = KernelCache(tmp_path)
    assert cache.put(KEY, make_entry()) is True
    assert cache.get(KEY) is None


def test_unwritable_directory_degrades_with_one_warning(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_bytes(b"not a directory")
    cache = KernelCache(blocker / "cache")  # makedirs fails even for root
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert cache.put(KEY, make_entry()) is False
        assert cache.put(KEY, make_entry()) is False
        assert KernelCache(blocker / "cache").put(KEY, make_entry()) is False
    messages = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert len(messages) == 1 and "TSJIT_CACHE_DIR" in messages[0]
    assert cache.get(KEY) is None
    assert cache.info()["enabled"] is False
