"""SSA construction for the frontend: merging variable bindings at control-flow joins.

The frontend keeps, per program point, a *scope*: a dict from variable name to the
object it is bound to (a :class:`~tsjit.lang.values.Value`, a
:class:`~tsjit.lang.memory.Pointer`, a Python constant, a tuple of those, or any
other compile-time object).  At a join (end of an ``if``, loop header, loop exit,
return) :func:`merge_scopes` builds the scope after the join:

* a name bound to the same object on every incoming edge keeps it;
* run-time scalars (and Python numbers mixed with them) get one ``phi`` per name —
  tuples are merged element by element;
* a name missing on some edge is dropped (it is "defined only in one branch");
* anything else (a Float32 on one edge and an Int32 on the other, a tensor on one and
  another tensor on the other) is a :class:`CompilationError` naming the variable.

Loops: :func:`loop_header_phis` creates the phis of the variables a loop carries (found
from the AST before the body is visited, so the body is visited once), and
:func:`complete_loop_phis` adds the back-edge values.  No ``alloca`` is ever emitted for
scalar locals.
"""
from __future__ import annotations

from dataclasses import dataclass

from llvmlite import ir

from tsjit.errors import CompilationError
from tsjit.lang import dtypes as dt
from tsjit.lang.memory import Pointer
from tsjit.lang.values import Value, cast_to, constant, is_constant, literal_dtype


@dataclass(eq=False)
class Edge:
    """One incoming control-flow edge: the block it leaves from and the scope it carries.

    ``open`` edges have no terminator yet (the merge emits the branch after coercing values);
    closed edges already branch to the join block.
    """

    block: ir.Block
    scope: dict
    open: bool = True


def describe(obj) -> str:
    """A short human name for what a variable holds, for error messages."""
    if isinstance(obj, Value):
        return f"a run-time {obj.dtype.name}"
    if isinstance(obj, Pointer):
        return f"a {obj!r}"
    if isinstance(obj, bool):
        return f"the compile-time bool {obj}"
    if is_constant(obj):
        return f"the compile-time {type(obj).__name__} {obj!r}"
    if isinstance(obj, tuple):
        return f"a tuple of {len(obj)}"
    return f"a {type(obj).__name__} object"


_INTERNAL_NAMES = {"<return>": "the returned value", "<ifexp>": "the conditional expression",
                   "<bool>": "the boolean expression"}


def _subject(name: str) -> str:
    """How messages name what is merged: "`x`" for a variable, words for the frontend's own keys
    (``<return>[1]`` -> "element [1] of the returned value")."""
    if not name.startswith("<"):
        return f"`{name}`"
    key, _, element = name.partition(">")
    described = _INTERNAL_NAMES.get(key + ">", "the value")
    return f"element {element} of {described}" if element else described


def _a(dtype) -> str:
    """``dtype``'s name with its indefinite article: "an Int32", "a Float32"."""
    return ("an " if dtype.name.startswith("I") else "a ") + dtype.name


def _is_scalar_leaf(obj) -> bool:
    return isinstance(obj, Value) or is_constant(obj)


def _leaf_kind(objs, name: str):
    """Decide how a leaf position merges: returns ('same', obj) | ('value', dtype) | ('pointer', proto)."""
    first = objs[0]
    if all(o is first for o in objs):
        return "same", first
    if all(isinstance(o, Pointer) for o in objs):
        if len({(o.dtype, o.address_space) for o in objs}) != 1:
            raise CompilationError(f"{_subject(name)} points to different element types or memories on different paths")
        return "pointer", min(o.alignment for o in objs)
    if all(_is_scalar_leaf(o) for o in objs):
        values = [o for o in objs if isinstance(o, Value)]
        if values:
            dtypes = {v.dtype for v in values}
            if len(dtypes) > 1:
                a, b = sorted(dtypes, key=lambda d: d.name)[:2]
                raise CompilationError(
                    f"{_subject(name)} is {_a(a)} on one path and {_a(b)} on another; convert one of them "
                    f"(e.g. tsjit.{b.name}(...)) so both paths agree")
            dtype = values[0].dtype
            for o in objs:
                if not isinstance(o, Value) and isinstance(o, float) and not dtype.is_float:
                    raise CompilationError(
                        f"{_subject(name)} is a run-time {dtype.name} on one path and the float {o!r} on another")
            return "value", dtype
        if all(o == first and type(o) is type(first) for o in objs):
            return "same", first
        dtype = literal_dtype(first)
        for o in objs[1:]:
            dtype = dt.promote(dtype, literal_dtype(o))
        return "value", dtype
    kinds = sorted({describe(o) for o in objs})
    raise CompilationError(
        f"{_subject(name)} holds {kinds[0]} on one path and {kinds[-1]} on another; only run-time scalars "
        f"may differ between the paths of an if/loop")


