"""Library kernels behind one call each (``tsjit.ops.*``), written with tsjit itself.

* :func:`matmul` / :func:`bmm` (:mod:`tsjit.ops.matmul`): bf16/fp16 GEMM with any strides, a
  per-shape configuration (:mod:`tsjit.ops.configs`; ``matmul.explain(a, b)`` says which and why),
  deterministic split-K and fused epilogues, on the Task Scheduling program of
  :mod:`tsjit.ops.gemm_program`.
* :func:`attention` (:mod:`tsjit.ops.attention`, issue 16): imported on first use.

Importing this package needs no GPU; a call does.
"""
from __future__ import annotations

import importlib

from tsjit.ops.matmul import bmm, explain, matmul

__all__ = ["matmul", "bmm", "explain", "attention"]

_LAZY = {"attention": "tsjit.ops.attention"}


def __getattr__(name: str):
    """``tsjit.ops.attention`` (and its module) load on first access, if the module exists."""
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(f"module 'tsjit.ops' has no attribute {name!r}")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name != module_name:
            raise
        raise AttributeError(f"module 'tsjit.ops' has no attribute {name!r} ({module_name} is not installed)") from None
    value = getattr(module, name, module)
    globals()[name] = value
    return value
