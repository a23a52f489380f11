"""``tsjit.ops.matmul`` / ``tsjit.ops.bmm``: the library GEMM behind one call.

``matmul(a, b)`` computes ``C = a @ b`` for ``a`` (M, K) and ``b`` (K, N) in BFloat16 or Float16, or
in fp8 (Float8E4M3 / Float8E5M2, torch ``float8_e4m3fn`` / ``float8_e5m2``, the two may mix) with
dequantization scales (fp32 accumulation) with the Task Scheduling program of
:mod:`tsjit.ops.gemm_program`:

* **fp8**: ``matmul(a, b, scale_a=sa, scale_b=sb)`` is ``(sa * a) @ (sb * b)`` in BFloat16 (default)
  or ``out_dtype`` Float32 / Float16.  ``sa`` / ``sb`` are Python numbers or Float32 GPU tensors with
  one element (per-tensor), ``sa`` of shape (M, 1) or (M,) (per row of a), ``sb`` (1, N) or (N,) (per
  column of b), as ``torch._scaled_mm`` takes them.  fp8 wgmma reads only K-major operands, so pass
  ``a`` row-major (M, K) and ``b`` as the transpose of a row-major (N, K) weight (``w.t()``, also what
  ``torch._scaled_mm`` asks); any other layout is first copied into a K-major buffer (one extra
  elementwise kernel per call, said by ``explain``).

* **Inputs**: torch tensors, tsjit ``DeviceArray`` s, any ``__cuda_array_interface__`` or DLPack
  object on the GPU.  **Any strides**: an operand whose K (or M / N) dimension is contiguous is
  read in place through a K-major (or MN-major, transposed wgmma) TMA descriptor; only operands
  TMA cannot address (rows not 16-byte aligned, no unit stride) are first copied into a padded
  K-major buffer (:mod:`tsjit.ops.staging`).  Every ``M, N, K >= 1`` works.  Operands whose rows are
  16- but not 128-byte aligned (K = 1000 bf16: 2000-byte rows) are read in place, or, where the cost
  model says the copy pays (:func:`tsjit.ops.realign.realign_choice`), first copied into 128-byte
  aligned rows in their own major (``explain`` says "realign"); K-major ones may instead take a 2-CTA
  cluster whose multicast halves each CTA's loads of Y (:func:`tsjit.ops.realign.misaligned_choice`,
  ``explain`` says "misaligned rows").
* **Roles**: for ``M <= 64`` the program computes ``C^T = B^T A^T`` (swap-AB), so the few rows of
  A become the narrow wgmma N dimension; the output is then written through its transposed view.
* **Configuration**: :mod:`tsjit.ops.configs` (tile, ring depth, split-K, epilogue) per shape;
  ``matmul.explain(a, b, ...)`` prints it and why.
* **Fused epilogue** (:class:`tsjit.lang.epilogue.FusedEpilogue`): ``out = activation(alpha * a @ b
  + beta * out_old + bias) + residual``, then ``epilogue_fn(y, row, col)`` (a ``@tsjit.func``).
  ``bias`` of shape (N,) or (1, N) is per column, (M, 1) per row; ``residual`` is (M, N).
* **Streams**: it runs on ``stream`` (a handle or stream object), by default on torch's current
  stream when torch is loaded, else tsjit's current stream.
* **Host cost**: a call whose shapes, strides, dtypes, alignment and options were seen before is
  a dict lookup; a call whose data pointers were seen before reuses its packed launch (TMA
  descriptors included): one ``cuLaunchKernelEx``, called with no Python frame of its own, from C where
  :mod:`tsjit.runtime.native_launch` builds (:meth:`tsjit.runtime.launch.BoundLaunch.direct`); the plain
  ``matmul(a, b, out=c)`` of torch tensors looks its launch up by the three addresses and checks the
  tensors' metadata; the plain allocating ``matmul(a, b)`` looks a and b up by their addresses,
  allocates the output as the entry says and takes the launch packed for the block torch's caching
  allocator returned (a block not seen yet is packed by the general path).  Measured on the H200
  (BENCHMARKS.md, issue 15, i15h): 5.3 us for ``out=`` of which the driver is 3.0 and the 13 torch
  reads a hit must make (address, shape, strides, dtype of three tensors, a's device, the current
  stream) 1.4.

Errors: a bad argument raises :class:`~tsjit.errors.LaunchError` naming it (shape, dtype, device).
"""
from __future__ import annotations

