"""The online softmax of the fp8 attention forward (issue 16, :mod:`tsjit.examples.attention_fp8`): the bf16 forward's
(:func:`~tsjit.examples.attention_softmax.online_softmax`, same statistics layout) with two changes for a kernel
whose tensor cores run twice as fast as bf16 ones, so the softmax's instructions are what limits it:

* **row sums optional** (``row_sums=False``): the fp8 forward can have the PV wgmma sum P for it (a row of ones
  below V^T: :class:`~tsjit.examples.attention_fp8.VTransposedTiles` with ``ones_rows``), which removes the
  ~2 x (BLOCK_N / 8 - 1) FADD of a thread's two row sums per KV tile; the statistics' ``l`` entries then stay 0;
* **a cheaper FMA-pipe exponential** (:func:`exp2_fma`): P is rounded to e4m3 (3 mantissa bits, a relative
  half-ulp of 6.25%) right after, so a quadratic (:data:`EXP2_QUADRATIC`, relative error 1.7e-3) is accurate enough,
  and a clamp at :data:`EXP2_FMA_MIN` (one FMNMX) replaces the compare and select of
  :func:`~tsjit.examples.attention_softmax.exp2_polynomial`: seven instructions instead of nine.

Compile-time Python over :class:`~tsjit.lang.fragment.Fragment` values, as :mod:`attention_softmax`.
"""
from __future__ import annotations

import tsjit
from tsjit.backend import emit
from tsjit.examples.attention_softmax import (EXP2_COEFFICIENTS, EXP2_ROUND, NEG_INF, exp2_polynomial, plus,
                                              polynomial_registers, quad_reduce, row_half, tree_reduce)
from tsjit.lang.fragment import Fragment
from tsjit.lang.values import Value

#: 2**f ~ c0 + c1 f + c2 f^2 on [-0.5, 0.5], fitted for the least maximum relative error (1.73e-3 in float32 Horner
#: evaluation, host numpy over 20001 points)
EXP2_QUADRATIC = (1.0004429817199707, 0.7034428119659424, 0.23842570185661316)
#: the exponent :func:`exp2_fma` clamps its argument to: ``2**-126`` keeps the exponent-field add from borrowing
#: (the result is then below e4m3's smallest subnormal, 2**-9, and rounds to 0)
EXP2_FMA_MIN = -126.0
#: polynomial degrees :func:`exp2_fma` evaluates
EXP2_DEGREES = (2, 3)


def bitcast(x, dtype):
    """The bits of the 32-bit Value ``x`` as ``dtype`` (an LLVM bitcast; compile-time Python)."""
    return Value(emit.current().builder.bitcast(x.ir, emit.llvm_type(dtype)), dtype)


def exp2_fma(x, degree: int = 2):
    """``2**x`` for a Float32 ``x <= 0`` (or -inf) on the FMA and ALU pipes (FlashAttention-4's emulation, cut to
    what an e4m3 P needs): ``x`` clamped to :data:`EXP2_FMA_MIN` (-inf too), ``j = round(x)`` by the ``EXP2_ROUND``
    addition, ``f = x - j`` in [-0.5, 0.5], :data:`EXP2_QUADRATIC` (``degree`` 2) or the cubic
    :data:`~tsjit.examples.attention_softmax.EXP2_COEFFICIENTS` (3) for ``2**f``, and ``j`` added to its exponent
    field (one IMAD).  Relative error <= 1.73e-3 (degree 2) / 7.5e-5 (3); results below 2**-126 are not exact but
    stay in [0, 2**-125].  Compile-time Python."""
    if degree not in EXP2_DEGREES:
        raise tsjit.CompilationError(f"exp2_fma: degree must be one of {EXP2_DEGREES}, got {degree!r}")
    clamped = tsjit.math.max(x, EXP2_FMA_MIN)
    rounded = clamped + EXP2_ROUND
    fraction = clamped - (rounded - EXP2_ROUND)
    coefficients = EXP2_QUADRATIC if degree == 2 else EXP2_COEFFICIENTS
    power = coefficients[-1]
    for c in reversed(coefficients[:-1]):
        power = tsjit.math.fma(power, fraction, c)
    scaled = bitcast(power, tsjit.Int32) + (bitcast(rounded, tsjit.Int32) << 23)
    return bitcast(scaled, tsjit.Float32)


