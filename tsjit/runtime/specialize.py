"""From actual kernel arguments to specializations and packed parameters.

:func:`specialize_one` runs on every signature miss: it maps each argument to a hashable spec
(:mod:`tsjit.abi`) and the ctypes values the driver copies, packed as the spec's
``parameters()`` say.  It does no
hashing of source and no IR work; the spec tuple is the in-memory cache key.

The disk key's parts that depend on the kernel are computed here too: :func:`kernel_identity`
(module, name, file and source digest of the kernel) and :func:`disk_spec_key` (constexpr values
by digest).  Everything else the kernel reaches is recorded by the frontend while it compiles
(:mod:`tsjit.frontend.dependencies`), stored in the cache entry and re-checked on a disk hit.
"""
from __future__ import annotations

import hashlib
import inspect
import os
import types

import numpy as np

from tsjit import abi
from tsjit.backend import assemble
from tsjit.errors import LaunchError, hide_from_pytest
from tsjit.frontend.dependencies import UndigestableValue, value_digest
from tsjit.frontend.source import source_text
from tsjit.lang import dtypes as dt
from tsjit.lang.constexpr import is_constexpr_annotation
from tsjit.lang.dtypes import TensorAnnotation
from tsjit.runtime import driver
from tsjit.runtime.arrays import ArraySpec, DeviceArray, describe_array_argument
from tsjit.runtime.cache import KernelCache

__tracebackhide__ = hide_from_pytest  # pytest shows a TsjitError without tsjit's frames

_INDEX_LIMIT = 2 ** 31


def _tensor_spec(dtype, shape, strides, ptr_align: int) -> abi.TensorSpec:
    span = 1
    for extent, stride in zip(shape, strides):
        if extent > 0:
            span += (extent - 1) * abs(stride)
    itemsize = dtype.itemsize
    return abi.TensorSpec(
        dtype=dtype, rank=len(shape), aligned16=ptr_align >= 16,
        unit_strides=tuple(s == 1 for s in strides),
        rows_aligned16=all((s * itemsize) % 16 == 0 for s in strides[:-1]),
        index64=span >= _INDEX_LIMIT or any(e >= _INDEX_LIMIT for e in shape))


def _alignment(ptr: int) -> int:
    return 256 if ptr == 0 else min(256, ptr & -ptr)


def _scalar_dtype(value, annotation):
    if isinstance(annotation, dt.DType):
        return annotation
    if isinstance(value, (bool, np.bool_)):
        return dt.Boolean
    if isinstance(value, (int, np.integer)) and not isinstance(value, np.integer):
        v = int(value)
        if -2**31 <= v < 2**31:
            return dt.Int32
        if -2**63 <= v < 2**63:
            return dt.Int64
        return dt.Uint64
    if isinstance(value, np.generic):
        return dt.from_numpy(value.dtype)
    if isinstance(value, float):
        return dt.Float32
    return None


def specialize_one(name: str, value, annotation, *, for_compile: bool = False, kernel_name: str = "kernel"):
    spec, values = _specialize_one(name, value, annotation, for_compile, kernel_name)
    if isinstance(annotation, TensorAnnotation):
        if not isinstance(spec, abi.TensorSpec):
            raise LaunchError(f"argument '{name}' must be an array ({annotation!r}); got {type(value).__name__}")
        problem = annotation.check(name, spec.dtype, spec.rank)
        if problem:
            raise LaunchError(problem)
    return spec, values