import sys
import threading

import tsjit
from tsjit import env
from tsjit.errors import LaunchError, did_you_mean
from tsjit.ops import autotune
from tsjit.ops.matmul_checks import (INPUT_DTYPES, OUTPUT_DTYPES, check_out_is_not_an_input,  # noqa: F401
                                     check_epilogue_fn, coefficient, output_dtype)  # (*_DTYPES re-exported)
from tsjit.ops.matmul_plan import Plan
from tsjit.ops.operands import TORCH_TYPES, Operand, operand, scale_operand, shape_dtype, stream_handle
from tsjit.runtime import driver, streams
from tsjit.runtime.arrays import DeviceArray
from tsjit.runtime.launch import BoundLaunch

#: SMs :func:`explain` plans for when no GPU is present (an H200's 132) and ``sms`` is not given.
DEFAULT_SMS = 132


_PLANS: dict = {}
_PLANS_LOCK = threading.Lock()


def cache_statistics() -> dict:
    """``{"plans": ..., "launches_packed": ...}``: how many call signatures were planned and how many
    packed launches (TMA descriptors + parameter blocks) were built for new data pointers."""
    plans = list(_PLANS.values())
    return {"plans": len(plans), "launches_packed": sum(p.bindings_built for p in plans)}


def _signature(op: Operand | None):
    return None if op is None else op.signature


#: torch call key (metadata + addresses + stream) -> (the launch's direct driver call or None
#: (:meth:`BoundLaunch.direct`), the packed launch)
_FAST: dict = {}
#: the plain ``matmul(a, b, out=c)`` of torch tensors on the current stream: (addresses, stream, alpha, beta) ->
#: (the tensors' (shape, strides, dtype)s, direct call or None, packed launch): one entry per address tuple,
#: hashed on six numbers instead of the nested metadata (about 0.5 us less per call)
_PLAIN: dict = {}
#: the plain allocating ``matmul(a, b)`` of torch tensors on the current stream: (addresses of a and b, stream,
#: alpha) -> (a's and b's (shape, strides, dtype)s, torch.empty, the output's shape, dtype and device, {address of a
#: new output: (direct call or None, packed launch)}): torch's caching allocator hands the same few blocks back
FAST_ENTRIES = 1024
_ALLOCATING: dict = {}
#: the plain ``matmul(a, b, out=c)`` of tsjit DeviceArrays on tsjit's current stream: as :data:`_PLAIN`
_PLAIN_ARRAYS: dict = {}
_THREAD = streams.thread_state               # this thread's use_stream() stream (tsjit.runtime.streams)
_interpret_requested = env.interpret_requested  # TSJIT_INTERPRET set now: DeviceArrays may be host memory
#: output addresses an allocating entry keeps packed launches for (oldest dropped first)
OUTPUT_ADDRESSES = 8
_RAW_STREAM: list = []                 # [torch's _cuda_getCurrentRawStream or None], looked up once
_CODE_STATE = [env.code_state()]       # the code-affecting environment the launch caches were filled under
_code_state = env.code_state


def _forget_launches_of_another_environment() -> None:
    """Empty the caches of packed launches (the four above, the plans' bindings) when a code-affecting variable
    (``TSJIT_DEBUG``, ...: :func:`tsjit.env.code_state`) changed since they were filled."""
    state = env.code_state()
    if state != _CODE_STATE[0]:
        for cache in (_FAST, _PLAIN, _ALLOCATING, _PLAIN_ARRAYS, _PLANS):
            cache.clear()
        _CODE_STATE[0] = state


def _key(x):
    """The fast path's key part of an argument: a torch tensor's metadata and address, else itself."""
    if x is None or type(x) is float or type(x) is int:
        return x
    return (x.data_ptr(), x.shape, x.stride(), x.dtype)