#: the exponent :class:`FusedExp2` clamps to (a margin of one below :data:`EXP2_FMA_MIN`: the clamp is applied to the
#: score, so the exponent argument it gives can be off by rounding)
EXP2_FUSED_MIN = -125.0


def integral(x):
    """``x`` rounded to an integer (Float32, ``|x| < 2**22``; -inf stays -inf) by the ``EXP2_ROUND`` addition."""
    return (x + EXP2_ROUND) - EXP2_ROUND


class FusedExp2:
    """``2**(s * scale_log2 - m)`` straight from a score ``s`` on the FMA pipe, for a row whose maximum ``m`` (exp2
    units) is an integer (:func:`integral`): the argument's integer part comes from one FFMA into the ``EXP2_ROUND``
    range, ``s * scale_log2 + (EXP2_ROUND - m)``, and its fraction from a second FFMA with the (exact) integer
    difference, so the exponent argument is never formed: six instructions and the clamp (seven; :func:`exp2_fma`
    takes eight with the FFMA that forms the argument).  The clamp is on the score, ``s >= (m + EXP2_FUSED_MIN) /
    scale_log2`` (``scale_log2 > 0``).  The quadratic :data:`EXP2_QUADRATIC` (relative error 1.73e-3, for P rounded
    to e4m3).  Compile-time Python: build once per row and tile, call per register."""

    def __init__(self, scale_log2, m_int, inverse_scale):
        self.scale = scale_log2
        self.offset = EXP2_ROUND - m_int
        self.lower = (m_int + EXP2_FUSED_MIN) * inverse_scale

    def __call__(self, s):
        clamped = tsjit.math.max(s, self.lower)
        rounded = tsjit.math.fma(clamped, self.scale, self.offset)
        fraction = tsjit.math.fma(clamped, self.scale, self.offset - rounded)
        power = EXP2_QUADRATIC[-1]
        for c in reversed(EXP2_QUADRATIC[:-1]):
            power = tsjit.math.fma(power, fraction, c)
        return bitcast(bitcast(power, tsjit.Int32) + (bitcast(rounded, tsjit.Int32) << 23), tsjit.Float32)


def exponentials(s, scaled, scale_log2, polynomial=0, degree=3, fused=False):
    """P = ``2**(s * scale_log2 - scaled[row])`` per register of S (``scaled``: the thread's two row maxima in exp2
    units, 0 for a row without keys so far), ``polynomial`` of every 16 on the FMA pipe (:func:`exp2_fma` of
    ``degree``; ``fused``: :class:`FusedExp2`, the maxima then integers), the others on the MUFU unit.  A list of
    Float32 Values (compile-time Python)."""
    emulated = polynomial_registers(polynomial, len(s))
    if fused:
        inverse = 1.0 / scale_log2
        fast = [FusedExp2(scale_log2, scaled[h], inverse) for h in range(2)]
    p = []
    for i in range(len(s)):
        if fused and i in emulated:
            p.append(fast[row_half(i)](s[i]))
            continue
        x = tsjit.math.fma(s[i], scale_log2, -scaled[row_half(i)])
        if i not in emulated:
            p.append(tsjit.math.exp2(x, ftz=True))
        elif degree == 3:
            p.append(exp2_polynomial(x))
        else:
            p.append(exp2_fma(x, degree))
    return p


def integral_maxima(s, stale, scale_log2, max_chains=4):
    """The thread's two running row maxima in exp2 units, rounded to integers (-inf for a row without keys so far):
    ``max(stale, round(max(row of s) * scale_log2))`` reduced over each row's quad (``stale``: the previous ones)."""
    raw = [quad_reduce(tree_reduce([s[i] for i in range(len(s)) if row_half(i) == h], tsjit.math.max, max_chains),
                       tsjit.math.max) for h in range(2)]
    return [tsjit.math.max(stale[h], integral(raw[h] * scale_log2)) for h in range(2)]


