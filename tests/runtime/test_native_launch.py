"""tsjit.runtime.native_launch without a GPU: the extension is built with this machine's C compiler into a fresh
cache directory and its Launch objects call a C stand-in of cuLaunchKernelEx (four pointers, a result) that records
what it was given; BoundLaunch.direct hands one out where the extension and a ctypes libcuda function exist."""
import ctypes
import os
import pathlib
import shutil
import subprocess
import sys
import types

import pytest

from tsjit.runtime import launch, native_launch

pytestmark = pytest.mark.skipif(native_launch._compiler() is None, reason="no C compiler on PATH")

RECORDER = r"""
#include <stdint.h>
static uintptr_t seen[4];
static int result = 0;
int record4(void *a, void *b, void *c, void *d) {
    seen[0] = (uintptr_t)a; seen[1] = (uintptr_t)b; seen[2] = (uintptr_t)c; seen[3] = (uintptr_t)d;
    return result;
}
uintptr_t seen_at(int i) { return seen[i]; }
void set_result(int r) { result = r; }
"""


@pytest.fixture
def fresh(monkeypatch, tmp_path):
    """A fresh cache directory and a process state that has not loaded the extension yet."""
    monkeypatch.setenv("TSJIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TSJIT_DISABLE_CACHE", raising=False)
    monkeypatch.setattr(native_launch, "_LOADED", [])
    return tmp_path


@pytest.fixture(scope="module")
def recorder(tmp_path_factory):
    directory = tmp_path_factory.mktemp("recorder")
    source, library = directory / "record.c", directory / "librecord.so"
    source.write_text(RECORDER)
    subprocess.run([native_launch._compiler(), "-O2", "-shared", "-fPIC", str(source), "-o", str(library)], check=True)
    held = ctypes.PyDLL(str(library))
    held.record4.restype = ctypes.c_int
    held.seen_at.restype = ctypes.c_uint64
    held.seen_at.argtypes = [ctypes.c_int]
    held.set_result.argtypes = [ctypes.c_int]
    return held


def test_a_launch_passes_its_four_pointers_and_returns_the_result(fresh, recorder):
    owner = object()
    call = native_launch.packed_launch(recorder.record4, 0x1000, 0x2000, 0x3000, owner)
    assert call is not None and call.owner is owner
    recorder.set_result(0)
    assert call() == 0
    assert [recorder.seen_at(i) for i in range(4)] == [0x1000, 0x2000, 0x3000, 0]
    recorder.set_result(201)                                   # CUDA_ERROR_INVALID_CONTEXT: handed back
    assert call() == 201
    with pytest.raises(TypeError, match="no arguments"):
        call(1)
    recorder.set_result(0)


def test_the_extension_is_built_once_into_the_cache_and_loaded_from_there(fresh, recorder, monkeypatch):
    kind = native_launch.launch_type()
    assert kind is not None
    path = pathlib.Path(native_launch.library_path(os.environ["TSJIT_CACHE_DIR"]))
    assert path.exists()
    monkeypatch.setattr(native_launch, "_LOADED", [])
    monkeypatch.setattr(native_launch, "_compiler", lambda: pytest.fail("built again"))
    assert native_launch.build(os.environ["TSJIT_CACHE_DIR"]) == str(path)


def test_a_compiler_error_falls_back_to_ctypes_and_is_not_retried(fresh, recorder, monkeypatch):
    monkeypatch.setattr(native_launch, "SOURCE", native_launch.SOURCE + "\n#error broken on purpose\n")
    assert native_launch.launch_type() is None
    assert native_launch.packed_launch(recorder.record4, 1, 2, 3, None) is None
    path = native_launch.library_path(os.environ["TSJIT_CACHE_DIR"])
    assert "broken on purpose" in pathlib.Path(path + ".failed").read_text()
    monkeypatch.setattr(native_launch, "_compiler", lambda: pytest.fail("retried"))
    assert native_launch.build(os.environ["TSJIT_CACHE_DIR"]) is None


def test_no_compiler_disabled_cache_or_switch_means_ctypes(fresh, recorder, monkeypatch):
    monkeypatch.setattr(native_launch, "_compiler", lambda: None)
    assert native_launch.launch_type() is None
    monkeypatch.setattr(native_launch, "_LOADED", [])
    monkeypatch.setenv("TSJIT_DISABLE_CACHE", "1")
    assert native_launch.launch_type() is None
    monkeypatch.setattr(native_launch, "ENABLED", False)
    assert native_launch.launch_type() is None


def test_a_python_stand_in_of_the_driver_gets_no_native_launch(fresh):
    assert native_launch.packed_launch(lambda *args: 0, 1, 2, 3, None) is None


def test_bound_launch_direct_is_native_and_falls_back_to_ctypes(fresh, recorder, monkeypatch):
    """BoundLaunch.direct: the native Launch (keeping its BoundLaunch alive) with the stream's config, the
    function handle and the parameter block; the ctypes partial where the extension is off."""
    import functools
    monkeypatch.setattr(launch, "_HELD_LAUNCH_EX", [recorder.record4])
    configs = {}

    def for_stream(stream):
        cfg = configs.setdefault(stream, ctypes.c_uint64(stream))
        return types.SimpleNamespace(getPtr=lambda: ctypes.addressof(cfg))

    bound = launch.BoundLaunch.__new__(launch.BoundLaunch)
    bound.raw, bound.handle, bound.params, bound.pinned = object(), 0x1234, 0x5678, {}
    bound.prepared = types.SimpleNamespace(for_stream=for_stream)
    direct = bound.direct(7)
    assert type(direct).__name__ == "Launch" and direct.owner is bound
    assert direct() == 0
    assert [recorder.seen_at(i) for i in range(4)] == [ctypes.addressof(configs[7]), 0x1234, 0x5678, 0]
    monkeypatch.setattr(native_launch, "ENABLED", False)
    fallback = bound.direct(7)
    assert isinstance(fallback, functools.partial) and fallback() == 0
    assert [recorder.seen_at(i) for i in range(4)] == [ctypes.addressof(configs[7]), 0x1234, 0x5678, 0]


def test_the_extension_builds_in_a_fresh_interpreter(tmp_path):
    """A new process finds nothing loaded: it builds (or loads) the extension and gets the Launch type."""
    code = "from tsjit.runtime import native_launch as n; t = n.launch_type(); print(t.__name__ if t else None)"
    environment = dict(os.environ, TSJIT_CACHE_DIR=str(tmp_path), PYTHONPATH=str(pathlib.Path(__file__).parents[2]))
    environment.pop("TSJIT_DISABLE_CACHE", None)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=environment, timeout=120)
    assert done.stdout.strip() == "Launch", done.stderr
    assert shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")


def test_a_stand_in_never_builds_the_extension(fresh):
    native_launch.packed_launch(lambda *args: 0, 1, 2, 3, None)
    assert not native_launch._LOADED and not (fresh / "cache").exists()