def _current_stream(a) -> int:
    if not _RAW_STREAM:
        torch = sys.modules.get("torch")
        _RAW_STREAM.append(getattr(torch._C, "_cuda_getCurrentRawStream", None) if torch is not None else None)
    raw = _RAW_STREAM[0]
    return raw(a.get_device()) if raw is not None else stream_handle(None, a)


def _fast_call(a, b, bias, activation, residual, alpha, beta, out, out_dtype, scale_a, scale_b, stream, epilogue_fn,
               batched, allocating=False):
    """The hot path for torch tensors: one dict lookup of everything the launch depends on, then
    one ``cuLaunchKernel``; ``None`` on a miss (the caller takes the full path).  ``allocating``: a plain
    ``matmul(a, b)`` (a hit is entered for :func:`matmul`'s allocating lookup)."""
    s = _current_stream(a) if stream is None else stream if type(stream) is int else stream_handle(stream, a)
    if out is None:
        rank = 3 if batched else 2
        if beta != 0.0 or len(a.shape) != rank or len(b.shape) != rank:
            return None, out, None                # the full path explains the mistake
        M, N = a.shape[-2], b.shape[-1]
        shape = (a.shape[0], M, N) if batched else (M, N)
        dtype = _torch_dtype(out_dtype, batched)
        if dtype is None:
            dtype = a.dtype if a.element_size() == 2 else sys.modules["torch"].bfloat16
        out = sys.modules["torch"].empty(shape, dtype=dtype, device=a.device)
    key = (a.data_ptr(), a.shape, a.stride(), a.dtype, b.data_ptr(), b.shape, b.stride(), b.dtype, out.data_ptr(),
           out.shape, out.stride(), out.dtype, s, alpha, beta, batched)
    if bias is not None or residual is not None or activation is not None or out_dtype is not None or \
            epilogue_fn is not None or scale_a is not None or scale_b is not None:
        key += (None if bias is None else _key(bias), None if residual is None else _key(residual), activation,
                out_dtype, epilogue_fn, None if scale_a is None else _key(scale_a),
                None if scale_b is None else _key(scale_b))
    entry = _FAST.get(key)
    if entry is None:
        return None, out, key
    if entry[0] is None or entry[0]():
        entry[1](s)
    if allocating and stream is None:       # matmul(a, b) whose allocating entry lacks this output address
        _remember_allocating(a, b, out, s, alpha, entry)
    return out, out, key


def _torch_dtype(dtype, batched: bool):
    if dtype is None:
        return None
    dtype = output_dtype(dtype, "bmm" if batched else "matmul")     # a torch, numpy or tsjit dtype
    torch = sys.modules["torch"]
    return {"BFloat16": torch.bfloat16, "Float16": torch.float16, "Float32": torch.float32}.get(dtype.name)


def _is_fast(x) -> bool:
    return x is None or type(x) in TORCH_TYPES or type(x) is float or type(x) is int


def _remember_allocating(a, b, out, s, alpha, launch) -> None:
    """Enter the launch ``(direct, bound)`` of the plain allocating call ``matmul(a, b)`` that wrote the new
    ``out`` on stream ``s``, for :func:`matmul`'s allocating lookup."""
    key = (a.data_ptr(), b.data_ptr(), s, alpha)
    meta = (a.shape, a.stride(), a.dtype, b.shape, b.stride(), b.dtype)
    entry = _ALLOCATING.get(key)
    if entry is None or entry[0] != meta:
        if len(_ALLOCATING) >= FAST_ENTRIES:
            _ALLOCATING.pop(next(iter(_ALLOCATING)))
        entry = _ALLOCATING[key] = (meta, sys.modules["torch"].empty, tuple(out.shape), out.dtype, out.device, {})
    launches = entry[5]
    if len(launches) >= OUTPUT_ADDRESSES:
        launches.pop(next(iter(launches)), None)
    launches[out.data_ptr()] = launch