def _specialize_one(name: str, value, annotation, for_compile: bool, kernel_name: str):
    """(spec, ctypes values) for one argument.

    ``for_compile=True`` accepts host numpy arrays and :class:`ArraySpec` as stand-ins for device arrays
    (no values are produced then).

    Raises:
        LaunchError: the argument cannot be passed (names it, says what was expected).
    """
    if is_constexpr_annotation(annotation):
        if hasattr(annotation, "check"):  # tsjit.Constexpr[T]: the value is a T
            annotation.check(name, value)
        if isinstance(value, (np.number, np.bool_)):  # np.int64(32) from a shape: the kernel sees the int 32
            value = value.item()
        return abi.ConstSpec(value), []  # its digest is checked with the disk key (disk_spec_key)
    if type(value) is DeviceArray:
        spec = _tensor_spec(value.dtype, value.shape, value.strides, _alignment(value.data_ptr))
        return spec, ([] if for_compile else spec.pack(value.data_ptr, value.shape, value.strides))
    tmap = getattr(value, "__tsjit_tensormap__", None)
    if tmap is not None:
        return value.spec(), ([] if for_compile else [value.parameter()])
    if isinstance(value, abi.TensorMapSpec):
        if not for_compile:
            raise LaunchError(f"argument '{name}' is a tsjit.tensormap_spec (a stand-in for compiling); pass a "
                              f"tsjit.TensorMap")
        return value, []
    if isinstance(value, ArraySpec):
        if not for_compile:
            raise LaunchError(f"argument '{name}' is a tsjit.spec (a stand-in for compiling); pass a device array")
        return _tensor_spec(value.dtype, value.shape, value.strides, value.align), []
    dtype = _scalar_dtype(value, annotation)
    if dtype is not None and not isinstance(value, np.ndarray):
        if isinstance(value, float) and dtype.is_int:
            raise LaunchError(f"argument '{name}' is annotated {dtype.name} but got the float {value!r}")
        spec = abi.ScalarSpec(dtype)
        return spec, ([] if for_compile else spec.pack(value, name))
    if isinstance(annotation, dt.DType):
        raise LaunchError(f"argument '{name}' is annotated {annotation.name} but got {type(value).__name__}")
    arg = describe_array_argument(value, name)
    if arg is None:
        raise LaunchError(f"argument '{name}': cannot pass a {type(value).__name__} object to a kernel; expected "
                          f"a device array (tsjit.to_device, torch/cupy CUDA tensor), a Python/numpy scalar, "
                          f"or a tsjit.Constexpr parameter (for tsjit.compile also a numpy array or a tsjit.spec)")
    if arg.dtype is None:
        given = getattr(value, "dtype", None) or (value.get("typestr") if isinstance(value, dict) else None)
        names = ", ".join(d.name for d in dt.ALL_DTYPES)
        raise LaunchError(f"argument '{name}' has the element type {given}, which tsjit does not support; "
                          f"supported: {names}")
    if arg.device_kind == "host":
        if for_compile:
            return _tensor_spec(arg.dtype, arg.shape, arg.strides, 16), []
        hint = "" if driver.gpu_available() else f"; {driver.no_gpu_hint(kernel_name)}"
        raise LaunchError(f"argument '{name}' is a host numpy array; kernels need device memory: pass "
                          f"tsjit.to_device({name}) (or a torch/cupy CUDA tensor){hint}")
    spec = _tensor_spec(arg.dtype, arg.shape, arg.strides, _alignment(arg.data_ptr))
    return spec, ([] if for_compile else spec.pack(arg.data_ptr, arg.shape, arg.strides))


# -- disk key parts ------------------------------------------------------------------------------
_TSJIT_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_version_digest: str | None = None


def tsjit_version_digest() -> str:
    """SHA-256 over tsjit's own source files (any change to the compiler invalidates the cache).

    A fresh process stats the files instead of reading them: the digest is memoized in the cache
    directory under the files' (path, size, mtime) signature and recomputed when that changes.
    """
    global _version_digest
    if _version_digest is None:
        files = []
        for root, dirs, names in os.walk(_TSJIT_ROOT):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            files.extend(os.path.join(root, f) for f in sorted(names) if f.endswith(".py"))
        signature = hashlib.sha256()
        for path in files:
            info = os.stat(path)
            signature.update(f"{os.path.relpath(path, _TSJIT_ROOT)}|{info.st_size}|{info.st_mtime_ns}\0".encode())
        cache = KernelCache()
        memo = cache.read_memo("source")
        if memo is not None and memo.get("signature") == signature.hexdigest() and \
                isinstance(memo.get("digest"), str):
            _version_digest = memo["digest"]
        else:
            h = hashlib.sha256()
            for path in files:
                h.update(os.path.relpath(path, _TSJIT_ROOT).encode())
                with open(path, "rb") as fh:
                    h.update(fh.read())
            _version_digest = h.hexdigest()
            cache.write_memo("source", {"signature": signature.hexdigest(), "digest": _version_digest})
    return _version_digest


_ptxas_memo_done: list = []   # ["adopted"] or ["written"]: this process has used the ptxas memo


