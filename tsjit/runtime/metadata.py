"""What tsjit knows about one compiled kernel: the typed ``CompiledKernel.metadata`` record.

:class:`KernelMetadata` is frozen and typed (``compiled.metadata.registers``); it is also a
read-only :class:`~collections.abc.Mapping` of its field names (``compiled.metadata["registers"]``,
``dict(compiled.metadata)``), the form the README shows.  The on-disk cache entry stores it as
JSON (:meth:`KernelMetadata.to_json`) and a disk hit reads it back (:meth:`KernelMetadata.from_json`).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace

from tsjit.abi import LaunchRequirements
from tsjit.errors import UsageKeyError


@dataclass(frozen=True, eq=False)
class KernelMetadata(Mapping):
    """The metadata of one compiled specialization.

    Attributes:
        kernel_name: the kernel symbol in the cubin.
        target: the target it was compiled for (``"sm_90a"``).
        key: the on-disk cache key (SHA-256 hex).
        registers: registers per thread (ptxas / nvJitLink report).
        spill_stores_bytes, spill_loads_bytes: register spill traffic per thread, bytes.
        stack_frame_bytes: per-thread stack frame, bytes.
        static_smem_bytes: static shared memory per CTA, bytes.
        smem_bytes: dynamic shared memory per CTA the kernel lays out itself, bytes (the launch
            raises a smaller ``smem_bytes`` to it).
        tool, tool_version: the assembler (``"nvptxcompiler"``, ``"ptxas"`` or ``"nvjitlink"``) and its version.
        assembler_notes: the assembler's "Potential Performance Loss" notes, e.g. ``"(C7504) Potential
            Performance Loss: 'setmaxnreg' ignored to maintain compatibility across compilation units."``
            (nvJitLink dropped the register split); empty when there is none.
        launch_requirements: the kernel's launch contract (:class:`~tsjit.abi.LaunchRequirements`).
        dependencies: what the compile resolved, with digests (:mod:`tsjit.frontend.dependencies`).
        debug_waits: per bounded wait of a ``TSJIT_DEBUG=1`` build, what it waits for.
        compile_ms: milliseconds per stage (``frontend``, ``llvm``, ``assemble``).
        from_cache: the kernel was loaded from the on-disk cache rather than compiled.
        artifacts: files the compile wrote besides the cubin (``TaskManager.render`` SVGs),
            ``[[path, text], ...]``; a disk-cache hit writes them again (:mod:`tsjit.frontend.artifacts`).
    """

    kernel_name: str
    target: str
    key: str
    registers: int = 0
    spill_stores_bytes: int = 0
    spill_loads_bytes: int = 0
    stack_frame_bytes: int = 0
    static_smem_bytes: int = 0
    smem_bytes: int = 0
    tool: str = ""
    tool_version: str = ""
    assembler_notes: list = field(default_factory=list)
    launch_requirements: LaunchRequirements = field(default_factory=LaunchRequirements)
    dependencies: dict = field(default_factory=dict)
    debug_waits: list = field(default_factory=list)
    compile_ms: dict = field(default_factory=dict)
    from_cache: bool = False
    artifacts: list = field(default_factory=list)

    # -- the Mapping view ---------------------------------------------------------------------
    def __getitem__(self, name: str):
        if name in _FIELD_NAMES:
            return getattr(self, name)
        raise UsageKeyError(f"kernel metadata has no field {name!r}; its fields are {', '.join(_FIELD_NAMES)}")

    def __iter__(self):
        return iter(_FIELD_NAMES)

    def __len__(self) -> int:
        return len(_FIELD_NAMES)

    def __eq__(self, other) -> bool:
        if isinstance(other, KernelMetadata):
            return all(getattr(self, n) == getattr(other, n) for n in _FIELD_NAMES)
        return Mapping.__eq__(self, other)

    __hash__ = None

    # -- cache entries (JSON) -----------------------------------------------------------------
    def to_json(self) -> dict:
        """A JSON-serializable dict for the on-disk cache entry (``from_cache`` is not stored)."""
        data = {n: getattr(self, n) for n in _FIELD_NAMES if n != "from_cache"}
        data["launch_requirements"] = self.launch_requirements.to_json()
        return data

    @classmethod
    def from_json(cls, data) -> "KernelMetadata | None":
        """The record :meth:`to_json` wrote, marked ``from_cache``; ``None`` when ``data`` is not one
        (no kernel name, or a field of the wrong shape): the caller treats that as a cache miss."""
        if not isinstance(data, Mapping) or not isinstance(data.get("kernel_name"), str) or not data["kernel_name"]:
            return None
        known = {n: data[n] for n in _FIELD_NAMES if n in data}
        known["launch_requirements"] = LaunchRequirements.from_json(known.get("launch_requirements"))
        known["from_cache"] = True
        try:
            return cls(**known)
        except TypeError:
            return None

    def replaced(self, **changes) -> "KernelMetadata":
        """A copy with ``changes`` (field names) applied."""
        return replace(self, **changes)


_FIELD_NAMES = tuple(f.name for f in fields(KernelMetadata))