def _call(a, b, bias, activation, residual, alpha, beta, out, out_dtype, scale_a, scale_b, stream, epilogue_fn,
          batched: bool, plan_only: bool = False, sms: int | None = None, allocated: bool = False):
    """The general path of matmul / bmm / explain (``plan_only``); ``allocated``: ``out`` was allocated by
    matmul's allocating lookup (the call was ``matmul(a, b)``)."""
    fast_key = None
    plain = (bias is None and residual is None and activation is None and out_dtype is None
             and scale_a is None and scale_b is None and epilogue_fn is None and not batched)
    allocating = plain and (out is None or allocated) and beta == 0.0
    if (not plan_only and type(a) in TORCH_TYPES and type(b) in TORCH_TYPES and (out is None or type(out) in TORCH_TYPES)
            and (bias is None or _is_fast(bias)) and (residual is None or _is_fast(residual))
            and (scale_a is None or _is_fast(scale_a)) and (scale_b is None or _is_fast(scale_b))):
        done, out, fast_key = _fast_call(a, b, bias, activation, residual, alpha, beta, out, out_dtype, scale_a,
                                         scale_b, stream, epilogue_fn, batched, allocating)
        if done is not None:
            return done
    name = "bmm" if batched else "matmul"
    alpha, beta = coefficient(alpha, "alpha", name), coefficient(beta, "beta", name)
    check_epilogue_fn(epilogue_fn, name)
    ranks = (3,) if batched else (2,)
    A = operand(a, "a", ranks, plan_only, name)
    B = operand(b, "b", ranks, plan_only, name)
    O = None if out is None else operand(out, "out", ranks, plan_only, name)
    R = None if residual is None else operand(residual, "residual", ranks, plan_only, name)
    V = None if bias is None else operand(bias, "bias", (1, 2), plan_only, name)
    kind_a, SA, factor_a = scale_operand(scale_a, "scale_a", A.shape[1], "row", plan_only, name)
    kind_b, SB, factor_b = scale_operand(scale_b, "scale_b", B.shape[2], "col", plan_only, name)
    if O is not None and not plan_only:
        same = R is not None and (R.ptr, R.shape, R.strides) == (O.ptr, O.shape, O.strides)   # out=residual: fine
        check_out_is_not_an_input(name, O, ((A, "a"), (B, "b"), (V, "bias"), (SA, "scale_a"), (SB, "scale_b"),
                                            (None if same else R, "residual")))
    alpha = alpha * factor_a * factor_b
    out_dtype = output_dtype(out_dtype, name)
    key = (_signature(A), _signature(B), _signature(O), _signature(V), _signature(R), activation, alpha != 1.0,
           beta != 0.0, out_dtype, epilogue_fn, batched, kind_a, kind_b)
    def make(forced=None, sms=sms):
        return Plan(A, B, O, V, R, activation, alpha, beta, out_dtype, epilogue_fn, batched, sms, (kind_a, kind_b),
                     forced)
    if plan_only:   # explain: planned for `sms`, never cached (a real call plans for its device)
        plan = make()
        return (autotune.stored_winner(plan, make, _device_name(plan)) or plan) if env.autotune() and sms is None \
            else plan
    plan = _PLANS.get(key)
    new = plan is None
    if new:
        plan = make()
    if O is None:
        shape = (plan.batch, plan.M, plan.N) if batched else (plan.M, plan.N)
        out = _allocate(shape, plan.out_dtype, a if A.torch else None)
        O = operand(out, "out", ranks, op=name)
    s = _current_stream(a) if stream is None and A.torch else stream_handle(stream, None)
    if new:
        if env.autotune():
            stored = autotune.stored_winner(plan, make, _device_name(plan))
            if stored is not None:
                plan = stored
            elif beta == 0.0 and (R is None or R.ptr != O.ptr):
                plan = autotune.measured_winner(plan, make, (A, B, O, V, R, alpha, beta, s, SA, SB), s,
                                                _device_name(plan))
        with _PLANS_LOCK:
            if len(_PLANS) > 4096:
                _PLANS.clear()
            _PLANS[key] = plan
    bound = plan.run(A, B, O, V, R, alpha, beta, s, SA, SB)
    if fast_key is not None and bound is not None:
        if len(_FAST) >= FAST_ENTRIES:
            _FAST.pop(next(iter(_FAST)))
        direct = bound.direct(s) if type(bound) is BoundLaunch else None
        _FAST[fast_key] = (direct, bound)
        if plain:
            if len(_PLAIN) >= FAST_ENTRIES:
                _PLAIN.pop(next(iter(_PLAIN)))
            _PLAIN[(a.data_ptr(), b.data_ptr(), out.data_ptr(), s, alpha, beta)] = (
                (a.shape, a.stride(), a.dtype, b.shape, b.stride(), b.dtype, out.shape, out.stride(), out.dtype),
                direct, bound)
            if allocating and stream is None:
                _remember_allocating(a, b, out, s, alpha, (direct, bound))
    elif (plain and stream is None and bound is not None and type(a) is DeviceArray and type(b) is DeviceArray
          and type(out) is DeviceArray and not env.interpret()):
        if len(_PLAIN_ARRAYS) >= FAST_ENTRIES:
            _PLAIN_ARRAYS.pop(next(iter(_PLAIN_ARRAYS)), None)
        _PLAIN_ARRAYS[(a.data_ptr, b.data_ptr, out.data_ptr, s, alpha, beta)] = (
            (a.shape, a.strides, a.dtype, b.shape, b.strides, b.dtype, out.shape, out.strides, out.dtype),
            bound.direct(s) if type(bound) is BoundLaunch else None, bound)
    return out


