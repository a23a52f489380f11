"""Pointers, tensors and shared memory in device code.

* :class:`Pointer` — a typed address in global (1), shared (3) or shared::cluster (7)
  memory; ``p + i`` advances by elements, ``p[i]`` loads, ``p[i] = v`` stores.
* :class:`Tensor` — a pointer with a shape and element strides.  Kernel array arguments
  arrive as tensors whose shape/strides are run-time ``Int32`` values (``Int64`` for
  arrays of 2**31 elements or more) except strides equal to 1, which the specialization
  key makes compile-time.  ``t[i, j]`` loads, ``t[i, j] = v`` stores, ``t.shape[k]``,
  ``t.stride(k)``; ``t.load_vector(index, n)`` / ``t.store_vector(index, values)`` move
  ``n`` consecutive elements of the innermost, unit-stride dimension in one access of
  up to 16 bytes.
* :func:`shared_array` — a typed view into the kernel's single dynamic shared-memory
  block (aligned to 1024 bytes); the kernel's dynamic shared-memory size grows by it.
* :func:`assume_aligned` — a pointer whose alignment the caller promises.  A pointer's known
  alignment is otherwise proven: from the array's base (array arguments 16 bytes, shared arrays
  their ``align``) and the index arithmetic (``address_of(buf, s, lane * 4)`` of Float32 keeps
  16 bytes; an index loaded from memory keeps only the element size).

No bounds checks are emitted: like CUDA C++, an out-of-range index is undefined
behaviour (mask with an ``if``).

Stores convert the value to the element type, as Triton's ``tl.store`` does, with one exception:

* a float into a narrower float element rounds to nearest even (Float32 into Float16 / BFloat16
  memory, as ``tsjit.Float16(v)``; beyond the range it becomes ``±inf``), silently: the value
  keeps its magnitude and loses precision only, which is what a half-precision output wants
  (every example kernel that writes Float16 / BFloat16 relies on it);
* an integer or Boolean into any integer element converts silently (a wider integer keeps its
  low bits, two's complement, as C and Triton); an integer into float memory rounds to nearest;
* a float into integer memory is refused (Triton would truncate toward zero): it drops the
  fraction, which is a wrong answer more often than a wanted one.  Convert explicitly with
  ``tsjit.Int32(v)`` (toward zero, saturating), or ``tsjit.Int32(tsjit.math.floor(v))``.
"""
from __future__ import annotations

import math

from llvmlite import ir

from tsjit.backend import emit
from tsjit.errors import CompilationError
from tsjit.lang import dtypes as dt
from tsjit.lang.dtypes import DType, TensorAnnotation
from tsjit.lang.values import Value, as_value, cast_to, constant, is_constant, require_integer

_SPACE_NAMES = {0: "generic", 1: "global", 3: "shared", 7: "shared::cluster"}


def _index(x, index_dtype: DType) -> Value:
    require_integer(x, "an index")
    if isinstance(x, Value):
        if x.dtype.is_bool or x.dtype.bits < index_dtype.bits:
            return cast_to(x, index_dtype)
        return x
    if not isinstance(x, int) or isinstance(x, bool):
        raise CompilationError(f"an index must be an integer, got {type(x).__name__}")
    return constant(x, index_dtype if -2**31 <= x < 2**31 or index_dtype.bits == 64 else dt.Int64)


