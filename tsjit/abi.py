"""The kernel ABI: what a compiled kernel needs from the code that launches it.

Today this module holds the *launch contract* (:class:`LaunchRequirements`); it is the
one place the runtime and the code generators share facts about a kernel's interface
(issue 11 moves the argument specs here too).  It imports nothing from tsjit but the
errors, so every layer may use it.

A Task Scheduling program knows its launch contract when it is lowered: the CTA is
exactly the TaskManager's warps (``threads``), a clustered pipeline needs its cluster
layout (``cluster``), the SMEM allocator's layout and the pipeline barriers need
``min_smem_bytes`` of dynamic shared memory.  A plain kernel declares the same through its
launch bounds (``@tsjit.kernel(max_threads=...)`` -> ``max_threads``).  The launcher
checks a configuration against the contract *before* the driver call, once per distinct
``(grid, block, cluster, smem)`` (the verdict is cached), so a mismatched launch is a
:class:`~tsjit.errors.LaunchError` and not a hung GPU: a TS program launched with 32
threads instead of its 160 waits forever for warps that do not exist.
"""
from __future__ import annotations

import operator
from dataclasses import asdict, dataclass, replace

from tsjit.errors import CompilationError, LaunchError

__all__ = ["LaunchRequirements", "dims3"]


def dims3(value, field: str = "dimension") -> tuple[int, int, int]:
    """``value`` (an int or a tuple of 1-3 ints) as an ``(x, y, z)`` triple, padded with 1.

    Raises:
        LaunchError: ``value`` is not an int or a tuple/list of 1-3 ints (names ``field``).
    """
    items = list(value) if isinstance(value, (tuple, list)) else [value]
    dims = []
    for item in items:
        try:
            dims.append(None if isinstance(item, bool) else operator.index(item))  # numpy.int64 is one too
        except TypeError:
            dims.append(None)
    if not 1 <= len(dims) <= 3 or None in dims:
        raise LaunchError(f"launch field '{field}' must be an int or a tuple of 1-3 ints; got {value!r}")
    return tuple(dims + [1] * (3 - len(dims)))


def _text(dims) -> str:
    return "(" + ", ".join(str(d) for d in dims) + ")"


