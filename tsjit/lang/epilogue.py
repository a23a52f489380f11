"""GEMM epilogues: a warpgroup's wgmma accumulator fragment -> shared memory or global memory.

Two paths, both for the Float32 accumulator of ``wgmma.mma_async.m64nNk*`` (layout in
:mod:`tsjit.lang.fragment`), each thread passing its own fragment:

* :func:`store_fragment_shared` — convert to BFloat16/Float16 pairs and write the warpgroup's
  ``64 x N`` tile into shared memory with ``stmatrix.sync.aligned.m8n8.x4.shared.b16`` (PTX ISA
  §9.7.14.5.16; one instruction stores four 8x8 matrices, 16 columns of 16 rows per warp).
  With ``swizzle="128B"`` (or 64B/32B) the tile is laid out as the boxes a TMA store descriptor
  with that swizzle reads: ``(N / W, 64, W)`` for ``W`` elements per swizzle row (64 BFloat16
  for 128B), box ``j`` holding columns ``j*W .. j*W + W - 1``, each 16-byte chunk of row ``r``
  at chunk position ``chunk ^ (r % 8)`` for 128B (``Swizzle<3,4,3>``; measured for TMA loads
  on the H200, ``wgmma_sw128.md`` §3).  Then the caller makes the writes visible to the TMA
  unit and stores the boxes::

      tsjit.epilogue.store_fragment_shared(acc, c_tile)          # every thread of the warpgroup
      tsjit.fence_proxy_async()                                  # generic -> async proxy
      tsjit.named_barrier_sync(1, 128)                           # (or syncthreads)
      if warpgroup_thread == 0:
          tsjit.epilogue.tma_store_tile(c_map, c_tile, (row0, col0))
          tsjit.bulk_commit_group(); tsjit.bulk_wait_group(0)

  TMA clips the boxes at the tensor's edges, so ragged M/N need no masks.
* :func:`store_fragment_global` — plain stores straight from registers to a global tensor with
  bounds masks (``row < M and col < N``): for ragged edges and outputs whose rows are not
  16-byte aligned (TMA cannot address them).  Adjacent column pairs go out as one 2-element
  vector store when the tensor's rows are aligned enough.

Both take an optional elementwise ``fn(value, row, col) -> value`` applied to each Float32
accumulator before conversion, where ``row``/``col`` are Int32 coordinates in the warpgroup's
tile (add your tile origin for global indices).  ``fn`` is a Python callable, a ``lambda`` or
nested ``def`` written in the kernel, or a ``@tsjit.func``; it runs at compile time on Values,
so ``lambda v, r, c: tsjit.math.max(v + bias[col0 + c], 0.0)`` (bias + ReLU) compiles to
straight-line code.
"""
from __future__ import annotations

import hashlib
import inspect
from dataclasses import dataclass, field

from llvmlite import ir

from tsjit.backend import emit
from tsjit.errors import CompilationError
from tsjit.lang import dtypes as dt
from tsjit.lang import math as tm
from tsjit.lang.dtypes import DType
from tsjit.lang.fragment import Fragment, accumulator_coords, warpgroup_thread_index
from tsjit.lang.memory import Pointer, Tensor, convert_for_store
from tsjit.lang.stmatrix import (SWIZZLE_SPANS, TILE_ROWS, check_stmatrix_tile, pack_pair, stmatrix_row_offset,
                                 store_slab_shared)
from tsjit.lang.tma import tma_store
from tsjit.lang.values import Value, as_value, cast_to, integer_operand


def _accumulator(acc, what: str) -> Fragment:
    if not isinstance(acc, Fragment) or acc.dtype is not dt.Float32:
        raise CompilationError(f"tsjit.epilogue.{what} needs a Float32 wgmma accumulator Fragment, got {acc!r}")
    if (2 * len(acc)) % 8:
        raise CompilationError(f"tsjit.epilogue.{what}: a wgmma accumulator has N/2 registers with N a multiple of "
                               f"8; this fragment has {len(acc)}")
    return acc


def _apply(acc: Fragment, fn, tid) -> list:
    """The accumulator values after ``fn(value, row, col)`` (still Values of any float dtype)."""
    if fn is None:
        return list(acc)
    values = []
    for i, v in enumerate(acc):
        row, col = accumulator_coords(i, tid)
        out = fn(v, row, col)
        if not isinstance(out, Value):
            out = as_value(out, dt.Float32)
        values.append(out)
    return values