class Pointer:
    """A typed device pointer.

    Attributes:
        ir: the llvmlite ``ptr addrspace(N)`` value.
        dtype: element dtype.
        address_space: 1 global, 3 shared (CTA), 7 shared::cluster.
        alignment: known byte alignment of the address (at least the element size).
    """

    __slots__ = ("ir", "dtype", "address_space", "alignment")

    def __init__(self, ir_value, dtype: DType, address_space: int, alignment: int | None = None):
        self.ir = ir_value
        self.dtype = dtype
        self.address_space = address_space
        self.alignment = alignment or dtype.itemsize

    def __repr__(self) -> str:
        return f"Pointer[{self.dtype.name}, {_SPACE_NAMES.get(self.address_space, self.address_space)}]"

    def __bool__(self):
        raise CompilationError("a device pointer cannot be used as a Python bool")

    def offset(self, elements) -> "Pointer":
        """This pointer advanced by ``elements`` (Value or int) elements."""
        if isinstance(elements, int) and elements == 0:
            return self
        idx = _index(elements, dt.Int64 if isinstance(elements, Value) and elements.dtype.bits == 64 else dt.Int32)
        b = emit.current().builder
        elem_ty = emit.llvm_type(self.dtype, memory=True)
        new = b.gep(self.ir, [idx.ir], source_etype=elem_ty, inbounds=True)
        # The offset's provable byte alignment: the power of two dividing every value it can take
        # (a run-time index such as ``j * 128 + lane * 4`` keeps a 16-byte step of Float32).
        modulus, residue = _congruence(elements)
        step_bytes = math.gcd(modulus, residue) * self.dtype.itemsize
        step = step_bytes & -step_bytes or self.alignment
        return Pointer(new, self.dtype, self.address_space, max(min(self.alignment, step), self.dtype.itemsize))

    def __add__(self, elements):
        return self.offset(elements)

    __radd__ = __add__

    def __sub__(self, elements):
        return self.offset(-elements)

    def cast(self, dtype: DType) -> "Pointer":
        """The same address viewed as ``dtype`` elements."""
        return Pointer(self.ir, dtype, self.address_space, self.alignment)

    def load(self, *, volatile: bool = False) -> Value:
        """Load one element.  ``volatile``: a load the compiler neither removes, merges nor hoists out of a
        loop (a flag another thread sets), emitted as a relaxed (``monotonic``) atomic load."""
        b = emit.current().builder
        ty = emit.llvm_type(self.dtype, memory=True)
        if volatile:      # llvmlite cannot print LLVM's `load volatile`; a monotonic atomic load is never elided
            inst = b.load_atomic(self.ir, "monotonic", self.alignment or self.dtype.itemsize, typ=ty)
        else:
            inst = b.load(self.ir, typ=ty, align=self.alignment)
        if self.dtype.is_bool:
            return Value(b.icmp_unsigned("!=", inst, ir.Constant(ty, 0)), dt.Boolean)
        return Value(inst, self.dtype)

    def store(self, value, *, volatile: bool = False) -> None:
        """Store ``value`` (converted to the element dtype by the module's store rules: a float rounds
        into a narrower float, a float into an integer element is refused) at this address.
        ``volatile``: a store the compiler keeps (a relaxed, ``monotonic``, atomic store)."""
        v = convert_for_store(value, self.dtype)
        b = emit.current().builder
        raw = b.zext(v.ir, emit.I8) if self.dtype.is_bool else v.ir
        if volatile:      # llvmlite cannot print LLVM's `store volatile`; its store_atomic wants typed pointers
            b._insert(ir.instructions.StoreAtomicInstr(b.block, raw, self.ir, "monotonic",
                                                       self.alignment or self.dtype.itemsize))
        else:
            b.store(raw, self.ir, align=self.alignment)

    def __getitem__(self, index) -> Value:
        return self.offset(index).load()

    def __iter__(self):  # without it Python would iterate through __getitem__ forever
        raise CompilationError("a pointer cannot be iterated at compile time; index it in a loop over range(n)")

    def __setitem__(self, index, value) -> None:
        self.offset(index).store(value)

    def load_vector(self, n: int) -> tuple[Value, ...]:
        """Load ``n`` consecutive elements in one access (``n * itemsize`` <= 16 bytes, power of two).

        Raises:
            CompilationError: the access would be wider than 16 bytes or the pointer is not known
                to be aligned to the access width.
        """
        vec_ty, width = self._vector_type(n)
        b = emit.current().builder
        raw = b.load(self.ir, typ=vec_ty, align=width)
        return tuple(Value(b.extract_element(raw, ir.Constant(emit.I32, i)), self.dtype) for i in range(n))

    def store_vector(self, values) -> None:
        """Store the sequence ``values`` (length ``n``) to ``n`` consecutive elements in one access."""
        values = tuple(values)
        vec_ty, width = self._vector_type(len(values))
        b = emit.current().builder
        vec = ir.Constant(vec_ty, ir.Undefined)
        for i, v in enumerate(values):
            vec = b.insert_element(vec, convert_for_store(v, self.dtype).ir, ir.Constant(emit.I32, i))
        b.store(vec, self.ir, align=width)

    def _vector_type(self, n: int):
        if not isinstance(n, int) or n < 1 or n & (n - 1):
            raise CompilationError(f"vector length must be a compile-time power of two, got {n!r}")
        if self.dtype.is_bool:
            raise CompilationError("vector access to Boolean memory is not supported")
        width = n * self.dtype.itemsize
        if width > 16:
            raise CompilationError(f"a vector access moves at most 16 bytes; {n} x {self.dtype.name} is {width}")
        if self.alignment < width:
            raise CompilationError(
                f"a {width}-byte vector access needs a {width}-byte aligned address, but this pointer is only "
                f"known to be {self.alignment}-byte aligned (array arguments are 16-byte aligned when their "
                f"base address is; index with a multiple of {n}, or, if you know the address is aligned, "
                f"promise it: tsjit.assume_aligned(pointer, {width}))")
        return ir.VectorType(emit.llvm_type(self.dtype, memory=True), n), width