def _device_name(plan: Plan) -> str:
    return f"{driver.device_properties().name.replace(' ', '_')}x{plan.problem.sms}"


def _allocate(shape, dtype, like):
    if like is not None:
        torch = sys.modules["torch"]
        return torch.empty(shape, dtype={"BFloat16": torch.bfloat16, "Float16": torch.float16,
                                         "Float32": torch.float32}[dtype.name], device=like.device)
    return tsjit.empty(shape, dtype)


def matmul(a, b, *, bias=None, activation=None, residual=None, alpha=1.0, beta=0.0, out=None, out_dtype=None,
           scale_a=None, scale_b=None, stream=None, epilogue_fn=None):
    """``activation(alpha * (a @ b) + beta * out + bias) + residual``, then ``epilogue_fn``, on the GPU.

    Args:
        a: (M, K) BFloat16 or Float16; b: (K, N), same dtype; M, N, K >= 1 (an empty product is a
            LaunchError).  GPU arrays: torch CUDA tensors, tsjit DeviceArrays, ``__cuda_array_interface__`` /
            DLPack objects (CPU tensors and numpy arrays are refused; :func:`explain` takes them).  Any
            strides: row-major and transposed (column-major) views whose base address and row stride are
            multiples of 16 bytes are read in place by TMA, any other layout (a strided slice such as
            ``x[:, ::2]``, rows of an odd byte length) is first copied into a padded buffer (``explain``
            says "staging").
            Or both fp8 (Float8E4M3 / Float8E5M2, any mix): then K contiguous in both (``a`` row-major, ``b =
            w.t()``) is read in place, any other layout is staged (module docstring); without scales they
            are 1.
        bias: (N,) or (1, N) per column, (M, 1) per row; BFloat16/Float16/Float32.
        activation: None, ``"relu"``, ``"gelu_tanh"`` or ``"silu"``.
        residual: (M, N), added after the activation.
        alpha, beta: real numbers (Python or numpy; not tensors: pass ``float(t)``); ``beta != 0`` needs ``out``
            (its previous contents are scaled and added).
        out: (M, N) output to write (any strides); else a new array (torch if ``a`` is torch).
        out_dtype: BFloat16 / Float16 / Float32 (tsjit, torch or numpy dtypes: ``np.float32``); default: a's dtype
            (BFloat16 for fp8 inputs).
        scale_a, scale_b: dequantization scales: Python numbers (folded into alpha, any dtype), or for fp8
            inputs Float32 GPU tensors of one element (per tensor), (M, 1) / (M,) (scale_a, per row of a),
            (1, N) / (N,) (scale_b, per column of b).
        stream: a stream handle or object; default torch's current stream (torch inputs) or tsjit's.
        epilogue_fn: a function ``(y, row, col) -> y`` applied last (global Int32 coordinates): a ``@tsjit.func``,
            a plain function or a lambda, compiled as kernel code (it must return a value).

    Returns:
        ``out`` (M, N).

    Raises:
        LaunchError: a bad argument, naming it (shape, dtype, device; an ``out`` that shares memory with an input
            or with itself; an ``epilogue_fn`` that does not take three arguments), or a launch failure.
        CompilationError: ``epilogue_fn`` does not compile.
    """
    if _code_state() != _CODE_STATE[0]:      # inlined: a frame less per call
        _forget_launches_of_another_environment()
    if (bias is None and residual is None and activation is None and out_dtype is None and scale_a is None
            and scale_b is None and epilogue_fn is None and stream is None):
        kind = type(a)                 # the plain call: one lookup keyed by the addresses, inlined
        if kind in TORCH_TYPES and type(b) is kind and _RAW_STREAM and _RAW_STREAM[0] is not None:
            if out is None:            # allocating: a and b checked, out made as the entry says (its metadata known)
                if beta == 0.0:
                    s = _RAW_STREAM[0](a.get_device())
                    entry = _ALLOCATING.get((a.data_ptr(), b.data_ptr(), s, alpha))
                    if entry is not None and entry[0] == (a.shape, a.stride(), a.dtype, b.shape, b.stride(), b.dtype):
                        out = entry[1](*entry[2], dtype=entry[3], device=entry[4])   # sizes as arguments: cheaper
                        launch = entry[5].get(out.data_ptr())
                        if launch is None:       # a block of the allocator not seen yet: pack its launch
                            return _call(a, b, None, None, None, alpha, beta, out, None, None, None, None, None,
                                         False, allocated=True)
                        if launch[0] is None or launch[0]():
                            launch[1](s)
                        return out
            elif type(out) is kind:
                s = _RAW_STREAM[0](a.get_device())
                entry = _PLAIN.get((a.data_ptr(), b.data_ptr(), out.data_ptr(), s, alpha, beta))
                if entry is not None and entry[0] == (a.shape, a.stride(), a.dtype, b.shape, b.stride(), b.dtype,
                                                      out.shape, out.stride(), out.dtype):
                    if entry[1] is None or entry[1]():   # the direct driver call; else (or on its error) the full one
                        entry[2](s)
                    return out
        elif kind is DeviceArray and type(b) is kind and type(out) is kind:   # the same for tsjit arrays
            s = _THREAD.stream
            s = 0 if s is None else s.value
            entry = _PLAIN_ARRAYS.get((a.data_ptr, b.data_ptr, out.data_ptr, s, alpha, beta))
            if entry is not None and entry[0] == (a.shape, a.strides, a.dtype, b.shape, b.strides, b.dtype, out.shape,
                                                  out.strides, out.dtype) and not _interpret_requested():
                if entry[1] is None or entry[1]():
                    entry[2](s)
                return out
    return _call(a, b, bias, activation, residual, alpha, beta, out, out_dtype, scale_a, scale_b, stream,
                 epilogue_fn, False)


