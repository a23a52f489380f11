"""float64 attention references for the device-array attention tests (test_attention_arrays_gpu.py and
test_attention_fp8_arrays_gpu.py): the masked softmax scores, the exact attention, and rounding to a tsjit dtype.

Arrays are (B, S, H, D) numpy float64; ``window`` is (left, right) with None for an unbounded side (causal:
right = 0); key ``c`` is visible from query row ``r`` when ``r + (Sk - Sq) - left <= c <= r + (Sk - Sq) + right``
(the queries are the last Sq positions of the keys)."""
import numpy as np

from tsjit.interpret.numerics import decode, encode


def masked_scores(q, k, causal, scale, window=(None, None)):
    """``scale * Q K^T`` per (batch, head): (B, H, Sq, Sk) float64, the keys outside the window (or causal mask)
    -inf; K's Hkv heads are shared by H / Hkv query heads each (GQA / MQA)."""
    heads, kv_heads = q.shape[2], k.shape[2]
    qd = q.transpose(0, 2, 1, 3)
    kd = np.repeat(k.transpose(0, 2, 1, 3), heads // kv_heads, axis=1)
    s = (qd @ kd.transpose(0, 1, 3, 2)) * scale
    sq, sk = q.shape[1], k.shape[1]
    left, right = window
    if causal:
        right = 0 if right is None else min(right, 0)
    rows = np.arange(sq)[:, None] + (sk - sq)
    cols = np.arange(sk)[None, :]
    if right is not None:
        s = np.where(cols > rows + right, -np.inf, s)
    if left is not None:
        s = np.where(cols < rows - left, -np.inf, s)
    return s


def reference(q, k, v, causal, scale, window=(None, None)):
    """float64 attention of (B, S, H, D) arrays: (out (B, Sq, H, D), lse (B, H, Sq)); rows that see no key
    give 0 and -inf.  ``window``: (left, right), None for an unbounded side (causal: right = 0)."""
    heads, kv_heads = q.shape[2], k.shape[2]
    if k.shape[1] == 0:
        return np.zeros(q.shape), np.full((q.shape[0], heads, q.shape[1]), -np.inf)
    vd = np.repeat(v.transpose(0, 2, 1, 3), heads // kv_heads, axis=1)
    s = masked_scores(q, k, causal, scale, window)
    p, lse = softmax_rows(s)
    return (p @ vd).transpose(0, 2, 1, 3), lse


def round_to(x, dtype):
    """``x`` rounded to the tsjit ``dtype`` (:func:`tsjit.interpret.numerics.encode`, then decoded), as float64."""
    return decode(encode(x, dtype), dtype).astype(np.float64)


def softmax_rows(s):
    """Row softmax of float64 scores ``s`` (..., Sk) and its log-sum-exp; fully masked rows give p = 0, lse = -inf."""
    peak = np.max(s, axis=-1, keepdims=True)
    peak = np.where(np.isinf(peak), 0.0, peak)
    total = np.sum(np.exp(s - peak), axis=-1)
    with np.errstate(divide="ignore"):
        lse = np.log(total) + peak[..., 0]
    return np.exp(s - np.where(np.isinf(lse), 0.0, lse)[..., None]), lse