def convert_for_store(value, dtype: DType) -> Value:
    """``value`` (Value or Python scalar) as a ``dtype`` Value for storing into ``dtype`` memory
    (stores and atomics).  Integers and floats widen or narrow implicitly (a float rounds to nearest
    into a narrower float); a float never becomes an integer implicitly (the module's store rules).

    Raises:
        CompilationError: a float value or a non-integral float literal into integer memory, or an
            object that is no scalar.
    """
    if isinstance(value, Value):
        if value.dtype is not dtype:
            if value.dtype.is_float and not dtype.is_float:
                raise CompilationError(
                    f"storing a {value.dtype.name} into {dtype.name} memory would truncate it toward zero; "
                    f"convert explicitly with tsjit.{dtype.name}(value) (a float into a narrower float "
                    f"element, e.g. Float32 into Float16, rounds to nearest implicitly; into an integer "
                    f"element it must be explicit)")
            return cast_to(value, dtype)
        return value
    if is_constant(value):
        return constant(value, dtype)
    raise CompilationError(f"cannot store a {type(value).__name__} object into {dtype.name} memory")


class Tensor:
    """A strided view of memory: :class:`Pointer` + shape + element strides.

    As a kernel-parameter annotation, ``x: tsjit.Tensor[tsjit.Float32, 2]`` (dtype and/or rank, ``None``
    for any) makes the launcher reject other arrays with a :class:`~tsjit.errors.LaunchError`.

    Attributes:
        ptr: the base :class:`Pointer`.
        shape: tuple of extents (Int32/Int64 Values or compile-time ints).
        strides: tuple of element strides (Values or compile-time ints; unit strides are ints).
        row_alignment: known byte alignment of the first element of every innermost row.
        dtype: element dtype.
        rank: number of dimensions.
    """

    def __class_getitem__(cls, params):
        params = params if isinstance(params, tuple) else (params,)
        dtype = next((p for p in params if isinstance(p, DType)), None)
        rank = next((p for p in params if isinstance(p, int) and not isinstance(p, bool)), None)
        return TensorAnnotation(dtype, rank)

    def __init__(self, ptr: Pointer, shape: tuple, strides: tuple, index_dtype: DType = dt.Int32,
                 row_alignment: int | None = None):
        if len(shape) != len(strides):
            raise CompilationError("internal: tensor shape and strides differ in rank")
        self.ptr = ptr
        # Known byte alignment of the start of every innermost row (vector accesses rely on it).
        self.row_alignment = row_alignment if row_alignment is not None else ptr.alignment
        self.shape = tuple(shape)
        self.strides = tuple(strides)
        self.index_dtype = index_dtype

    def __repr__(self) -> str:
        return f"Tensor[{self.dtype.name}, rank {self.rank}]"

    # Attributes of a TMA descriptor argument; reading one from a plain array gets the fix named.
    _TENSORMAP_ONLY = frozenset({"box_shape", "box_bytes", "tile_shape", "smem_bytes", "swizzle",
                                 "element_strides"})

    def __getattr__(self, name: str):
        if name not in Tensor._TENSORMAP_ONLY:
            raise AttributeError(f"'Tensor' object has no attribute '{name}'")
        hint = (f"'{name}' belongs to a TMA descriptor, and this is a plain device array ({self!r}): "
                f"pass tsjit.TensorMap(array, box) for this argument instead of the array itself")
        exc = AttributeError(f"'Tensor' object has no attribute '{name}'; {hint}")
        exc.hint = hint   # the frontend appends it to its located error
        raise exc

    @property
    def dtype(self) -> DType:
        return self.ptr.dtype

    @property
    def rank(self) -> int:
        return len(self.shape)

    def stride(self, dim: int):
        """Element stride of dimension ``dim`` (compile-time int when it is known to be 1)."""
        return self.strides[self._dim(dim)]

    def size(self, dim: int):
        return self.shape[self._dim(dim)]

    def numel(self):
        """Total number of elements (product of the shape)."""
        total = 1
        for extent in self.shape:
            total = total * extent
        return total

    def _dim(self, dim) -> int:
        if not isinstance(dim, int):
            raise CompilationError("a tensor dimension must be a compile-time integer")
        if not -self.rank <= dim < self.rank:
            raise CompilationError(f"dimension {dim} is out of range for a rank-{self.rank} tensor")
        return dim % self.rank

    def _offset(self, index):
        if not isinstance(index, tuple):
            index = (index,)
        if getattr(index, "_fields", None) == ("x", "y", "z") and self.rank != 3:   # a Dim3 (builtins)
            raise CompilationError(
                f"a rank-{self.rank} tensor indexed with a whole (x, y, z) triple (tsjit.thread_idx(), "
                f"block_idx(), block_dim() or grid_dim()); index with its components, e.g. "
                f"tsjit.thread_idx().x")
        if len(index) != self.rank:
            raise CompilationError(
                f"a rank-{self.rank} tensor needs {self.rank} indices (one per dimension), got {len(index)}"
                + ("; an element store needs them all" if len(index) < self.rank else
                   f"; drop {len(index) - self.rank}, or pass an array of rank {len(index)}"))
        offset = 0
        for i, stride in zip(index, self.strides):
            if isinstance(i, slice):
                raise CompilationError("slicing a tensor is not supported; index it element by element")
            term = _index(i, self.index_dtype) if isinstance(i, Value) else i
            term = term if (isinstance(stride, int) and stride == 1) else term * stride
            offset = term if (isinstance(offset, int) and offset == 0) else offset + term
        return offset

    def element_pointer(self, index) -> Pointer:
        """Address of element ``index`` (tuple of one index per dimension)."""
        return self.ptr.offset(self._offset(index))

    def __getitem__(self, index):
        """``t[i, j]`` loads an element; fewer indices than the rank give a sub-tensor view
        (``tiles[stage]`` of a ``(stages, m, n)`` array is the ``(m, n)`` tile)."""
        if not isinstance(index, tuple):
            index = (index,)
        if len(index) < self.rank:
            return self.view(index)
        return self.element_pointer(index).load()

    def __setitem__(self, index, value) -> None:
        self.element_pointer(index).store(value)

    def __iter__(self):  # without it Python would iterate through __getitem__ forever
        raise CompilationError("a device array cannot be iterated at compile time (its extent is known only at "
                               "run time); loop over its indices: `for i in range(x.shape[0])`")

    def view(self, leading) -> "Tensor":
        """The sub-tensor at leading indices ``leading`` (a tuple shorter than the rank).

        Its known alignment is the base alignment reduced by the byte strides of the indexed
        dimensions (compile-time strides keep TMA/vector alignment: a ``(stages, 64, 64)`` Float32
        array aligned to 1024 gives 1024-aligned tiles)."""
        leading = tuple(leading)
        offset = 0
        align = self.ptr.alignment
        for i, stride in zip(leading, self.strides):
            if isinstance(stride, int):
                stride_bytes = stride * self.dtype.itemsize
                if not (isinstance(i, int) and i == 0):
                    align = min(align, stride_bytes & -stride_bytes if stride_bytes else align)
            else:
                align = self.dtype.itemsize
            term = i if (isinstance(stride, int) and stride == 1) else i * stride
            offset = term if (isinstance(offset, int) and offset == 0) else offset + term
        p = self.ptr.offset(offset)
        p = Pointer(p.ir, self.dtype, p.address_space, max(self.dtype.itemsize, align, p.alignment))
        rest = len(leading)
        return Tensor(p, self.shape[rest:], self.strides[rest:], self.index_dtype,
                      row_alignment=min(self.row_alignment, p.alignment))

    def reshape(self, shape) -> "Tensor":
        """The same elements with a new compile-time row-major ``shape`` (this tensor must be row-major
        contiguous with compile-time extents, like a :func:`shared_array`)."""
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        if not all(isinstance(e, int) for e in self.shape + self.strides) or self.strides != _row_major(self.shape):
            raise CompilationError("reshape needs a row-major tensor with compile-time shape (e.g. a shared_array)")
        total = 1
        for e in self.shape:
            total *= e
        new_total = 1
        for e in shape:
            new_total *= e
        if new_total != total or not all(isinstance(e, int) and e > 0 for e in shape):
            raise CompilationError(f"cannot reshape {self.shape} into {shape}")
        return Tensor(self.ptr, shape, _row_major(shape), self.index_dtype, row_alignment=self.row_alignment)

    def reinterpret(self, dtype: DType) -> "Tensor":
        """The same bytes viewed as ``dtype`` elements (like ``numpy.ndarray.view``): the innermost
        dimension must have unit stride; its extent scales by the size ratio (it must divide evenly
        when growing the element size — the caller guarantees it for run-time extents)."""
        if not (isinstance(self.strides[-1], int) and self.strides[-1] == 1):
            raise CompilationError("reinterpret needs a unit-stride innermost dimension")
        old, new = self.dtype.itemsize, dtype.itemsize
        if old == new:
            scale_shape, scale_stride = (lambda x: x), (lambda x: x)
        elif new > old:
            if new % old:
                raise CompilationError(f"cannot view {self.dtype.name} as {dtype.name}")
            ratio = new // old
            scale_shape = lambda x: x // ratio  # noqa: E731
            scale_stride = lambda x: x // ratio  # noqa: E731
        else:
            ratio = old // new
            scale_shape = lambda x: x * ratio  # noqa: E731
            scale_stride = lambda x: x * ratio  # noqa: E731
        shape = self.shape[:-1] + (scale_shape(self.shape[-1]),)
        strides = tuple(scale_stride(s) for s in self.strides[:-1]) + (1,)
        return Tensor(self.ptr.cast(dtype), shape, strides, self.index_dtype, row_alignment=self.row_alignment)

    def load_vector(self, index, n: int) -> tuple[Value, ...]:
        """Load elements ``index .. index + n - 1`` along the innermost dimension in one access.

        The innermost stride must be 1 and ``index[-1]`` a multiple of ``n`` (the base is known
        16-byte aligned from the specialization key).  An innermost index that is provably not
        a multiple of ``n`` (a constant such as ``1``, or ``tx * 4 + 1``) raises
        :class:`CompilationError`; for any other run-time index the caller guarantees it.
        """
        return self._vector_pointer(index, n).load_vector(n)

    def store_vector(self, index, values) -> None:
        """Store ``values`` to elements ``index .. index + len(values) - 1`` of the innermost dimension."""
        values = tuple(values)
        self._vector_pointer(index, len(values)).store_vector(values)

    def _vector_pointer(self, index, n: int) -> Pointer:
        if not (isinstance(self.strides[-1], int) and self.strides[-1] == 1):
            raise CompilationError("vector access needs a unit-stride innermost dimension; this argument's "
                                   "innermost stride is not 1 in this call")
        p = self.element_pointer(index)
        align = min(self.row_alignment, 16)
        modulus, residue = _congruence(index[-1] if isinstance(index, tuple) else index)
        if modulus % n == 0 and residue % n:  # provably not a multiple of n
            misalign = (residue % n) * self.dtype.itemsize
            align = min(align, misalign & -misalign)
        return Pointer(p.ir, self.dtype, p.address_space, align)


