"""The argument checks of ``tsjit.ops.matmul`` / ``bmm`` that a plan runs once per call signature: shapes,
dtypes and options, each mistake a :class:`~tsjit.errors.LaunchError` naming the argument."""
from __future__ import annotations

import inspect
import numbers

from tsjit.errors import LaunchError
from tsjit.lang import dtypes as dt
from tsjit.lang.epilogue import ACTIVATIONS
from tsjit.ops.operands import FP8_DTYPES, Operand, shares_memory

INPUT_DTYPES = ("BFloat16", "Float16") + FP8_DTYPES
OUTPUT_DTYPES = ("BFloat16", "Float16", "Float32")
_OUTPUT_CHOICES = ("tsjit.BFloat16 / tsjit.Float16 / tsjit.Float32, torch.bfloat16 / torch.float16 / torch.float32, "
                   "or numpy's float16 / float32")


def output_dtype(value, name: str = "matmul") -> dt.DType | None:
    """The tsjit dtype that ``out_dtype`` ``value`` names (``None`` stays ``None``: the default).

    ``value`` is a tsjit dtype (returned as is: :func:`check_arguments` checks it), a torch dtype
    (``torch.float32``), or anything ``numpy.dtype`` accepts (``np.float32``, ``np.dtype('float16')``,
    ``"float32"``); ``name`` is the calling op (``"matmul"`` / ``"bmm"``), for the message.

    Raises:
        LaunchError: ``value`` names no dtype, or one the ops cannot write (float64, int32, ...):
            saying what was passed and what to pass.
    """
    if value is None or isinstance(value, dt.DType):
        return value
    text = str(value)
    if text.startswith("torch."):                  # a torch dtype: tsjit.lang.dtypes.lookup reads its name
        found, given = dt.lookup(text), text
    else:
        found = dt.lookup(value)
        given = f"numpy dtype {_numpy_name(value)}" if found is not None or _numpy_name(value) is not None else None
    if found is None or found.name not in OUTPUT_DTYPES:
        given = given or f"{value!r} (of type {type(value).__name__})"
        raise LaunchError(f"tsjit.ops.{name}: argument 'out_dtype' is {given}; the output can be BFloat16, Float16 "
                          f"or Float32: pass {_OUTPUT_CHOICES}")
    return found


def coefficient(value, name: str, op: str = "matmul") -> float:
    """``alpha`` / ``beta`` (argument ``name`` of op ``op``) as a float: a real number (Python or numpy; not a bool,
    not a tensor: the coefficient is a launch argument, read on the host).

    Raises:
        LaunchError: anything else, naming the argument and what was passed.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise LaunchError(f"tsjit.ops.{op}: argument '{name}' must be a real number (a Python float), got "
                          f"{value!r} (of type {type(value).__name__}); a one-element tensor t is passed as "
                          f"float(t)")
    return float(value)


def check_epilogue_fn(fn, op: str = "matmul") -> None:
    """``epilogue_fn`` is None or a function taking ``(y, row, col)`` (a ``@tsjit.func``, a plain function or a
    lambda; a signature that cannot be read is left to the compile).

    Raises:
        LaunchError: not callable, or its signature does not take three positional arguments, naming it.
    """
    if fn is None:
        return
    if not callable(fn):
        hint = f" (for an activation pass activation={fn!r})" if isinstance(fn, str) else ""
        raise LaunchError(f"tsjit.ops.{op}: argument 'epilogue_fn' must be a function (y, row, col) -> y, got "
                          f"{fn!r} (of type {type(fn).__name__}){hint}")
    try:
        inspect.signature(fn).bind(0, 0, 0)
    except TypeError:
        raise LaunchError(f"tsjit.ops.{op}: argument 'epilogue_fn' must take (y, row, col), the element and its "
                          f"global Int32 coordinates; {getattr(fn, '__name__', fn)!r} has the signature "
                          f"{inspect.signature(fn)}") from None
    except ValueError:
        pass                                     # no readable signature (a builtin): the compile says more


def _numpy_name(value) -> str | None:
    """numpy's name of the dtype ``value`` names (``"float64"``), or ``None`` when numpy knows no such dtype."""
    import numpy as np   # lazily: as in tsjit.lang.dtypes
    try:
        return np.dtype(value).name
    except TypeError:
        return None