@dataclass(frozen=True)
class LaunchRequirements:
    """The launch contract of one compiled kernel (stored in ``CompiledKernel.metadata``).

    Attributes:
        threads: threads per CTA the program needs exactly (a TS program: the TaskManager's
            warps x 32), or ``None`` when any block size works.
        max_threads: the most threads per CTA the kernel was compiled for (launch bound
            ``.maxntid``, ``@tsjit.kernel(max_threads=...)``), or ``None``.
        cluster: CTAs per cluster ``(x, y, z)`` the program needs (a clustered pipeline's
            ``cta_layout_vmnk``; the kernel carries ``.reqnctapercluster``), or ``None``.
            The launcher uses it when the caller gives no ``cluster``.
        min_smem_bytes: dynamic shared memory per CTA the kernel lays out itself (the SMEM
            allocator's total, pipeline barriers, ``shared_array``), bytes.  The launcher
            raises a smaller ``smem_bytes`` to it.
        max_smem_bytes: the target's dynamic shared memory per CTA, bytes (``None``: only the
            device limit given to :meth:`check` applies).
        pdl: the program has programmatic-dependent-launch barriers (``griddepcontrol``).
            Informational: without ``pdl=True`` they are no-ops and the launch is merely
            serialized, so :meth:`check` does not refuse it.

    Source: PTX ISA §11.4 (``.maxntid``, ``.reqntid``, ``.reqnctapercluster``); CUDA
    Programming Guide "Thread Block Clusters" (the grid is a whole number of clusters).
    """

    threads: int | None = None
    max_threads: int | None = None
    cluster: tuple[int, int, int] | None = None
    min_smem_bytes: int = 0
    max_smem_bytes: int | None = None
    pdl: bool = False

    def merged(self, **fields) -> "LaunchRequirements":
        """A copy with ``fields`` declared; a field declared twice with different values is a
        :class:`~tsjit.errors.CompilationError` (two TaskManagers of one kernel disagree)."""
        for name, value in fields.items():
            if name == "cluster" and value is not None:
                value = dims3(value)
            old = getattr(self, name)
            if name in ("threads", "cluster") and old is not None and value is not None and old != value:
                raise CompilationError(f"the kernel declares two launch requirements for '{name}': {old} and "
                                       f"{value}; one kernel has one CTA shape (use one TaskManager per kernel, "
                                       f"or tasks that cover the same warps)")
            fields[name] = value
        return replace(self, **fields)

    # -- the check ----------------------------------------------------------------------------
    def check(self, kernel_name: str, grid, block, cluster, smem_bytes: int, device_limit: int | None) -> None:
        """Refuse a launch configuration that does not match the contract.

        Args:
            kernel_name: the kernel, for messages.
            grid, block: CTAs per grid and threads per CTA (int or 1-3 ints).
            cluster: CTAs per cluster (int, 1-3 ints) or ``None`` (no cluster attribute).
            smem_bytes: dynamic shared memory per CTA the launch will request, bytes.
            device_limit: the device's dynamic shared memory per CTA (opt-in limit minus the
                kernel's static shared memory), bytes; ``None`` skips that check.

        Raises:
            LaunchError: naming the kernel, the field, what was given and what the program
                needs: threads per CTA not equal to ``threads`` (or above ``max_threads``);
                a cluster other than ``cluster``; a grid that is not a whole number of
                clusters; ``smem_bytes`` below ``min_smem_bytes`` or above the device's or
                the target's limit.
        """
        g, b = dims3(grid, "grid"), dims3(block, "block")
        count = b[0] * b[1] * b[2]
        who = f"kernel {kernel_name!r}"
        if self.threads is not None and count != self.threads:
            raise LaunchError(
                f"{who} was launched with block={_text(b)} ({count} threads per CTA), but its program needs "
                f"exactly {self.threads} threads ({self.threads // 32} warps: the TaskManager's tasks); launch "
                f"with block=({self.threads},). A smaller CTA would wait forever for warps that do not exist.")
        if self.max_threads is not None and count > self.max_threads:
            raise LaunchError(f"{who} was launched with block={_text(b)} ({count} threads per CTA), but it was "
                              f"compiled for at most {self.max_threads} (launch bound max_threads)")
        c = dims3(cluster, "cluster") if cluster is not None else None
        if self.cluster is not None and self.cluster != (1, 1, 1) and c != self.cluster:
            given = "no cluster" if c is None else f"cluster={_text(c)}"
            raise LaunchError(f"{who} was launched with {given}, but its program needs cluster="
                              f"{_text(self.cluster)} (the pipelines' cta_layout_vmnk); pass cluster="
                              f"{_text(self.cluster)} or leave cluster unset")
        if c is not None:
            for axis, (extent, size) in enumerate(zip(g, c)):
                if size < 1 or extent % size:
                    raise LaunchError(f"{who} was launched with grid={_text(g)}, which is not a whole number of "
                                      f"clusters of {_text(c)} (grid[{axis}]={extent} is not a multiple of "
                                      f"{size}); round grid[{axis}] up to {-(-extent // max(size, 1)) * size}")
        if smem_bytes < self.min_smem_bytes:
            raise LaunchError(f"{who} was launched with smem_bytes={smem_bytes}, but its program lays out "
                              f"{self.min_smem_bytes} bytes of dynamic shared memory; pass at least that")
        for limit, what in ((device_limit, "the device allows"), (self.max_smem_bytes, "the target allows")):
            if limit is not None and smem_bytes > limit:
                need = (f"its program needs {self.min_smem_bytes}" if self.min_smem_bytes > limit else
                        f"the launch asked for {smem_bytes}")
                raise LaunchError(f"{who} needs {smem_bytes} bytes of dynamic shared memory per CTA ({need}), "
                                  f"but {what} {limit}; use fewer stages or smaller tiles")

    # -- cache entries (JSON) -----------------------------------------------------------------
    def to_json(self) -> dict:
        """A JSON-serializable dict (for the on-disk cache entry's metadata)."""
        return asdict(self)

    @classmethod
    def from_json(cls, data) -> "LaunchRequirements":
        """The record :meth:`to_json` wrote; an absent or malformed value is the empty contract."""
        if isinstance(data, cls):
            return data
        if not isinstance(data, dict):
            return cls()
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        try:
            if known.get("cluster") is not None:
                known["cluster"] = dims3(known["cluster"])
            return cls(**known)
        except (TypeError, LaunchError):  # a malformed record: the entry's checksum makes this unlikely
            return cls()


# -- the hang record of TSJIT_DEBUG=1 builds --------------------------------------------------
#: The ``.global .u64`` a debug build reads the hang-record buffer's address from; the runtime
#: sets it after loading the module (``cuModuleGetGlobal``).
HANG_RECORD_SYMBOL = "tsjit_hang_record"
#: The ``.global .u32`` counter a timed-out warp increments to claim a record slot.
HANG_CLAIMS_SYMBOL = "tsjit_hang_claims"
#: Written last into a slot: the slot holds a complete record.
HANG_MAGIC = 0x5453_4A49_5448_4E47
#: Slots in one buffer; warps that time out after they are all claimed are not recorded.
HANG_MAX_RECORDS = 32
#: The 64-bit fields of one slot, in order (``site`` indexes ``metadata["debug_waits"]``;
#: ``-1`` marks a field the wait site does not know).
HANG_FIELDS = ("magic", "site", "cta_x", "cta_y", "cta_z", "warp", "lane", "cluster_rank", "stage", "loop_offset",
               "iteration", "phase", "waited_ns", "sm", "budget_ns", "reserved")
HANG_RECORD_BYTES = 8 * len(HANG_FIELDS)
#: How long a timed-out thread waits after writing before it traps, so that the record reaches
#: host memory and other warps that time out at about the same moment can record theirs (ns).
HANG_GRACE_NS = 50_000_000