_FP8_NAMES = {"Float8E4M3": "e4m3", "Float8E5M2": "e5m2"}
#: one 32-bit register of four FP8 values: two ``cvt.rn.satfinite.{e4m3x2,e5m2x2}.f32`` (operand ``a`` goes to the
#: upper byte of each 16-bit result) joined low half first; the CPU interpreter matches this template
FP8_QUAD_ASM = ("{{ .reg .b16 lo, hi; cvt.rn.satfinite.{kind}x2.f32 lo, $2, $1; "
                "cvt.rn.satfinite.{kind}x2.f32 hi, $4, $3; mov.b32 $0, {{lo, hi}}; }}")


def pack_fp8_quad(values, dtype: DType) -> Value:
    """Four values rounded to ``dtype`` (Float8E4M3 or Float8E5M2: round to nearest even, saturated to the
    largest finite value, NaN kept) and packed into one Int32, ``values[0]`` in bits 0-7 ... ``values[3]`` in
    bits 24-31: one register of an 8-bit wgmma A fragment (four consecutive K elements, PTX ISA §9.7.15.5.1.1).

    Raises:
        CompilationError: not four values, or ``dtype`` is not an FP8 type.

    Source: PTX ISA §9.7.9.21 ``cvt`` (``.satfinite.e4m3x2.f32``: needs sm_89 and PTX 7.8).
    """
    if dtype.name not in _FP8_NAMES:
        raise CompilationError(f"pack_fp8_quad packs Float8E4M3 or Float8E5M2, not {dtype.name}")
    if len(values) != 4:
        raise CompilationError(f"pack_fp8_quad packs four values, got {len(values)}")
    args = [cast_to(as_value(v, dt.Float32), dt.Float32).ir for v in values]
    result = emit.current().inline_asm(emit.I32, FP8_QUAD_ASM.format(kind=_FP8_NAMES[dtype.name]), "=r,f,f,f,f",
                                       args, side_effect=False)
    return Value(result, dt.Int32)


def store_fragment_shared(acc: Fragment, tile, *, dtype: DType | None = None, swizzle: str = "128B", fn=None,
                          tid=None) -> None:
    """Write the warpgroup's ``64 x N`` accumulator tile to shared memory with ``stmatrix``.

    Every thread of the warpgroup calls it with its own fragment (the instruction is
    ``.sync.aligned``: all 32 lanes of each warp together).

    Args:
        acc: Float32 accumulator Fragment of ``N / 2`` registers (``N`` a multiple of 8).
        tile: shared-memory tile of a 2-byte float dtype:

            * ``swizzle="128B"`` / ``"64B"`` / ``"32B"``: shape ``(N / W, 64, W)`` with ``W`` = span / 2
              (64, 32, 16), aligned to the pattern (1024 bytes for 128B); each ``tile[j]`` is one TMA
              box of a store descriptor with the same swizzle and box ``(64, W)``;
            * ``swizzle="none"``: shape ``(64, N)`` row-major, 16-byte aligned.
        dtype: stored type, BFloat16 or Float16 (default: the tile's dtype).
        swizzle: the layout, as above.
        fn: optional ``fn(value, row, col)`` applied to each accumulator (see the module docstring).
        tid: thread index (only ``tid % 128`` matters), default ``tsjit.thread_idx().x``.

    Raises:
        CompilationError: not a Float32 accumulator, a tile of the wrong shape, dtype or
            alignment, N not a multiple of 16 with a swizzle narrower than 16 columns, or an
            unknown swizzle.

    Source: PTX ISA §9.7.14.5.16 "stmatrix" (register ``ri`` of lane ``l`` holds row ``l / 4``,
    columns ``2 * (l % 4)`` and ``+1`` of matrix ``i``; lanes ``8i .. 8i + 7`` give the row
    addresses of matrix ``i``).
    """
    acc = _accumulator(acc, "store_fragment_shared")
    n = 2 * len(acc)
    ptr, dtype = check_stmatrix_tile(tile, n, TILE_ROWS, swizzle, dtype, "epilogue.store_fragment_shared")
    values = _apply(acc, fn, tid)
    local = warpgroup_thread_index(tid)
    store_slab_shared(values, ptr, (local >> 5) << 4, local & 31, n, swizzle, dtype)


