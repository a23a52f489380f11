"""The cache's file handling (issue 9 §1): an entry knows its key, paths that are not regular files
are skipped without blocking, and ``clear``/``info`` touch only what tsjit wrote."""
import hashlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

import pytest

from tsjit.runtime import cache as cache_module
from tsjit.runtime.cache import CacheEntry, KernelCache

KEY = hashlib.sha256(b"one specialization").hexdigest()
OTHER = hashlib.sha256(b"another specialization").hexdigest()
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch):
    for name in ("TSJIT_CACHE_DIR", "TSJIT_DISABLE_CACHE", "TSJIT_ALWAYS_COMPILE"):
        monkeypatch.delenv(name, raising=False)


def entry(seed: int = 0) -> CacheEntry:
    return CacheEntry(os.urandom(64) + bytes([seed]), {"kernel_name": "k", "seed": seed})


def test_entry_copied_under_another_name_is_a_miss(tmp_path):
    cache = KernelCache(tmp_path)
    assert cache.put(KEY, entry())
    shutil.copy(cache.path_for(KEY), cache.path_for(OTHER))
    assert cache.get(KEY).metadata["cache_key"] == KEY
    assert cache.get(OTHER) is None
    assert os.path.exists(cache.path_for(OTHER))  # a valid file of another key is not deleted as corrupt


def test_entry_without_a_stored_key_is_a_miss(tmp_path):
    cache = KernelCache(tmp_path)
    with open(cache.path_for(KEY), "wb") as fh:  # written by an older tsjit that stored no key
        fh.write(cache_module.encode_entry(entry()))
    assert cache.get(KEY) is None


def _get_within(cache, key, seconds=5.0):
    """cache.get(key) on a thread; fails the test if it blocks."""
    result = {}
    worker = threading.Thread(target=lambda: result.setdefault("value", cache.get(key)), daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), "KernelCache.get blocked on a path that is not a regular file"
    return result["value"]


def _make_special(kind: str, path: str):
    if kind == "directory":
        os.mkdir(path)
        return None
    if kind == "fifo":
        os.mkfifo(path)
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(path)
    return sock


@pytest.mark.parametrize("kind", ["directory", "fifo", "socket"])
def test_path_that_is_not_a_regular_file_is_skipped(kind):
    directory = tempfile.mkdtemp(prefix="c", dir="/tmp")  # short: AF_UNIX paths are limited to ~107 bytes
    cache = KernelCache(directory)
    path = cache.path_for(KEY)
    held = _make_special(kind, path)
    try:
        assert _get_within(cache, KEY) is None
        assert cache.put(KEY, entry()) is False  # left alone, and writing stays enabled
        assert cache.put(OTHER, entry()) is True
        assert cache.info()["entries"] == 1
        assert cache.clear() == 1
        assert os.path.lexists(path) and not os.path.isfile(path)
    finally:
        if held is not None:
            held.close()
        shutil.rmtree(directory, ignore_errors=True)


def test_symlink_to_a_fifo_is_skipped(tmp_path):
    cache = KernelCache(tmp_path)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    os.symlink(fifo, cache.path_for(KEY))
    assert _get_within(cache, KEY) is None
    assert cache.info()["entries"] == 0
    assert cache.clear() == 0 and os.path.lexists(cache.path_for(KEY))


def test_clear_and_info_touch_only_tsjit_files(tmp_path):
    cache = KernelCache(tmp_path)
    assert cache.put(KEY, entry())
    foreign = {
        "notes.txt": b"someone else's file",
        "build.tmp": b"another program's temporary file",
        ".abc.tmp": b"not ours either",
        f"{OTHER}.tsjitc": b"named like an entry, but not written by tsjit",
        f".{OTHER}.zz9_ab.tmp": b"named like our temporary file, but no tsjit header",
    }
    for name, data in foreign.items():
        (tmp_path / name).write_bytes(data)
    old = time.time() - cache_module.STALE_TEMP_SECONDS - 60
    for name in foreign:
        os.utime(tmp_path / name, (old, old))
    live_temp = tmp_path / f".{KEY}.live01.tmp"  # a writer still at work
    live_temp.write_bytes(cache_module.MAGIC[:4])
    stale_temp = tmp_path / f".{KEY}.dead01.tmp"  # a writer that died
    stale_temp.write_bytes(cache_module.MAGIC + b"partial")
    os.utime(stale_temp, (old, old))
    (tmp_path / f"{'0' * 64}.tsjitc").mkdir()
    info = cache.info()
    assert info["entries"] == 1 and info["total_bytes"] == os.path.getsize(cache.path_for(KEY))
    assert cache.clear() == 2  # the entry and the stale temporary file
    remaining = set(os.listdir(tmp_path))
    assert remaining == set(foreign) | {live_temp.name, f"{'0' * 64}.tsjitc"}


def test_command_line_clear_keeps_other_files(tmp_path):
    cache = KernelCache(tmp_path)
    assert cache.put(KEY, entry())
    (tmp_path / "keep.tmp").write_bytes(b"x")
    env = dict(os.environ, TSJIT_CACHE_DIR=str(tmp_path), PYTHONPATH=ROOT)
    script = ("from tsjit.__main__ import main; main(['cache', 'info']); main(['cache', 'clear']); "
              "main(['cache', 'info'])")
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("entries: 1") == 1 and "entries: 0" in out.stdout
    assert "removed 1 " in out.stdout
    assert os.listdir(tmp_path) == ["keep.tmp"]