def _element(obj, i: int):
    """Element ``i`` of a tuple as stored, bypassing a subclass's ``__getitem__`` (the join moves the
    registers of a ``Fragment`` still in flight, which is no read of them), else ``obj[i]``."""
    return tuple.__getitem__(obj, i) if isinstance(obj, tuple) else obj[i]


def _structure(objs, name: str):
    """Flatten the objects bound to one name on every edge into per-leaf lists."""
    first = objs[0]
    if isinstance(first, tuple) and not all(o is first for o in objs):
        if not all(isinstance(o, tuple) and type(o) is type(first) and len(o) == len(first) for o in objs):
            raise CompilationError(f"{_subject(name)} is a tuple of different lengths or types on different paths")
        return [("tuple", type(first), [_structure([_element(o, i) for o in objs], f"{name}[{i}]")[0]
                                        for i in range(len(first))])]
    return [("leaf", objs, name)]


def coerce(obj, dtype, builder_block_ok: bool = True) -> Value:
    """``obj`` (Value or Python number) as a Value of ``dtype`` for a phi incoming."""
    if isinstance(obj, Value):
        return obj if obj.dtype is dtype else cast_to(obj, dtype)
    return constant(obj, dtype)


def merge_scopes(builder: ir.IRBuilder, edges: list[Edge], join: ir.Block, *,
                 names=None) -> dict:
    """Emit the branches of ``edges`` into ``join`` and return the scope valid at ``join``.

    ``names`` restricts which names are merged (default: names bound on every edge).
    Raises :class:`CompilationError` for incompatible bindings.
    """
    if not edges:
        raise CompilationError("internal: merge with no incoming edge")
    if names is None:
        names = set(edges[0].scope)
        for e in edges[1:]:
            names &= set(e.scope)
    names = sorted(names)      # phis in name order: the IR (and PTX) must not depend on the hash seed
    plans = {}
    for name in names:
        plans[name] = _structure([e.scope[name] for e in edges], name)[0]

    # 1. per edge: coerce incoming values in the edge's block, then branch.
    incoming: dict[str, list] = {name: [] for name in names}
    for index, e in enumerate(edges):
        if e.open:
            builder.position_at_end(e.block)
        per_name = {}
        for name in names:
            per_name[name] = _coerce_tree(plans[name], e, index, builder if e.open else None)
        if e.open:
            builder.branch(join)
        for name in names:
            incoming[name].append(per_name[name])

    # 2. phis at the join.
    builder.position_at_end(join)
    result = {}
    for name in names:
        result[name] = _build_tree(plans[name], incoming[name], edges, builder, name)
    return result


def _coerce_tree(plan, edge: Edge, index: int, builder):
    if plan[0] == "tuple":
        return tuple(_coerce_tree(p, edge, index, builder) for p in plan[2])
    _, objs, name = plan
    kind, info = _leaf_kind(objs, name)
    obj = objs[index]
    if kind == "same":
        return obj
    if kind == "pointer":
        return obj.ir
    if builder is None:
        if isinstance(obj, Value) and obj.dtype is info:
            return obj.ir
        if not isinstance(obj, Value):
            return constant(obj, info).ir
        raise CompilationError(f"internal: `{name}` needs a conversion on a closed edge")
    return coerce(obj, info).ir


def _build_tree(plan, incomings, edges, builder, name):
    if plan[0] == "tuple":
        parts = []
        for i, sub in enumerate(plan[2]):
            parts.append(_build_tree(sub, [_element(inc, i) for inc in incomings], edges, builder, name))
        ctor = plan[1]
        return ctor(*parts) if hasattr(ctor, "_fields") else ctor(parts)
    _, objs, leaf_name = plan
    kind, info = _leaf_kind(objs, leaf_name)
    if kind == "same":
        return info
    if all(inc is incomings[0] for inc in incomings):
        ir_value = incomings[0]
    else:
        phi = builder.phi(incomings[0].type, name=_phi_name(leaf_name))
        for inc, e in zip(incomings, edges):
            phi.add_incoming(inc, e.block)
        ir_value = phi
    if kind == "pointer":
        proto = objs[0]
        return Pointer(ir_value, proto.dtype, proto.address_space, info)
    return Value(ir_value, info)


