"""Library kernels on torch tensors: ``tsjit.ops.attention`` (issue 16)."""
from tsjit.ops.attention import attention

__all__ = ["attention"]
