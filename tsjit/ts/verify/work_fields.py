"""Which fields of its resource a work body names: ``self.<field>`` read statically.

A resource may hold a reference to a ring (``GmemTiles(smem=ring)``, an MMA operand ring whose
consumer works also read another ring's tiles).  The exhaustive model counts the works of such a
resource as accesses of the referenced ring's stage: a read in an iteration that waited on it, a
write in a task that fills it.  A resource that is not a ring exists to access the ring it
references, so that is taken as given; a ring's own works write their own stage, and write a
ring it references only if the body -- or a method or property of the resource that it reaches
through ``self`` -- names the field holding that ring.  So the TMA load of a ring B that keeps
``a_ring`` for its MMAs writes B's tiles only.  Reads through a reference stay as given (a routed
token may carry the referenced stage into a body that never names the field).

:func:`fields_named` answers None (unknown: assume every field) when the source is not
available, when ``self`` escapes (passed to a call, stored, ``getattr(self, ...)``,
``vars(self)``) or when ``self.__dict__`` is read: each keeps the access, never drops one.
"""
from __future__ import annotations

import ast
import inspect

from tsjit.ts.verify.async_reads import body_statements

__all__ = ["fields_named", "names_field"]

_MISSING = object()
_UNKNOWN = None


def _callable_body(member):
    """The function behind a class member reached through ``self``, or None (a plain field)."""
    if isinstance(member, (staticmethod, classmethod)):
        member = member.__func__
    if isinstance(member, property):
        member = member.fget
    return member if inspect.isfunction(member) else None


def _names(function, resource, seen: set):
    statements = body_statements(function)
    code = function.__code__
    if not statements or code.co_argcount == 0:
        return _UNKNOWN
    me = code.co_varnames[0]
    bases = set()
    found: set = set()
    for statement in statements:
        for node in ast.walk(statement):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == me:
                bases.add(id(node.value))
                if node.attr == "__dict__":
                    return _UNKNOWN
                found.add(node.attr)
                member = _callable_body(inspect.getattr_static(type(resource), node.attr, _MISSING))
                if member is not None and member not in seen:
                    seen.add(member)
                    inner = _names(member, resource, seen)
                    if inner is _UNKNOWN:
                        return _UNKNOWN
                    found |= inner
    for statement in statements:
        for node in ast.walk(statement):
            if isinstance(node, ast.Name) and node.id == me and id(node) not in bases:
                return _UNKNOWN        # self escapes: anything may be read through it
    return found


def fields_named(function, resource) -> frozenset | None:
    """The attribute names ``function`` (a work method of ``resource``) reads through ``self``,
    following the resource's own methods and properties; None when not known (module docstring)."""
    if function is None or not inspect.isfunction(function):
        return _UNKNOWN
    found = _names(function, resource, {function})
    return None if found is _UNKNOWN else frozenset(found)


def names_field(step, resource, target) -> bool:
    """Whether work ``step`` of ``resource`` may access ``target`` (a ring it references) through
    a field holding it: True unless its body provably never names such a field."""
    names = fields_named(getattr(step, "function", None), resource)
    if names is None:
        return True
    holders = [name for name, value in vars(resource).items() if value is target]
    return any(name in names for name in holders)
