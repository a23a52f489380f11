"""Lowering a kernel for the interpreter: the compiler's own frontend and TS lowering, with notes taken.

:func:`lower_for_interpreter` runs :func:`tsjit.frontend.kernel_entry.compile_to_llvm` exactly as a
GPU compile does (const_expr arms, range_constexpr unrolling, label folding, TaskManager
verification: all the compiler's), and keeps what the LLVM text loses:

* the ``llvmlite.ir`` function itself (the interpreter translates its instructions, no re-parse);
* for every instruction, the kernel statement being compiled when it was emitted (the frontend's
  ``KernelModule.statement``): its ``file:line`` names the source line in every report;
* every shared-memory reservation (offset, bytes, the line that made it) so a shared address can
  be named ("shared array of file.py:42, byte 96"), and each TS pipeline's barrier block
  (resource, full/empty, stage) from the lowering's storages.

The notes are taken by a subclass of :class:`~tsjit.backend.emit.KernelModule` that is put in place
of the class for the duration of one compile (under a lock) and by a recording ``_insert`` on its
IR builder; nothing changes in the emitted code.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field

from tsjit.backend import emit
from tsjit.frontend import kernel_entry
from tsjit.frontend.kernel_entry import LoweredKernel
from tsjit.ts import lower_pipeline

__all__ = ["InterpretProgram", "lower_for_interpreter", "SmemRegion"]

_LOCK = threading.Lock()


@dataclass
class SmemRegion:
    """One shared-memory reservation: ``[offset, offset + nbytes)``, named by the line that made it."""

    offset: int
    nbytes: int
    what: str


@dataclass
class InterpretProgram:
    """A kernel lowered for the interpreter.

    Attributes:
        lowered: the :class:`LoweredKernel` (LLVM text, launch requirements, parameter layout...).
        function: the kernel's ``llvmlite.ir.Function``.
        module: its ``llvmlite.ir.Module``.
        lines: ``id(instruction) -> "file:line"`` of the statement that emitted it.
        regions: the shared-memory reservations in offset order.
        barriers: ``offset -> "resource.full[stage]"`` of each TS pipeline barrier.
    """

    lowered: LoweredKernel
    function: object
    module: object
    lines: dict = field(default_factory=dict)
    regions: list = field(default_factory=list)
    barriers: dict = field(default_factory=dict)

    def line_of(self, instruction) -> str:
        return self.lines.get(id(instruction), "")

    def describe_shared(self, offset: int) -> str:
        """``offset`` named by the barrier or the shared reservation holding it."""
        name = self.barriers.get(offset - offset % 8)
        if name is not None:
            return f"mbarrier {name}"
        for region in self.regions:
            if region.offset <= offset < region.offset + region.nbytes:
                return f"{region.what}, byte {offset - region.offset}"
        return f"shared offset {offset}"

    def nearest_shared(self, offset: int, nbytes: int) -> str:
        """For an out-of-bounds report: the ``nbytes``-wide access at ``offset`` as an element index of the
        shared reservation nearest it (``""`` when the kernel reserved none)."""
        if not self.regions:
            return ""
        region = min(self.regions, key=lambda r: 0 if r.offset <= offset < r.offset + r.nbytes
                     else min(abs(offset - r.offset), abs(offset + nbytes - r.offset - r.nbytes)))
        size = max(nbytes, 1)
        return (f"element {(offset - region.offset) // size} ({size}-byte) of the {region.what} "
                f"({region.nbytes // size} such elements)")


def _location_text(km) -> str:
    statement = km.statement
    if statement is None:
        return ""
    parsed, node = statement
    try:
        loc = parsed.location(node)
        return f"{loc.filename}:{loc.line}"
    except Exception:  # noqa: BLE001 - a location is a courtesy of the report
        return ""


class _RecordingModule(emit.KernelModule):
    """A KernelModule that notes each instruction's statement and each shared reservation."""

    instances: list = []

    def __init__(self, name, target):
        super().__init__(name, target)
        self.notes_lines: dict = {}
        self.notes_keep: list = []
        self.notes_regions: list = []
        _RecordingModule.instances.append(self)

    @property
    def builder(self):
        return self.__dict__.get("_builder")

    @builder.setter
    def builder(self, value):
        if value is not None and not getattr(value, "_tsjit_recording", False):
            insert = value._insert
            km = self

            def recording_insert(instr, _insert=insert):
                km.notes_lines[id(instr)] = _location_text(km)
                km.notes_keep.append(instr)
                return _insert(instr)
            value._insert = recording_insert
            value._tsjit_recording = True
        self.__dict__["_builder"] = value

    def reserve_shared(self, nbytes: int, align: int = 16) -> int:
        offset = super().reserve_shared(nbytes, align)
        where = _location_text(self)
        self.notes_regions.append(SmemRegion(offset, nbytes, f"shared memory reserved at {where}" if where
                                             else "shared memory"))
        return offset


