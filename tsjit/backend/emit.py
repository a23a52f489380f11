"""The emission context: one LLVM module and the builder of the function being compiled.

The frontend creates a :class:`KernelModule` per compilation and pushes it with
:func:`activate`; everything that builds IR (``Value`` operators, builtins, the TS
lowering) reaches it through :func:`current`.  This is what lets trace-time Python
(schedules, resource constructors) build IR with ordinary operators.

Helpers here are the only places that create llvmlite types for dtypes, declare
intrinsics (after the per-target gate in :mod:`tsjit.backend.intrinsics`) and write
kernel annotations.
"""
from __future__ import annotations

import struct
import threading
from contextlib import contextmanager

from llvmlite import ir

from tsjit.abi import LaunchRequirements
from tsjit.backend import intrinsics as intrinsic_table
from tsjit.backend.targets import DATA_LAYOUT, TRIPLE, Target
from tsjit.errors import CompilationError

GLOBAL = 1
SHARED = 3
SHARED_CLUSTER = 7

I1 = ir.IntType(1)
I8 = ir.IntType(8)
I16 = ir.IntType(16)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
VOID = ir.VoidType()

_state = threading.local()


class BFloatType(ir.Type):
    """LLVM's ``bfloat`` (llvmlite 0.50 has no class for it).  Constants are written in
    LLVM's ``0xR`` hex form from the round-to-nearest-even bfloat16 bit pattern."""

    null = "0xR0000"
    intrinsic_name = "bf16"

    def _to_string(self):
        return "bfloat"

    def __eq__(self, other):
        return isinstance(other, BFloatType)

    def __hash__(self):
        return hash("bfloat")

    def format_constant(self, value):
        bits = struct.unpack("<I", struct.pack("<f", float(value)))[0]
        if (bits & 0x7F800000) == 0x7F800000 and bits & 0x7FFFFF:
            rounded = 0x7FC0
        else:
            rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF
        return f"0xR{rounded:04X}"


BFLOAT = BFloatType()


def llvm_type(dtype, *, memory: bool = False) -> ir.Type:
    """The LLVM type of a tsjit dtype; ``memory=True`` stores Boolean as i8."""
    if dtype.is_bool:
        return I8 if memory else I1
    if dtype.is_float:
        if dtype.bits == 8:  # storage-only FP8 (Float8E4M3 / Float8E5M2): raw bytes
            return I8
        if dtype.bits == 16:
            return BFLOAT if dtype.name == "BFloat16" else ir.HalfType()
        return ir.FloatType() if dtype.bits == 32 else ir.DoubleType()
    return ir.IntType(dtype.bits)


def pointer_type(address_space: int = 0) -> ir.PointerType:
    """An opaque LLVM pointer in ``address_space`` (1 global, 3 shared, 7 shared::cluster)."""
    return ir.PointerType(addrspace=address_space)