#: how many instructions deep :func:`_congruence` reads (bounds its work on shared subexpressions)
CONGRUENCE_DEPTH = 12


def _congruence(x, depth: int = CONGRUENCE_DEPTH) -> tuple[int, int]:
    """``(modulus, residue)`` such that the integer ``x`` (Value or int) provably satisfies
    ``x % modulus == residue % modulus``, read from the instructions that computed it (constants,
    ``+``, ``-``, ``*``, ``<<`` by a constant, integer casts).  Modulus ``0`` means ``x == residue``;
    ``(1, 0)`` means nothing is known.  Wrap-around keeps every power-of-two modulus valid (only
    power-of-two moduli are used: alignments)."""
    x = x.ir if isinstance(x, Value) else x
    if isinstance(x, int):
        return 0, x
    if isinstance(x, ir.Constant) and isinstance(x.constant, int):
        return 0, x.constant
    op = getattr(x, "opname", None)
    if depth == 0 or op not in ("sext", "zext", "trunc", "add", "sub", "mul", "shl"):
        return 1, 0
    if op in ("sext", "zext", "trunc"):
        return _congruence(x.operands[0], depth - 1)
    (m1, r1), (m2, r2) = (_congruence(o, depth - 1) for o in x.operands)
    if op == "add":
        return math.gcd(m1, m2), r1 + r2
    if op == "sub":
        return math.gcd(m1, m2), r1 - r2
    if op == "shl":
        if m2 or not 0 <= r2 < 64:
            return 1, 0
        m2, r2 = 0, 1 << r2  # a shift by a constant multiplies by a power of two
    return math.gcd(m1 * m2, m1 * r2, m2 * r1), r1 * r2


