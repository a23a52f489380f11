"""Handlers of special registers, math intrinsics and warp collectives (shuffle, vote, redux, elect).

Special registers (PTX ISA §10) read the thread's ids; ``%clock``/``%globaltimer`` count up per
read.  Math intrinsics compute in binary64 and round once to float32; the ``.approx`` forms
therefore return the correctly rounded value (the hardware's is within its documented ulps).
Warp collectives (PTX ISA ``shfl.sync``, ``vote.sync``, ``redux.sync``, ``elect.sync``,
``bar.warp.sync``) are rendezvous of the lanes in their member mask (:func:`~.sync.join_warp`).
"""
from __future__ import annotations

import math

from tsjit.errors import InterpretError
from tsjit.interpret import scalars as S
from tsjit.interpret.casts import float_to_int
from tsjit.interpret.races import synchronize
from tsjit.interpret.registry import handles, handles_prefix
from tsjit.interpret.scalars import F32
from tsjit.interpret.sync import warp_collective

_NV = "llvm.nvvm."
_SREG = _NV + "read.ptx.sreg."
_AXES = {"x": 0, "y": 1, "z": 2}


def _sreg_reader(name: str):
    base, _, axis = name.rpartition(".")
    i = _AXES.get(axis)
    readers = {
        "tid": lambda th: th.tid[i], "ntid": lambda th: th.machine.block[i],
        "ctaid": lambda th: th.cta.ctaid[i], "nctaid": lambda th: th.machine.grid[i],
        "clusterid": lambda th: th.cta.cluster.cluster_id[i],
        "nclusterid": lambda th: th.machine.grid[i] // th.machine.cluster_dims[i],
        "cluster.ctaid": lambda th: th.cta.cluster_ctaid[i],
        "cluster.nctaid": lambda th: th.machine.cluster_dims[i],
    }
    if i is not None and base in readers:
        return readers[base]
    machine_sms = 132
    scalar = {
        "laneid": lambda th: th.lane, "warpid": lambda th: th.linear // 32,
        "smid": lambda th: th.cta.cluster.index % machine_sms, "nsmid": lambda th: machine_sms,
        "lanemask.eq": lambda th: 1 << th.lane, "lanemask.lt": lambda th: (1 << th.lane) - 1,
        "lanemask.le": lambda th: (2 << th.lane) - 1, "lanemask.gt": lambda th: (~((2 << th.lane) - 1)) & 0xFFFFFFFF,
        "lanemask.ge": lambda th: (~((1 << th.lane) - 1)) & 0xFFFFFFFF,
        "dynamic_smem_size": lambda th: th.machine.smem_bytes, "total_smem_size": lambda th: th.machine.smem_bytes,
        "cluster.ctarank": lambda th: th.cta.rank, "cluster.nctarank": lambda th: len(th.cta.cluster.ctas),
    }
    return scalar.get(name)


@handles_prefix(_SREG)
def _sreg(tr, instr, d, args):
    name = instr.callee.name[len(_SREG):]
    if name in ("clock", "clock64", "globaltimer"):
        mask = (1 << instr.type.width) - 1

        def clock(f):
            m = f[0].machine
            m.progress_clock = getattr(m, "progress_clock", 0) + 1000
            f[d] = m.progress_clock & mask
        return clock
    reader = _sreg_reader(name)
    if reader is None:
        raise InterpretError(f"the interpreter does not know the special register %{name} ({tr.where(instr)})")

    def sreg(f):
        f[d] = reader(f[0])
    inline = _SREG_SOURCE.get(name)
    if inline is not None:    # read inline in the fused block (translate.fuse): every thread reads its ids often
        sreg.source = f"f[{d}] = f[0].{inline}"
    return sreg


_SREG_SOURCE = {f"{base}.{axis}": f"{path}[{i}]" for axis, i in _AXES.items() for base, path in
                (("tid", "tid"), ("ctaid", "cta.ctaid"), ("ntid", "machine.block"), ("nctaid", "machine.grid"))}
_SREG_SOURCE.update({"laneid": "lane", "warpid": "linear // 32"})


@handles(_NV + "is_explicit_cluster")
def _explicit_cluster(tr, instr, d, args):
    def explicit(f):
        f[d] = 1 if f[0].machine.cluster_dims != (1, 1, 1) else 0
    return explicit


# -- math -------------------------------------------------------------------------------------------
def _f32_unary(fn):
    return lambda x: F32(fn(float(x)))