def without_empty(scaled):
    """Maxima in exp2 units with -inf (a row without keys so far) replaced by 0, so the exponentials give 0."""
    return [tsjit.select(scaled[h] == NEG_INF, 0.0, scaled[h]) for h in range(2)]


#: per byte of packed e4m3 P: adding it carries into the byte's top bit exactly where P >= 2**8 (code 0x78 up)
OVERFLOW_ADD = 0x08080808
OVERFLOW_CODE = 0x78


def overflow_bits(packed):
    """The OR over the packed e4m3 P (an Int32 Fragment) of each word plus :data:`OVERFLOW_ADD`, masked to the
    bytes' top bits: nonzero iff some P is at least 2**8 (P >= 0, codes <= 0x7F, so no byte carries into the next);
    as three-input ORs (compile-time Python)."""
    return or_tree([w + OVERFLOW_ADD for w in packed]) & (-2139062144)           # 0x80808080 as an Int32


def or_tree(words):
    """The bitwise OR of the Int32 Values ``words`` as three-input ORs (one LOP3 per two words; compile-time
    Python)."""
    words = list(words)
    while len(words) > 1:
        words = [words[i] | words[i + 1] | words[i + 2] if i + 2 < len(words) else
                 (words[i] | words[i + 1] if i + 1 < len(words) else words[i])
                 for i in range(0, len(words), 3)]
    return words[0]


def online_softmax_fp8(s, stats, scale_log2, threshold=None, polynomial=0, *, row_sums=True, degree=3,
                       max_chains=4, fused=False):
    """One step of the online softmax (as :func:`~tsjit.examples.attention_softmax.online_softmax`: same ``stats``
    layout, maxima, conditional rescaling and alphas) for the fp8 forward.  ``row_sums=False``: the thread-partial row
    sums are not computed (``l`` stays 0; the PV wgmma sums P).  ``polynomial``: of every 16 exponentials of P, how
    many run on the FMA pipe (:func:`exp2_fma` of ``degree``; degree 3 with the range check is the bf16 module's
    :func:`~tsjit.examples.attention_softmax.exp2_polynomial`, the same arithmetic).  Returns (P as Float32 in S's
    registers, new stats).  ``max_chains``: independent running maxima per row (FMNMX chains)."""
    maxima = [quad_reduce(tree_reduce([stats[h]] + [s[i] for i in range(len(s)) if row_half(i) == h],
                                      tsjit.math.max, max_chains), tsjit.math.max) for h in range(2)]
    grew = 1.0
    if threshold is not None:
        grown = [(maxima[h] - stats[h]) * scale_log2 > threshold for h in range(2)]
        moves = tsjit.vote_any(grown[0] | grown[1])
        maxima = [tsjit.select(moves, maxima[h], stats[h]) for h in range(2)]
        grew = tsjit.select(moves, 1.0, 0.0)
    scaled, alphas = [], []
    for h in range(2):
        m_scaled = tsjit.select(maxima[h] == NEG_INF, 0.0, maxima[h] * scale_log2)
        old = stats[h] * scale_log2
        if fused:
            m_scaled, old = integral(m_scaled), integral(old)
        scaled.append(m_scaled)
        alphas.append(tsjit.math.exp2(old - m_scaled, ftz=True))
    p = exponentials(s, scaled, scale_log2, polynomial, degree, fused)
    if row_sums:
        sums = [tree_reduce([stats[2 + h] * alphas[h]] + [p[i] for i in range(len(s)) if row_half(i) == h], plus)
                for h in range(2)]
    else:
        sums = [stats[2], stats[3]]
    return Fragment(p, tsjit.Float32), Fragment([maxima[0], maxima[1], sums[0], sums[1], alphas[0], alphas[1], grew],
                                                tsjit.Float32)


__all__ = ["bitcast", "exp2_fma", "online_softmax_fp8", "integral", "FusedExp2", "exponentials", "integral_maxima",
           "without_empty", "overflow_bits", "or_tree", "OVERFLOW_ADD", "OVERFLOW_CODE", "EXP2_QUADRATIC",
           "EXP2_FMA_MIN",
           "EXP2_FUSED_MIN", "EXP2_DEGREES"]