def _check_compile_time_shape(dtype: DType, shape) -> None:
    """A CompilationError when ``shape`` (or one of its entries) is a run-time device value."""
    entries = [("shape", shape)] if isinstance(shape, Value) else \
        [(f"shape[{i}]", s) for i, s in enumerate(shape)] if isinstance(shape, (tuple, list)) else []
    for field, entry in entries:
        if isinstance(entry, Value):
            raise CompilationError(
                f"shared_array({getattr(dtype, 'name', dtype)}, ...): '{field}' is a run-time {entry.dtype.name} value "
                f"(a kernel argument passed at launch, or computed on the device), but a shared array's shape must be "
                f"known at compile time: declare that kernel parameter as `name: tsjit.Constexpr[int]` (its value "
                f"is then part of the compiled kernel) or pass an int literal / a compile-time constant")


def _element_dtype(value, where: str) -> DType:
    """The tsjit dtype of an array's element type ``value`` (:func:`tsjit.lang.dtypes.lookup`: a tsjit dtype,
    a numpy dtype or a dtype name); a CompilationError naming ``where`` and the value otherwise."""
    found = dt.lookup(value)
    if found is None:
        shown = f"{value!r}" if isinstance(value, str) else f"{value!r} (of type {type(value).__name__})"
        raise CompilationError(
            f"{where}: the element type {shown} is not a dtype: pass a tsjit dtype (e.g. tsjit.Float32, "
            f"tsjit.BFloat16), a numpy dtype (np.float32, np.dtype('float16')) or a dtype name ('float32')")
    return found


