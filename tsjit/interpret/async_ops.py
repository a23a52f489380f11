"""Asynchronous copies: TMA (cp.async.bulk.tensor), bulk copies, cp.async and their groups."""
from __future__ import annotations
