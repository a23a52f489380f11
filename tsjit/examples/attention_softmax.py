"""The online softmax of FlashAttention on the registers of one thread of a wgmma warpgroup (issue 16).

Compile-time Python over :class:`~tsjit.lang.fragment.Fragment` values: the functions run while a work
body compiles and build straight-line code.  A thread holds, of a 64 x N Float32 wgmma accumulator, the
registers ``i`` with ``row = 16 * warp + lane // 4 + 8 * ((i % 4) // 2)`` (two rows per thread, ``r`` and
``r + 8``) and ``col = 8 * (i // 4) + 2 * (lane % 4) + i % 2`` (PTX ISA §9.7.15.5.1.1.1, Figure 149); the
four threads ``4q .. 4q + 3`` of a warp share each row, so a row reduction is a thread-local reduction and
two ``shfl.xor`` steps.

The statistics of a thread are one Float32 Fragment ``(m_r, m_r8, l_r, l_r8, alpha_r, alpha_r8, grew)``: the
running row maxima of the raw scores, the thread-partial row sums of P, the factor the running output
must be scaled by after the last step and whether that factor differs from 1 on some row of the warp.
"""
from __future__ import annotations

import tsjit
from tsjit.backend import emit
from tsjit.lang.epilogue import pack_pair
from tsjit.lang.fragment import Fragment
from tsjit.lang.values import Value

NEG_INF = float("-inf")
#: 1.5 * 2**23: ``x + EXP2_ROUND`` holds round(x) in its low mantissa bits (|x| <= 2**22)
EXP2_ROUND = 12582912.0
#: 2**f ~ c0 + c1 f + c2 f^2 + c3 f^3 on [-0.5, 0.5], fitted for the least maximum relative error (7.5e-5 in
#: float32 Horner evaluation)
EXP2_COEFFICIENTS = (0.9999280571937561, 0.6932609677314758, 0.2426111400127411, 0.05517168715596199)
#: the smallest exponent :func:`exp2_polynomial` scales by (its result stays a normal float); below it, 0
EXP2_POLYNOMIAL_MIN = -125.0


def row_half(i):
    """Which of its two rows (``r`` or ``r + 8``) accumulator register ``i`` of a thread holds."""
    return (i % 4) // 2


def quad_reduce(value, combine):
    """Combine ``value`` over the 4 threads that hold one accumulator row (lanes 4q .. 4q + 3)."""
    value = combine(value, tsjit.shuffle_xor(value, 1))
    return combine(value, tsjit.shuffle_xor(value, 2))


def plus(a, b):
    """``a + b``: the combine step of a row sum (see :func:`quad_reduce`)."""
    return a + b


def tree_reduce(values, combine, chains=4):
    """``combine`` over ``values`` as ``chains`` independent running reductions joined at the end: the
    dependent chain is ``len(values) / chains`` long instead of ``len(values)`` (the exact order of a float
    sum changes; max is exact either way)."""
    partial = list(values[:chains])
    for i, value in enumerate(values[chains:]):
        partial[i % chains] = combine(partial[i % chains], value)
    while len(partial) > 1:
        partial = [combine(partial[i], partial[i + 1]) if i + 1 < len(partial) else partial[i]
                   for i in range(0, len(partial), 2)]
    return partial[0]