def assembler_key(search: bool = True) -> str | None:
    """:func:`tsjit.backend.assemble.assembler_version` for the disk key, without searching for ptxas
    when the cache directory remembers it: the memo ``ptxas`` holds the path and version found last
    time with its :func:`~tsjit.backend.assemble.ptxas_fingerprint`, and is adopted only when the
    fingerprint is unchanged (same file, same search inputs), so a hit in a fresh process pays no
    cuda.pathfinder import, search or ``ptxas --version`` (50-250 ms).  A process that searched
    writes the memo once.  ``search=False``: ``None`` where a search would be needed (see
    :func:`tsjit.backend.assemble.assembler_version`)."""
    cache = None
    if not _ptxas_memo_done and assemble.found_ptxas() is None:
        cache = KernelCache()
        memo = cache.read_memo("ptxas")
        if memo is not None and isinstance(memo.get("path"), str) and isinstance(memo.get("version"), str) \
                and memo.get("fingerprint") == assemble.ptxas_fingerprint(memo["path"]):
            assemble.adopt_ptxas(memo["path"], memo["version"])
            _ptxas_memo_done.append("adopted")
    version = assemble.assembler_version(search=search)
    if not _ptxas_memo_done:
        found = assemble.found_ptxas()
        if found is not None:
            (cache or KernelCache()).write_memo("ptxas", {"path": found[0], "version": found[1],
                                                          "fingerprint": assemble.ptxas_fingerprint(found[0])})
            _ptxas_memo_done.append("written")
    return version


def kernel_identity(fn) -> str:
    """What names a kernel in the disk key: module, qualified name, absolute source file and the
    SHA-256 of its source text.  Two ``__main__`` scripts differ in their file, so their kernels
    never share an entry."""
    filename = inspect.getsourcefile(fn) or inspect.getfile(fn)
    text = source_text(fn)
    digest = hashlib.sha256(text.encode()).hexdigest() if text is not None else "<no source>"
    return f"{fn.__module__}|{fn.__qualname__}|{os.path.abspath(filename)}|{digest}"


def disk_spec_key(names, specs) -> str:
    """The specializations as stable text for the disk key: constexpr values by their digest
    (:func:`~tsjit.frontend.dependencies.value_digest`: a callable by its source and what it reaches,
    not by its name).

    Raises:
        LaunchError: a constexpr value has no stable digest (names the argument, says what to pass).
    """
    parts = []
    for name, spec in zip(names, specs):
        if isinstance(spec, abi.ConstSpec):
            try:
                parts.append(f"C:{value_digest(spec.value)}")
            except UndigestableValue as exc:
                raise LaunchError(f"argument '{name}' is tsjit.Constexpr but {exc}: tsjit cannot key the kernel "
                                  f"cache by it; pass an int, float, str, tuple, numpy scalar, dtype, a function "
                                  f"or an object whose attributes are such values, or give its class a "
                                  f"__tsjit_key__() method") from None
        else:
            parts.append(repr(spec.key()))
    return "|".join(parts)


class _Identity:
    """A hashable stand-in for an object, equal only to itself (it keeps the object alive)."""

    __slots__ = ("obj",)

    def __init__(self, obj):
        self.obj = obj

    def __hash__(self) -> int:
        return id(self.obj)

    def __eq__(self, other) -> bool:
        return isinstance(other, _Identity) and other.obj is self.obj


_PLAIN_CONSTANTS = (bool, int, float, complex, str, bytes, type(None))


def _memory_token(value):
    kind = type(value)
    if kind in _PLAIN_CONSTANTS:
        return kind, value
    if kind is tuple or kind is list:
        return kind, tuple(_memory_token(v) for v in value)
    if isinstance(value, dt.DType):
        return dt.DType, value.name
    if isinstance(value, np.generic):
        return kind, value.tobytes()
    if isinstance(value, types.MethodType):  # a new bound-method object on every attribute access
        return types.MethodType, _Identity(value.__self__), _Identity(value.__func__)
    return _Identity(value)


def memory_spec_key(specs) -> tuple:
    """The in-memory cache key of ``specs``: cheap (no source hashing); a constexpr object other than a
    plain constant is keyed by identity, so two different callables never share a compiled kernel."""
    return tuple(("C", _memory_token(s.value)) if isinstance(s, abi.ConstSpec) else s.key() for s in specs)
