"""GPU targets tsjit compiles for.

A :class:`Target` names everything that differs between builds: the LLVM NVPTX cpu,
the PTX ISA version LLVM is told to emit (a ``+ptxNN`` feature), the compute
capability, and whether the code uses arch-specific (``a``) features.  Code built for
one target does not assemble or run for another (toolchain.md §2: sm_90a PTX is
rejected by ``ptxas -arch=sm_90`` and by ``-arch=sm_100a``), so every build and every
cache entry is per target.

Known targets:

========  =======  ==========  ===========================================
name      PTX ISA  capability  notes
========  =======  ==========  ===========================================
sm_90a    8.6      9.0         H200 / H100 with wgmma and setmaxnreg (default)
sm_100a   8.6      10.0        Blackwell datacenter: tcgen05, TMEM, CLC
sm_100f   8.8      10.0        the sm_100 family (10.x): the same tcgen05 / CLC features
sm_90     8.0      9.0         portable Hopper, no arch-specific features
========  =======  ==========  ===========================================

PTX 8.6 is the lowest ISA with ``.relaxed`` mbarrier ops and every tcgen05 /
clusterlaunchcontrol instruction on sm_100a (toolchain.md §1, §2); ptxas 13.0 accepts
it, and LLVM 22 accepts features from ``+ptx32`` to ``+ptx90``.  Family-specific ``f`` targets
need PTX 8.8 (PTX ISA 9.1, "Target ISA Notes" of every tcgen05 instruction: "supported on
family-specific architectures from PTX ISA version 8.8"); sm_100f code runs on every 10.x GPU.
"""
from __future__ import annotations

from dataclasses import dataclass

from tsjit import env
from tsjit.errors import CompilationError, TsjitError

__all__ = ["TRIPLE", "DATA_LAYOUT", "Target", "DEFAULT_TARGET", "KNOWN_TARGETS", "environment_target", "get_target",
           "target_for_capability"]

#: LLVM target triple of every tsjit module.
TRIPLE = "nvptx64-nvidia-cuda"

#: NVPTX64 data layout of LLVM 22 (``str(target_machine.target_data)``; the same for
#: every sm_* cpu): 64-bit pointers, 32-bit tensor-memory pointers (address space 6).
#: Here, not in :mod:`tsjit.backend.nvptx`, so that building IR does not load LLVM's native library.
DATA_LAYOUT = "e-p6:32:32-i64:64-i128:128-i256:256-v16:16-v32:32-n16:32:64"

#: The target used when neither the caller nor the device says otherwise (an H200).
DEFAULT_TARGET = "sm_90a"


@dataclass(frozen=True)
class Target:
    """One compilation target.

    Attributes:
        name: the PTX ``.target`` name and ``-arch`` value (``"sm_90a"``).
        cpu: the LLVM NVPTX cpu name (equal to ``name`` for every known target).
        ptx_version: PTX ISA version LLVM emits, ``(major, minor)``.
        capability: compute capability ``(major, minor)`` of the GPUs it runs on.
        arch_specific: True for ``a`` targets, whose code runs only on that exact
            capability (PTX ISA 8.0+, "Architecture-specific features").
        smem_bytes_per_cta: the most dynamic shared memory one CTA may use, bytes (227 KiB on
            sm_90 and sm_100: CUDA Programming Guide, "Compute Capabilities", table of
            technical specifications).
    """

    name: str
    cpu: str
    ptx_version: tuple[int, int]
    capability: tuple[int, int]
    arch_specific: bool
    smem_bytes_per_cta: int = 232448

    @property
    def ptx_feature(self) -> str:
        """The LLVM target feature selecting the PTX ISA version (``"+ptx86"``)."""
        major, minor = self.ptx_version
        return f"+ptx{major}{minor}"

    @property
    def ptx_version_text(self) -> str:
        """The PTX ISA version as written in messages and in ``.version`` (``"8.6"``)."""
        return f"{self.ptx_version[0]}.{self.ptx_version[1]}"

    def __str__(self) -> str:
        return self.name


KNOWN_TARGETS: dict[str, Target] = {
    t.name: t
    for t in (
        Target("sm_90a", "sm_90a", (8, 6), (9, 0), True),
        Target("sm_100a", "sm_100a", (8, 6), (10, 0), True),
        Target("sm_100f", "sm_100f", (8, 8), (10, 0), True),
        Target("sm_90", "sm_90", (8, 0), (9, 0), False),
    )
}

# The arch-specific target tsjit builds for a GPU of a given capability.
_TARGET_BY_CAPABILITY: dict[tuple[int, int], str] = {(9, 0): "sm_90a", (10, 0): "sm_100a"}


def get_target(name: str | Target) -> Target:
    """The :class:`Target` called ``name`` (a Target is returned unchanged).

    Raises:
        CompilationError: ``name`` is not a known target.
    """
    if isinstance(name, Target):
        return name
    target = KNOWN_TARGETS.get(name) if isinstance(name, str) else None
    if target is None:
        known = ", ".join(KNOWN_TARGETS)
        raise CompilationError(f"unknown target {name!r}; known: {known}")
    return target


def target_for_capability(major: int, minor: int) -> str:
    """The target name tsjit builds for a device of compute capability ``major.minor``.

    9.0 (H100/H200) gives ``"sm_90a"`` and 10.0 (B200/GB200) gives ``"sm_100a"``.

    Raises:
        CompilationError: tsjit has no target for that capability.
    """
    name = _TARGET_BY_CAPABILITY.get((major, minor))
    if name is None:
        supported = ", ".join(f"{c[0]}.{c[1]} ({n})" for c, n in _TARGET_BY_CAPABILITY.items())
        raise CompilationError(
            f"no tsjit target for compute capability {major}.{minor}; "
            f"supported: {supported}")
    return name


def environment_target() -> str | None:
    """The target named by ``TSJIT_TARGET``, or ``None`` when it is unset.

    Raises:
        TsjitError: the variable holds something that is not a target tsjit builds for (the
            message names ``TSJIT_TARGET``, its value and the known targets).
    """
    name = env.target()
    if name is not None and name not in KNOWN_TARGETS:
        raise TsjitError(f"environment variable TSJIT_TARGET={env.TARGET.raw()!r} is not a target tsjit builds "
                         f"for; expected one of {list(KNOWN_TARGETS)}, or unset it to use the current device's")
    return name
