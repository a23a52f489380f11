"""Library kernels behind one call each (``tsjit.ops.*``), written with tsjit itself.

* :func:`matmul` / :func:`bmm` (:mod:`tsjit.ops.matmul`): bf16/fp16 GEMM with any strides, a
  per-shape configuration (:mod:`tsjit.ops.configs`; ``matmul.explain(a, b)`` says which and why),
  deterministic split-K and fused epilogues, on the Task Scheduling program of
  :mod:`tsjit.ops.gemm_program`.
* :func:`attention` (:mod:`tsjit.ops.attention`, issue 16): forward attention.

Importing this package needs no GPU; a call does.
"""
from __future__ import annotations

from tsjit.ops.attention import attention
from tsjit.ops.matmul import bmm, explain, matmul

__all__ = ["matmul", "bmm", "explain", "attention"]