def _exp2(x):
    try:
        return 2.0 ** x
    except OverflowError:
        return math.inf


def _log2(x):
    if x < 0 or x != x:
        return math.nan
    if x == 0:
        return -math.inf
    return math.log2(x) if x != math.inf else math.inf


def _rsqrt(x):
    if x < 0 or x != x:
        return math.nan
    if x == 0:
        return math.copysign(math.inf, x)
    return 1.0 / math.sqrt(x) if x != math.inf else 0.0


def _sqrt(x):
    if x < 0 or x != x:
        return math.nan
    return math.sqrt(x)


def _rcp(x):
    return 1.0 / x if x != 0 else math.copysign(math.inf, x)


def _sin(x):
    return math.sin(x) if math.isfinite(x) else math.nan


def _cos(x):
    return math.cos(x) if math.isfinite(x) else math.nan


_UNARY_F32 = {"rsqrt.approx": _rsqrt, "ex2.approx": _exp2, "lg2.approx": _log2, "sin.approx": _sin,
              "cos.approx": _cos, "sqrt.approx": _sqrt, "sqrt.rn": _sqrt, "rcp.approx": _rcp, "rcp.rn": _rcp}


@handles_prefix(_NV + "rsqrt.")
@handles_prefix(_NV + "ex2.")
@handles_prefix(_NV + "lg2.")
@handles_prefix(_NV + "sin.")
@handles_prefix(_NV + "cos.")
@handles_prefix(_NV + "sqrt.")
@handles_prefix(_NV + "rcp.")
def _nvvm_unary(tr, instr, d, args):
    name = instr.callee.name[len(_NV):]
    key = ".".join(p for p in name.split(".")[:2])
    fn = _UNARY_F32[key]
    kind = S.kind_of(instr.type)
    rnd = F32 if kind == "float" else float
    a, = args

    def unary(f):
        f[d] = rnd(fn(float(f[a])))
    return unary


def _nan_max(x, y):
    return math.nan if x != x or y != y else max(x, y)


def _nan_min(x, y):
    return math.nan if x != x or y != y else min(x, y)


def _num_max(x, y):
    if x != x:
        return y
    if y != y:
        return x
    if x == y == 0:
        return x if math.copysign(1, x) > 0 else y
    return max(x, y)


def _num_min(x, y):
    if x != x:
        return y
    if y != y:
        return x
    if x == y == 0:
        return x if math.copysign(1, x) < 0 else y
    return min(x, y)


def _binary_float(fn):
    def factory(tr, instr, d, args):
        a, b = args

        def op(f):
            f[d] = fn(f[a], f[b])
        return op
    return factory


handles(_NV + "fmax.f", _NV + "fmax.d", "llvm.maxnum.f32", "llvm.maxnum.f64", "llvm.maxnum.f16")(_binary_float(_num_max))
handles(_NV + "fmin.f", _NV + "fmin.d", "llvm.minnum.f32", "llvm.minnum.f64", "llvm.minnum.f16")(_binary_float(_num_min))
handles(_NV + "fmax.nan.f", "llvm.maximum.f32", "llvm.maximum.f64", "llvm.maximum.f16")(_binary_float(_nan_max))
handles(_NV + "fmin.nan.f", "llvm.minimum.f32", "llvm.minimum.f64", "llvm.minimum.f16")(_binary_float(_nan_min))
handles("llvm.copysign.f32", "llvm.copysign.f64", "llvm.copysign.f16")(_binary_float(
    lambda x, y: type(x)(math.copysign(float(x), float(y))) if not isinstance(x, float) else math.copysign(x, y)))


@handles_prefix(_NV + "mulhi.")
def _mulhi(tr, instr, d, args):
    width = instr.type.width
    signed = instr.callee.name.split(".")[-1] in ("i", "ll")
    sign = 1 << (width - 1)
    mask = (1 << width) - 1
    a, b = args

    def mulhi(f):
        x, y = f[a], f[b]
        if signed:
            x, y = (x ^ sign) - sign, (y ^ sign) - sign
        f[d] = ((x * y) >> width) & mask
    return mulhi


@handles("llvm.fma.f32", "llvm.fma.f64", "llvm.fma.f16")
def _fma(tr, instr, d, args):
    a, b, c = args
    if S.kind_of(instr.type) == "float":
        def fma(f):
            f[d] = S.fma32(f[a], f[b], f[c])
        return fma

    def fma64(f):
        f[d] = S.round_float(float(f[a]) * float(f[b]) + float(f[c]), S.kind_of(instr.type))
    return fma64


