"""Register fragments: compile-time-sized arrays of per-thread values.

A :class:`Fragment` is what a warpgroup MMA reads and writes: each thread of the warpgroup
holds ``len(fragment)`` registers (128 Float32 accumulators per thread for ``m64n256``), and
which matrix element a register holds is fixed by the instruction (the *layout*).  A
fragment lives entirely in registers because it is indexed **only by compile-time
integers**: ``acc[i]`` with a Python ``int`` names one SSA value; a run-time index raises
:class:`CompilationError` (unroll the loop with ``tsjit.range_constexpr``).

Fragments are **values**, like Python ints and tuples (``Fragment`` is a ``tuple``
subclass):

* ``acc[i] = v`` in kernel code rebinds the name ``acc`` to a new fragment with element
  ``i`` replaced (``v`` is converted to the fragment's dtype); a ``@tsjit.func`` that changes
  a fragment must return it.
* At control-flow joins the frontend merges fragments element by element, so a fragment
  carried across a run-time loop becomes one ``phi`` per element, never an ``alloca``
  (:mod:`tsjit.frontend.ssa`).
* ``acc.fill(v)``, ``acc.map(fn)`` and :meth:`Fragment.with_item` return new fragments.
* The fragment ``tsjit.wgmma.mma_async`` returns is *in flight* until a ``wgmma.wait_group``
  follows it in the kernel's code: indexing it (``acc[0]``), ``map``, ``to`` or ``acc[i] = v``
  before that raises :class:`CompilationError` (PTX ISA §9.7.15.7: accessing the accumulators
  before the wait is undefined).  Passing it on to the next ``mma_async`` or to
  ``wgmma.fence_operand`` is allowed.

The accumulator layout of ``wgmma.mma_async.m64nNk*`` with Float32 accumulators (PTX ISA
§9.7.15.5.1.1.1, "Matrix Fragments for wgmma.mma_async.m64nNk16", Figure 149; the same
layout for k8 and k32), for thread ``tid`` of the warpgroup (``warp = tid // 32``,
``lane = tid % 32``) and register ``i`` (0 <= i < N/2)::

    row = 16 * warp + lane // 4 + 8 * ((i % 4) // 2)
    col = 8 * (i // 4) + 2 * (lane % 4) + i % 2

Verified against numpy on the H200 for N = 256 (``shared/reference/wgmma_sw128.md`` §6).
:meth:`Fragment.accumulator_coords` computes it.
"""
from __future__ import annotations

from tsjit.errors import CompilationError
from tsjit.lang.builtins import thread_idx
from tsjit.lang import dtypes as dt
from tsjit.lang.dtypes import DType
from tsjit.lang.values import Value, as_value, cast_to, integer_operand

WARPGROUP_THREADS = 128