def bias_axis(bias: Operand | None, M: int, N: int, op: str = "matmul") -> str:
    """``"none"``, ``"col"`` (shape (N,) / (1, N)) or ``"row"`` ((M, 1)) for a rank-3 ``bias`` operand.

    Raises:
        LaunchError: any other shape, naming 'bias'.
    """
    if bias is None:
        return "none"
    shape = bias.shape[1:]
    if shape in ((1, N),):
        return "col"
    if shape == (M, 1) and M > 1:
        return "row"
    if shape == (1, 1) and N == 1:
        return "col"
    raise LaunchError(f"tsjit.ops.{op}: argument 'bias' has shape {tuple(s for s in bias.shape if s != 1) or (1,)}; "
                      f"expected (N,) = ({N},) or (1, N) for a per-column bias, or (M, 1) = ({M}, 1) per row")


def check_matrix(op: Operand | None, name: str, batch: int, M: int, N: int, dtypes, caller: str = "matmul") -> None:
    """Check that operand ``name`` (``out`` / ``residual``; None passes) of op ``caller`` (``"matmul"`` /
    ``"bmm"``) is (batch, M, N) of one of ``dtypes``.

    Raises:
        LaunchError: naming ``name``, its shape or dtype, and the expected one.
    """
    if op is None:
        return
    if op.shape[1:] != (M, N) or op.shape[0] not in (batch,):
        want = (batch, M, N) if batch > 1 else (M, N)
        raise LaunchError(f"tsjit.ops.{caller}: argument '{name}' has shape {op.shape if batch > 1 else op.shape[1:]}; "
                          f"expected {want}")
    if op.dtype is None or op.dtype.name not in dtypes:
        raise LaunchError(f"tsjit.ops.{caller}: argument '{name}' has dtype {getattr(op.dtype, 'name', op.dtype)}; "
                          f"expected one of {list(dtypes)}")


def check_out_does_not_overlap_itself(out: Operand | None, op: str = "matmul", batched: bool = False) -> None:
    """Refuse an ``out`` two of whose elements share memory (a broadcast view, ``torch.empty(1, N).expand(M, N)``,
    or strides like (1, 1)): the tiles' stores would overwrite each other, a silently wrong result.  Sufficient
    test: ordered by stride, each dimension of extent > 1 steps past the whole of the smaller ones.

    Raises:
        LaunchError: naming ``out`` and its strides.
    """
    if out is None:
        return
    span = 1
    for stride, extent in sorted((s, n) for s, n in zip(out.strides, out.shape) if n > 1):
        if stride < span:
            shape, strides = (out.shape, out.strides) if batched else (out.shape[1:], out.strides[1:])
            raise LaunchError(f"tsjit.ops.{op}: argument 'out' has strides {tuple(strides)} for shape {shape}: "
                              f"several of its elements share memory (a broadcast or overlapping view), so the "
                              f"product's stores would overwrite each other. Pass an out of its own (row-major or "
                              f"transposed), or none")
        span = stride * extent


def check_out_is_not_an_input(name: str, out: Operand, inputs) -> None:
    """Refuse an ``out`` that starts at the address of an input (``matmul(a, b, out=a)``): its tiles would be read
    after other tiles overwrote them, a silently wrong result), or that shares any element with one (a slice
    of the same buffer that overlaps it; one beside it is fine).  ``inputs``: ``(Operand or None, argument
    name)`` pairs.  (``residual`` may be ``out`` itself, same address and strides: each element is read before it
    is written; the caller leaves it out of ``inputs`` then.)

    Raises:
        LaunchError: naming the argument ``out`` shares memory with.
    """
    if 0 in out.shape:
        return                                   # no element to overwrite (torch gives empty tensors address 0)
    for op, arg in inputs:
        if op is not None and 0 in op.shape:
            continue
        if op is not None and op.ptr == out.ptr:
            raise LaunchError(f"tsjit.ops.{name}: argument 'out' is the memory of argument '{arg}' (both start at "
                              f"{out.ptr:#x}); the product would read {arg} after overwriting parts of it. Pass a "
                              f"separate out (or none: a new array is returned)")
        if op is not None and shares_memory(op, out):
            raise LaunchError(f"tsjit.ops.{name}: argument 'out' overlaps the memory of argument '{arg}' (out "
                              f"starts at {out.ptr:#x}, {arg} at {op.ptr:#x}, and some elements of out are elements "
                              f"of {arg}); the product would read {arg} after overwriting parts of it. Pass an out "
                              f"that shares no memory with the inputs (a slice of the same buffer beside {arg} is "
                              f"fine)")


