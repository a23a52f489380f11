"""Shared pytest setup.

Tests marked ``@pytest.mark.gpu`` need an NVIDIA GPU and driver; they are skipped with a
reason when :func:`tsjit.runtime.driver.gpu_available` is ``False`` (that call never raises).
"""
import pytest

GPU_SKIP_REASON = "no NVIDIA GPU/driver available"


def _gpu_available() -> bool:
    try:
        from tsjit.runtime.driver import gpu_available
    except Exception:  # the package itself failed to import: the tests will say why
        return False
    return gpu_available()


def pytest_collection_modifyitems(config, items):
    gpu_items = [item for item in items if "gpu" in item.keywords]
    if gpu_items and not _gpu_available():
        skip = pytest.mark.skip(reason=GPU_SKIP_REASON)
        for item in gpu_items:
            item.add_marker(skip)