class Fragment(tuple):
    """A compile-time-sized array of run-time values of one dtype (registers of one thread).

    Args:
        values: the elements, each a :class:`Value` (Python numbers are accepted when
            ``dtype`` is given and become constants).
        dtype: the element dtype (default: the dtype of the first element).

    Attributes:
        dtype: the element dtype.

    Raises:
        CompilationError: no elements, or elements of different dtypes.
    """

    __tsjit_value_semantics__ = True  # `frag[i] = v` in kernel code rebinds the name

    def __new__(cls, values, dtype: DType | None = None):
        items = list(values)
        if not items:
            raise CompilationError("a Fragment needs at least one element")
        if dtype is None:
            first = items[0]
            if not isinstance(first, Value):
                raise CompilationError("Fragment(values): give dtype= when the elements are Python numbers")
            dtype = first.dtype
        converted = []
        for index, item in enumerate(items):
            if isinstance(item, Value):
                if item.dtype is not dtype:
                    raise CompilationError(
                        f"Fragment element {index} is {item.dtype.name} but the fragment holds {dtype.name}; "
                        f"convert it with tsjit.{dtype.name}(value)")
                converted.append(item)
            else:
                converted.append(cast_to(as_value(item, dtype), dtype))
        return super().__new__(cls, converted)

    # -- construction ----------------------------------------------------------------------
    @classmethod
    def full(cls, size: int, value, dtype: DType = dt.Float32) -> "Fragment":
        """A fragment of ``size`` elements all equal to ``value`` converted to ``dtype``.

        ``tsjit.Fragment.full(128, 0.0)`` is the zeroed accumulator of an m64n256 Float32 MMA.
        """
        if not isinstance(size, int) or isinstance(size, bool) or size < 1:
            raise CompilationError(f"Fragment size must be a positive compile-time int, got {size!r}")
        if not isinstance(dtype, DType):
            raise CompilationError(f"Fragment dtype must be a tsjit dtype, got {dtype!r}")
        element = cast_to(as_value(value, dtype), dtype)
        return cls([element] * size, dtype)

    @classmethod
    def zeros(cls, size: int, dtype: DType = dt.Float32) -> "Fragment":
        """``Fragment.full(size, 0, dtype)``."""
        return cls.full(size, 0, dtype)

    # -- element access --------------------------------------------------------------------
    @property
    def dtype(self) -> DType:
        return tuple.__getitem__(self, 0).dtype

    def _index(self, key) -> int:
        if isinstance(key, Value):
            raise CompilationError(
                f"a Fragment is indexed only by compile-time integers (its {len(self)} elements are "
                f"separate registers), but this index is a run-time {key.dtype.name}; unroll the loop "
                f"with `for i in tsjit.range_constexpr({len(self)}):`")
        if isinstance(key, bool) or not isinstance(key, int):
            raise CompilationError(f"a Fragment index must be a compile-time int, got {type(key).__name__}")
        if not -len(self) <= key < len(self):
            raise CompilationError(f"Fragment index {key} is out of range for {len(self)} elements")
        return key % len(self)

    def _check_ready(self, what: str) -> None:
        """Raise if the fragment holds the accumulators of an MMA still in flight (``in_flight``:
        set by :func:`tsjit.wgmma.mma_async`, cleared by the ``wait_group`` after it)."""
        in_flight = self.__dict__.get("in_flight")
        if in_flight is not None:
            in_flight.check(what)

    def __getitem__(self, key):
        self._check_ready("reads")
        if isinstance(key, slice):
            return Fragment(tuple.__getitem__(self, key), self.dtype)
        return tuple.__getitem__(self, self._index(key))

    def with_item(self, key, value) -> "Fragment":
        """A copy with element ``key`` (compile-time int) replaced by ``value`` converted to
        :attr:`dtype`; what ``frag[key] = value`` means in kernel code."""
        self._check_ready("overwrites")
        index = self._index(key)
        items = list(self)
        items[index] = cast_to(as_value(value, self.dtype), self.dtype)
        return Fragment(items, self.dtype)

    set = with_item

    def __setitem__(self, key, value):
        raise CompilationError(
            "a Fragment is a value: `frag[i] = v` rebinds `frag` only in kernel code; in compile-time "
            "Python write `frag = frag.with_item(i, v)`")

    # -- whole-fragment operations ---------------------------------------------------------
    def fill(self, value) -> "Fragment":
        """A fragment of the same size and dtype with every element ``value``."""
        return Fragment.full(len(self), value, self.dtype)

    def map(self, fn) -> "Fragment":
        """``Fragment(fn(v) for v in self)``: ``fn`` is a Python callable, a kernel ``lambda``
        or a ``@tsjit.func``, applied at compile time to each element Value.  The result's
        dtype is what ``fn`` returns (all elements must agree)."""
        self._check_ready("reads")
        results = [fn(v) for v in self]
        first = next((r for r in results if isinstance(r, Value)), None)
        return Fragment(results, first.dtype if first is not None else self.dtype)

    def to(self, dtype: DType) -> "Fragment":
        """Every element converted to ``dtype`` (see :func:`tsjit.lang.values.cast_to`)."""
        self._check_ready("reads")
        return Fragment([cast_to(v, dtype) for v in self], dtype)

    def __add__(self, other):
        raise CompilationError("`+` on a Fragment is ambiguous (tuple concatenation or elementwise); use "
                               "frag.map(lambda v: ...) for elementwise arithmetic")

    __radd__ = __mul__ = __rmul__ = __add__

    def __repr__(self) -> str:
        return f"Fragment[{self.dtype.name} x {len(self)}]"

    # -- wgmma accumulator layout ----------------------------------------------------------
    def accumulator_coords(self, i: int, tid=None) -> tuple[Value, Value]:
        """(row, col) of the accumulator element that register ``i`` of thread ``tid`` holds in
        the warpgroup's ``64 x N`` tile of a ``wgmma.mma_async.m64nNk*`` Float32 accumulator
        (``N = 2 * len(self)``); see the module docstring.

        Args:
            i: register index, a compile-time int in ``0 .. len(self) - 1``.
            tid: the thread's index (Int32 Value; only ``tid % 128`` matters); default
                ``tsjit.thread_idx().x``.
        """
        return accumulator_coords(self._index(i), tid)


def warpgroup_thread_index(tid=None):
    """``tid % 128``: an Int32 Value (default ``tid``: ``tsjit.thread_idx().x``), or a Python int
    for a Python int ``tid`` (host-side layout computations and tests)."""
    if isinstance(tid, int) and not isinstance(tid, bool):
        return tid % WARPGROUP_THREADS
    if tid is None:
        tid = thread_idx().x
    tid = integer_operand(tid, dt.Int32, "tid")
    return tid & (WARPGROUP_THREADS - 1)


def accumulator_coords(i: int, tid=None) -> tuple[Value, Value]:
    """(row, col) in the warpgroup's ``64 x N`` tile of accumulator register ``i`` of thread
    ``tid`` for ``wgmma.mma_async.m64nNk*`` with Float32 accumulators (PTX ISA
    §9.7.15.5.1.1.1, Figure 149)::

        row = 16 * (tid % 128 // 32) + (tid % 32) // 4 + 8 * ((i % 4) // 2)
        col = 8 * (i // 4) + 2 * (tid % 4) + i % 2

    Args:
        i: compile-time register index (>= 0).
        tid: thread index (Int32 Value), default ``tsjit.thread_idx().x``; a Python int gives
            Python ints (no kernel needed).

    Returns:
        Two Int32 Values (two ints for an int ``tid``).
    """
    if isinstance(i, bool) or not isinstance(i, int) or i < 0:
        raise CompilationError(f"accumulator register index must be a compile-time int >= 0, got {i!r}")
    local = warpgroup_thread_index(tid)
    warp = local >> 5
    lane = local & 31
    row = (warp << 4) + (lane >> 2) + 8 * ((i % 4) // 2)
    col = ((lane & 3) << 1) + (8 * (i // 4) + i % 2)
    return row, col


__all__ = ["Fragment", "accumulator_coords", "warpgroup_thread_index", "WARPGROUP_THREADS"]
