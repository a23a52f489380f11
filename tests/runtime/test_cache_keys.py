"""What the cache key and the recorded dependencies cover (issue 9 §1): ``__main__`` scripts, constexpr
callables by source, refusal of values without a stable digest, the re-check on a disk hit, and an
in-memory hit that hashes nothing."""
import json
import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import tsjit
from tsjit.errors import CompilationError, LaunchError
from tsjit.frontend import dependencies
from tsjit.runtime import kernel as kernel_module

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
X = np.zeros(32, np.float32)

SCRIPT = """
import json, numpy as np, tsjit

SCALE = {scale}

@tsjit.kernel
def k(x, out, n):
    i = tsjit.thread_idx().x
    if i < n:
        out[i] = x[i] * SCALE

c = tsjit.compile(k, np.zeros(32, np.float32), np.zeros(32, np.float32), 32)
print(json.dumps({{"from_cache": c.metadata["from_cache"], "key": c.metadata["key"]}}))
"""


def test_kernels_of_two_main_scripts_never_share_an_entry(tmp_path):
    cache = tmp_path / "cache"
    env = dict(os.environ, TSJIT_CACHE_DIR=str(cache), PYTHONPATH=ROOT, PYTHONDONTWRITEBYTECODE="1")
    env.pop("TSJIT_ALWAYS_COMPILE", None)
    scripts = []
    for name in ("first.py", "second.py"):  # the same kernel text, the same constant: only the file differs
        path = tmp_path / name
        path.write_text(SCRIPT.format(scale=3.0))
        scripts.append(str(path))

    def run(script):
        out = subprocess.run([sys.executable, script], env=env, capture_output=True, text=True, timeout=120,
                             cwd=str(tmp_path))
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout.strip().splitlines()[-1])

    first, second, again = run(scripts[0]), run(scripts[1]), run(scripts[0])
    assert first["from_cache"] is False and second["from_cache"] is False
    assert first["key"] != second["key"]
    assert again["from_cache"] is True and again["key"] == first["key"]


def make_scale(factor):
    @tsjit.func
    def scale(v):
        return v * factor
    return scale


@tsjit.kernel
def apply_fn(x, out, FN: tsjit.Constexpr):
    i = tsjit.thread_idx().x
    out[i] = FN(x[i])


def test_constexpr_callables_of_one_name_are_keyed_by_what_they_compute():
    three, five, three_again = make_scale(3.0), make_scale(5.0), make_scale(3.0)
    assert three.__qualname__ == five.__qualname__
    a = tsjit.compile(apply_fn, X, X, three)
    b = tsjit.compile(apply_fn, X, X, five)
    c = tsjit.compile(apply_fn, X, X, three_again)
    assert a.metadata["key"] != b.metadata["key"] and a.ptx != b.ptx
    assert "0f40400000" in a.ptx and "0f40A00000" in b.ptx  # 3.0 and 5.0 as f32 immediates
    assert c.metadata["key"] == a.metadata["key"]  # another object, the same source and closure


LOCK = threading.Lock()


@tsjit.kernel
def uses_a_lock(x, out):
    i = tsjit.thread_idx().x
    guard = LOCK
    out[i] = x[i]


def test_global_without_a_stable_digest_is_refused_with_its_location():
    with pytest.raises(CompilationError) as info:
        tsjit.compile(uses_a_lock, X, X)
    err = info.value
    assert err.location is not None and err.location.line == uses_a_lock.fn.__code__.co_firstlineno + 3
    assert "`LOCK`" in err.message and "lock" in err.message and "__tsjit_key__" in err.message


class Holder:
    def __init__(self):
        self.scale = 2.0
        self.lock = threading.Lock()


HOLDER = Holder()


@tsjit.kernel
def uses_holder(x, out):
    i = tsjit.thread_idx().x
    out[i] = x[i] * dependencies_test_helper(HOLDER)


def dependencies_test_helper(holder):
    return holder.scale


def test_refusal_names_the_attribute_that_cannot_be_digested():
    with pytest.raises(CompilationError) as info:
        tsjit.compile(uses_holder, X, X)
    assert "HOLDER.lock" in info.value.message