def lower_for_interpreter(fn, arg_specs: dict, target, options: dict) -> InterpretProgram:
    """Lower ``fn`` for ``arg_specs`` and ``target`` as the compiler does, keeping the IR objects and
    the notes described in the module docstring.

    Raises:
        CompilationError / VerificationError: as a GPU compile of the same kernel would.
    """
    with _LOCK:
        original = emit.KernelModule
        _RecordingModule.instances = []
        emit.KernelModule = _RecordingModule
        storages_hook = _hook_storages()
        try:
            lowered = kernel_entry.compile_to_llvm(fn, arg_specs, target, **options)
        finally:
            emit.KernelModule = original
            storages_hook()
        km = _RecordingModule.instances[-1] if _RecordingModule.instances else None
        _RecordingModule.instances = []
    function = km.function
    regions = sorted(km.notes_regions, key=lambda r: r.offset)
    program = InterpretProgram(lowered, function, km.module, dict(km.notes_lines), regions,
                               getattr(km, "interpret_barrier_names", {}))
    program._keep = km.notes_keep  # ids of instructions stay valid while they live
    return program


def _hook_storages():
    """Wrap the TS lowering's barrier allocation so the barrier names reach the program; returns
    the function that restores it."""
    original = lower_pipeline.allocate

    def allocate(*args, **kwargs):   # lower_pipeline.allocate(ctx, manager, base)
        storages = original(*args, **kwargs)
        km = emit.current()
        names = getattr(km, "interpret_barrier_names", None)
        if names is None:
            names = km.interpret_barrier_names = {}
        users: dict = {}      # barrier offset -> the resources whose storages use it (a Fork's shared full)
        for resource, storage in storages.items():
            for s in range(storage.stages):
                for kind in ("full", "empty"):
                    users.setdefault((_barrier_offset(storage, kind, s), kind, s), []).append(resource)
        for (offset, kind, s), resources in users.items():
            names[offset] = f"{_barrier_owner(resources, storages)}.{kind}[{s}]"
        return storages
    lower_pipeline.allocate = allocate

    def restore():
        lower_pipeline.allocate = original
    return restore


def _barrier_owner(resources, storages) -> str:
    """How the user writes the owner of a barrier: the resource (``ring``), a pipeline-group member's
    own barrier as ``group.member`` (``fork.ring2``), one its group's members share as the group (``fork``)."""
    group = getattr(storages[resources[0]], "group", None)
    if group is None:
        return resources[0].name
    return group.name if len(resources) > 1 else f"{group.name}.{resources[0].name}"


def _barrier_offset(storage, kind: str, stage: int) -> int:
    """The shared offset of ``storage``'s ``kind`` barrier of ``stage`` (its full and empty arrays:
    :class:`tsjit.ts.lower_pipeline.PipelineStorage`; a group member's arrays are its group's)."""
    base = storage.offset if kind == "full" else getattr(storage, "empty_offset", storage.offset + 8 * storage.stages)
    return int(base) + 8 * stage
