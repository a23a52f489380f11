"""The kernel-level disk cache (issue 2): a hit in a new process, invalidation when the kernel, a
device function in another module or a module-level constant changes, a corrupt entry recompiled,
and four processes compiling the same kernel at once."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

HELPER_MODULE = """
import tsjit
OFFSET = {offset}

@tsjit.func
def shift(x):
    return x + {shift}
"""

KERNEL_MODULE = """
import numpy as np, tsjit
import helper_mod

@tsjit.kernel
def k(x, out, n):
    i = tsjit.thread_idx().x
    if i < n:
        out[i] = helper_mod.shift(x[i]) * {scale} + helper_mod.OFFSET
"""

DRIVER = """
import json, sys, numpy as np
sys.path.insert(0, sys.argv[1])
import kernel_mod, tsjit
c = tsjit.compile(kernel_mod.k, np.zeros(32, np.float32), np.zeros(32, np.float32), 32)
print(json.dumps({"from_cache": c.metadata["from_cache"], "key": c.metadata["key"],
                  "cubin": len(c.cubin)}))
"""


def _write(directory, offset=1, shift=2, scale=3):
    with open(os.path.join(directory, "helper_mod.py"), "w") as fh:
        fh.write(textwrap.dedent(HELPER_MODULE.format(offset=offset, shift=shift)))
    with open(os.path.join(directory, "kernel_mod.py"), "w") as fh:
        fh.write(textwrap.dedent(KERNEL_MODULE.format(scale=scale)))


def _compile_in_new_process(src_dir, cache_dir):
    env = dict(os.environ, TSJIT_CACHE_DIR=cache_dir, PYTHONPATH=ROOT, PYTHONDONTWRITEBYTECODE="1")
    out = subprocess.run([sys.executable, "-c", DRIVER, src_dir], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.fixture
def dirs(tmp_path):
    src, cache = tmp_path / "src", tmp_path / "cache"
    src.mkdir()
    cache.mkdir()
    _write(str(src))
    return str(src), str(cache)


def test_second_process_hits_the_disk_cache(dirs):
    src, cache = dirs
    first = _compile_in_new_process(src, cache)
    second = _compile_in_new_process(src, cache)
    assert first["from_cache"] is False and second["from_cache"] is True
    assert first["key"] == second["key"]


@pytest.mark.parametrize("change", [{"scale": 4}, {"shift": 5}, {"offset": 7}],
                         ids=["kernel source", "device function in another module", "module constant"])
def test_edits_invalidate_the_entry(dirs, change):
    src, cache = dirs
    before = _compile_in_new_process(src, cache)
    _write(src, **change)
    after = _compile_in_new_process(src, cache)
    assert before["from_cache"] is False and after["from_cache"] is False
    assert _compile_in_new_process(src, cache)["from_cache"] is True


def test_corrupt_entry_is_recompiled_not_raised(dirs):
    src, cache = dirs
    first = _compile_in_new_process(src, cache)
    entries = [os.path.join(root, f) for root, _, files in os.walk(cache) for f in files]
    assert entries
    for path in entries:
        with open(path, "r+b") as fh:
            fh.seek(max(0, os.path.getsize(path) // 2))
            fh.write(b"\x00garbage\xff" * 4)
    again = _compile_in_new_process(src, cache)
    assert again["from_cache"] is False and again["key"] == first["key"]
    third = _compile_in_new_process(src, cache)
    assert third["from_cache"] is True


def test_four_processes_compiling_at_once_leave_one_valid_entry(dirs):
    src, cache = dirs
    env = dict(os.environ, TSJIT_CACHE_DIR=cache, PYTHONPATH=ROOT, PYTHONDONTWRITEBYTECODE="1")
    procs = [subprocess.Popen([sys.executable, "-c", DRIVER, src], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(4)]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=180)
        assert p.returncode == 0, err
        results.append(json.loads(out.strip().splitlines()[-1]))
    assert len({r["key"] for r in results}) == 1
    files = [f for _, _, fs in os.walk(cache) for f in fs if not f.startswith("tsjit-memo-")]
    assert len([f for f in files if not f.endswith(".tmp")]) == 1 and not [f for f in files if f.endswith(".tmp")]
    assert _compile_in_new_process(src, cache)["from_cache"] is True
