"""Translating one kernel's LLVM IR into Python closures, once per program.

Every SSA value gets a slot of a per-thread register list ``f`` (slot 0 is the thread itself;
constants and parameters are pre-filled from a template).  Every instruction becomes a closure
``op(f)`` that reads its operand slots and writes its result slot; instructions that may wait
(barriers, warp collectives, mbarrier waits) become generator functions ``blocker(f)`` run with
``yield from``, so a thread's fiber (:mod:`tsjit.interpret.machine`) suspends exactly there.  A basic
block is a list of segments ``(ops, blocker)`` and a terminator ``term(f) -> next block`` that also
performs the phi moves of the edge taken (parallel copies).

Arithmetic follows :mod:`tsjit.interpret.scalars`; memory and atomics :mod:`tsjit.interpret.memory_ops`;
calls of NVVM intrinsics and inline PTX go through the handler tables of
:mod:`tsjit.interpret.intrinsics` and :mod:`tsjit.interpret.inline_asm`.
"""
from __future__ import annotations

import operator

from llvmlite import ir

from tsjit.errors import InterpretError
from tsjit.interpret import memory_ops
from tsjit.interpret.binary_ops import BINARY, binary_source
from tsjit.interpret import scalars as S
from tsjit.interpret.casts import cast_function
from tsjit.interpret.scalars import F32

__all__ = ["Translator", "Block"]


class Block:
    """A translated basic block: ``segments`` [(ops tuple, blocker or None)], ``term``, ``name``."""

    __slots__ = ("name", "segments", "term", "ir_block")

    def __init__(self, name, ir_block):
        self.name = name
        self.ir_block = ir_block
        self.segments = []
        self.term = None


def _elementwise(fn, t):
    """Lift a scalar function of one or two operands to vectors of type ``t`` (tuples)."""
    if S.kind_of(t) != "vector":
        return fn
    return lambda *xs: tuple(fn(*items) for items in zip(*xs))