@tsjit.kernel
def takes_constant(x, out, C: tsjit.Constexpr):
    i = tsjit.thread_idx().x
    out[i] = x[i]


def test_constexpr_argument_without_a_stable_digest_is_a_launch_error_naming_it():
    with pytest.raises(LaunchError) as info:
        tsjit.compile(takes_constant, X, X, threading.Lock())
    assert "'C'" in str(info.value) and "__tsjit_key__" in str(info.value)


def test_constexpr_numpy_scalar_and_list_are_accepted_and_keyed_by_value():
    a = tsjit.compile(takes_constant, X, X, np.float32(1.5))
    b = tsjit.compile(takes_constant, X, X, np.float32(2.5))
    c = tsjit.compile(takes_constant, X, X, [1, 2])
    assert len({a.metadata["key"], b.metadata["key"], c.metadata["key"]}) == 3


CONFIG = {"scale": 3.0}


@tsjit.kernel
def scaled(x, out):
    i = tsjit.thread_idx().x
    out[i] = x[i] * CONFIG["scale"]


def test_disk_hit_rechecks_the_recorded_dependencies(tmp_path, monkeypatch):
    monkeypatch.setenv("TSJIT_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("TSJIT_ALWAYS_COMPILE", raising=False)
    first = tsjit.compile(scaled, X, X)
    assert f"global:{__name__}:CONFIG" in first.metadata["dependencies"]
    scaled._loaded.clear()  # as in a fresh process: only the disk entry is left
    assert tsjit.compile(scaled, X, X).metadata["from_cache"] is True
    monkeypatch.setitem(CONFIG, "scale", 5.0)
    scaled._loaded.clear()
    changed = tsjit.compile(scaled, X, X)
    assert changed.metadata["from_cache"] is False and changed.ptx != first.ptx


def test_from_cache_tells_how_the_returned_object_was_made_and_memory_hits_return_it_again(tmp_path, monkeypatch):
    """Documented in CompiledKernel and README: ``from_cache`` is the origin of the object (False:
    compiled in this process, True: loaded from disk); an in-memory hit is the same object."""
    monkeypatch.setenv("TSJIT_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("TSJIT_ALWAYS_COMPILE", raising=False)
    scaled._loaded.clear()
    compiled = tsjit.compile(scaled, X, X)
    again = tsjit.compile(scaled, X, X)
    assert again is compiled and again.metadata["from_cache"] is False
    scaled._loaded.clear()
    loaded = tsjit.compile(scaled, X, X)
    assert loaded is not compiled and loaded.metadata["from_cache"] is True
    assert tsjit.compile(scaled, X, X) is loaded
    assert "in-memory hit" in type(compiled).__doc__ and "from_cache" in type(compiled).__doc__


def test_in_memory_hit_hashes_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("TSJIT_CACHE_DIR", str(tmp_path))
    three = make_scale(3.0)
    compiled = tsjit.compile(apply_fn, X, X, three)

    def forbidden(*args, **kwargs):
        raise AssertionError("an in-memory hit must not digest or re-check anything")
    monkeypatch.setattr(kernel_module, "dependencies_unchanged", forbidden)
    monkeypatch.setattr(kernel_module, "disk_spec_key", forbidden)
    monkeypatch.setattr(dependencies.Digester, "digest", forbidden)
    assert tsjit.compile(apply_fn, X, X, three) is compiled


def test_recheck_treats_unresolvable_records_as_changes():
    assert dependencies.unchanged({"global:no_such_module_xyz:K": "int:1"}, scaled.fn) is False
    assert dependencies.unchanged({f"global:{__name__}:CONFIG.nope": "int:1"}, scaled.fn) is False
    assert dependencies.unchanged({"weird": "x"}, scaled.fn) is False
    assert dependencies.unchanged(None, scaled.fn) is False
    assert dependencies.unchanged({}, scaled.fn) is True


def test_digests_are_stable_and_distinguish_values():
    d = dependencies.value_digest
    assert d(1) != d(1.0) != d(True)
    assert d(np.float32(1.5)) != d(np.float64(1.5)) and d(np.float32(1.5)) == d(np.float32(1.5))
    assert d([1, 2]) != d((1, 2)) and d({"a": 1}) != d({"a": 2})
    assert d(np.arange(4)) != d(np.arange(5)) and d(np.arange(4)) == d(np.arange(4))
    assert d(tsjit.Float32) != d(tsjit.Float64)
    with pytest.raises(dependencies.UndigestableValue):
        d(np.array([object()]))
    with pytest.raises(dependencies.UndigestableValue):
        d((x for x in range(3)))
    looped = []
    looped.append(looped)
    assert d(looped) == d(looped)  # cycles terminate


def test_digest_of_a_function_follows_what_it_reaches(tmp_path, monkeypatch):
    source = textwrap.dedent("""
        import helper_b
        K = 2
        def f(v):
            return v * K + helper_b.g(v)
    """)
    (tmp_path / "helper_a.py").write_text(source)
    (tmp_path / "helper_b.py").write_text("def g(v):\n    return v\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import helper_a
    import helper_b
    before = dependencies.value_digest(helper_a.f)
    monkeypatch.setattr(helper_a, "K", 3)
    after_constant = dependencies.value_digest(helper_a.f)
    monkeypatch.setattr(helper_b, "g", lambda v: v + 1)
    after_callee = dependencies.value_digest(helper_a.f)
    assert len({before, after_constant, after_callee}) == 3


def test_tsjit_source_digest_is_memoized_by_file_signature(tmp_path, monkeypatch):
    from tsjit.runtime import specialize
    from tsjit.runtime.cache import KernelCache
    monkeypatch.setenv("TSJIT_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(specialize, "_version_digest", None)
    real = specialize.tsjit_version_digest()
    memo = KernelCache().read_memo("source")
    assert memo["digest"] == real
    KernelCache().write_memo("source", {"signature": memo["signature"], "digest": "f" * 64})
    monkeypatch.setattr(specialize, "_version_digest", None)
    assert specialize.tsjit_version_digest() == "f" * 64  # same files, same stat: the memo is used
    KernelCache().write_memo("source", {"signature": "0" * 64, "digest": "f" * 64})
    monkeypatch.setattr(specialize, "_version_digest", None)
    assert specialize.tsjit_version_digest() == real  # another signature: recomputed from the sources
    assert KernelCache().clear() == 1 and os.listdir(tmp_path) == []


def test_assembler_version_from_wheel_metadata_matches_the_loaded_library(monkeypatch):
    from tsjit.backend import assemble
    monkeypatch.setenv("TSJIT_ASSEMBLER", "nvjitlink")
    wheel = assemble._wheel_nvjitlink()
    if wheel is None:
        pytest.skip("no nvidia-nvjitlink wheel installed")
    version, text = assemble._nvjitlink()  # loads the library
    if version is None or version < assemble._NVJITLINK_FIXED:
        pytest.skip(f"nvJitLink unusable here: {text}")
    assert assemble.assembler_version() == text == wheel[1]


def test_a_kernel_edited_and_its_module_reloaded_is_compiled_again(tmp_path, monkeypatch):
    """Edit a kernel's file in place and reload its module in the same process (Jupyter's autoreload,
    importlib.reload): linecache still holds the first text; the key must come from the new one, not hit
    the old kernel's entry (it did: the source digest read linecache without checking the file)."""
    import importlib
    monkeypatch.setenv("TSJIT_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "edited_kernel.py"
    body = "import tsjit\n\n@tsjit.kernel\ndef k(x, out):\n    i = tsjit.thread_idx().x\n    out[i] = x[i] * {}\n"
    path.write_text(body.format("2.0"))
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        module = importlib.import_module("edited_kernel")
        first = tsjit.compile(module.k, X, X)
        path.write_text(body.format("3.0"))     # same length and line count
        stat = os.stat(path)
        os.utime(path, (stat.st_atime, stat.st_mtime + 5))
        importlib.invalidate_caches()
        module = importlib.reload(module)
        second = tsjit.compile(module.k, X, X)
    finally:
        sys.modules.pop("edited_kernel", None)
    assert second.metadata["from_cache"] is False and second.metadata["key"] != first.metadata["key"]
    assert "0f40400000" in second.ptx.lower() and "0f40400000" not in first.ptx.lower()   # 3.0f, not 2.0f