def shared_array(dtype: DType, shape, *, align: int = 128) -> Tensor:
    """A row-major array of ``dtype`` with compile-time ``shape`` in dynamic shared memory.

    Args:
        dtype: element type: a tsjit dtype (``tsjit.Float32``), a numpy dtype (``np.float32``,
            ``np.dtype('float16')``) or a dtype name (``"float32"``, ``"BFloat16"``).
        shape: int or tuple of compile-time ints.
        align: byte alignment of the array's start (power of two, <= 1024; TMA destinations need
            128, 128B-swizzled tiles 1024 — PTX ISA §5.5.6).

    Returns:
        A :class:`Tensor` in address space 3.  The kernel's dynamic shared-memory size includes it.

    Raises:
        CompilationError: ``dtype`` names no dtype, the shape is not compile-time positive ints, the alignment exceeds
            1024, or the array exceeds what one CTA of the target may use
            (``Target.smem_bytes_per_cta``, 227 KiB on sm_90a).  Arrays that exceed it only
            together are reported when the kernel is complete (still at compile time).
    """
    dtype = _element_dtype(dtype, "shared_array")
    if isinstance(shape, int):
        shape = (shape,)
    _check_compile_time_shape(dtype, shape)
    if not all(isinstance(s, int) and s > 0 for s in shape):
        raise CompilationError(f"shared_array needs a compile-time shape of positive ints, got {shape!r}")
    if align > 1024:
        raise CompilationError("shared_array alignment cannot exceed the block's 1024-byte alignment")
    km = emit.current()
    nbytes = dtype.itemsize
    for s in shape:
        nbytes *= s
    limit = km.target.smem_bytes_per_cta
    if nbytes > limit:
        raise CompilationError(
            f"shared_array({dtype.name}, {_shape_text(shape)}) needs {nbytes} bytes of shared memory, but one CTA "
            f"on {km.target.name} has at most {limit}: use smaller tiles or fewer stages")
    before = km.smem_bytes
    offset = km.reserve_shared(nbytes, max(align, dtype.itemsize))
    if km.smem_bytes > limit and before <= limit:
        # Together with earlier arrays: reported when the kernel is complete (a TaskManager's M1
        # check, which names the resources, runs first); see tsjit.frontend.kernel_entry.
        km.smem_overflow = (f"shared_array({dtype.name}, {_shape_text(shape)}) of {nbytes} bytes brought it "
                            f"from {before} to {km.smem_bytes} bytes")
    return Tensor(shared_pointer(offset, dtype, align), tuple(shape), _row_major(shape))


