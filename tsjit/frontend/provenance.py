"""Where code comes from, for the cache key: user code, tsjit, the standard library or an installed
distribution (with its version), so a dependency outside user code is keyed by its version and not by
its source text (:mod:`tsjit.frontend.dependencies` uses it)."""
from __future__ import annotations

import functools
import os
import platform
import sys


@functools.lru_cache(maxsize=None)
def module_origin(module_name: str) -> str | None:
    """``None`` for user code, else what keys code of module ``module_name``: ``"tsjit"``,
    ``"python-3.11.7"`` (standard library, builtins) or ``"package:numpy==2.1.0"`` (installed)."""
    top = (module_name or "").partition(".")[0]
    if top == "tsjit":
        return "tsjit"
    if top == "__main__" or not top:
        return None
    if top in sys.stdlib_module_names or top == "builtins":
        return f"python-{platform.python_version()}"
    module = sys.modules.get(module_name) or sys.modules.get(top)
    path = getattr(module, "__file__", None) or ""
    if "site-packages" in path or "dist-packages" in path:
        version = _distribution_version(top, path)
        if version:
            return f"package:{version}"
    return None


def _distribution_version(top: str, module_file: str) -> str | None:
    """``"numpy==2.1.0"`` for the distribution that installed top-level package ``top``, read from the
    ``*.dist-info`` directory names next to it (cheap: one ``listdir`` per site directory), else from
    ``importlib.metadata`` (slow to import, so only when the names do not say)."""
    marker = "site-packages" if "site-packages" in module_file else "dist-packages"
    site = module_file[:module_file.index(marker) + len(marker)]
    versions = _site_distributions(site)
    version = versions.get(_normalize(top))
    if version is not None:
        return f"{top}=={version}"
    from importlib import metadata  # lazily: ~30 ms to import, needed only when dist-info names do not say
    try:
        names = metadata.packages_distributions().get(top) or ()
        found = sorted(f"{name}=={metadata.version(name)}" for name in set(names))
    except (metadata.PackageNotFoundError, ValueError, OSError):
        return None
    return ",".join(found) or None


def _normalize(name: str) -> str:
    return name.lower().replace("-", "_").replace(".", "_")


@functools.lru_cache(maxsize=None)
def _site_distributions(site: str) -> dict:
    """Normalized distribution name -> version, from the ``name-version.dist-info`` entries of ``site``."""
    found = {}
    try:
        entries = os.listdir(site)
    except OSError:
        return found
    for entry in entries:
        for suffix in (".dist-info", ".egg-info"):
            if entry.endswith(suffix):
                name, _, version = entry[:-len(suffix)].partition("-")
                if version:
                    found[_normalize(name)] = version
    return found


def foreign_name(obj) -> str | None:
    """``origin:module.qualname`` for a function or class outside user code, else ``None``."""
    module = getattr(obj, "__module__", None)
    if not isinstance(module, str):
        return None
    origin = module_origin(module)
    if origin is None:
        return None
    return f"{origin}:{module}.{getattr(obj, '__qualname__', getattr(obj, '__name__', '?'))}"