class KernelModule:
    """One LLVM module under construction for one target.

    Attributes:
        module: the llvmlite module.
        target: the :class:`Target` being compiled for.
        builder: the IRBuilder of the current function (``None`` between functions).
        function: the ``ir.Function`` of the kernel.
        smem_bytes: dynamic shared memory the kernel needs, in bytes (grown by
            :meth:`reserve_shared`).
        launch_requirements: the launch contract code generators declare while emitting
            (:class:`~tsjit.abi.LaunchRequirements`; replace it with ``.merged(...)``).
        loop_unroll_hints: ``(back-edge branch, count)`` of each run-time loop with an unroll hint.
        grid_constant_params: indices of the ``__grid_constant__`` (by-value TMA descriptor) parameters.
    """

    def __init__(self, name: str, target: Target):
        self.module = ir.Module(name=name)
        self.module.triple = TRIPLE
        self.module.data_layout = DATA_LAYOUT
        self.target = target
        self.builder: ir.IRBuilder | None = None
        self.function: ir.Function | None = None
        self.smem_bytes = 0
        self.smem_align = 16
        self._smem_global = None
        self._strings: dict[bytes, ir.GlobalVariable] = {}
        self._counter = 0
        self.annotations: list = []
        self.launch_requirements = LaunchRequirements()
        self.loop_unroll_hints: list = []
        self.grid_constant_params: list = []
        self.completion_checks: list = []   # callables run when the kernel body is complete
        self.statement = None   # (parsed source, ast node) of the kernel statement being compiled

    def on_complete(self, check) -> None:
        """Run ``check()`` when the kernel's body has been emitted without error (before the
        kernel-wide checks); it may warn or raise (e.g. a TaskManager that never ran)."""
        self.completion_checks.append(check)

    def statement_location(self):
        """The SourceLocation of the kernel statement being compiled (set by the frontend), or None."""
        if self.statement is None:
            return None
        parsed, node = self.statement
        return parsed.location(node)

    # -- names ---------------------------------------------------------------------------------
    def unique(self, base: str) -> str:
        self._counter += 1
        return f"{base}.{self._counter}"

    # -- intrinsics ----------------------------------------------------------------------------
    def intrinsic(self, name: str, args, *, name_hint: str = ""):
        """Call NVVM/LLVM intrinsic ``name`` with llvmlite values ``args``.

        Raises:
            CompilationError: the intrinsic is not available on this target.
        """
        intrinsic_table.check_supported(name, self.target)
        entry = intrinsic_table.lookup(name)
        entry.check_immediates(list(args), self.target)
        entry.check_constant_widths(list(args))
        fn = intrinsic_table.declare(self.module, name)
        return self.builder.call(fn, list(args), name=name_hint)

    def inline_asm(self, ret_type: ir.Type, asm: str, constraints: str, args, *,
                   side_effect: bool = True):
        """Emit inline PTX (used where LLVM has no intrinsic, e.g. ``wgmma.mma_async``)."""
        fnty = ir.FunctionType(ret_type, [a.type for a in args])
        return self.builder.asm(fnty, asm, constraints, list(args), side_effect)

    # -- shared memory -------------------------------------------------------------------------
    def shared_base(self):
        """The ``addrspace(3)`` base of the one dynamic shared-memory block (aligned to 1024 B).

        All shared memory lives in this block (DESIGN.md: a static ``.shared`` variable next to
        it makes nvJitLink 13.0 misalign it).
        """
        if self._smem_global is None:
            gv = ir.GlobalVariable(self.module, ir.ArrayType(I8, 0), "tsjit_smem", addrspace=SHARED)
            gv.linkage = "external"
            gv.align = 1024
            gv.type = pointer_type(SHARED)  # opaque, as LLVM 22 prints it (llvmlite types it otherwise)
            self._smem_global = gv
        return self._smem_global

    def reserve_shared(self, nbytes: int, align: int = 16) -> int:
        """Reserve ``nbytes`` of dynamic shared memory aligned to ``align``; returns the offset."""
        if align & (align - 1):
            raise CompilationError(f"shared-memory alignment must be a power of two, got {align}")
        offset = (self.smem_bytes + align - 1) // align * align
        self.smem_bytes = offset + nbytes
        self.smem_align = max(self.smem_align, align)
        return offset

    # -- constant strings (device_print) -------------------------------------------------------
    def global_string(self, data: bytes) -> ir.GlobalVariable:
        gv = self._strings.get(data)
        if gv is None:
            arr = ir.ArrayType(I8, len(data))
            gv = ir.GlobalVariable(self.module, arr, self.unique("str"), addrspace=0)
            gv.global_constant = True
            gv.linkage = "internal"
            gv.initializer = ir.Constant(arr, bytearray(data))
            gv.type = pointer_type(0)
            self._strings[data] = gv
        return gv

    # -- kernel annotations --------------------------------------------------------------------
    def annotate(self, key: str, value: int) -> None:
        """Add a ``!nvvm.annotations`` entry for the kernel (``maxntidx``, ``minctasm``, ...)."""
        self.module.add_named_metadata(
            "nvvm.annotations", [self.function, ir.MetaDataString(self.module, key), ir.Constant(I32, value)])

    def ir_text(self) -> str:
        return str(self.module)


def current() -> KernelModule:
    """The active :class:`KernelModule`.

    Raises:
        CompilationError: no kernel is being compiled (a device value was used outside
            ``@tsjit.kernel`` code).
    """
    stack = getattr(_state, "stack", None)
    if not stack:
        raise CompilationError("device values can only be used while a tsjit kernel is being compiled: this "
                               "tsjit call (thread_idx(), shared_array(), a device array's element, ...) ran in "
                               "plain Python; make it in a @tsjit.kernel function's body or in code that body "
                               "calls (Task Scheduling resources are built inside the kernel)")
    return stack[-1]


def active() -> bool:
    return bool(getattr(_state, "stack", None))


@contextmanager
def activate(kernel_module: KernelModule):
    """Make ``kernel_module`` the target of IR emission inside the ``with`` block."""
    stack = getattr(_state, "stack", None)
    if stack is None:
        stack = _state.stack = []
    stack.append(kernel_module)
    try:
        yield kernel_module
    finally:
        stack.pop()