class Translator:
    """Translates ``program.function`` (see module docstring); ``handlers`` resolve calls."""

    def __init__(self, program, call_handler):
        self.program = program
        self.call_handler = call_handler
        self.slots: dict[int, int] = {}
        self.template: list = [None]
        self.blocks: dict[int, Block] = {}
        self.params: list[int] = []
        self.globals: dict[str, int] = {}   # global variable name -> slot (filled at launch)
        self.keep = []
        self.allocas: list = []
        #: ``wrap(instr, op) -> op`` applied to every translated instruction (launch sets the wgmma
        #: accumulator checks of :func:`tsjit.interpret.wgmma_ops.reader_checks`), or None
        self.wrap_instruction = None

    # -- slots ------------------------------------------------------------------------------
    def new_slot(self, initial=None) -> int:
        self.template.append(initial)
        return len(self.template) - 1

    def slot(self, value) -> int:
        key = id(value)
        found = self.slots.get(key)
        if found is not None:
            return found
        if isinstance(value, ir.GlobalVariable):
            index = self.new_slot(0)
            self.globals.setdefault(value.name, index)
            index = self.globals[value.name]
        elif isinstance(value, ir.Constant):
            index = self.new_slot(S.constant_value(value))
        else:
            index = self.new_slot(None)
        self.slots[key] = index
        self.keep.append(value)
        return index

    def where(self, instr) -> str:
        line = self.program.line_of(instr)
        return line or f"LLVM instruction `{str(instr).strip()[:80]}`"

    # -- translation ------------------------------------------------------------------------
    def translate(self) -> Block:
        fn = self.program.function
        for arg in fn.args:
            self.params.append(self.slot(arg))
        for bb in fn.blocks:
            self.blocks[id(bb)] = Block(bb.name, bb)
        for bb in fn.blocks:
            self._translate_block(bb)
        return self.blocks[id(fn.blocks[0])]

    def _translate_block(self, bb) -> None:
        block = self.blocks[id(bb)]
        ops = []
        for instr in bb.instructions:
            if isinstance(instr, ir.PhiInstr):
                self.slot(instr)
                continue
            if isinstance(instr, ir.Terminator) or isinstance(instr, (ir.Branch, ir.ConditionalBranch)):
                block.segments.append((fuse(ops), None))
                block.term = self._terminator(bb, instr)
                return
            result = self._instruction(instr)
            if result is None:
                continue
            if self.wrap_instruction is not None:
                result = self.wrap_instruction(instr, result)
            if getattr(result, "blocking", False):
                block.segments.append((fuse(ops), result))
                ops = []
            else:
                ops.append(result)
        block.segments.append((fuse(ops), None))
        block.term = lambda f: None

    def _instruction(self, instr):
        if isinstance(instr, ir.CallInstr):
            d = self.slot(instr) if not isinstance(instr.type, ir.VoidType) else None
            return self.call_handler(self, instr, d, [self.slot(a) for a in instr.args])
        method = _DISPATCH.get(type(instr))
        if method is None and instr.opname == "fneg":
            return self._fneg(instr)
        if method is None:
            opname = instr.opname
            method = BINARY.get(opname) and Translator._binary
        if method is None:
            raise InterpretError(f"the interpreter cannot execute LLVM instruction `{str(instr).strip()}` "
                                 f"({self.where(instr)}); please report it")
        return method(self, instr)

    # -- control flow ---------------------------------------------------------------------------
    def _edge(self, pred, succ_bb):
        succ = self.blocks[id(succ_bb)]
        moves = []
        for instr in succ_bb.instructions:
            if not isinstance(instr, ir.PhiInstr):
                break
            for value, block in instr.incomings:
                if block is pred:
                    moves.append((self.slot(instr), self.slot(value)))
                    break
            else:
                raise InterpretError(f"internal error, please report: phi {instr.name} has no incoming value "
                                     f"for block {pred.name}")
        if not moves:
            return lambda f: succ
        if len(moves) == 1:
            (d, s), = moves

            def edge1(f):
                f[d] = f[s]
                return succ
            return edge1
        dsts, fetch = tuple(m[0] for m in moves), operator.itemgetter(*(m[1] for m in moves))
        first, end = dsts[0], dsts[0] + len(dsts)
        if dsts == tuple(range(first, end)):     # the phis of a block: consecutive slots, one parallel copy
            def edge_run(f):
                f[first:end] = fetch(f)
                return succ
            return edge_run

        def edge(f):
            for d, v in zip(dsts, fetch(f)):
                f[d] = v
            return succ
        return edge

    def _terminator(self, bb, instr):
        if isinstance(instr, ir.ConditionalBranch):
            c = self.slot(instr.operands[0])
            then, other = self._edge(bb, instr.operands[1]), self._edge(bb, instr.operands[2])
            return lambda f: then(f) if f[c] else other(f)
        if isinstance(instr, ir.Branch):
            return self._edge(bb, instr.operands[0])
        if isinstance(instr, ir.Ret):
            return lambda f: None
        if isinstance(instr, ir.SwitchInstr):
            v = self.slot(instr.operands[0])
            default = self._edge(bb, instr.default)
            table = {S.constant_value(value) if isinstance(value, ir.Constant) else int(value): self._edge(bb, target)
                     for value, target in instr.cases}
            return lambda f: table.get(f[v], default)(f)
        if isinstance(instr, ir.Unreachable):
            where = self.where(instr)

            def unreachable(f):
                raise InterpretError(f"thread {f[0].describe()} reached `unreachable` ({where})")
            return unreachable
        raise InterpretError(f"the interpreter cannot execute the terminator `{str(instr).strip()}`")

    # -- arithmetic -------------------------------------------------------------------------------
    def _binary(self, instr):
        a, b = (self.slot(x) for x in instr.operands)
        d = self.slot(instr)
        t = instr.type
        scalar_type = t.element if S.kind_of(t) == "vector" else t
        fn = BINARY[instr.opname](scalar_type, self.where(instr))
        if S.kind_of(t) == "vector":
            vfn = _elementwise(fn, t)

            def vop(f):
                f[d] = vfn(f[a], f[b])
            return vop
        op = _bind2(fn, d, a, b)
        divisor = instr.operands[1]
        constant = S.constant_value(divisor) if isinstance(divisor, ir.Constant) else None
        text = binary_source(instr.opname, scalar_type, d, a, b, constant)
        return source(op, text) if text else op

    def _fneg(self, instr):
        a, d = self.slot(instr.operands[0]), self.slot(instr)

        def fneg(f):
            f[d] = -f[a]
        return fneg

    def _icmp(self, instr):
        a, b = (self.slot(x) for x in instr.operands)
        d = self.slot(instr)
        t = instr.operands[0].type
        pred = instr.op
        if S.kind_of(t) == "ptr":
            width = 64
        else:
            width = (t.element if S.kind_of(t) == "vector" else t).width
        sign = 1 << (width - 1)
        text = None
        if S.kind_of(t) != "vector":
            unsigned = {"eq": "==", "ne": "!=", "ugt": ">", "uge": ">=", "ult": "<", "ule": "<="}
            signed = {"sgt": ">", "sge": ">=", "slt": "<", "sle": "<="}
            if pred in unsigned:
                text = f"f[{d}] = f[{a}] {unsigned[pred]} f[{b}]"
            elif pred in signed:
                text = f"f[{d}] = (f[{a}] ^ {sign}) {signed[pred]} (f[{b}] ^ {sign})"
        base = {"eq": operator.eq, "ne": operator.ne, "ugt": operator.gt, "uge": operator.ge,
                "ult": operator.lt, "ule": operator.le}.get(pred)
        if base is None:
            cmp = {"sgt": operator.gt, "sge": operator.ge, "slt": operator.lt, "sle": operator.le}.get(pred)
            if cmp is None:
                cmp = {">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le,
                       "==": operator.eq, "!=": operator.ne}[pred]

            def fn(x, y):
                return cmp(x ^ sign, y ^ sign)
        else:
            fn = base
        if S.kind_of(t) == "vector":
            fn = _elementwise(fn, t)
        op = _bind2(fn, d, a, b)
        return source(op, text) if text else op

    def _fcmp(self, instr):
        a, b = (self.slot(x) for x in instr.operands)
        d = self.slot(instr)
        pred = instr.op
        ordered = {"oeq": operator.eq, "ogt": operator.gt, "oge": operator.ge, "olt": operator.lt,
                   "ole": operator.le, "one": operator.ne, "ord": lambda x, y: True}
        unordered = {"ueq": operator.eq, "ugt": operator.gt, "uge": operator.ge, "ult": operator.lt,
                     "ule": operator.le, "une": operator.ne, "uno": lambda x, y: False}
        if pred in ordered:
            cmp = ordered[pred]

            def fn(x, y):
                return not (x != x or y != y) and cmp(x, y)
        elif pred in unordered:
            cmp = unordered[pred]

            def fn(x, y):
                return (x != x or y != y) or cmp(x, y)
        elif pred in ("true", "false"):
            value = pred == "true"

            def fn(x, y):
                return value
        else:
            raise InterpretError(f"the interpreter does not know fcmp predicate {pred!r}")
        if S.kind_of(instr.operands[0].type) == "vector":
            fn = _elementwise(fn, instr.operands[0].type)
        return _bind2(fn, d, a, b)

    def _select(self, instr):
        c, a, b = (self.slot(x) for x in instr.operands)
        d = self.slot(instr)
        if S.kind_of(instr.operands[0].type) == "vector":
            def vselect(f):
                f[d] = tuple(x if k else y for k, x, y in zip(f[c], f[a], f[b]))
            return vselect

        def select(f):
            f[d] = f[a] if f[c] else f[b]
        return source(select, f"f[{d}] = f[{a}] if f[{c}] else f[{b}]")

    def _cast(self, instr):
        a, d = self.slot(instr.operands[0]), self.slot(instr)
        fn = cast_function(self, instr)
        if fn is None:
            def same(f):
                f[d] = f[a]
            return source(same, f"f[{d}] = f[{a}]")
        if getattr(fn, "needs_thread", False):
            def thread_cast(f):
                f[d] = fn(f[0], f[a])
            return thread_cast

        def cast(f):
            f[d] = fn(f[a])
        op = instr.opname
        src_type, dst_type = instr.operands[0].type, instr.type
        if S.kind_of(src_type) == "int" and S.kind_of(dst_type) == "int":
            if op == "trunc":
                return source(cast, f"f[{d}] = f[{a}] & {S.mask_of(dst_type)}")
            if op == "zext":
                return source(cast, f"f[{d}] = int(f[{a}])")
            if op == "sext":
                sign = 1 << (src_type.width - 1)
                return source(cast, f"f[{d}] = ((int(f[{a}]) ^ {sign}) - {sign}) & {S.mask_of(dst_type)}")
        return cast

    def _gep(self, instr):
        base = self.slot(instr.pointer)
        d = self.slot(instr)
        t = instr.source_etype
        terms = []  # (slot, scale, width) for dynamic indices; constant offset folded
        offset = 0
        for position, index in enumerate(instr.indices):
            if position == 0:
                scale = S.type_size(t)
            elif S.kind_of(t) == "struct":
                field = S.constant_value(index)
                offset += S.struct_offsets(t)[field]
                t = t.elements[field]
                continue
            else:
                t = t.element
                scale = S.type_size(t)
            if isinstance(index, ir.Constant):
                offset += S.to_signed(S.constant_value(index), index.type.width) * scale
            else:
                terms.append((self.slot(index), scale, index.type.width))
        mask = (1 << 64) - 1
        if not terms:
            def gep0(f):
                f[d] = (f[base] + offset) & mask
            return source(gep0, f"f[{d}] = (f[{base}] + {offset}) & {mask}")
        if len(terms) == 1:
            (s, scale, width), = terms
            sign = 1 << (width - 1)

            def gep1(f):
                f[d] = (f[base] + offset + ((f[s] ^ sign) - sign) * scale) & mask
            return source(gep1, f"f[{d}] = (f[{base}] + {offset} + ((f[{s}] ^ {sign}) - {sign}) * {scale}) & {mask}")

        def gep(f):
            total = f[base] + offset
            for s, scale, width in terms:
                sign = 1 << (width - 1)
                total += ((f[s] ^ sign) - sign) * scale
            f[d] = total & mask
        return gep

    def _extractvalue(self, instr):
        a, d = self.slot(instr.aggregate), self.slot(instr)
        indices = tuple(instr.indices)
        if len(indices) == 1:
            i, = indices

            def extract1(f):
                f[d] = f[a][i]
            return source(extract1, f"f[{d}] = f[{a}][{i}]")

        def extract(f):
            v = f[a]
            for i in indices:
                v = v[i]
            f[d] = v
        return extract

    def _insertvalue(self, instr):
        a, v, d = self.slot(instr.aggregate), self.slot(instr.value), self.slot(instr)
        indices = tuple(instr.indices)

        def insert(f):
            f[d] = _replace(f[a], indices, f[v])
        return insert

    def _extractelement(self, instr):
        a, i, d = self.slot(instr.operands[0]), self.slot(instr.operands[1]), self.slot(instr)

        def extract(f):
            f[d] = f[a][f[i]]
        return extract

    def _insertelement(self, instr):
        a, v, i = (self.slot(x) for x in instr.operands)
        d = self.slot(instr)

        def insert(f):
            t = list(f[a])
            t[f[i]] = f[v]
            f[d] = tuple(t)
        return insert

    def _shufflevector(self, instr):
        a, b = self.slot(instr.operands[0]), self.slot(instr.operands[1])
        mask = S.constant_value(instr.operands[2])
        d = self.slot(instr)

        def shuffle(f):
            both = tuple(f[a]) + tuple(f[b])
            f[d] = tuple(both[m] if m < len(both) else 0 for m in mask)
        return shuffle

    def _memory(self, instr):
        return memory_ops.translate(self, instr)

    def _fence(self, instr):
        return None


