"""The one table of LLVM / NVVM intrinsics tsjit emits, gated by target.

LLVM's NVPTX back end *aborts the process* ("LLVM ERROR: Cannot select: intrinsic
...", or ``exit(1)`` for "no libcall available") when it meets an intrinsic the
target cannot lower (toolchain.md §6.2).  So every intrinsic call goes through this
table first: :func:`check_supported` raises a :class:`~tsjit.errors.CompilationError`
for a target the intrinsic does not support, and :func:`declare` adds the exact
declaration LLVM 22 expects to an ``llvmlite.ir.Module``.

Each :class:`Intrinsic` records

* its LLVM name and signature as ``llvmlite.ir`` types (opaque pointers with address
  spaces: 1 global, 3 shared::cta, 6 tensor memory, 7 shared::cluster; a plain ``ptr``
  is generic),
* which parameters are immediates (LLVM ``immarg``: the argument must be a constant,
  else the verifier rejects the module) and which values they may take,
* a :class:`Requirement`: the set of targets and the minimum PTX ISA version.

The requirements were measured with llvmlite 0.50 (LLVM 22.1) and ptxas 13.0
(toolchain.md §1-§2, re-checked by ``tests/backend/test_intrinsics.py``, which compiles
one kernel per intrinsic for every target it claims, and assembles the PTX with
ptxas).  Generic LLVM math intrinsics that do not select on NVPTX (``llvm.exp.f32``,
``llvm.log.*``, ``llvm.sin.f64``, ...) are listed with no supported target and an
``alternative`` naming what the builtin must emit instead.

Names: :func:`lookup` accepts the full LLVM name (``llvm.nvvm.elect.sync``) or the
*key*, which is the name without its ``llvm.nvvm.`` / ``llvm.`` prefix
(``elect.sync``, ``sqrt.f32``).
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from llvmlite import ir

from tsjit.backend.targets import KNOWN_TARGETS, Target, get_target
from tsjit.errors import CompilationError

__all__ = ["Requirement", "Immediate", "Intrinsic", "INTRINSICS", "lookup",
           "check_supported", "declare", "supported_on"]


# ---------------------------------------------------------------------------------
# Requirements
# ---------------------------------------------------------------------------------
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
        names = [n for n in KNOWN_TARGETS if n in self.targets]
        listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]
        return f"{listed} ({ptx})"


_ALL = frozenset(KNOWN_TARGETS)
ANY = Requirement(_ALL, (7, 8))            # plain sm_90 PTX 7.8 features
PTX80 = Requirement(_ALL, (8, 0))          # cp.async.bulk*, elect.sync, expect_tx, ...
PTX83 = Requirement(_ALL, (8, 3))          # fence.proxy.tensormap::generic
PTX86 = Requirement(_ALL, (8, 6))          # .relaxed mbarrier ops, shared::cta TMA forms
SM90A = Requirement(frozenset({"sm_90a"}), (8, 0))              # wgmma
SM90A_SM100A = Requirement(frozenset({"sm_90a", "sm_100a"}), (8, 0))  # setmaxnreg
SM100A = Requirement(frozenset({"sm_100a"}), (8, 6))            # tcgen05, CLC


def _never(reason: str, alternative: str) -> Requirement:
    return Requirement(frozenset(), (7, 8), reason, alternative)


# ---------------------------------------------------------------------------------
# Intrinsic
# ---------------------------------------------------------------------------------
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
        if self.values is None:
            return None
        return self.values + tuple(self.extra_values.get(target.name, ()))


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

    @property
    def key(self) -> str:
        """The short name: the LLVM name without ``llvm.nvvm.`` or ``llvm.``."""
        for prefix in ("llvm.nvvm.", "llvm."):
            if self.name.startswith(prefix):
                return self.name[len(prefix):]
        return self.name

    @property
    def function_type(self) -> ir.FunctionType:
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
                raise CompilationError(
                    f"argument '{imm.name}' of `{self.key}` is {int(value.constant)}; "
                    f"allowed on {target.name}: {_describe_values(allowed)}")


def _describe_values(values: tuple[int, ...]) -> str:
    if len(values) > 6 and values == tuple(range(values[0], values[-1] + 1, values[1] - values[0])):
        return f"{values[0]}..{values[-1]} in steps of {values[1] - values[0]}"
    return ", ".join(str(v) for v in values)


# ---------------------------------------------------------------------------------
# Signature shorthand: "i64 (p3 bar, immarg i32 count)"
# ---------------------------------------------------------------------------------
_SCALARS: dict[str, ir.Type] = {
    "void": ir.VoidType(), "i1": ir.IntType(1), "i8": ir.IntType(8), "i16": ir.IntType(16),
    "i32": ir.IntType(32), "i64": ir.IntType(64), "i128": ir.IntType(128),
    "f32": ir.FloatType(), "f64": ir.DoubleType(), "ptr": ir.PointerType(),
    "p1": ir.PointerType(addrspace=1), "p3": ir.PointerType(addrspace=3),
    "p6": ir.PointerType(addrspace=6), "p7": ir.PointerType(addrspace=7),
}


def _parse_type(text: str) -> ir.Type:
    text = text.strip()
    if text in _SCALARS:
        return _SCALARS[text]
    vector = re.fullmatch(r"<(\d+) x (\w+)>", text)
    if vector:
        return ir.VectorType(_SCALARS[vector.group(2)], int(vector.group(1)))
    struct = re.fullmatch(r"\{(\w+)\*(\d+)\}", text)           # {i32*4}
    if struct:
        return ir.LiteralStructType([_SCALARS[struct.group(1)]] * int(struct.group(2)))
    if text.startswith("{") and text.endswith("}"):
        return ir.LiteralStructType([_parse_type(t) for t in text[1:-1].split(",")])
    raise ValueError(f"bad type in intrinsic table: {text!r}")


def _parse_signature(sig: str):
    ret_text, _, params_text = sig.partition("(")
    params_text = params_text.rstrip().removesuffix(")")
    types, names, imm_positions = [], [], []
    depth, start, pieces = 0, 0, []
    for i, ch in enumerate(params_text):            # split on top-level commas
        depth += ch in "{<"
        depth -= ch in "}>"
        if ch == "," and depth == 0:
            pieces.append(params_text[start:i])
            start = i + 1
    if params_text.strip():
        pieces.append(params_text[start:])
    for index, piece in enumerate(pieces):
        words = piece.split()
        if words[0] == "immarg":
            imm_positions.append(index)
            words = words[1:]
        if words[0].startswith(("{", "<")):         # re-join "<4 x i32>"
            close = "}" if words[0].startswith("{") else ">"
            end = next(i for i, w in enumerate(words) if w.endswith(close))
            words = [" ".join(words[:end + 1])] + words[end + 1:]
        types.append(_parse_type(words[0]))
        names.append(words[1] if len(words) > 1 else f"arg{index}")
    return _parse_type(ret_text), tuple(types), tuple(names), imm_positions


# ---------------------------------------------------------------------------------
# The table
# ---------------------------------------------------------------------------------
_TABLE: dict[str, Intrinsic] = {}
_BY_KEY: dict[str, Intrinsic] = {}


def _add(name: str, sig: str, req: Requirement = ANY, doc: str = "",
         imm: Mapping[str, tuple[int, ...] | range | None] | None = None,
         imm_extra: Mapping[str, Mapping[str, tuple[int, ...]]] | None = None) -> None:
    ret, types, names, positions = _parse_signature(sig)
    imm, imm_extra = dict(imm or {}), dict(imm_extra or {})
    immediates = []
    for pos in positions:
        pname = names[pos]
        values = imm.pop(pname, (0, 1) if types[pos] == ir.IntType(1) else None)
        immediates.append(Immediate(pos, pname, None if values is None else tuple(values),
                                    MappingProxyType(dict(imm_extra.pop(pname, {})))))
    if imm or imm_extra:
        raise ValueError(f"{name}: immediates {sorted(imm) + sorted(imm_extra)} not in signature")
    entry = Intrinsic(name, ret, types, names, tuple(immediates), req, doc)
    if name in _TABLE:
        raise ValueError(f"duplicate intrinsic {name}")
    _TABLE[name] = entry
    _BY_KEY[entry.key] = entry


_ISA = "PTX ISA 8.6"
_XYZ = ("x", "y", "z")

# --- special registers (PTX ISA "Special Registers") --------------------------------
for _reg, _doc in (("tid", "thread index in the CTA"), ("ntid", "CTA shape"),
                   ("ctaid", "CTA index in the grid"), ("nctaid", "grid shape in CTAs"),
                   ("clusterid", "cluster index in the grid"),
                   ("nclusterid", "grid shape in clusters"),
                   ("cluster.ctaid", "CTA index in the cluster"),
                   ("cluster.nctaid", "cluster shape in CTAs")):
    for _axis in _XYZ:
        _add(f"llvm.nvvm.read.ptx.sreg.{_reg}.{_axis}", "i32 ()", ANY,
             f"%{_reg.replace('.', '_')}.{_axis}: {_doc} ({_ISA}, Special Registers)")
for _reg, _ty, _doc in (
        ("laneid", "i32", "lane index in the warp, 0..31"),
        ("warpid", "i32", "hardware warp slot (not stable; use tid / 32)"),
        ("smid", "i32", "SM index"), ("nsmid", "i32", "number of SM ids"),
        ("clock", "i32", "32-bit SM cycle counter"),
        ("clock64", "i64", "64-bit SM cycle counter"),
        ("globaltimer", "i64", "global nanosecond timer"),
        ("lanemask.eq", "i32", "bit of this lane"), ("lanemask.lt", "i32", "lanes below"),
        ("lanemask.le", "i32", "lanes at or below"), ("lanemask.gt", "i32", "lanes above"),
        ("lanemask.ge", "i32", "lanes at or above"),
        ("dynamic_smem_size", "i32", "dynamic shared memory of this launch, bytes"),
        ("total_smem_size", "i32", "static + dynamic shared memory, bytes"),
        ("cluster.ctarank", "i32", "CTA rank in the cluster"),
        ("cluster.nctarank", "i32", "CTAs per cluster")):
    _add(f"llvm.nvvm.read.ptx.sreg.{_reg}", f"{_ty} ()", ANY,
         f"%{_reg.replace('.', '_')}: {_doc} ({_ISA}, Special Registers)")
_add("llvm.nvvm.is_explicit_cluster", "i1 ()", ANY,
     "%is_explicit_cluster: launched with explicit cluster dims (Special Registers)")

# --- CTA / warp / cluster barriers (PTX ISA "bar, barrier", "barrier.cluster") -------
_add("llvm.nvvm.barrier.cta.sync.aligned.all", "void (i32 id)", ANY,
     "bar.sync id: all threads of the CTA, warp-uniform (barrier.sync.aligned)")
_add("llvm.nvvm.barrier.cta.sync.aligned.count", "void (i32 id, i32 count)", ANY,
     "bar.sync id, count: named barrier over `count` threads (multiple of 32)")
_add("llvm.nvvm.barrier.cta.sync.all", "void (i32 id)", ANY,
     "barrier.sync id: like bar.sync, threads of a warp may diverge")
_add("llvm.nvvm.barrier.cta.sync.count", "void (i32 id, i32 count)", ANY,
     "barrier.sync id, count (non-aligned)")
_add("llvm.nvvm.barrier.cta.arrive.aligned.count", "void (i32 id, i32 count)", ANY,
     "bar.arrive id, count: arrive on a named barrier without waiting (producer side)")
_add("llvm.nvvm.barrier.cta.arrive.count", "void (i32 id, i32 count)", ANY,
     "barrier.arrive id, count (non-aligned)")
_add("llvm.nvvm.barrier.cta.red.popc.aligned.all", "i32 (i32 id, i1 pred)", ANY,
     "bar.red.popc.u32: CTA barrier returning how many threads had `pred` true")
_add("llvm.nvvm.barrier.cta.red.and.aligned.all", "i1 (i32 id, i1 pred)", ANY,
     "bar.red.and.pred: CTA barrier returning AND of `pred`")
_add("llvm.nvvm.barrier.cta.red.or.aligned.all", "i1 (i32 id, i1 pred)", ANY,
     "bar.red.or.pred: CTA barrier returning OR of `pred`")
_add("llvm.nvvm.bar.warp.sync", "void (i32 mask)", ANY, "bar.warp.sync mask")
for _op, _req in (("arrive", ANY), ("wait", ANY), ("arrive.relaxed", PTX80),
                  ("arrive.aligned", PTX80), ("wait.aligned", PTX80),
                  ("arrive.relaxed.aligned", PTX80)):
    _add(f"llvm.nvvm.barrier.cluster.{_op}", "void ()", _req,
         f"barrier.cluster.{_op}: cluster-wide barrier phase ({_ISA}, barrier.cluster)")

# --- warp shuffles, votes, reductions (PTX ISA "shfl.sync", "vote.sync", "redux.sync")
for _mode in ("idx", "up", "down", "bfly"):
    for _ty in ("i32", "f32"):
        _add(f"llvm.nvvm.shfl.sync.{_mode}.{_ty}",
             f"{_ty} (i32 mask, {_ty} value, i32 lane_or_delta, i32 clamp)", ANY,
             f"shfl.sync.{_mode}.b32; clamp packs c (bits 0-4) and segment mask (bits 8-12)")
for _mode in ("all", "any", "uni"):
    _add(f"llvm.nvvm.vote.{_mode}.sync", "i1 (i32 mask, i1 pred)", ANY,
         f"vote.sync.{_mode}.pred")
_add("llvm.nvvm.vote.ballot.sync", "i32 (i32 mask, i1 pred)", ANY, "vote.sync.ballot.b32")
_add("llvm.nvvm.activemask", "i32 ()", ANY, "activemask.b32: lanes currently active")
for _op in ("add", "min", "max", "umin", "umax", "and", "or", "xor"):
    _add(f"llvm.nvvm.redux.sync.{_op}", "i32 (i32 value, i32 mask)", ANY,
         f"redux.sync.{_op}: warp reduction of a 32-bit integer (sm_80+)")

# --- memory fences (PTX ISA "membar / fence") ---------------------------------------
for _scope in ("cta", "gl", "sys"):
    _add(f"llvm.nvvm.membar.{_scope}", "void ()", ANY,
         f"membar.{_scope} (fence.sc.{_scope}); acq_rel fences are LLVM `fence` "
         f"instructions with syncscope")
_add("llvm.nvvm.fence.sc.cluster", "void ()", ANY, "fence.sc.cluster")
_add("llvm.nvvm.fence.mbarrier_init.release.cluster", "void ()", PTX80,
     "fence.mbarrier_init.release.cluster: publish mbarrier.init to the cluster and the "
     "async proxy before the first TMA or remote arrive (toolchain.md §6.8)")
for _space, _ptx in (("", ""), (".shared_cta", ".shared::cta"), (".global", ".global"),
                     (".shared_cluster", ".shared::cluster")):
    _add(f"llvm.nvvm.fence.proxy.async{_space}", "void ()", PTX80,
         f"fence.proxy.async{_ptx}: order generic-proxy accesses with async-proxy ones "
         f"(TMA, wgmma operands)")
for _scope in ("cta", "cluster", "gpu", "sys"):
    _add(f"llvm.nvvm.fence.proxy.tensormap_generic.release.{_scope}", "void ()", PTX83,
         f"fence.proxy.tensormap::generic.release.{_scope} (after writing a tensormap)")
    _add(f"llvm.nvvm.fence.proxy.tensormap_generic.acquire.{_scope}",
         "void (ptr tensormap, immarg i32 size)", PTX83,
         f"fence.proxy.tensormap::generic.acquire.{_scope} [tensormap], 128",
         imm={"size": (128,)})
_add("llvm.nvvm.fence.acquire.sync_restrict.space.cluster.scope.cluster", "void ()", PTX86,
     "fence.acquire.sync_restrict::shared::cluster.cluster")
_add("llvm.nvvm.fence.release.sync_restrict.space.cta.scope.cluster", "void ()", PTX86,
     "fence.release.sync_restrict::shared::cta.cluster")

# --- NVVM math (PTX ISA "Floating Point Instructions") --------------------------------
# Not listed: llvm.nvvm.lg2.approx.d -- LLVM 22 emits `lg2.approx.f64`, which ptxas
# rejects ("Unexpected instruction types specified for 'lg2'").
for _name, _sig, _doc in (
        ("rsqrt.approx.f", "f32 (f32 x)", "rsqrt.approx.f32"),
        ("rsqrt.approx.ftz.f", "f32 (f32 x)", "rsqrt.approx.ftz.f32"),
        ("rsqrt.approx.d", "f64 (f64 x)", "rsqrt.approx.f64"),
        ("ex2.approx.f32", "f32 (f32 x)", "ex2.approx.f32: 2**x, max rel. error 2**-22"),
        ("ex2.approx.ftz.f32", "f32 (f32 x)", "ex2.approx.ftz.f32"),
        ("lg2.approx.f", "f32 (f32 x)", "lg2.approx.f32: log2(x)"),
        ("lg2.approx.ftz.f", "f32 (f32 x)", "lg2.approx.ftz.f32"),
        ("sin.approx.f", "f32 (f32 x)", "sin.approx.f32"),
        ("sin.approx.ftz.f", "f32 (f32 x)", "sin.approx.ftz.f32"),
        ("cos.approx.f", "f32 (f32 x)", "cos.approx.f32"),
        ("cos.approx.ftz.f", "f32 (f32 x)", "cos.approx.ftz.f32"),
        ("sqrt.approx.f", "f32 (f32 x)", "sqrt.approx.f32"),
        ("sqrt.rn.f", "f32 (f32 x)", "sqrt.rn.f32 (IEEE)"),
        ("rcp.approx.ftz.f", "f32 (f32 x)", "rcp.approx.ftz.f32"),
        ("rcp.rn.f", "f32 (f32 x)", "rcp.rn.f32 (IEEE)"),
        ("rcp.rn.d", "f64 (f64 x)", "rcp.rn.f64 (IEEE)"),
        ("fmax.f", "f32 (f32 a, f32 b)", "max.f32"), ("fmin.f", "f32 (f32 a, f32 b)", "min.f32"),
        ("fmax.nan.f", "f32 (f32 a, f32 b)", "max.NaN.f32 (NaN-propagating)"),
        ("fmin.nan.f", "f32 (f32 a, f32 b)", "min.NaN.f32 (NaN-propagating)"),
        ("fmax.d", "f64 (f64 a, f64 b)", "max.f64"), ("fmin.d", "f64 (f64 a, f64 b)", "min.f64"),
        ("mulhi.i", "i32 (i32 a, i32 b)", "mul.hi.s32"),
        ("mulhi.ui", "i32 (i32 a, i32 b)", "mul.hi.u32"),
        ("mulhi.ll", "i64 (i64 a, i64 b)", "mul.hi.s64"),
        ("mulhi.ull", "i64 (i64 a, i64 b)", "mul.hi.u64")):
    _add(f"llvm.nvvm.{_name}", _sig, ANY, _doc)

# --- generic LLVM intrinsics, checked to select on NVPTX (LLVM 22) --------------------
_NO_LIBCALL = "LLVM 22 NVPTX: 'no libcall available', exits the process"
_NO_SELECT = "LLVM 22 NVPTX: 'Cannot select', aborts the process"
for _fp, _ty in (("f32", "f32"), ("f64", "f64")):
    for _fn in ("sqrt", "fabs", "floor", "ceil", "trunc", "rint", "round", "nearbyint"):
        _add(f"llvm.{_fn}.{_fp}", f"{_ty} ({_ty} x)", ANY,
             f"{_fn} ({_fp}; IEEE where the PTX instruction is)")
    for _fn in ("minnum", "maxnum", "minimum", "maximum", "copysign"):
        _add(f"llvm.{_fn}.{_fp}", f"{_ty} ({_ty} a, {_ty} b)", ANY, f"{_fn} ({_fp})")
    _add(f"llvm.fma.{_fp}", f"{_ty} ({_ty} a, {_ty} b, {_ty} c)", ANY, f"fma.rn.{_fp}")
_add("llvm.exp2.f32", "f32 (f32 x)", ANY, "2**x: lowers to ex2.approx.f32")
_add("llvm.exp2.f64", "f64 (f64 x)", _never(_NO_LIBCALL, "no f64 exp2 instruction; "
     "convert to f32 and use ex2.approx.f32, or implement the f64 series"), "2**x (f64)")
_LOG2E = "1.4426950408889634"
_LN2 = "0.6931471805599453"
for _fp in ("f32", "f64"):
    _add(f"llvm.exp.{_fp}", f"{_fp} ({_fp} x)", _never(
        _NO_LIBCALL, f"use ex2.approx.f32: exp(x) = ex2(x * {_LOG2E})"), f"e**x ({_fp})")
    _add(f"llvm.log.{_fp}", f"{_fp} ({_fp} x)", _never(
        _NO_LIBCALL, f"use lg2.approx: log(x) = lg2(x) * {_LN2}"), f"ln(x) ({_fp})")
    _add(f"llvm.log2.{_fp}", f"{_fp} ({_fp} x)", _never(
        _NO_LIBCALL, "use lg2.approx.f (f32) / lg2.approx.d (f64)"), f"log2(x) ({_fp})")
    _add(f"llvm.pow.{_fp}", f"{_fp} ({_fp} x, {_fp} y)", _never(
        _NO_SELECT, "use ex2.approx(y * lg2.approx(x))"), f"x**y ({_fp})")
    for _fn in ("sin", "cos"):
        _add(f"llvm.{_fn}.{_fp}", f"{_fp} ({_fp} x)", _never(
            _NO_SELECT + ("; f32 selects only with the afn flag" if _fp == "f32" else ""),
            f"use {_fn}.approx.f (f32)"), f"{_fn}(x) ({_fp})")
for _ty in ("i32", "i64"):
    for _fn in ("smin", "smax", "umin", "umax"):
        _add(f"llvm.{_fn}.{_ty}", f"{_ty} ({_ty} a, {_ty} b)", ANY, f"{_fn} ({_ty})")
    _add(f"llvm.abs.{_ty}", f"{_ty} ({_ty} x, immarg i1 int_min_is_poison)", ANY, "abs")
    for _fn in ("ctlz", "cttz"):
        _add(f"llvm.{_fn}.{_ty}", f"{_ty} ({_ty} x, immarg i1 zero_is_poison)", ANY,
             f"{_fn}: count leading/trailing zeros (clz.b / brev+clz)")
    for _fn in ("ctpop", "bitreverse", "bswap"):
        _add(f"llvm.{_fn}.{_ty}", f"{_ty} ({_ty} x)", ANY, f"{_fn} ({_ty})")
    for _fn in ("fshl", "fshr"):
        _add(f"llvm.{_fn}.{_ty}", f"{_ty} ({_ty} hi, {_ty} lo, {_ty} shift)", ANY,
             f"funnel shift ({_fn}; shf.{_fn[-1]} for i32)")

# --- mbarrier (PTX ISA "Parallel Synchronization: mbarrier") --------------------------
_MB = "llvm.nvvm.mbarrier"
_add(f"{_MB}.init.shared", "void (p3 bar, i32 count)", ANY,
     "mbarrier.init.shared.b64 [bar], count: arrival count 1..2**20-1")
_add(f"{_MB}.inval.shared", "void (p3 bar)", ANY, "mbarrier.inval.shared.b64")
_add(f"{_MB}.arrive.shared", "i64 (p3 bar)", ANY,
     "mbarrier.arrive.shared.b64 (one arrival, release.cta); returns the state token")
_add(f"{_MB}.pending.count", "i32 (i64 state)", ANY, "mbarrier.pending_count.b64")
for _rel, _req_cta, _req_cluster in (("", PTX80, PTX80), (".relaxed", PTX86, PTX86)):
    _sem = "relaxed" if _rel else "release"
    for _op, _ptx, _what in (("arrive", "arrive", "arrive with a count"),
                             ("arrive.drop", "arrive_drop", "arrive and drop"),
                             ("arrive.expect.tx", "arrive.expect_tx", "expect_tx then arrive")):
        _arg = "i32 tx_bytes" if "expect" in _op else "i32 count"
        _add(f"{_MB}.{_op}{_rel}.scope.cta.space.cta", f"i64 (p3 bar, {_arg})", _req_cta,
             f"mbarrier.{_ptx}.{_sem}.cta.shared::cta.b64: {_what}; returns the state token")
        _add(f"{_MB}.{_op}{_rel}.scope.cluster.space.cta", f"i64 (p3 bar, {_arg})",
             _req_cluster, f"{_what}, {_sem}.cluster scope, on a local barrier")
        _add(f"{_MB}.{_op}{_rel}.scope.cluster.space.cluster", f"void (p7 bar, {_arg})",
             _req_cluster, f"{_what} on a (possibly remote) shared::cluster barrier "
             f"(mapa result); returns no state")
for _scope in ("cta", "cluster"):
    _add(f"{_MB}.expect.tx.scope.{_scope}.space.cta", "void (p3 bar, i32 tx_bytes)", PTX80,
         f"mbarrier.expect_tx.relaxed.{_scope}.shared::cta.b64: add pending tx bytes")
    _add(f"{_MB}.complete.tx.scope.{_scope}.space.cta", "void (p3 bar, i32 tx_bytes)", PTX80,
         f"mbarrier.complete_tx.relaxed.{_scope}.shared::cta.b64")
_add(f"{_MB}.expect.tx.scope.cluster.space.cluster", "void (p7 bar, i32 tx_bytes)", PTX80,
     "mbarrier.expect_tx on a shared::cluster barrier")
for _rel, _req in (("", ANY), (".relaxed", PTX86)):
    for _scope in ("cta", "cluster"):
        _r = _req if (_scope == "cta" or _rel) else PTX80
        _base = f"{_MB}.{{}}{_rel}.scope.{_scope}.space.cta"
        _add(_base.format("try.wait.parity"), "i1 (p3 bar, i32 parity)", _r,
             f"mbarrier.try_wait.parity{_rel}.{_scope}: true when phase `parity` completed "
             f"(may suspend for a system-defined time)")
        _add(_base.format("try.wait.parity.tl"), "i1 (p3 bar, i32 parity, i32 suspend_ns)",
             _r, "try_wait.parity with a suspend-time hint (ns)")
        _add(_base.format("try.wait"), "i1 (p3 bar, i64 state)", _r,
             "mbarrier.try_wait on a state token from arrive")
        _add(_base.format("test.wait.parity"), "i1 (p3 bar, i32 parity)", _r,
             "mbarrier.test_wait.parity: non-blocking phase test")
        _add(_base.format("test.wait"), "i1 (p3 bar, i64 state)", _r,
             "mbarrier.test_wait on a state token")
_add(f"{_MB}.test.wait.shared", "i1 (p3 bar, i64 state)", ANY, "mbarrier.test_wait.shared.b64")

# --- TMA and bulk copies (PTX ISA "cp.async.bulk", "cp.async.bulk.tensor") ------------
_BULK = "llvm.nvvm.cp.async.bulk"
for _dim in range(1, 6):
    _coords = ", ".join(f"i32 c{i}" for i in range(_dim))
    _add(f"{_BULK}.tensor.g2s.tile.{_dim}d",
         f"void (p7 dst, p3 bar, ptr tensormap, {_coords}, i16 cta_mask, i64 cache_hint, "
         f"immarg i1 use_cta_mask, immarg i1 use_cache_hint, immarg i32 cta_group)", PTX80,
         f"TMA load {_dim}d: cp.async.bulk.tensor.{_dim}d.shared::cluster.global.tile."
         f"mbarrier::complete_tx::bytes [dst], [tensormap, {{c..}}], [bar]; "
         f"cta_group 1/2 only on sm_100a",
         imm={"cta_group": (0,)}, imm_extra={"cta_group": {"sm_100a": (1, 2)}})
    _add(f"{_BULK}.tensor.g2s.cta.tile.{_dim}d",
         f"void (p3 dst, p3 bar, ptr tensormap, {_coords}, i64 cache_hint, "
         f"immarg i1 use_cache_hint)", PTX86,
         f"TMA load {_dim}d into shared::cta (no multicast)")
    _add(f"{_BULK}.tensor.s2g.tile.{_dim}d",
         f"void (p3 src, ptr tensormap, {_coords}, i64 cache_hint, immarg i1 use_cache_hint)",
         PTX80, f"TMA store {_dim}d: cp.async.bulk.tensor.{_dim}d.global.shared::cta."
         f"tile.bulk_group; complete with commit.group / wait.group")
    for _red in ("add", "min", "max"):
        _add(f"{_BULK}.tensor.reduce.{_red}.tile.{_dim}d",
             f"void (p3 src, ptr tensormap, {_coords}, i64 cache_hint, "
             f"immarg i1 use_cache_hint)", PTX80,
             f"TMA reduce-store {_dim}d: cp.reduce.async.bulk.tensor .{_red}")
    _add(f"{_BULK}.tensor.prefetch.tile.{_dim}d",
         f"void (ptr tensormap, {_coords}, i64 cache_hint, immarg i1 use_cache_hint)", PTX80,
         f"cp.async.bulk.prefetch.tensor.{_dim}d.L2.global.tile")
_add(f"{_BULK}.commit.group", "void ()", PTX80, "cp.async.bulk.commit_group")
_add(f"{_BULK}.wait.group", "void (immarg i32 n)", PTX80,
     "cp.async.bulk.wait_group n: wait until at most n bulk groups are pending",
     imm={"n": range(0, 64)})
_add(f"{_BULK}.wait.group.read", "void (immarg i32 n)", PTX80,
     "cp.async.bulk.wait_group.read n: sources of all but n groups may be reused",
     imm={"n": range(0, 64)})
_add(f"{_BULK}.global.to.shared.cluster",
     "void (p7 dst, p3 bar, p1 src, i32 nbytes, i16 cta_mask, i64 cache_hint, "
     "immarg i1 use_cta_mask, immarg i1 use_cache_hint)", PTX80,
     "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes (non-tensor)")
_add(f"{_BULK}.global.to.shared.cta",
     "void (p3 dst, p3 bar, p1 src, i32 nbytes, i64 cache_hint, immarg i1 use_cache_hint)",
     PTX86, "cp.async.bulk.shared::cta.global (non-tensor)")
_add(f"{_BULK}.shared.cta.to.global",
     "void (p1 dst, p3 src, i32 nbytes, i64 cache_hint, immarg i1 use_cache_hint)", PTX80,
     "cp.async.bulk.global.shared::cta.bulk_group (non-tensor)")
_add(f"{_BULK}.shared.cta.to.cluster", "void (p7 dst, p3 bar, p3 src, i32 nbytes)", PTX80,
     "cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes")
_add(f"{_BULK}.prefetch.L2", "void (p1 src, i32 nbytes, i64 cache_hint, "
     "immarg i1 use_cache_hint)", PTX80, "cp.async.bulk.prefetch.L2.global")
_add("llvm.nvvm.prefetch.tensormap.p0", "void (ptr tensormap)", PTX80,
     "prefetch.tensormap [tensormap]")

# --- warp-level misc: elect, setmaxnreg, matrices, PDL, DSMEM ----------------------------
_add("llvm.nvvm.elect.sync", "{i32, i1} (i32 mask)", PTX80,
     "elect.sync: {leader lane, is-leader predicate} over `mask`")
for _dir, _regs in (("inc", 232), ("dec", 40)):
    _add(f"llvm.nvvm.setmaxnreg.{_dir}.sync.aligned.u32", "void (immarg i32 regs)",
         SM90A_SM100A, f"setmaxnreg.{_dir}.sync.aligned.u32 regs: warpgroup-wide register "
         f"reallocation (e.g. {_regs}); 24..256, multiple of 8",
         imm={"regs": range(24, 257, 8)})
_add("llvm.nvvm.wgmma.fence.sync.aligned", "void ()", SM90A,
     "wgmma.fence: order register/smem writes before wgmma.mma_async (inline asm)")
_add("llvm.nvvm.wgmma.commit_group.sync.aligned", "void ()", SM90A, "wgmma.commit_group")
_add("llvm.nvvm.wgmma.wait_group.sync.aligned", "void (immarg i64 n)", SM90A,
     "wgmma.wait_group n: at most n wgmma groups pending", imm={"n": range(0, 8)})
for _num, _ret in ((1, "i32"), (2, "{i32*2}"), (4, "{i32*4}")):
    for _trans in ("", ".trans"):
        _regs = ", ".join(f"i32 r{i}" for i in range(_num))
        _add(f"llvm.nvvm.ldmatrix.sync.aligned.m8n8.x{_num}{_trans}.b16.p3",
             f"{_ret} (p3 src)", ANY, f"ldmatrix.sync.aligned.m8n8.x{_num}{_trans}.shared.b16")
        _add(f"llvm.nvvm.stmatrix.sync.aligned.m8n8.x{_num}{_trans}.b16.p3",
             f"void (p3 dst, {_regs})", ANY,
             f"stmatrix.sync.aligned.m8n8.x{_num}{_trans}.shared.b16")
_add("llvm.nvvm.griddepcontrol.wait", "void ()", ANY,
     "griddepcontrol.wait: wait for the prerequisite grid (PDL)")
_add("llvm.nvvm.griddepcontrol.launch.dependents", "void ()", ANY,
     "griddepcontrol.launch_dependents: let the dependent grid start (PDL)")
_add("llvm.nvvm.mapa.shared.cluster", "p7 (p3 addr, i32 rank)", ANY,
     "mapa.shared::cluster.u32: address of `addr` in the smem of CTA `rank`")
_add("llvm.nvvm.mapa", "ptr (ptr addr, i32 rank)", ANY, "mapa.u64 (generic addresses)")
_add("llvm.nvvm.getctarank.shared.cluster", "i32 (p3 addr)", ANY,
     "getctarank.shared::cluster.u32: CTA rank owning a shared::cluster address")
_add("llvm.nvvm.getctarank", "i32 (ptr addr)", ANY, "getctarank.u64 (generic address)")

# --- tcgen05 / TMEM (PTX ISA 8.6 "tcgen05"), sm_100a only ------------------------------
_TC = "llvm.nvvm.tcgen05"
for _cg in ("cg1", "cg2"):
    _g = f"cta_group::{_cg[-1]}"
    _add(f"{_TC}.alloc.shared.{_cg}", "void (p3 slot, i32 ncols)", SM100A,
         f"tcgen05.alloc.{_g}: allocate `ncols` TMEM columns (32..512, power of 2); "
         f"the TMEM address is written to smem `slot`")
    _add(f"{_TC}.alloc.{_cg}", "void (ptr slot, i32 ncols)", SM100A,
         f"tcgen05.alloc.{_g} with a generic `slot` address")
    _add(f"{_TC}.dealloc.{_cg}", "void (p6 taddr, i32 ncols)", SM100A, f"tcgen05.dealloc.{_g}")
    _add(f"{_TC}.relinq.alloc.permit.{_cg}", "void ()", SM100A,
         f"tcgen05.relinquish_alloc_permit.{_g}")
    _add(f"{_TC}.commit.shared.{_cg}", "void (p3 bar)", SM100A,
         f"tcgen05.commit.{_g}.mbarrier::arrive::one: arrive on `bar` when prior MMAs finish")
    _add(f"{_TC}.commit.mc.shared.{_cg}", "void (p3 bar, i16 cta_mask)", SM100A,
         f"tcgen05.commit.{_g}...multicast::cluster")
_MMA_IMM = {"kind": (0, 1, 2, 3), "cta_group": (1, 2), "collector": (0, 1, 2, 3)}
_add(f"{_TC}.mma.shared",
     "void (p6 d, i64 a_desc, i64 b_desc, i32 idesc, i1 accumulate, immarg i32 kind, "
     "immarg i32 cta_group, immarg i32 collector)", SM100A,
     "tcgen05.mma: D(TMEM) (+)= A(smem desc) x B(smem desc); kind 0 f16, 1 tf32, "
     "2 f8f6f4, 3 i8; collector 0 discard, 1 lastuse, 2 fill, 3 use", imm=_MMA_IMM)
_add(f"{_TC}.mma.tensor",
     "void (p6 d, p6 a, i64 b_desc, i32 idesc, i1 accumulate, immarg i32 kind, "
     "immarg i32 cta_group, immarg i32 collector)", SM100A,
     "tcgen05.mma with A in TMEM", imm=_MMA_IMM)
for _shape, _per in (("32x32b", 1), ("16x64b", 1), ("16x128b", 2), ("16x256b", 4)):
    _num = 1
    while _per * _num <= 128:
        _n = _per * _num
        _vec = "i32" if _n == 1 else f"<{_n} x i32>"
        _add(f"{_TC}.ld.{_shape}.x{_num}", f"{_vec} (p6 taddr, immarg i1 pack)", SM100A,
             f"tcgen05.ld.sync.aligned.{_shape}.x{_num}.b32: {_n} registers per thread")
        _add(f"{_TC}.st.{_shape}.x{_num}", f"void (p6 taddr, {_vec} values, immarg i1 unpack)",
             SM100A, f"tcgen05.st.sync.aligned.{_shape}.x{_num}.b32")
        _num *= 2
for _name, _doc in (("wait.ld", "tcgen05.wait::ld"), ("wait.st", "tcgen05.wait::st"),
                    ("fence.before.thread.sync", "tcgen05.fence::before_thread_sync"),
                    ("fence.after.thread.sync", "tcgen05.fence::after_thread_sync")):
    _add(f"{_TC}.{_name}", "void ()", SM100A, _doc)

# --- cluster launch control (PTX ISA 8.6 "clusterlaunchcontrol"), sm_100a only ---------
_CLC = "llvm.nvvm.clusterlaunchcontrol"
_add(f"{_CLC}.try_cancel.async.shared", "void (p3 response, p3 bar)", SM100A,
     "clusterlaunchcontrol.try_cancel: ask to cancel a not-yet-launched cluster; the "
     "16-byte response arrives through `bar` (complete_tx)")
_add(f"{_CLC}.try_cancel.async.multicast.shared", "void (p3 response, p3 bar)", SM100A,
     "try_cancel with the response multicast to every CTA of the cluster")
_add(f"{_CLC}.query_cancel.is_canceled", "i1 (i128 response)", SM100A,
     "clusterlaunchcontrol.query_cancel.is_canceled.pred.b128")
for _axis in _XYZ:
    _add(f"{_CLC}.query_cancel.get_first_ctaid.{_axis}", "i32 (i128 response)", SM100A,
         f"clusterlaunchcontrol.query_cancel.get_first_ctaid::{_axis}.b32.b128")

INTRINSICS: Mapping[str, Intrinsic] = MappingProxyType(_TABLE)
"""Every intrinsic tsjit may emit, by LLVM name."""


# ---------------------------------------------------------------------------------
# API
# ---------------------------------------------------------------------------------
def lookup(name: str) -> Intrinsic:
    """The table entry for ``name`` (full LLVM name or key).

    Raises:
        CompilationError: ``name`` is not in the table (internal: a builtin asked for an
            intrinsic nobody has checked).
    """
    entry = _TABLE.get(name) or _BY_KEY.get(name)
    if entry is None:
        raise CompilationError(
            f"internal: intrinsic {name!r} is not in tsjit's intrinsic table "
            f"(tsjit/backend/intrinsics.py); add it there with its requirements")
    return entry


def check_supported(name: str, target: Target | str) -> None:
    """Raise unless intrinsic ``name`` can be compiled for ``target``.

    Call before emitting the call: LLVM aborts the process on intrinsics the target
    cannot select (toolchain.md §6.2).

    Raises:
        CompilationError: e.g. "`setmaxnreg.inc.sync.aligned.u32` needs sm_90a or
            sm_100a (PTX 8.0); this kernel is being compiled for sm_90 (PTX 8.0)".
    """
    entry = lookup(name)
    target = get_target(target)
    req = entry.requirement
    if req.allows(target):
        return
    if not req.targets:
        raise CompilationError(
            f"`{entry.key}` cannot be compiled for NVPTX ({req.reason}); {req.alternative}")
    raise CompilationError(
        f"`{entry.key}` needs {req.describe()}; this kernel is being compiled for "
        f"{target.name} (PTX {target.ptx_version_text})")


def supported_on(target: Target | str) -> list[Intrinsic]:
    """Every table entry that compiles for ``target``, in table order."""
    target = get_target(target)
    return [entry for entry in _TABLE.values() if entry.requirement.allows(target)]


def declare(module: ir.Module, name: str) -> ir.Function:
    """The declaration of intrinsic ``name`` in ``module``, added on first use.

    Idempotent: a second call returns the same ``ir.Function``.  Does not check the
    target; call :func:`check_supported` first.

    Raises:
        CompilationError: ``name`` is unknown, or ``module`` already holds a different
            global of that name (internal).
    """
    entry = lookup(name)
    existing = module.globals.get(entry.name)
    if existing is not None:
        if not isinstance(existing, ir.Function) or existing.function_type != entry.function_type:
            raise CompilationError(
                f"internal: module already defines {entry.name} as {existing.type}, "
                f"not as the intrinsic {entry.function_type}")
        return existing
    return ir.Function(module, entry.function_type, name=entry.name)
