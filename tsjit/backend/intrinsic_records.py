"""The records of the intrinsic table (:mod:`tsjit.backend.intrinsics`): where an intrinsic
compiles (:class:`Requirement` and the common ones), which parameters are immediates
(:class:`Immediate`), one entry (:class:`Intrinsic`), and the signature shorthand the table is
written in (:func:`parse_signature`).  Kept apart from the table so that the table module is the
data alone.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from llvmlite import ir

from tsjit.backend.targets import KNOWN_TARGETS, Target, get_target
from tsjit.errors import CompilationError

__all__ = ["Requirement", "Immediate", "Intrinsic", "ANY", "PTX80", "PTX83", "PTX86", "SM90A", "SM90A_SM100A",
           "SM100A", "never", "parse_signature"]


@dataclass(frozen=True)
class Requirement:
    """Where an intrinsic compiles: a set of target names and a minimum PTX ISA version.

    An empty ``targets`` set means "never on NVPTX" (the generic math intrinsics LLVM
    cannot select); ``alternative`` then says what to emit instead.
    """

    targets: frozenset[str]
    min_ptx: tuple[int, int] = (7, 8)
    reason: str = ""
    alternative: str = ""

    def allows(self, target: Target) -> bool:
        """True when ``target`` is in the set and emits at least ``min_ptx``."""
        return target.name in self.targets and target.ptx_version >= self.min_ptx

    def describe(self) -> str:
        """``"sm_90a (PTX 8.0)"`` / ``"PTX 8.6"`` / ``"sm_90a or sm_100a (PTX 8.0)"``."""
        ptx = f"PTX {self.min_ptx[0]}.{self.min_ptx[1]}"
        if self.targets == frozenset(KNOWN_TARGETS):
            return ptx
        if not self.targets:
            return "no target"
        names = [n for n in KNOWN_TARGETS if n in self.targets]
        listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]
        return f"{listed} ({ptx})"


_ALL = frozenset(KNOWN_TARGETS)
ANY = Requirement(_ALL, (7, 8))            # plain sm_90 PTX 7.8 features
PTX80 = Requirement(_ALL, (8, 0))          # cp.async.bulk*, elect.sync, expect_tx, ...
PTX83 = Requirement(_ALL, (8, 3))          # fence.proxy.tensormap::generic
PTX86 = Requirement(_ALL, (8, 6))          # .relaxed mbarrier ops, shared::cta TMA forms
SM90A = Requirement(frozenset({"sm_90a"}), (8, 0))              # wgmma
SM90A_SM100A = Requirement(frozenset({"sm_90a", "sm_100a", "sm_100f"}), (8, 0))  # setmaxnreg
SM100A = Requirement(frozenset({"sm_100a", "sm_100f"}), (8, 6))  # tcgen05, CLC (sm_100f: PTX 8.8)


def never(reason: str, alternative: str) -> Requirement:  # LLVM cannot select it at all
    return Requirement(frozenset(), (7, 8), reason, alternative)


@dataclass(frozen=True)
class Immediate:
    """A parameter that must be a compile-time constant (LLVM ``immarg``).

    Attributes:
        index: 0-based parameter position.
        name: parameter name used in messages.
        values: the allowed values on every supported target, or ``None`` for any.
        extra_values: additional values allowed only on the named targets.
    """

    index: int
    name: str
    values: tuple[int, ...] | None = None
    extra_values: Mapping[str, tuple[int, ...]] = field(default_factory=dict)

    def allowed_on(self, target: Target) -> tuple[int, ...] | None:
        """The values allowed when compiling for ``target`` (``None``: any integer)."""
        extra = tuple(self.extra_values.get(target.name, ()))
        return None if self.values is None else self.values + extra


@dataclass(frozen=True)
class Intrinsic:
    """One LLVM intrinsic tsjit may call.

    Attributes:
        name: the LLVM name, exactly as LLVM 22 prints it (no auto-upgrade).
        return_type: ``llvmlite.ir`` return type.
        param_types: ``llvmlite.ir`` parameter types.
        param_names: names of the parameters, for messages and docs.
        immediates: the parameters that must be constants.
        requirement: the targets / PTX ISA version that support it.
        doc: what it does, with the PTX instruction it lowers to and the source.
    """

    name: str
    return_type: ir.Type
    param_types: tuple[ir.Type, ...]
    param_names: tuple[str, ...]
    immediates: tuple[Immediate, ...]
    requirement: Requirement
    doc: str

    def __repr__(self) -> str:
        return f"<Intrinsic {self.name}: {self.function_type}; {self.requirement.describe()}>"

    @property
    def key(self) -> str:
        """The short name: the LLVM name without ``llvm.nvvm.`` or ``llvm.``."""
        for prefix in ("llvm.nvvm.", "llvm."):
            if self.name.startswith(prefix):
                return self.name[len(prefix):]
        return self.name

    @property
    def function_type(self) -> ir.FunctionType:  # noqa: D102
        return ir.FunctionType(self.return_type, self.param_types)

    def supports(self, target: Target | str) -> bool:
        """True when this intrinsic can be compiled for ``target``."""
        return self.requirement.allows(get_target(target))

    def check_immediates(self, args: Iterable[ir.Value], target: Target | str) -> None:
        """Check that every immediate argument of a call is an allowed integer constant.

        Raises:
            CompilationError: an immediate is not a constant or not an allowed value.
        """
        target = get_target(target)
        args = list(args)
        for imm in self.immediates:
            value = args[imm.index] if imm.index < len(args) else None
            if not isinstance(value, ir.Constant) or not isinstance(value.constant, int):
                raise CompilationError(
                    f"argument '{imm.name}' of `{self.key}` must be a compile-time "
                    f"integer constant")
            allowed = imm.allowed_on(target)
            if allowed is not None and int(value.constant) not in allowed:
                shown = allowed if len(allowed) < 8 else (*allowed[:3], "...", allowed[-1])
                raise CompilationError(
                    f"argument '{imm.name}' of `{self.key}` is {int(value.constant)}; "
                    f"allowed on {target.name}: {', '.join(map(str, shown))}")


    def check_constant_widths(self, args: Iterable[ir.Value]) -> None:
        """Check that every integer constant argument fits its parameter's width (llvmlite would
        print ``i32 1099511627776`` and LLVM truncate or reject it).

        Raises:
            CompilationError: naming the parameter, the value and the width.
        """
        for index, value in enumerate(args):
            if isinstance(value, ir.Constant) and isinstance(value.type, ir.IntType) \
                    and isinstance(value.constant, int):
                width = value.type.width
                if not -(1 << (width - 1)) <= value.constant < (1 << width):
                    pname = self.param_names[index] if index < len(self.param_names) else str(index)
                    raise CompilationError(f"argument '{pname}' of `{self.key}` is {value.constant}, which does "
                                           f"not fit in {width} bits")


# ---------------------------------------------------------------------------------
# Signature shorthand: "i64 (p3 bar, immarg i32 count)"; types: void i1..i128 f32 f64,
# ptr (generic), p1/p3/p6/p7 (address spaces), v4i32 (vector), {i32, i1} / {i32*4}.
# ---------------------------------------------------------------------------------
_SCALARS: dict[str, ir.Type] = {
    "void": ir.VoidType(), "f16": ir.HalfType(), "f32": ir.FloatType(), "f64": ir.DoubleType(),
    **{f"i{b}": ir.IntType(b) for b in (1, 8, 16, 32, 64, 128)},
    "ptr": ir.PointerType(), **{f"p{a}": ir.PointerType(addrspace=a) for a in (1, 3, 6, 7)},
}


def _parse_type(text: str) -> ir.Type:
    text = text.strip()
    vector = re.fullmatch(r"v(\d+)(i\d+)", text)
    if vector:
        return ir.VectorType(_SCALARS[vector.group(2)], int(vector.group(1)))
    if text.startswith("{"):
        members = []
        for part in text[1:-1].split(","):
            name, _, count = part.strip().partition("*")
            members += [_SCALARS[name]] * int(count or 1)
        return ir.LiteralStructType(members)
    return _SCALARS[text]


def parse_signature(sig: str):
    ret_text, params_text = sig[:-1].split(" (", 1)
    types, names, imm_positions = [], [], []
    for index, piece in enumerate(p for p in params_text.split(",") if p.strip()):
        words = piece.split()
        if words[0] == "immarg":
            imm_positions.append(index)
            words = words[1:]
        types.append(_parse_type(words[0]))
        names.append(words[1] if len(words) > 1 else f"arg{index}")
    return _parse_type(ret_text), tuple(types), tuple(names), imm_positions