def _shape_text(shape) -> str:
    return "x".join(str(extent) for extent in shape)


def shared_pointer(byte_offset: int, dtype: DType, alignment: int | None = None) -> Pointer:
    """A pointer to ``byte_offset`` inside the dynamic shared-memory block (no reservation)."""
    km = emit.current()
    base = km.shared_base()
    b = km.builder
    p = b.gep(base, [ir.Constant(emit.I32, 0), ir.Constant(emit.I32, byte_offset)],
              source_etype=ir.ArrayType(emit.I8, 0), inbounds=True)
    align = alignment or (byte_offset & -byte_offset if byte_offset else 1024)
    return Pointer(p, dtype, emit.SHARED, max(dtype.itemsize, min(align, 1024)))


def _row_major(shape) -> tuple[int, ...]:
    strides, acc = [], 1
    for s in reversed(shape):
        strides.append(acc)
        acc *= s
    return tuple(reversed(strides))


def dynamic_shared(dtype: DType) -> Pointer:
    """A pointer to the start of the dynamic shared-memory block, as ``dtype`` elements.

    Its size is what the launch passes as ``smem_bytes`` (plus anything :func:`shared_array`
    reserved, which starts at offset 0 — do not mix both styles).
    """
    return shared_pointer(0, dtype, 1024)


#: the largest alignment :func:`assume_aligned` takes: the dynamic shared-memory block's alignment
MAX_ASSUMED_ALIGNMENT = 1024


def assume_aligned(pointer: Pointer, nbytes: int) -> Pointer:
    """``pointer`` with a byte alignment of ``nbytes`` that the caller guarantees (as CUDA C++'s
    ``__builtin_assume_aligned``): what a 16-byte ``cp_async`` or vector access needs when the
    compiler cannot prove it (a run-time index that is a multiple of 4 Float32, a row of a
    run-time stride).  No instruction is emitted: later accesses through the result use it.

    Args:
        pointer: a :class:`Pointer` in any memory (``address_of(t, i, j)``, ``t.ptr``, ``p.offset(k)``).
        nbytes: a compile-time power of two, 1 .. 1024; an alignment already known to be larger is kept.

    Returns:
        A :class:`Pointer` to the same address, of the same dtype and memory.

    Raises:
        CompilationError: ``pointer`` is a tensor or an element value, not a pointer (pass
            ``address_of(t, index)``), or ``nbytes`` is not a compile-time power of two up to 1024.

    A wrong promise is undefined behaviour: the GPU faults with "misaligned address"; the CPU
    interpreter reports misaligned loads, stores (a vector access: its whole width) and ``cp.async``
    addresses (shared destination and global source), with the line.
    """
    if isinstance(pointer, Tensor):
        raise CompilationError(f"tsjit.assume_aligned takes a pointer, got a tensor {pointer!r}; pass the address "
                               f"of the element: tsjit.assume_aligned(tsjit.address_of(t, index), {nbytes!r})")
    if isinstance(pointer, Value):
        raise CompilationError(f"tsjit.assume_aligned takes a pointer, got a {pointer.dtype.name} value (an "
                               f"element, already loaded); pass tsjit.address_of(t, index) instead of t[index]")
    if not isinstance(pointer, Pointer):
        raise CompilationError(f"tsjit.assume_aligned takes a pointer, got {type(pointer).__name__}")
    if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 1 or nbytes & (nbytes - 1) \
            or nbytes > MAX_ASSUMED_ALIGNMENT:
        got = f"a run-time {nbytes.dtype.name}" if isinstance(nbytes, Value) else repr(nbytes)
        raise CompilationError(f"tsjit.assume_aligned: the alignment must be a compile-time power of two "
                               f"1 .. {MAX_ASSUMED_ALIGNMENT} bytes, got {got}")
    return Pointer(pointer.ir, pointer.dtype, pointer.address_space, max(pointer.alignment, nbytes))


def as_index(x, dtype: DType = dt.Int32) -> Value:
    """``x`` as an index Value (Python ints become constants)."""
    return _index(as_value(x) if not isinstance(x, Value) else x, dtype)
