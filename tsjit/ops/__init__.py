"""Library kernels behind one call each (``tsjit.ops.*``), written with tsjit itself.

* :func:`matmul` / :func:`bmm` (:mod:`tsjit.ops.matmul`): bf16/fp16 GEMM with any strides and fp8
  (e4m3 / e5m2, K-major, with per-tensor or per-row / per-column scales), a per-shape configuration
  (:mod:`tsjit.ops.configs`, optionally measured: :mod:`tsjit.ops.autotune`; ``matmul.explain(a, b)``
  says which and why), deterministic split-K and fused epilogues, on the Task Scheduling program
  of :mod:`tsjit.ops.gemm_program`; :mod:`tsjit.ops.operands` reads the array arguments.
* :func:`attention` (:mod:`tsjit.ops.attention`, issue 16): forward attention; :func:`attention_backward`
  (:mod:`tsjit.ops.attention_bwd`): its gradients.

Importing this package needs no GPU; a call does.
"""
from __future__ import annotations

from tsjit.ops.attention import attention
from tsjit.ops.attention_bwd import attention_backward
from tsjit.ops.matmul import bmm, explain, matmul

__all__ = ["matmul", "bmm", "explain", "attention", "attention_backward"]