def bmm(a, b, *, bias=None, activation=None, residual=None, alpha=1.0, beta=0.0, out=None, out_dtype=None,
        stream=None, epilogue_fn=None):
    """Batched :func:`matmul`: ``a`` (L, M, K), ``b`` (L, K, N) -> (L, M, N); one launch for all L
    products (the batch is the work tiles' third coordinate).  ``bias`` is shared by the batch;
    ``residual`` / ``out`` are (L, M, N).  Arguments and errors as :func:`matmul`."""
    _forget_launches_of_another_environment()
    return _call(a, b, bias, activation, residual, alpha, beta, out, out_dtype, None, None, stream, epilogue_fn,
                 True)


def explain(a, b, *, verbose: bool = False, dtype=None, sms: int | None = None, **kwargs) -> str:
    """Return the text (``print(tsjit.ops.matmul.explain(a, b))``; ``verbose=True`` also prints
    it) of the configuration :func:`matmul` uses for these
    arguments and why (same keyword arguments as :func:`matmul`, plus ``batched=True`` for
    :func:`bmm`).  Nothing is launched and no GPU is needed: the plan needs only shapes, strides,
    dtypes and alignment, and the device's SM count.

    Args:
        a, b (and ``out``, ``bias``, ``residual``): GPU arrays as for :func:`matmul`, or
            ``tsjit.spec(shape, dtype, strides=..., align=...)`` specs, or host numpy arrays or CPU
            torch tensors (they stand for device arrays of their shape, strides and dtype, 16-byte
            aligned), or shape tuples with ``dtype`` (``explain((256, 512), (512, 1024),
            dtype=tsjit.BFloat16)``).
        dtype: the dtype of shape-tuple arguments (a tsjit, torch or numpy dtype).
        sms: SMs to plan for, an int >= 1; default the current GPU's, or :data:`DEFAULT_SMS` (132, an H200)
            when no GPU is present (the text then says so).

    Raises:
        LaunchError: as :func:`matmul`, naming the argument.
    """
    unknown = sorted(set(kwargs) - set(_EXPLAIN_KEYWORDS))
    if unknown:   # a misspelled keyword would plan another problem, silently
        raise LaunchError(f"tsjit.ops.matmul.explain: unexpected keyword argument {unknown[0]!r}; it takes "
                          f"matmul's keywords ({', '.join(_EXPLAIN_KEYWORDS)}), verbose, dtype and sms."
                          + did_you_mean(unknown[0], _EXPLAIN_KEYWORDS + ("verbose", "dtype", "sms")))
    if sms is not None and (isinstance(sms, bool) or not isinstance(sms, int) or sms < 1):
        raise LaunchError(f"tsjit.ops.matmul.explain: argument 'sms' must be an int >= 1 (the SMs to plan for), got "
                          f"{sms!r}")
    shapes = {}
    for name, value in (("a", a), ("b", b), ("out", kwargs.get("out")), ("bias", kwargs.get("bias")),
                        ("residual", kwargs.get("residual"))):
        if isinstance(value, tuple) and all(isinstance(n, int) for n in value):
            if dtype is None:
                raise LaunchError(f"tsjit.ops.matmul.explain: argument '{name}' is the shape {value}; pass its "
                                  f"dtype too (dtype=tsjit.BFloat16), or a tsjit.spec(shape, dtype)")
            value = tsjit.spec(value, shape_dtype(dtype, "bmm" if kwargs.get("batched") else "matmul"))
        shapes[name] = value
    note = ""
    if sms is None and not driver.gpu_available():
        sms = DEFAULT_SMS
        note = f"\nsms: {DEFAULT_SMS} assumed (no GPU here: tsjit.ops.matmul.DEFAULT_SMS, an H200); pass sms=N for another device"
    elif sms is not None:
        note = f"\nsms: {sms} (given)"
    text = _call(shapes["a"], shapes["b"], shapes["bias"], kwargs.get("activation"), shapes["residual"],
                 kwargs.get("alpha", 1.0), kwargs.get("beta", 0.0), shapes["out"], kwargs.get("out_dtype"),
                 kwargs.get("scale_a"), kwargs.get("scale_b"), None, kwargs.get("epilogue_fn"),
                 kwargs.get("batched", False), plan_only=True, sms=sms).explain() + note
    if verbose:
        print(text)
    return text


#: the keywords of :func:`matmul` that :func:`explain` reads (``stream`` is accepted and plays no part), and
#: ``batched`` (:func:`bmm`)
_EXPLAIN_KEYWORDS = ("bias", "activation", "residual", "alpha", "beta", "out", "out_dtype", "scale_a", "scale_b",
                     "stream", "epilogue_fn", "batched")


def _explain_bmm(a, b, **kwargs) -> str:
    """:func:`explain` for :func:`bmm`: ``explain(a, b, batched=True, ...)``.

    Raises:
        LaunchError: as :func:`explain`; also for ``scale_a`` / ``scale_b``, which :func:`bmm` does not take.
    """
    for name in ("scale_a", "scale_b"):
        if kwargs.get(name) is not None:
            raise LaunchError(f"tsjit.ops.bmm.explain: unexpected keyword argument '{name}': bmm takes no fp8 scale "
                              f"tensors (fold per-tensor scales into alpha, or call tsjit.ops.matmul per batch)")
    return explain(a, b, batched=True, **kwargs)


matmul.explain = explain
bmm.explain = _explain_bmm
