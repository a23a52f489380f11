"""The one table of LLVM / NVVM intrinsics tsjit emits, gated by target.

LLVM's NVPTX back end *aborts the process* ("LLVM ERROR: Cannot select: intrinsic
...", or ``exit(1)`` for "no libcall available") when it meets an intrinsic the
target cannot lower (toolchain.md §6.2).  So every intrinsic call goes through this
table first: :func:`check_supported` raises a :class:`~tsjit.errors.CompilationError`
for a target the intrinsic does not support, and :func:`declare` adds the exact
declaration LLVM 22 expects to an ``llvmlite.ir.Module``.

Each :class:`Intrinsic` records its LLVM name and ``llvmlite.ir`` signature (opaque pointers; address
spaces 1 global, 3 shared::cta, 6 tensor memory, 7 shared::cluster), its immediates (``immarg``) with
their allowed values, and a :class:`Requirement` (set of targets, minimum PTX ISA version).

Requirements were measured with llvmlite 0.50 / ptxas 13.0 (toolchain.md §1-§2) and are re-checked by
``tests/backend/test_intrinsics.py``.  Math intrinsics that never select on NVPTX (``llvm.exp.f32``,
``llvm.log.*``, ...) are listed with no target and the ``alternative`` to emit instead.

:func:`lookup` takes the LLVM name (``llvm.nvvm.elect.sync``) or the key without ``llvm.nvvm.``/``llvm.``.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType

from llvmlite import ir

from tsjit.backend.intrinsic_records import (ANY, PTX80, PTX83, PTX86, SM90A, SM90A_SM100A, SM100A, Immediate,
                                             Intrinsic, Requirement, never, parse_signature)
from tsjit.backend.targets import Target, get_target
from tsjit.errors import CompilationError

__all__ = ["Requirement", "Immediate", "Intrinsic", "INTRINSICS", "lookup", "check_supported", "declare", "supported_on"]


# --- the table -----------------------------------------------------------------------
_TABLE: dict[str, Intrinsic] = {}
_BY_KEY: dict[str, Intrinsic] = {}


def _add(name: str, sig: str, req: Requirement = ANY, doc: str = "",
         imm: Mapping[str, Iterable[int]] | None = None,
         imm_extra: Mapping[str, Mapping[str, tuple[int, ...]]] | None = None) -> None:
    ret, types, names, positions = parse_signature(sig)
    imm, imm_extra = dict(imm or {}), dict(imm_extra or {})
    immediates = []
    for pos in positions:
        values = imm.pop(names[pos], (0, 1) if types[pos] == ir.IntType(1) else None)
        immediates.append(Immediate(pos, names[pos], None if values is None else tuple(values),
                                    MappingProxyType(dict(imm_extra.pop(names[pos], {})))))
    if imm or imm_extra or name in _TABLE:
        raise RuntimeError(f"internal error, please report: intrinsic table entry {name}: duplicate, or "
                           f"immediates {[*imm, *imm_extra]} not in its signature")
    entry = Intrinsic(name, ret, types, names, tuple(immediates), req, doc)
    _TABLE[name] = entry
    _BY_KEY[entry.key] = entry


def _add_all(prefix: str, req: Requirement, rows) -> None:
    """_add for rows of (name suffix, signature, doc)."""
    for suffix, sig, doc in rows:
        _add(prefix + suffix, sig, req, doc)


_NV = "llvm.nvvm."

# --- special registers (PTX ISA "Special Registers") ------------------------------------
for _reg, _doc in (("tid", "thread index in the CTA"), ("ntid", "CTA shape"),
                   ("ctaid", "CTA index in the grid"), ("nctaid", "grid shape in CTAs"),
                   ("clusterid", "cluster index in the grid"), ("nclusterid", "grid in clusters"),
                   ("cluster.ctaid", "CTA index in the cluster"),
                   ("cluster.nctaid", "cluster shape in CTAs")):
    _add_all(_NV + "read.ptx.sreg.", ANY, [(f"{_reg}.{axis}", "i32 ()",
             f"%{_reg.replace('.', '_')}.{axis}: {_doc} (PTX ISA, Special Registers)")
             for axis in "xyz"])
_add_all(_NV + "read.ptx.sreg.", ANY, [(reg, f"{ty} ()", f"%{reg.replace('.', '_')}: {doc}")
         for reg, ty, doc in (
    ("laneid", "i32", "lane index, 0..31"), ("warpid", "i32", "hardware warp slot (unstable)"),
    ("smid", "i32", "SM index"), ("nsmid", "i32", "number of SM ids"),
    ("clock", "i32", "32-bit SM cycle counter"), ("clock64", "i64", "64-bit SM cycle counter"),
    ("globaltimer", "i64", "global timer, nanoseconds"),
    *[(f"lanemask.{m}", "i32", f"lanes with id {m} ours") for m in ("eq", "lt", "le", "gt", "ge")],
    ("dynamic_smem_size", "i32", "dynamic shared memory of this launch, bytes"),
    ("total_smem_size", "i32", "static + dynamic shared memory, bytes"),
    ("cluster.ctarank", "i32", "CTA rank in the cluster"),
    ("cluster.nctarank", "i32", "CTAs per cluster"))])
_add(_NV + "is_explicit_cluster", "i1 ()", ANY, "%is_explicit_cluster: launched with cluster dims")

# --- CTA / warp / cluster barriers (PTX ISA "bar, barrier", "barrier.cluster") ----------
_add_all(_NV, ANY, (
    ("barrier.cta.sync.aligned.all", "void (i32 id)", "bar.sync id: every thread of the CTA"),
    ("barrier.cta.sync.aligned.count", "void (i32 id, i32 count)",
     "bar.sync id, count: named barrier over `count` threads (a multiple of 32)"),
    ("barrier.cta.sync.all", "void (i32 id)", "barrier.sync id (warps may diverge)"),
    ("barrier.cta.sync.count", "void (i32 id, i32 count)", "barrier.sync id, count"),
    ("barrier.cta.arrive.aligned.count", "void (i32 id, i32 count)",
     "bar.arrive id, count: arrive on a named barrier without waiting"),
    ("barrier.cta.arrive.count", "void (i32 id, i32 count)", "barrier.arrive id, count"),
    ("barrier.cta.red.popc.aligned.all", "i32 (i32 id, i1 pred)",
     "bar.red.popc.u32: CTA barrier returning how many threads had `pred`"),
    ("barrier.cta.red.and.aligned.all", "i1 (i32 id, i1 pred)", "bar.red.and.pred"),
    ("barrier.cta.red.or.aligned.all", "i1 (i32 id, i1 pred)", "bar.red.or.pred"),
    ("bar.warp.sync", "void (i32 mask)", "bar.warp.sync mask"),
    ("barrier.cluster.arrive", "void ()", "barrier.cluster.arrive (release)"),
    ("barrier.cluster.wait", "void ()", "barrier.cluster.wait (acquire)")))
_add_all(_NV + "barrier.cluster.", PTX80, [(op, "void ()", f"barrier.cluster.{op}")
         for op in ("arrive.relaxed", "arrive.aligned", "wait.aligned", "arrive.relaxed.aligned")])

# --- warp shuffles, votes, reductions (PTX ISA "shfl.sync", "vote.sync", "redux.sync") --
_add_all(_NV, ANY, [(f"shfl.sync.{mode}.{ty}",
                     f"{ty} (i32 mask, {ty} value, i32 lane_or_delta, i32 clamp)",
                     f"shfl.sync.{mode}.b32; clamp = c (bits 0-4) | segment mask (bits 8-12)")
                    for mode in ("idx", "up", "down", "bfly") for ty in ("i32", "f32")])
_add_all(_NV, ANY, [(f"vote.{m}.sync", "i1 (i32 mask, i1 pred)", f"vote.sync.{m}.pred")
                    for m in ("all", "any", "uni")])
_add(_NV + "vote.ballot.sync", "i32 (i32 mask, i1 pred)", ANY, "vote.sync.ballot.b32")
_add(_NV + "activemask", "i32 ()", ANY, "activemask.b32: lanes currently active")
_add_all(_NV + "redux.sync.", ANY, [(op, "i32 (i32 value, i32 mask)", f"redux.sync.{op}")
                                    for op in "add min max umin umax and or xor".split()])

# --- memory fences (PTX ISA "membar / fence").  fence.{acquire,release,acq_rel,sc}.<scope>
# are plain LLVM `fence` instructions with syncscope "block"/"cluster"/"device"/none(sys).
_add_all(_NV, ANY, [(f"membar.{s}", "void ()", f"membar.{s}") for s in ("cta", "gl", "sys")]
         + [("fence.sc.cluster", "void ()", "fence.sc.cluster")])
_add(_NV + "fence.mbarrier_init.release.cluster", "void ()", PTX80,
     "fence.mbarrier_init.release.cluster: publish mbarrier.init before the first TMA or "
     "remote arrive (toolchain.md §6.8)")
_add_all(_NV + "fence.proxy.async", PTX80, [
    (llvm_space, "void ()", f"fence.proxy.async{ptx_space}: order generic-proxy accesses "
     f"with async-proxy ones (TMA, wgmma operands)")
    for llvm_space, ptx_space in (("", ""), (".shared_cta", ".shared::cta"),
                                  (".global", ".global"), (".shared_cluster", ".shared::cluster"))])
for _scope in ("cta", "cluster", "gpu", "sys"):
    _add(f"{_NV}fence.proxy.tensormap_generic.release.{_scope}", "void ()", PTX83,
         f"fence.proxy.tensormap::generic.release.{_scope} (after writing a tensormap)")
    _add(f"{_NV}fence.proxy.tensormap_generic.acquire.{_scope}",
         "void (ptr tensormap, immarg i32 size)", PTX83,
         f"fence.proxy.tensormap::generic.acquire.{_scope} [tensormap], 128", imm={"size": (128,)})
_add_all(_NV, PTX86, [(f"fence.{o}.sync_restrict.space.{s}.scope.cluster", "void ()",
                       f"fence.{o}.sync_restrict::shared::{s}.cluster")
                      for o, s in (("acquire", "cluster"), ("release", "cta"))])

# --- NVVM math (PTX ISA "Floating Point Instructions").  Not listed: lg2.approx.d, for
# which LLVM 22 emits `lg2.approx.f64` and ptxas rejects it. ------------------------------
_add_all(_NV, ANY, [(name, "f32 (f32 x)", ptx) for name, ptx in (
    ("rsqrt.approx.f", "rsqrt.approx.f32"), ("rsqrt.approx.ftz.f", "rsqrt.approx.ftz.f32"),
    ("ex2.approx.f32", "ex2.approx.f32: 2**x"), ("ex2.approx.ftz.f32", "ex2.approx.ftz.f32"),
    ("lg2.approx.f", "lg2.approx.f32: log2(x)"), ("lg2.approx.ftz.f", "lg2.approx.ftz.f32"),
    ("sin.approx.f", "sin.approx.f32"), ("sin.approx.ftz.f", "sin.approx.ftz.f32"),
    ("cos.approx.f", "cos.approx.f32"), ("cos.approx.ftz.f", "cos.approx.ftz.f32"),
    ("sqrt.approx.f", "sqrt.approx.f32"), ("sqrt.rn.f", "sqrt.rn.f32 (IEEE)"),
    ("rcp.approx.ftz.f", "rcp.approx.ftz.f32"), ("rcp.rn.f", "rcp.rn.f32 (IEEE)"))])
_add_all(_NV, ANY, (
    ("rsqrt.approx.d", "f64 (f64 x)", "rsqrt.approx.f64"),
    ("rcp.rn.d", "f64 (f64 x)", "rcp.rn.f64 (IEEE)"),
    ("fmax.f", "f32 (f32 a, f32 b)", "max.f32"), ("fmin.f", "f32 (f32 a, f32 b)", "min.f32"),
    ("fmax.nan.f", "f32 (f32 a, f32 b)", "max.NaN.f32"),
    ("fmin.nan.f", "f32 (f32 a, f32 b)", "min.NaN.f32"),
    ("fmax.d", "f64 (f64 a, f64 b)", "max.f64"), ("fmin.d", "f64 (f64 a, f64 b)", "min.f64"),
    *[(f"mulhi.{n}", f"{t} ({t} a, {t} b)", f"mul.hi.{p}") for n, t, p in (
        ("i", "i32", "s32"), ("ui", "i32", "u32"), ("ll", "i64", "s64"), ("ull", "i64", "u64"))]))

# --- generic LLVM intrinsics, each checked to select on NVPTX (LLVM 22) -----------------
for _f in ("f32", "f64"):  # float -> int that saturates (NaN -> 0) where fptosi/fptoui would be poison
    _add_all("llvm.", ANY, [(f"fpto{s}i.sat.i{b}.{_f}", f"i{b} ({_f} x)", f"cvt.rzi.{s}{b}.{_f} with clamps")
                            for s in "su" for b in (8, 16, 32, 64)])
_NO_LIBCALL = "LLVM 22 NVPTX exits the process with 'no libcall available'"
_NO_SELECT = "LLVM 22 NVPTX aborts the process with 'Cannot select'"
for _t in ("f16", "f32", "f64"):
    _add_all("llvm.", ANY, [(f"{fn}.{_t}", f"{_t} ({_t} x)", f"{fn} ({_t})") for fn in (
        "sqrt", "fabs", "floor", "ceil", "trunc", "rint", "round", "nearbyint")])
    _add_all("llvm.", ANY, [(f"{fn}.{_t}", f"{_t} ({_t} a, {_t} b)", f"{fn} ({_t})")
                            for fn in ("minnum", "maxnum", "minimum", "maximum", "copysign")])
    _add(f"llvm.fma.{_t}", f"{_t} ({_t} a, {_t} b, {_t} c)", ANY, f"fma.rn.{_t}")
    _add(f"llvm.exp.{_t}", f"{_t} ({_t} x)", never(
        _NO_LIBCALL, "use ex2.approx.f32: exp(x) = ex2(x * 1.4426950408889634)"), "e**x")
    _add(f"llvm.log.{_t}", f"{_t} ({_t} x)", never(
        _NO_LIBCALL, "use lg2.approx.f: log(x) = lg2(x) * 0.6931471805599453"), "ln(x)")
    _add(f"llvm.log2.{_t}", f"{_t} ({_t} x)", never(_NO_LIBCALL, "use lg2.approx.f"), "log2")
    _add(f"llvm.pow.{_t}", f"{_t} ({_t} x, {_t} y)", never(
        _NO_SELECT, "use ex2.approx(y * lg2.approx(x))"), "x**y")
    for _fn in ("sin", "cos"):
        _add(f"llvm.{_fn}.{_t}", f"{_t} ({_t} x)", never(
            _NO_SELECT + (" (f32 selects only with the afn flag)" if _t == "f32" else ""),
            f"use {_fn}.approx.f (f32)"), f"{_fn}(x)")
_add("llvm.exp2.f32", "f32 (f32 x)", ANY, "2**x: lowers to ex2.approx.f32")
_add("llvm.exp2.f64", "f64 (f64 x)", never(_NO_LIBCALL, "use ex2.approx.f32 on an f32"), "2**x")
for _t in ("i8", "i16", "i32", "i64"):
    _add_all("llvm.", ANY, [(f"{fn}.{_t}", f"{_t} ({_t} a, {_t} b)", f"{fn} ({_t})")
                            for fn in ("smin", "smax", "umin", "umax")]
             + [(f"{fn}.{_t}", f"{_t} ({_t} x)", f"{fn} ({_t})")
                for fn in ("ctpop", "bitreverse", "bswap")[:3 if _t != "i8" else 2]])
    _add_all("llvm.", ANY, [(f"{fn}.{_t}", f"{_t} ({_t} hi, {_t} lo, {_t} shift)",
                             f"funnel shift {fn} ({_t})") for fn in ("fshl", "fshr")])
    _add_all("llvm.", ANY, [(f"{fn}.{_t}", f"{_t} ({_t} x, immarg i1 {flag}_poison)", fn)
                            for fn, flag in (("abs", "int_min_is"), ("ctlz", "zero_is"),
                                             ("cttz", "zero_is"))])

# --- mbarrier (PTX ISA "Parallel Synchronization and Communication: mbarrier") ----------
_MB = _NV + "mbarrier."
_add_all(_MB, ANY, (
    ("init.shared", "void (p3 bar, i32 count)", "mbarrier.init.shared.b64: count 1..2**20-1"),
    ("inval.shared", "void (p3 bar)", "mbarrier.inval.shared.b64"),
    ("arrive.shared", "i64 (p3 bar)", "mbarrier.arrive.shared.b64; returns the state"),
    ("pending.count", "i32 (i64 state)", "mbarrier.pending_count.b64"),
    ("test.wait.shared", "i1 (p3 bar, i64 state)", "mbarrier.test_wait.shared.b64")))
for _rel, _req in (("", PTX80), (".relaxed", PTX86)):
    _sem = _rel[1:] or "release"
    for _op, _ptx in (("arrive", "arrive"), ("arrive.drop", "arrive_drop"),
                      ("arrive.expect.tx", "arrive.expect_tx")):
        _arg = "i32 tx_bytes" if "expect" in _op else "i32 count"
        _add_all(_MB, _req, (
            (f"{_op}{_rel}.scope.cta.space.cta", f"i64 (p3 bar, {_arg})",
             f"mbarrier.{_ptx}.{_sem}.cta.shared::cta.b64; returns the state"),
            (f"{_op}{_rel}.scope.cluster.space.cta", f"i64 (p3 bar, {_arg})",
             f"mbarrier.{_ptx}.{_sem}.cluster.shared::cta.b64; returns the state"),
            (f"{_op}{_rel}.scope.cluster.space.cluster", f"void (p7 bar, {_arg})",
             f"mbarrier.{_ptx}.{_sem}.cluster.shared::cluster.b64 on a (remote) barrier "
             f"from mapa; returns no state")))
    for _scope in ("cta", "cluster"):
        _add_all(_MB, _req if (_scope == "cluster" or _rel) else ANY, [
            (f"{op}{_rel}.scope.{_scope}.space.cta", sig, f"mbarrier.{ptx}: {doc}")
            for op, ptx, sig, doc in (
                ("try.wait.parity", "try_wait.parity", "i1 (p3 bar, i32 parity)",
                 "true once the phase with `parity` completed (suspends a while)"),
                ("try.wait.parity.tl", "try_wait.parity", "i1 (p3 bar, i32 parity, "
                 "i32 suspend_ns)", "with a suspend-time hint, ns"),
                ("try.wait", "try_wait", "i1 (p3 bar, i64 state)", "on a state from arrive"),
                ("test.wait.parity", "test_wait.parity", "i1 (p3 bar, i32 parity)",
                 "non-blocking phase test"),
                ("test.wait", "test_wait", "i1 (p3 bar, i64 state)", "non-blocking"))])
for _scope in ("cta", "cluster"):
    _add_all(_MB, PTX80, [(f"{op}.scope.{_scope}.space.cta", "void (p3 bar, i32 tx_bytes)",
                           f"mbarrier.{op.replace('.tx', '_tx')}.relaxed.{_scope}.shared::cta.b64")
                          for op in ("expect.tx", "complete.tx")])
_add(_MB + "expect.tx.scope.cluster.space.cluster", "void (p7 bar, i32 tx_bytes)", PTX80,
     "mbarrier.expect_tx.relaxed.cluster.shared::cluster.b64")

# --- TMA and bulk copies (PTX ISA "cp.async.bulk", "cp.async.bulk.tensor") --------------
_BULK = _NV + "cp.async.bulk."
for _dim in range(1, 6):
    _c = ", ".join(f"i32 c{i}" for i in range(_dim))
    _add(f"{_BULK}tensor.g2s.tile.{_dim}d",
         f"void (p7 dst, p3 bar, ptr tensormap, {_c}, i16 cta_mask, i64 cache_hint, "
         f"immarg i1 use_cta_mask, immarg i1 use_cache_hint, immarg i32 cta_group)", PTX80,
         f"TMA load: cp.async.bulk.tensor.{_dim}d.shared::cluster.global.tile.mbarrier::"
         f"complete_tx::bytes [dst], [tensormap, {{c}}], [bar]; cta_group 1/2: sm_100a only",
         imm={"cta_group": (0,)}, imm_extra={"cta_group": {"sm_100a": (1, 2), "sm_100f": (1, 2)}})
    _add(f"{_BULK}tensor.g2s.cta.tile.{_dim}d", f"void (p3 dst, p3 bar, ptr tensormap, {_c}, "
         f"i64 cache_hint, immarg i1 use_cache_hint)", PTX86,
         f"TMA load {_dim}d into shared::cta (no multicast)")
    _add_all(_BULK + "tensor.", PTX80, [(f"{op}.tile.{_dim}d", f"void (p3 src, ptr tensormap, "
             f"{_c}, i64 cache_hint, immarg i1 use_cache_hint)", f"TMA {doc} {_dim}d")
             for op, doc in (("s2g", "store (bulk_group; commit.group / wait.group)"),
                             ("reduce.add", "reduce-add store"), ("reduce.min", "reduce-min store"),
                             ("reduce.max", "reduce-max store"))])
    _add(f"{_BULK}tensor.prefetch.tile.{_dim}d", f"void (ptr tensormap, {_c}, i64 cache_hint, "
         f"immarg i1 use_cache_hint)", PTX80, f"cp.async.bulk.prefetch.tensor.{_dim}d.L2")
_add(_BULK + "commit.group", "void ()", PTX80, "cp.async.bulk.commit_group")
_add(_BULK + "wait.group", "void (immarg i32 n)", PTX80,
     "cp.async.bulk.wait_group n: until at most n bulk groups are pending", imm={"n": range(64)})
_add(_BULK + "wait.group.read", "void (immarg i32 n)", PTX80,
     "cp.async.bulk.wait_group.read n: sources of all but n groups reusable", imm={"n": range(64)})
_add_all(_BULK, PTX80, (
    ("global.to.shared.cluster", "void (p7 dst, p3 bar, p1 src, i32 nbytes, i16 cta_mask, "
     "i64 cache_hint, immarg i1 use_cta_mask, immarg i1 use_cache_hint)",
     "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"),
    ("shared.cta.to.global", "void (p1 dst, p3 src, i32 nbytes, i64 cache_hint, "
     "immarg i1 use_cache_hint)", "cp.async.bulk.global.shared::cta.bulk_group"),
    ("shared.cta.to.cluster", "void (p7 dst, p3 bar, p3 src, i32 nbytes)",
     "cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes"),
    ("prefetch.L2", "void (p1 src, i32 nbytes, i64 cache_hint, immarg i1 use_cache_hint)",
     "cp.async.bulk.prefetch.L2.global")))
_add(_BULK + "global.to.shared.cta", "void (p3 dst, p3 bar, p1 src, i32 nbytes, "
     "i64 cache_hint, immarg i1 use_cache_hint)", PTX86, "cp.async.bulk.shared::cta.global")
_add(_NV + "prefetch.tensormap.p0", "void (ptr tensormap)", PTX80, "prefetch.tensormap")

# --- elect, setmaxnreg, wgmma sync, matrices, PDL, DSMEM --------------------------------
_add(_NV + "elect.sync", "{i32, i1} (i32 mask)", PTX80,
     "elect.sync: {leader lane, is-leader predicate} over `mask`")
for _dir in ("inc", "dec"):
    _add(f"{_NV}setmaxnreg.{_dir}.sync.aligned.u32", "void (immarg i32 regs)", SM90A_SM100A,
         f"setmaxnreg.{_dir}.sync.aligned.u32: warpgroup register reallocation, 24..256 "
         f"step 8", imm={"regs": range(24, 257, 8)})
_add_all(_NV + "wgmma.", SM90A, (
    ("fence.sync.aligned", "void ()", "wgmma.fence: before wgmma.mma_async (inline asm)"),
    ("commit_group.sync.aligned", "void ()", "wgmma.commit_group")))
_add(_NV + "wgmma.wait_group.sync.aligned", "void (immarg i64 n)", SM90A,
     "wgmma.wait_group n: at most n wgmma groups pending", imm={"n": range(8)})
for _num, _ret in ((1, "i32"), (2, "{i32*2}"), (4, "{i32*4}")):
    _regs = ", ".join(f"i32 r{i}" for i in range(_num))
    for _tr in ("", ".trans"):
        _add_all(_NV, ANY, (
            (f"ldmatrix.sync.aligned.m8n8.x{_num}{_tr}.b16.p3", f"{_ret} (p3 src)",
             f"ldmatrix.sync.aligned.m8n8.x{_num}{_tr}.shared.b16"),
            (f"stmatrix.sync.aligned.m8n8.x{_num}{_tr}.b16.p3", f"void (p3 dst, {_regs})",
             f"stmatrix.sync.aligned.m8n8.x{_num}{_tr}.shared.b16")))
# --- cp.async (sm_80 non-bulk asynchronous copies, PTX ISA "cp.async") ------------------------
_add_all(_NV + "cp.async.", ANY, (
    *[(f"ca.shared.global.{n}", "void (p3 dst, p1 src)", f"cp.async.ca.shared.global: {n} bytes") for n in (4, 8, 16)],
    ("cg.shared.global.16", "void (p3 dst, p1 src)", "cp.async.cg.shared.global: 16 bytes, L2 only"),
    ("commit.group", "void ()", "cp.async.commit_group"), ("wait.group", "void (immarg i32 n)", "cp.async.wait_group"),
    ("wait.all", "void ()", "cp.async.wait_all"),
    ("mbarrier.arrive.noinc.shared", "void (p3 bar)", "cp.async.mbarrier.arrive.noinc: arrive when prior copies land")))
_add_all(_NV, ANY, (
    ("griddepcontrol.wait", "void ()", "griddepcontrol.wait: wait for the primary grid (PDL)"),
    ("griddepcontrol.launch.dependents", "void ()",
     "griddepcontrol.launch_dependents: let the dependent grid start (PDL)"),
    ("mapa.shared.cluster", "p7 (p3 addr, i32 rank)",
     "mapa.shared::cluster.u32: `addr` in the shared memory of CTA `rank`"),
    ("mapa", "ptr (ptr addr, i32 rank)", "mapa.u64 (generic addresses)"),
    ("getctarank.shared.cluster", "i32 (p3 addr)", "getctarank.shared::cluster.u32"),
    ("getctarank", "i32 (ptr addr)", "getctarank.u64 (generic address)")))

# --- tcgen05 / TMEM (PTX ISA 8.6 "tcgen05"), sm_100a only --------------------------------
_TC = _NV + "tcgen05."
for _cg in ("cg1", "cg2"):
    _g = f"cta_group::{_cg[-1]}"
    _add_all(_TC, SM100A, (
        (f"alloc.shared.{_cg}", "void (p3 slot, i32 ncols)", f"tcgen05.alloc.{_g}: allocate "
         f"`ncols` TMEM columns (32..512, a power of 2); the address goes to smem `slot`"),
        (f"alloc.{_cg}", "void (ptr slot, i32 ncols)", f"tcgen05.alloc.{_g}, generic `slot`"),
        (f"dealloc.{_cg}", "void (p6 taddr, i32 ncols)", f"tcgen05.dealloc.{_g}"),
        (f"relinq.alloc.permit.{_cg}", "void ()", f"tcgen05.relinquish_alloc_permit.{_g}"),
        (f"commit.shared.{_cg}", "void (p3 bar)",
         f"tcgen05.commit.{_g}.mbarrier::arrive::one: arrive when prior MMAs finish"),
        (f"commit.mc.shared.{_cg}", "void (p3 bar, i16 cta_mask)",
         f"tcgen05.commit.{_g}.mbarrier::arrive::one.multicast::cluster")))
_MMA_IMM = {"kind": (0, 1, 2), "cta_group": (1, 2), "collector": (0, 1, 2, 3)}
for _form, _a in (("shared", "i64 a_desc"), ("tensor", "p6 a")):
    _add(f"{_TC}mma.{_form}", f"void (p6 d, {_a}, i64 b_desc, i32 idesc, i1 accumulate, "
         f"immarg i32 kind, immarg i32 cta_group, immarg i32 collector)", SM100A,
         f"tcgen05.mma: D(TMEM) (+)= A x B(smem desc), A from {_form} memory; kind 0 f16, "
         f"1 tf32, 2 f8f6f4, 3 i8 (sm_100a only: kind::i8 has no family-specific form, LLVM cannot "
         f"select it for sm_100f); collector 0 discard, 1 lastuse, 2 fill, 3 use",
         imm=_MMA_IMM, imm_extra={"kind": {"sm_100a": (3,)}})
for _shape, _per in (("32x32b", 1), ("16x64b", 1), ("16x128b", 2), ("16x256b", 4)):
    for _num in (1, 2, 4, 8, 16, 32, 64, 128):
        _n = _per * _num
        if _n > 128:
            break
        _vec = "i32" if _n == 1 else f"v{_n}i32"
        _add_all(_TC, SM100A, (
            (f"ld.{_shape}.x{_num}", f"{_vec} (p6 taddr, immarg i1 pack)",
             f"tcgen05.ld.sync.aligned.{_shape}.x{_num}.b32: {_n} registers per thread"),
            (f"st.{_shape}.x{_num}", f"void (p6 taddr, {_vec} values, immarg i1 unpack)",
             f"tcgen05.st.sync.aligned.{_shape}.x{_num}.b32")))
_add_all(_TC, SM100A, [(name, "void ()", doc) for name, doc in (
    ("wait.ld", "tcgen05.wait::ld"), ("wait.st", "tcgen05.wait::st"),
    ("fence.before.thread.sync", "tcgen05.fence::before_thread_sync"),
    ("fence.after.thread.sync", "tcgen05.fence::after_thread_sync"))])

# --- cluster launch control (PTX ISA 8.6 "clusterlaunchcontrol"), sm_100a only ----------
_add_all(_NV + "clusterlaunchcontrol.", SM100A, (
    ("try_cancel.async.shared", "void (p3 response, p3 bar)", "clusterlaunchcontrol."
     "try_cancel: cancel a pending cluster; 16-byte response through `bar` (complete_tx)"),
    ("try_cancel.async.multicast.shared", "void (p3 response, p3 bar)",
     "try_cancel with the response multicast to every CTA of the cluster"),
    ("query_cancel.is_canceled", "i1 (i128 response)", "query_cancel.is_canceled.pred.b128"),
    *[(f"query_cancel.get_first_ctaid.{a}", "i32 (i128 response)",
       f"query_cancel.get_first_ctaid::{a}.b32.b128") for a in "xyz"]))

INTRINSICS: Mapping[str, Intrinsic] = MappingProxyType(_TABLE)
"""Every intrinsic tsjit may emit, by LLVM name."""

# Older spellings LLVM 22 still parses but auto-upgrades; lookup() maps them to the
# entry of the name LLVM prints, and declare() declares that name.
_ALIASES: dict[str, str] = {
    "llvm.nvvm.ex2.approx.f": "llvm.nvvm.ex2.approx.f32",
    "llvm.nvvm.ex2.approx.ftz.f": "llvm.nvvm.ex2.approx.ftz.f32",
    **{f"{_NV}{op}.sync.aligned.m8n8.x{n}{t}.b16": f"{_NV}{op}.sync.aligned.m8n8.x{n}{t}.b16.p3"
       for op in ("ldmatrix", "stmatrix") for n in (1, 2, 4) for t in ("", ".trans")},
}


def lookup(name: str) -> Intrinsic:
    """The table entry for ``name`` (full LLVM name, key, or an auto-upgraded older
    spelling such as ``llvm.nvvm.ex2.approx.f``).

    Raises:
        CompilationError: ``name`` is not in the table (internal: a builtin asked for an
            intrinsic nobody has checked).
    """
    name = _ALIASES.get(name) or _ALIASES.get("llvm.nvvm." + name) or name
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
