"""Tensor-core collectives: wgmma, ldmatrix, stmatrix."""
from __future__ import annotations