def source(op, text: str):
    """Attach ``text`` (one Python statement over ``f``, literals only) to ``op``: :func:`fuse` inlines it."""
    op.source = text
    return op


def fuse(ops) -> tuple:
    """One function running ``ops`` in order (a 1-tuple, or empty): the ops that carry a ``source`` are
    inlined as statements, the others are called; a basic block's straight-line code then costs one
    Python call instead of one per instruction."""
    if not ops:
        return ()
    if len(ops) == 1 and getattr(ops[0], "source", None) is None:
        return (ops[0],)
    namespace = {"F32": F32}
    lines = []
    for i, op in enumerate(ops):
        text = getattr(op, "source", None)
        if text is None:
            namespace[f"_op{i}"] = op
            lines.append(f"_op{i}(f)")
        else:
            lines.append(text)
    code = "def fused(f):\n    " + "\n    ".join(lines) + "\n"
    exec(compile(code, "<tsjit.interpret block>", "exec"), namespace)  # noqa: S102 - code we generated
    return (namespace["fused"],)


def _replace(aggregate, indices, value):
    items = list(aggregate)
    if len(indices) == 1:
        items[indices[0]] = value
    else:
        items[indices[0]] = _replace(items[indices[0]], indices[1:], value)
    return tuple(items)


def _bind2(fn, d, a, b):
    def op(f):
        f[d] = fn(f[a], f[b])
    return op


_DISPATCH = {
    ir.ICMPInstr: Translator._icmp, ir.FCMPInstr: Translator._fcmp, ir.SelectInstr: Translator._select,
    ir.CastInstr: Translator._cast, ir.GEPInstr: Translator._gep, ir.ExtractValue: Translator._extractvalue,
    ir.InsertValue: Translator._insertvalue, ir.ExtractElement: Translator._extractelement,
    ir.InsertElement: Translator._insertelement, ir.ShuffleVector: Translator._shufflevector,
    ir.LoadInstr: Translator._memory, ir.StoreInstr: Translator._memory, ir.AtomicRMW: Translator._memory,
    ir.CmpXchg: Translator._memory, ir.AllocaInstr: Translator._memory, ir.Fence: Translator._fence,
    ir.LoadAtomicInstr: Translator._memory, ir.StoreAtomicInstr: Translator._memory,
}