def tma_store_tile(tmap, tile, coords) -> None:
    """Issue the TMA stores of a tile written by :func:`store_fragment_shared` with a swizzle:
    box ``j`` (``tile[j]``) goes to ``(coords[0], coords[1] + j * W)``.  Call from one thread after
    ``fence_proxy_async`` and a barrier; follow with ``bulk_commit_group`` / ``bulk_wait_group``.

    Args:
        tmap: the output's TensorMap, box ``(64, W)`` and the tile's swizzle.
        tile: the ``(N / W, 64, W)`` shared tile.
        coords: ``(row0, col0)`` of the tile's first element in the output (Int32).
    """
    if not isinstance(tile, Tensor) or tile.rank != 3 or not isinstance(tile.shape[0], int):
        raise CompilationError("tsjit.epilogue.tma_store_tile needs the (boxes, 64, W) shared tile of "
                               "store_fragment_shared")
    row0, col0 = coords
    width = tile.shape[2]
    for j in range(tile.shape[0]):
        tma_store(tmap, tile[j], (row0, col0 + j * width))


def store_fragment_global(acc: Fragment, out: Tensor, row0, col0, M=None, N=None, *, fn=None, tid=None) -> None:
    """Store the warpgroup's accumulator tile to ``out[row0 + row, col0 + col]`` where
    ``row0 + row < M`` and ``col0 + col < N`` (masked, for ragged edges).

    Args:
        acc: Float32 accumulator Fragment (``N_tile / 2`` registers).
        out: a rank-2 global tensor (any dtype a Float32 converts to on store).
        row0, col0: the tile's origin in ``out`` (Int32 Values or ints).
        M, N: bounds (default ``out.shape``).
        fn: optional ``fn(value, row, col)`` applied first (tile coordinates).
        tid: thread index, default ``tsjit.thread_idx().x``.

    Column pairs ``(c, c + 1)`` are written with one 2-element vector store when ``out``'s rows
    are known to be aligned to the pair's size; otherwise, and for the last odd column, one
    element at a time.
    """
    acc = _accumulator(acc, "store_fragment_global")
    if not isinstance(out, Tensor) or out.rank != 2 or out.ptr.address_space != emit.GLOBAL:
        raise CompilationError(f"tsjit.epilogue.store_fragment_global needs a rank-2 global tensor, got {out!r}")
    rows = out.shape[0] if M is None else M
    cols = out.shape[1] if N is None else N
    values = _apply(acc, fn, tid)
    index = out.index_dtype
    col0_given = col0
    what = "tsjit.epilogue.store_fragment_global: "
    row0 = integer_operand(row0, index, what + "row0")
    col0 = integer_operand(col0, index, what + "col0")
    rows = integer_operand(rows, index, what + "M")
    cols = integer_operand(cols, index, what + "N")
    pair_bytes = 2 * out.dtype.itemsize
    unit_stride = isinstance(out.strides[1], int) and out.strides[1] == 1
    vector_ok = unit_stride and out.row_alignment >= pair_bytes and pair_bytes <= 16
    if isinstance(col0_given, int) and col0_given % 2:
        vector_ok = False                                  # pairs start at odd columns
    b = emit.current().builder
    for i in range(0, len(acc), 2):
        row, col = accumulator_coords(i, tid)
        grow = row0 + cast_to(row, index)
        gcol = col0 + cast_to(col, index)
        first = convert_for_store(values[i], out.dtype)
        second = convert_for_store(values[i + 1], out.dtype)
        with b.if_then(((grow < rows) & (gcol < cols)).ir):
            pointer = out.element_pointer((grow, gcol))
            both = gcol + 1 < cols
            if vector_ok:
                if not isinstance(col0_given, int):
                    both = both & ((col0 & 1) == 0)        # a run-time odd origin: element stores
                with b.if_else(both.ir) as (then, otherwise):
                    with then:
                        Pointer(pointer.ir, out.dtype, pointer.address_space, pair_bytes).store_vector((first, second))
                    with otherwise:
                        pointer.store(first)
                        with b.if_then((gcol + 1 < cols).ir):
                            (pointer + 1).store(second)            # unit inner stride on this path
            else:
                pointer.store(first)
                with b.if_then(both.ir):
                    out.element_pointer((grow, gcol + 1)).store(second)   # any inner stride