def mask_scores(s, row0, col0, seqlen_k, offset, right=None, left=None):
    """S with ``-inf`` where the key column is past ``seqlen_k`` or outside the band
    ``row + offset - left <= key <= row + offset + right`` (``right`` / ``left`` None: unbounded; ``right = 0``
    is the causal mask); ``row0`` / ``col0`` are the tile origins in rows / keys.

    Per thread the bounds are folded once per row (its two rows ``r``, ``r + 8``) into the last (and first) visible
    key relative to the thread's first column, so each register costs one compare against its compile-time column
    offset ``8 * (i // 4) + i % 2`` and one select (two compares with a left bound)."""
    tid = tsjit.thread_idx().x
    row_base, col_base = s.accumulator_coords(0, tid)
    key_base = col0 + col_base
    last, first = [], []
    for h in range(2):
        row = row0 + row_base + 8 * h
        bound = seqlen_k - 1 - key_base
        if right is not None:
            bound = tsjit.math.min(bound, row + offset + right - key_base)
        last.append(bound)
        if left is not None:
            first.append(row + offset - left - key_base)
    out = []
    for i in range(len(s)):
        h, step = row_half(i), 8 * (i // 4) + i % 2
        visible = last[h] >= step
        if left is not None:
            visible = visible & (first[h] <= step)
        out.append(tsjit.select(visible, s[i], NEG_INF))
    return Fragment(out, tsjit.Float32)


def _reinterpret(x, dtype):
    """The bits of the 32-bit Value ``x`` as ``dtype`` (an LLVM bitcast; compile-time Python)."""
    return Value(emit.current().builder.bitcast(x.ir, emit.llvm_type(dtype)), dtype)


def exp2_polynomial(x):
    """``2**x`` for a Float32 ``x <= 0`` (or -inf) on the FMA pipe instead of the MUFU unit (FlashAttention-4's
    exponential emulation): ``j = round(x)`` by the ``EXP2_ROUND`` addition, ``f = x - j`` in [-0.5, 0.5], the
    cubic :data:`EXP2_COEFFICIENTS` (three FMA) for ``2**f``, and ``j`` added to its exponent field (a shift and an
    integer add); ``x < EXP2_POLYNOMIAL_MIN`` (with -inf) gives 0.  Ten instructions, relative error <= 7.5e-5 (the
    e4m3 rounding of P that follows is 6%); compile-time Python."""
    rounded = x + EXP2_ROUND
    fraction = x - (rounded - EXP2_ROUND)
    c0, c1, c2, c3 = EXP2_COEFFICIENTS
    power = tsjit.math.fma(tsjit.math.fma(tsjit.math.fma(c3, fraction, c2), fraction, c1), fraction, c0)
    scaled = _reinterpret(power, tsjit.Int32) + (_reinterpret(rounded, tsjit.Int32) << 23)
    return tsjit.select(x >= EXP2_POLYNOMIAL_MIN, _reinterpret(scaled, tsjit.Float32), 0.0)


def polynomial_registers(count: int, size: int) -> frozenset:
    """The accumulator registers (of ``size``) whose exponential :func:`online_softmax` computes with
    :func:`exp2_polynomial`: ``count`` of every 16 (0: none), spread over the 16 (slot ``k``: register
    ``4 * floor(4 k / count) + k % 4`` of each 16, so consecutive slots alternate between the thread's two rows and
    two column parities: ``i % 4`` is ``2 * row half + parity``).  The former choice, slot ``16 k / count``, put
    counts 2 and 4 all on one row and parity (H200: 6-8% slower than 3 with 224-key tiles, BENCHMARKS.md); count 3
    is the same either way."""
    if not 0 <= count <= 16:
        raise tsjit.CompilationError(f"online_softmax: the polynomial exp2 takes 0 to 16 of every 16 registers, "
                                     f"got {count}")
    slots = {4 * (4 * k // count) + k % 4 for k in range(count)}
    return frozenset(i for i in range(size) if i % 16 in slots)


def online_softmax(s, stats, scale_log2, threshold=None, polynomial=0):
    """One step of the online softmax on the thread's slice of S (raw scores, ``-inf`` masked).

    ``stats`` = (m_r, m_r8, l_r, l_r8, alpha_r, alpha_r8, grew): running row maxima (raw units), the
    thread-partial row sums, the factor the previous O must be scaled by and whether that factor is not 1 on
    some row of the warp (1.0 / 0.0).  ``threshold`` (log2 units, or None): the running maxima of a warp move
    only when some row's maximum grew by more than ``threshold`` (``* scale_log2``) since they last moved, so
    P stays below ``2**threshold`` and most steps have alpha = 1 exactly (O is not rescaled then: see
    ``VTiles.rescale``).  O and the row sums always share one maximum, so the normalized result is the same up
    to rounding (FlashAttention-4's conditional rescaling); the decision is warp-uniform (``vote.any``).
    Threshold 0 rounds exactly as the unconditional form (the maxima are always current; only steps where no
    row of the warp grew skip the rescale).  A threshold > 0 rounds differently: with a stale maximum no P of a
    row is exactly 1.0, so the largest terms of P V are rounded to 16 bits too (H200: 1.3x-2.3x the max error).
    ``polynomial``: how many of every 16 exponentials of P run on the FMA pipe (:func:`exp2_polynomial`, for the
    fp8 forward, where the MUFU unit's 16 exp2 per cycle per SM match the tensor cores' rate; 0: all on MUFU).
    Returns (P as Float32 in S's registers, new stats); :func:`pack_probabilities` turns P into the PV wgmma's
    A registers."""
    maxima = [quad_reduce(tree_reduce([stats[h]] + [s[i] for i in range(len(s)) if row_half(i) == h],
                                      tsjit.math.max), tsjit.math.max) for h in range(2)]
    grew = 1.0
    if threshold is not None:
        # (new - old) is NaN for a row that has seen only -inf (no growth) and +inf on its first visible key
        grown = [(maxima[h] - stats[h]) * scale_log2 > threshold for h in range(2)]
        moves = tsjit.vote_any(grown[0] | grown[1])
        maxima = [tsjit.select(moves, maxima[h], stats[h]) for h in range(2)]
        grew = tsjit.select(moves, 1.0, 0.0)
    scaled, alphas = [], []
    for h in range(2):
        # a row that has seen only -inf keeps max -inf; subtract 0 then so exp2 gives 0, not NaN
        m_scaled = tsjit.select(maxima[h] == NEG_INF, 0.0, maxima[h] * scale_log2)
        scaled.append(m_scaled)
        alphas.append(tsjit.math.exp2(stats[h] * scale_log2 - m_scaled, ftz=True))
    emulated = polynomial_registers(polynomial, len(s))
    p = []
    for i in range(len(s)):
        x = tsjit.math.fma(s[i], scale_log2, -scaled[row_half(i)])
        p.append(exp2_polynomial(x) if i in emulated else tsjit.math.exp2(x, ftz=True))
    sums = [tree_reduce([stats[2 + h] * alphas[h]] + [p[i] for i in range(len(s)) if row_half(i) == h], plus)
            for h in range(2)]
    return Fragment(p, tsjit.Float32), Fragment([maxima[0], maxima[1], sums[0], sums[1], alphas[0], alphas[1], grew],
                                                tsjit.Float32)


def pack_probabilities(p, dtype):
    """P (Float32 accumulator layout) rounded to ``dtype`` and packed in pairs: register ``t`` of the result
    holds columns ``2t, 2t + 1`` of the thread's slice, which is the m64k16 wgmma A-fragment order."""
    return Fragment([pack_pair(p[2 * t], p[2 * t + 1], dtype) for t in range(len(p) // 2)], tsjit.Int32)


def initial_stats():
    """(m, m, l, l, alpha, alpha, grew) before the first KV tile."""
    return Fragment([NEG_INF, NEG_INF, 0.0, 0.0, 1.0, 1.0, 1.0], tsjit.Float32)


__all__ = ["row_half", "quad_reduce", "tree_reduce", "plus", "mask_scores", "online_softmax", "pack_probabilities",
           "initial_stats", "exp2_polynomial", "polynomial_registers", "NEG_INF", "EXP2_ROUND", "EXP2_COEFFICIENTS",
           "EXP2_POLYNOMIAL_MIN"]