def _rounding(fn):
    def factory(tr, instr, d, args):
        a, = args
        kind = S.kind_of(instr.type)

        def op(f):
            x = float(f[a])
            f[d] = S.round_float(fn(x) if math.isfinite(x) else x, kind)
        return op
    return factory


def _round_half_away(x):
    return math.copysign(math.floor(abs(x) + 0.5), x)


for _t in ("f16", "f32", "f64"):
    handles(f"llvm.sqrt.{_t}")(_rounding(_sqrt))
    handles(f"llvm.fabs.{_t}")(_rounding(abs))
    handles(f"llvm.floor.{_t}")(_rounding(math.floor))
    handles(f"llvm.ceil.{_t}")(_rounding(math.ceil))
    handles(f"llvm.trunc.{_t}")(_rounding(math.trunc))
    handles(f"llvm.rint.{_t}", f"llvm.nearbyint.{_t}")(_rounding(round))
    handles(f"llvm.round.{_t}")(_rounding(_round_half_away))
handles("llvm.exp2.f32")(_rounding(_exp2))


@handles_prefix("llvm.fptosi.sat.")
@handles_prefix("llvm.fptoui.sat.")
def _fpto_sat(tr, instr, d, args):
    signed = instr.callee.name.startswith("llvm.fptosi")
    width = instr.type.width
    a, = args

    def sat(f):
        f[d] = float_to_int(f[a], width, signed)
    return sat


def _int_family(fn_of_width):
    def factory(tr, instr, d, args):
        width = instr.type.width
        fn = fn_of_width(width)
        if len(args) == 1 or instr.callee.name.split(".")[1] in ("abs", "ctlz", "cttz"):
            a = args[0]

            def unary(f):
                f[d] = fn(f[a])
            return unary
        if len(args) == 2:
            a, b = args

            def binary(f):
                f[d] = fn(f[a], f[b])
            return binary
        a, b, c = args

        def ternary(f):
            f[d] = fn(f[a], f[b], f[c])
        return ternary
    return factory


def _signed_pick(pick):
    def of_width(w):
        sign = 1 << (w - 1)
        return lambda x, y: x if pick((x ^ sign) - sign, (y ^ sign) - sign) else y
    return of_width


def _funnel(left):
    def of_width(w):
        mask = (1 << w) - 1

        def fsh(hi, lo, shift):
            s = shift % w
            both = (hi << w) | lo
            return ((both << s) >> w) & mask if left else (both >> s) & mask
        return fsh
    return of_width