def check_arguments(A: Operand, B: Operand, out: Operand | None, bias: Operand | None, residual: Operand | None,
                    activation, beta: float, out_dtype, batched: bool, scales=("none", "none")):
    """``(batch, M, N, K, output dtype, bias axis)`` of a call whose operands are ``A`` (batch, M, K) and ``B``
    (batch, K, N); the bias axis is ``"none"``, ``"col"`` or ``"row"`` (in C's coordinates).

    Raises:
        LaunchError: a shape, dtype or option mistake, naming the argument and what it should be.
    """
    name = "bmm" if batched else "matmul"
    batch, M, K = A.shape
    if B.shape[0] != batch or B.shape[1] != K:
        want = f"({batch}, {K}, N)" if batched else f"({K}, N)"
        got = B.shape if batched else B.shape[1:]
        raise LaunchError(f"tsjit.ops.{name}: argument 'b' has shape {got}; expected {want} (a is "
                          f"{A.shape if batched else A.shape[1:]})")
    N = B.shape[2]
    for op, arg in ((A, "a"), (B, "b")):
        if op.dtype is None or op.dtype.name not in INPUT_DTYPES:
            raise LaunchError(f"tsjit.ops.{name}: argument '{arg}' has dtype {getattr(op.dtype, 'name', None)}; "
                              f"expected BFloat16, Float16, Float8E4M3 or Float8E5M2")
    fp8 = A.dtype.name in FP8_DTYPES
    if A.dtype is not B.dtype and not (fp8 and B.dtype.name in FP8_DTYPES):
        raise LaunchError(f"tsjit.ops.{name}: argument 'b' has dtype {B.dtype.name} but 'a' has {A.dtype.name}; "
                          f"both must be BFloat16, both Float16, or both fp8 (Float8E4M3 / Float8E5M2, any mix)")
    if not fp8 and scales != ("none", "none"):
        raise LaunchError(f"tsjit.ops.{name}: arguments 'scale_a' / 'scale_b' as tensors dequantize fp8 inputs; "
                          f"a and b are {A.dtype.name}: pass scales as Python numbers or use alpha")
    if min(batch, M, N, K) < 1:
        raise LaunchError(f"tsjit.ops.{name}: every dimension must be >= 1; got "
                          + (f"L={batch}, " if batched else "") + f"M={M}, N={N}, K={K}")
    if activation not in (None,) + ACTIVATIONS:
        raise LaunchError(f"tsjit.ops.{name}: argument 'activation' must be one of {list(ACTIVATIONS)} or None; "
                          f"got {activation!r}")
    if out is not None:
        dtype = out.dtype
        if out_dtype is not None and dtype is not out_dtype:
            raise LaunchError(f"tsjit.ops.{name}: argument 'out' has dtype {dtype.name} but out_dtype is "
                              f"{out_dtype.name}")
    else:
        dtype = out_dtype or (dt.BFloat16 if fp8 else A.dtype)
    if dtype.name not in OUTPUT_DTYPES:
        given = "out' has dtype" if out is not None else "out_dtype' is"
        raise LaunchError(f"tsjit.ops.{name}: argument '{given} {dtype.name}; the output can be BFloat16, "
                          f"Float16 or Float32")
    check_matrix(out, "out", batch, M, N, OUTPUT_DTYPES, name)
    check_out_does_not_overlap_itself(out, name, batched)
    check_matrix(residual, "residual", batch, M, N, OUTPUT_DTYPES, name)
    if beta != 0.0 and out is None:
        raise LaunchError(f"tsjit.ops.{name}: argument 'beta' is {beta} but no 'out' was given; beta scales "
                          f"out's previous contents")
    if bias is not None and (bias.shape[0] != 1 or bias.dtype is None or bias.dtype.name not in OUTPUT_DTYPES):
        raise LaunchError(f"tsjit.ops.{name}: argument 'bias' must be a BFloat16/Float16/Float32 vector; got "
                          f"shape {bias.shape}, dtype {getattr(bias.dtype, 'name', None)}")
    axis = bias_axis(bias, M, N, name)
    return batch, M, N, K, dtype, axis
