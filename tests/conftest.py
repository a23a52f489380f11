"""Shared pytest setup.

Tests marked ``@pytest.mark.gpu`` need an NVIDIA GPU and driver; they are skipped with a
reason when :func:`tsjit.runtime.driver.gpu_available` is ``False`` (that call never raises).
``@pytest.mark.gpu(reason="...")`` says why the CPU interpreter cannot stand in (the skip shows it).

Tests marked ``@pytest.mark.gpu_or_interpret`` run twice: ``[gpu]`` (marked ``gpu``) and
``[interpret]`` under the CPU interpreter (``TSJIT_INTERPRET=1`` for the test; ``tsjit.env.interpret()``
tells a test to pick its reduced sizes).  Without a GPU the ``[gpu]`` twin is *deselected*, not
skipped: its ``[interpret]`` variant runs in its place, so the skipped count is what truly needs a GPU
(real timing, torch CUDA tensors, the driver's own encoders).  The summary says how many twins went.

The suite never writes into the user's real kernel cache: ``TSJIT_CACHE_DIR`` points at a
temporary directory for the whole session (set in ``os.environ``, so subprocesses and notebook
kernels the tests start inherit it), removed at the end.

Tests marked ``@pytest.mark.file_permissions`` need permission bits to bind (a ``chmod 0`` file is unreadable).
Root ignores them (CAP_DAC_OVERRIDE), and CI runs as root: there such a test reruns itself in a pytest
subprocess under util-linux ``setpriv`` with CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH dropped, and passes or
fails with it; it is skipped only where root has no ``setpriv``.
"""
import os
import shutil
import subprocess
import sys
import tempfile

import pytest

GPU_SKIP_REASON = "no NVIDIA GPU/driver available"
_UNPRIVILEGED_RERUN = "TSJIT_TEST_UNPRIVILEGED_RERUN"     # set in the setpriv subprocess of a file_permissions test


_session_cache_dir = None


def pytest_configure(config):
    global _session_cache_dir
    _session_cache_dir = tempfile.mkdtemp(prefix="tsjit-test-cache-")
    os.environ["TSJIT_CACHE_DIR"] = _session_cache_dir


def pytest_unconfigure(config):
    if _session_cache_dir is not None:
        shutil.rmtree(_session_cache_dir, ignore_errors=True)


def _gpu_available() -> bool:
    try:
        from tsjit.runtime.driver import gpu_available
    except Exception:  # the package itself failed to import: the tests will say why
        return False
    return gpu_available()


def pytest_generate_tests(metafunc):
    if metafunc.definition.get_closest_marker("gpu_or_interpret") and "device_backend" in metafunc.fixturenames:
        metafunc.parametrize("device_backend", [pytest.param("gpu", marks=pytest.mark.gpu),
                                                pytest.param("interpret", marks=pytest.mark.interpret)],
                             indirect=True)


@pytest.fixture(autouse=True)
def device_backend(request, monkeypatch):
    """``"gpu"`` or ``"interpret"`` for a ``gpu_or_interpret`` test (the latter sets TSJIT_INTERPRET=1)."""
    backend = getattr(request, "param", None)
    if backend == "interpret":
        monkeypatch.setenv("TSJIT_INTERPRET", "1")
    return backend


_deselected_twins = 0


def _is_gpu_twin(item) -> bool:
    callspec = getattr(item, "callspec", None)
    return (item.get_closest_marker("gpu_or_interpret") is not None and callspec is not None
            and callspec.params.get("device_backend") == "gpu")


def pytest_collection_modifyitems(config, items):
    global _deselected_twins
    gpu_items = [item for item in items if item.get_closest_marker("gpu") is not None]
    if gpu_items and not _gpu_available():
        twins = [item for item in gpu_items if _is_gpu_twin(item)]
        if twins:
            config.hook.pytest_deselected(items=twins)
            chosen = set(map(id, twins))
            items[:] = [item for item in items if id(item) not in chosen]
            _deselected_twins = len(twins)
        for item in gpu_items:
            if not _is_gpu_twin(item):
                why = item.get_closest_marker("gpu").kwargs.get("reason")   # why the interpreter cannot stand in
                item.add_marker(pytest.mark.skip(reason=f"{GPU_SKIP_REASON}: {why}" if why else GPU_SKIP_REASON))


def pytest_terminal_summary(terminalreporter):
    if _deselected_twins:
        terminalreporter.write_line(f"no GPU: {_deselected_twins} [gpu] twins of gpu_or_interpret tests deselected "
                                    f"(their [interpret] variants ran); skipped tests need a GPU itself")


def _permission_bits_bind() -> bool:
    return os.name != "posix" or os.geteuid() != 0 or bool(os.environ.get(_UNPRIVILEGED_RERUN))


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    """A ``file_permissions`` test run as root: rerun it in a subprocess without CAP_DAC_OVERRIDE (setpriv)."""
    if pyfuncitem.get_closest_marker("file_permissions") is None or _permission_bits_bind():
        return None
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("needs file permission bits to bind: root ignores them (CAP_DAC_OVERRIDE), and util-linux "
                    "setpriv, which reruns the test without that capability, is not installed")
    command = [setpriv, "--inh-caps=-all", "--ambient-caps=-all", "--bounding-set=-dac_override,-dac_read_search",
               sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", pyfuncitem.nodeid]
    result = subprocess.run(command, cwd=pyfuncitem.config.rootpath, env={**os.environ, _UNPRIVILEGED_RERUN: "1"},
                            capture_output=True, text=True, timeout=600)
    if result.returncode != 0:
        pytest.fail(f"the rerun without CAP_DAC_OVERRIDE ({' '.join(command[:4])} ...) failed:\n"
                    f"{result.stdout[-4000:]}{result.stderr[-2000:]}", pytrace=False)
    return True