def _phi_name(name: str) -> str:
    return "".join(c if c.isalnum() or c == "_" else "_" for c in name)


@dataclass
class LoopPhi:
    """A loop-carried variable: its header phis (one per scalar leaf) and the prototype."""

    name: str
    prototype: object       # the binding before the loop (with Values materialized)
    phis: list              # [(path, phi, dtype or Pointer proto)]


def loop_header_phis(builder: ir.IRBuilder, scope: dict, carried: set[str], preheader: ir.Block) -> list[LoopPhi]:
    """Create phis at the current position (the loop header) for every carried name.

    Python numbers bound before the loop are materialized (int -> Int32/Int64, float ->
    Float32, bool -> Boolean).  Opaque objects are not given phis; the caller checks the
    body leaves them unchanged.
    """
    records = []
    for name in sorted(carried):
        if name not in scope:
            continue
        obj = scope[name]
        phis: list = []
        new_obj = _phi_tree(builder, obj, name, (), phis, preheader)
        if phis:
            scope[name] = new_obj
            records.append(LoopPhi(name, new_obj, phis))
    return records


def _phi_tree(builder, obj, name, path, phis, preheader):
    if isinstance(obj, tuple):
        parts = [_phi_tree(builder, o, f"{name}[{i}]", path + (i,), phis, preheader) for i, o in enumerate(obj)]
        return type(obj)(*parts) if hasattr(type(obj), "_fields") else type(obj)(parts)
    if isinstance(obj, Value) or is_constant(obj):
        v = obj if isinstance(obj, Value) else constant(obj)
        phi = builder.phi(v.ir.type, name=_phi_name(name))
        phi.add_incoming(v.ir, preheader)
        phis.append((path, phi, v.dtype, name))
        return Value(phi, v.dtype)
    if isinstance(obj, Pointer):
        phi = builder.phi(obj.ir.type, name=_phi_name(name))
        phi.add_incoming(obj.ir, preheader)
        phis.append((path, phi, obj, name))
        return Pointer(phi, obj.dtype, obj.address_space, obj.alignment)
    return obj


def _at_path(obj, path):
    for i in path:
        obj = _element(obj, i)
    return obj


def complete_loop_phis(builder: ir.IRBuilder, records: list[LoopPhi], latch_scope: dict, latch: ir.Block,
                       loop_line: int | None = None) -> None:
    """Add the back-edge incoming (from ``latch``, whose builder position is before its branch)."""
    for rec in records:
        if rec.name not in latch_scope:
            raise CompilationError(f"`{rec.name}` is deleted inside the loop")
        new = latch_scope[rec.name]
        for path, phi, kind, leaf_name in rec.phis:
            try:
                leaf = _at_path(new, path)
            except (TypeError, IndexError):
                raise CompilationError(f"`{rec.name}` changes structure inside the loop") from None
            if isinstance(kind, Pointer):
                if not isinstance(leaf, Pointer) or leaf.dtype is not kind.dtype:
                    raise CompilationError(f"`{leaf_name}` stops being a {kind!r} inside the loop")
                phi.add_incoming(leaf.ir, latch)
                continue
            dtype = kind
            if isinstance(leaf, Value):
                if leaf.dtype is not dtype:
                    raise CompilationError(
                        f"`{leaf_name}` is {_a(dtype)} before the loop and {_a(leaf.dtype)} after one "
                        f"iteration; initialize it with the type it takes in the loop, e.g. "
                        f"`{leaf_name} = tsjit.{leaf.dtype.name}(0)`")
                phi.add_incoming(leaf.ir, latch)
            elif is_constant(leaf):
                if isinstance(leaf, float) and not dtype.is_float:
                    raise CompilationError(f"`{leaf_name}` is {_a(dtype)} before the loop and a float inside it")
                phi.add_incoming(constant(leaf, dtype).ir, latch)
            else:
                raise CompilationError(
                    f"`{leaf_name}` is a run-time {dtype.name} before the loop and {describe(leaf)} inside it")