# -- the fused GEMM epilogue ---------------------------------------------------------------------
ACTIVATIONS = ("none", "relu", "gelu_tanh", "silu")
BIAS_AXES = ("none", "row", "col")
SCALE_KINDS = ("none", "tensor", "vector")
_GELU_C = 0.7978845608028654          # sqrt(2 / pi)


def _source_digest(function) -> str:
    """A digest of a user epilogue function's source (it is part of the kernel cache key)."""
    target = getattr(function, "fn", function)
    try:
        text = inspect.getsource(target)
    except (OSError, TypeError):
        text = getattr(target, "__qualname__", repr(target))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class FusedEpilogue:
    """The elementwise epilogue of a GEMM, applied to each Float32 accumulator before it is
    converted and stored: the documented hook of ``tsjit.ops.matmul``.

    ``y = scale_x * scale_y * acc`` (fp8 dequantization: ``scale_rows`` / ``scale_cols`` is
    ``"tensor"`` for one Float32 per tensor, loaded once per tile, or ``"vector"`` for one per
    row / per column of the output), then ``y = alpha * y`` (``alpha``), ``+ beta * c_old`` (``beta``: the output's previous value),
    ``+ bias[row]`` / ``+ bias[col]`` (``bias="row"`` / ``"col"``), then the ``activation``
    (``"relu"``, ``"gelu_tanh"``: ``0.5 y (1 + tanh(sqrt(2/pi) (y + 0.044715 y^3)))``, ``"silu"``:
    ``y / (1 + exp(-y))``), ``+ residual[row, col]`` (``residual``), and last ``function(y, row, col)``:
    a ``@tsjit.func`` (or any callable on Values) of the Float32 value and the Int32 *global*
    coordinates of the element in the output (``transposed``: the tile being stored is of the
    output's transpose, so the function is called with ``(y, col, row)`` of the tile, i.e. the
    output's own ``(row, col)``).

    An instance is hashable and goes into a kernel's cache key (a user ``function`` by the digest
    of its source).  :meth:`bind` builds the per-tile ``fn(value, row, col)`` that
    :func:`store_fragment_shared` / :func:`store_fragment_global` take; loads of bias and residual
    use clamped indices, so the ragged edge of a tile never reads out of bounds (those elements are
    masked at the store).

    Raises:
        CompilationError: an unknown activation or bias axis.
    """

    alpha: bool = False
    beta: bool = False
    bias: str = "none"
    activation: str = "none"
    residual: bool = False
    function: object = field(default=None, compare=False, hash=False)
    function_digest: str = ""
    transposed: bool = False
    scale_rows: str = "none"
    scale_cols: str = "none"

    def __post_init__(self):
        if self.activation not in ACTIVATIONS:
            raise CompilationError(f"FusedEpilogue activation must be one of {list(ACTIVATIONS)}, got "
                                   f"{self.activation!r}")
        if self.bias not in BIAS_AXES:
            raise CompilationError(f"FusedEpilogue bias must be one of {list(BIAS_AXES)}, got {self.bias!r}")
        for name in ("scale_rows", "scale_cols"):
            if getattr(self, name) not in SCALE_KINDS:
                raise CompilationError(f"FusedEpilogue {name} must be one of {list(SCALE_KINDS)}, got "
                                       f"{getattr(self, name)!r}")
        if self.function is not None and not self.function_digest:
            object.__setattr__(self, "function_digest", _source_digest(self.function))

    @property
    def is_identity(self) -> bool:
        """True when the epilogue leaves the accumulator unchanged."""
        return (not self.alpha and not self.beta and self.bias == "none" and self.activation == "none"
                and not self.residual and self.function is None and self.scale_rows == "none"
                and self.scale_cols == "none")

    @property
    def loads_per_element(self) -> int:
        """Global loads per output element (bias, residual, previous output)."""
        return (int(self.bias != "none") + int(self.residual) + int(self.beta) + int(self.scale_rows == "vector")
                + int(self.scale_cols == "vector"))

    def __repr__(self) -> str:
        parts = [f"{k}={getattr(self, k)!r}" for k in ("alpha", "beta", "bias", "activation", "residual",
                                                           "transposed")]
        parts += [f"{k}={getattr(self, k)!r}" for k in ("scale_rows", "scale_cols") if getattr(self, k) != "none"]
        if self.function is not None:
            parts.append(f"function={getattr(self.function, '__qualname__', '?')}@{self.function_digest}")
        return "FusedEpilogue(" + ", ".join(parts) + ")"

    def __tsjit_key__(self) -> str:
        """Its part of a kernel's cache key (the user function by the digest of its source)."""
        return repr(self)

    def describe(self) -> str:
        """A short human-readable formula of the epilogue (for ``explain``)."""
        y = "acc"
        if self.scale_rows != "none" or self.scale_cols != "none":
            kinds = {"tensor": "", "vector": "[row]"}
            rows = f"scale_x{kinds[self.scale_rows]}*" if self.scale_rows != "none" else ""
            cols = f"scale_y{kinds[self.scale_cols].replace('row', 'col')}*" if self.scale_cols != "none" else ""
            y = f"{rows}{cols}acc"
        if self.alpha:
            y = f"alpha*{y}"
        if self.beta:
            y += " + beta*out"
        if self.bias != "none":
            y += f" + bias[{self.bias}]"
        if self.activation != "none":
            y = f"{self.activation}({y})"
        if self.residual:
            y += " + residual"
        if self.function is not None:
            y = f"{getattr(self.function, '__qualname__', 'fn')}({y}, row, col)"
        return y

    def bind(self, operands, batch, row0, col0, rows, cols):
        """The ``fn(value, row, col)`` of one warpgroup tile whose origin is ``(row0, col0)``
        (``operands`` = ``(bias, residual, out, alpha, beta[, scale_x, scale_y])``; ``out``/``residual``
        rank 3 with a leading batch when the launch is batched), or ``None`` for the identity.
        Per-tensor scales are loaded here, once per tile pass, not per element."""
        if self.is_identity:
            return None
        bias, residual, out, alpha, beta = operands[:5]
        scale_x, scale_y = operands[5:7] if len(operands) >= 7 else (None, None)
        scale = None                                    # the product of the per-tensor scales
        for kind, vector in ((self.scale_rows, scale_x), (self.scale_cols, scale_y)):
            if kind == "tensor":
                value = cast_to(vector.element_pointer((0,)).load(), dt.Float32)
                scale = value if scale is None else scale * value
        if self.residual and residual.rank == 3:
            residual = residual.view((batch,))
        if self.beta and out.rank == 3:
            out = out.view((batch,))
        def fn(value, row, col):
            r = row0 + row
            c = col0 + col
            rr = tm.min(r, rows - 1)
            cc = tm.min(c, cols - 1)
            y = cast_to(as_value(value, dt.Float32), dt.Float32)
            if scale is not None:
                y = y * scale
            if self.scale_rows == "vector":
                y = y * cast_to(scale_x.element_pointer((rr,)).load(), dt.Float32)
            if self.scale_cols == "vector":
                y = y * cast_to(scale_y.element_pointer((cc,)).load(), dt.Float32)
            if self.alpha:
                y = y * alpha
            if self.beta:
                y = y + beta * cast_to(out.element_pointer((rr, cc)).load(), dt.Float32)
            if self.bias == "row":
                y = y + cast_to(bias.element_pointer((rr,)).load(), dt.Float32)
            elif self.bias == "col":
                y = y + cast_to(bias.element_pointer((cc,)).load(), dt.Float32)
            y = apply_activation(y, self.activation)
            if self.residual:
                y = y + cast_to(residual.element_pointer((rr, cc)).load(), dt.Float32)
            if self.function is not None:       # transposed: the tile is of C^T, the function sees C's coordinates
                y = self.function(y, c, r) if self.transposed else self.function(y, r, c)
            return y
        return fn


def apply_activation(y: Value, activation: str) -> Value:
    """``activation`` (one of :data:`ACTIVATIONS`) of a Float32 value."""
    if activation == "relu":
        return tm.max(y, 0.0)
    if activation == "silu":
        return y / (tm.exp(y * -1.0) + 1.0)
    if activation == "gelu_tanh":
        inner = (y + y * y * y * 0.044715) * _GELU_C
        tanh = 1.0 - 2.0 / (tm.exp(inner * 2.0) + 1.0)
        return y * 0.5 * (tanh + 1.0)
    if activation != "none":
        raise CompilationError(f"unknown activation {activation!r}; one of {list(ACTIVATIONS)}")
    return y


__all__ = ["store_fragment_shared", "store_fragment_global", "tma_store_tile", "pack_pair", "pack_fp8_quad",
           "stmatrix_row_offset", "FusedEpilogue", "apply_activation", "ACTIVATIONS", "BIAS_AXES", "SCALE_KINDS"]