for _t in ("i8", "i16", "i32", "i64"):
    handles(f"llvm.smin.{_t}")(_int_family(_signed_pick(lambda x, y: x <= y)))
    handles(f"llvm.smax.{_t}")(_int_family(_signed_pick(lambda x, y: x >= y)))
    handles(f"llvm.umin.{_t}")(_int_family(lambda w: min))
    handles(f"llvm.umax.{_t}")(_int_family(lambda w: max))
    handles(f"llvm.ctpop.{_t}")(_int_family(lambda w: lambda x: bin(x).count("1")))
    handles(f"llvm.bitreverse.{_t}")(_int_family(lambda w: lambda x: int(format(x, f"0{w}b")[::-1], 2)))
    handles(f"llvm.bswap.{_t}")(_int_family(lambda w: lambda x: int.from_bytes(x.to_bytes(w // 8, "little"), "big")))
    handles(f"llvm.fshl.{_t}")(_int_family(_funnel(True)))
    handles(f"llvm.fshr.{_t}")(_int_family(_funnel(False)))
    handles(f"llvm.abs.{_t}")(_int_family(lambda w: lambda x: (abs((x ^ (1 << (w - 1))) - (1 << (w - 1))))
                                          & ((1 << w) - 1)))
    handles(f"llvm.ctlz.{_t}")(_int_family(lambda w: lambda x: w - x.bit_length()))
    handles(f"llvm.cttz.{_t}")(_int_family(lambda w: lambda x: ((x & -x).bit_length() - 1) if x else w))


# -- warp collectives ---------------------------------------------------------------------------------
def _shuffle_compute(mode: str):
    def compute(rv):
        by_lane = {t.lane: v[0] for t, v in rv.inputs.items()}
        results = {}
        for th, (value, b, c) in rv.inputs.items():
            lane = th.lane
            clamp, segmask = c & 0x1F, (c >> 8) & 0x1F
            max_lane = (lane & segmask) | (clamp & ~segmask)
            min_lane = lane & segmask
            if mode == "up":
                j = lane - b
                ok = j >= max_lane
            elif mode == "down":
                j = lane + b
                ok = j <= max_lane
            elif mode == "bfly":
                j = lane ^ b
                ok = j <= max_lane
            else:
                j = min_lane | (b & ~segmask)
                ok = j <= max_lane
            if not ok:
                j = lane
            results[th] = by_lane[j] if j in by_lane else _inactive_source(rv, th, j)
        return results
    return compute


def _inactive_source(rv, th, j):
    # PTX: reading from a lane outside membermask (or inactive) gives an undefined value; the interpreter
    # reports it, since a GPU would silently give garbage.
    raise InterpretError(f"{rv.what} at {rv.where}: lane {th.lane} reads lane {j}, which is not in the member "
                         f"mask (its value is undefined on the GPU); widen the mask or change the lane/offset")


@handles_prefix(_NV + "shfl.sync.")
def _shfl(tr, instr, d, args):
    mode = instr.callee.name.split(".")[4]
    m, v, b, c = args
    where = tr.where(instr)
    compute = _shuffle_compute(mode)
    kind = f"shfl.sync.{mode}"

    return warp_collective(kind, lambda f: f[m], lambda f: (f[v], f[b], f[c]), compute, where, d)


def _vote_compute(mode: str):
    def compute(rv):
        preds = {t: bool(p) for t, p in rv.inputs.items()}
        if mode == "ballot":
            ballot = sum(1 << t.lane for t, p in preds.items() if p)
            return {t: ballot for t in preds}
        values = list(preds.values())
        result = {"all": all(values), "any": any(values), "uni": all(values) or not any(values)}[mode]
        return {t: int(result) for t in preds}
    return compute


@handles(_NV + "vote.all.sync", _NV + "vote.any.sync", _NV + "vote.uni.sync", _NV + "vote.ballot.sync")
def _vote(tr, instr, d, args):
    mode = instr.callee.name.split(".")[3]
    m, p = args
    where = tr.where(instr)
    compute = _vote_compute(mode)
    kind = f"vote.sync.{mode}"

    return warp_collective(kind, lambda f: f[m], lambda f: f[p], compute, where, d)


_REDUX = {"add": lambda xs, w: sum(xs) & 0xFFFFFFFF, "and": None, "or": None, "xor": None,
          "umin": lambda xs, w: min(xs), "umax": lambda xs, w: max(xs),
          "min": lambda xs, w: min(xs, key=lambda x: (x ^ 0x80000000)),
          "max": lambda xs, w: max(xs, key=lambda x: (x ^ 0x80000000))}


@handles_prefix(_NV + "redux.sync.")
def _redux(tr, instr, d, args):
    op = instr.callee.name.split(".")[-1]
    v, m = args
    where = tr.where(instr)

    def combine(values):
        if op in ("and", "or", "xor"):
            out = values[0]
            for x in values[1:]:
                out = out & x if op == "and" else out | x if op == "or" else out ^ x
            return out
        return _REDUX[op](values, 32)

    def compute(rv):
        result = combine(list(rv.inputs.values()))
        return {t: result for t in rv.inputs}

    return warp_collective(f"redux.sync.{op}", lambda f: f[m], lambda f: f[v], compute, where, d)


@handles(_NV + "activemask")
def _activemask(tr, instr, d, args):
    def activemask(f):
        warp = f[0].warp
        f[d] = sum(1 << t.lane for t in warp.threads if t.alive)
    return activemask


@handles(_NV + "elect.sync")
def _elect(tr, instr, d, args):
    m, = args
    where = tr.where(instr)

    def compute(rv):
        leader = min(t.lane for t in rv.inputs)
        return {t: (leader, 1 if t.lane == leader else 0) for t in rv.inputs}

    return warp_collective("elect.sync", lambda f: f[m], lambda f: None, compute, where, d)


@handles(_NV + "bar.warp.sync")
def _syncwarp(tr, instr, d, args):
    m, = args
    where = tr.where(instr)

    def compute(rv):
        if rv.scope.cta.machine.checks:
            synchronize(list(rv.inputs))
        return {t: None for t in rv.inputs}

    return warp_collective("bar.warp.sync", lambda f: f[m], lambda f: None, compute, where, None)
