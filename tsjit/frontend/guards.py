"""Guards that keep compile-time Python from silently computing the wrong kernel or never ending.

The frontend runs ordinary Python at compile time (constant folding, unrolled loops, lists and
dicts of values).  Some of Python's answers are wrong for device values, and some compile-time
computations do not end; each guard here turns one of them into a located
:class:`~tsjit.errors.CompilationError` or into the right IR:

* :func:`membership` — ``i in (1, 2)`` / ``i not in {...}`` with a run-time ``i`` compares
  element by element at run time (Python's ``in`` would hash the value or compare identities
  and fold to a constant).
* :func:`identity` — ``x[i] is y`` (other than ``is None``) is refused: it would fold on object
  identity.
* :func:`bounded_iteration` — compile-time loops (``range_constexpr``, loops over tuples,
  lists and iterators) and unpacking (``f(*xs)``, ``a, b = xs``) stop with an error after the
  **unroll limit** of iterations instead of running forever (``itertools.count()``) or filling
  memory (``range_constexpr(10**6)``).  The limit is per loop, default 4096
  (:data:`DEFAULT_UNROLL_LIMIT`); raise it with ``@tsjit.kernel(unroll_limit=N)`` or the
  ``TSJIT_UNROLL_LIMIT`` environment variable (the kernel option wins).
* :func:`check_compile_time_size` — ``2 ** 10**9``, ``1 << 10**12`` or ``"x" * 10**10`` on
  compile-time operands is refused before Python tries to build the result.
* :class:`RegionSnapshot` / :func:`check_mutation` — a Python list, dict or set that exists
  before a run-time ``if``/loop is a compile-time object: appending a device value to it in
  one branch or iteration would make it hold a value that does not exist on the other paths
  (LLVM rejects the IR, or worse, the code is wrong).  Such mutations are refused at the
  statement that makes them, or at the ``if``/loop when they happen out of sight.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass, field

from tsjit import env
from tsjit.errors import CompilationError
from tsjit.lang.constexpr import DynamicRange
from tsjit.lang.values import Value, binary, compare, is_constant, logical_not

DEFAULT_UNROLL_LIMIT = env.UNROLL_LIMIT.default  # 4096
_MAX_COMPILE_TIME_BITS = 1 << 16          # compile-time ints larger than this are refused
_MAX_COMPILE_TIME_LENGTH = 1 << 20        # compile-time strings/lists/tuples built by `*`


def resolve_unroll_limit(option: int | None) -> int:
    """The unroll limit of one compile: the kernel option, else ``TSJIT_UNROLL_LIMIT``, else 4096.

    Raises:
        CompilationError: the option is not a positive int.
    """
    if option is None:
        return env.unroll_limit()
    if isinstance(option, bool) or not isinstance(option, int) or option < 1:
        raise CompilationError(f"@tsjit.kernel(unroll_limit=...) must be a positive int, got {option!r}")
    return option


def _limit_error(what: str, count, limit: int) -> CompilationError:
    size = f"{count} iterations" if isinstance(count, int) else f"more than {limit} iterations"
    return CompilationError(
        f"{what} would unroll {size} at compile time, over the unroll limit of {limit}; use a run-time "
        f"loop (`for i in range(n)`), or raise the limit with @tsjit.kernel(unroll_limit=N) or "
        f"TSJIT_UNROLL_LIMIT=N")


def bounded_iteration(iterable, limit: int, what: str):
    """Iterate ``iterable`` at compile time, at most ``limit`` items.

    ``what`` names the construct in messages (``"this loop"``, ``"unpacking"``).

    Raises:
        CompilationError: the object is not iterable, or yields more than ``limit`` items (a
            sized object longer than the limit fails before its first item).
    """
    try:
        iterator = iter(iterable)
    except CompilationError:
        raise
    except TypeError:
        raise CompilationError(f"`{type(iterable).__name__}` object is not iterable") from None
    try:
        length = len(iterable)
    except Exception:  # noqa: BLE001 - an iterator without a length
        length = None
    if length is not None and length > limit:
        raise _limit_error(what, length, limit)
    for count, item in enumerate(iterator):
        if count >= limit:
            raise _limit_error(what, None, limit)
        yield item


# -- membership ------------------------------------------------------------------------------
_COLLECTIONS = (tuple, list, set, frozenset, dict)


def membership(item, container, *, negate: bool):
    """``item in container`` (``not in`` when ``negate``), built at run time when a device value
    takes part: an ``or`` of ``==`` comparisons over a tuple/list/set/dict's elements, or the
    bounds and step test of a ``range``.

    Raises:
        CompilationError: ``container`` is a device array or another object that has no
            compile-time elements, or an element is not a number.
    """
    elements = None
    if isinstance(container, _COLLECTIONS):
        elements = list(container)
    involves_device = isinstance(item, Value) or isinstance(container, DynamicRange) or (
        elements is not None and any(isinstance(e, Value) for e in elements))
    if not involves_device:
        return (item not in container) if negate else (item in container)
    if isinstance(container, (range, DynamicRange)):
        result = _in_range(item, container)
    elif elements is None:
        raise CompilationError(
            f"`in` with a run-time value needs a tuple, list, set or range of numbers to compare with, "
            f"got a {type(container).__name__} object")
    else:
        result = False
        for element in elements:
            if not (isinstance(element, Value) or is_constant(element)):
                raise CompilationError(f"`in` compares a run-time value with each element, but this collection "
                                       f"holds a {type(element).__name__} object")
            result = _or(result, compare("==", item, element))
    if negate:
        return logical_not(result)
    return result


def _or(a, b):
    if isinstance(a, bool):
        return b if not a else True
    return binary("|", a, b)


def _in_range(item, rng):
    start, end, step = (rng.start, rng.stop, rng.step) if isinstance(rng, range) else (rng.start, rng.end, rng.step)
    if not isinstance(step, int):
        raise CompilationError("`in range(...)` with a run-time value needs a compile-time step")
    if isinstance(item, Value) and not (item.dtype.is_int or item.dtype.is_bool):
        raise CompilationError(f"`in range(...)` needs an integer, got a run-time {item.dtype.name}")
    if step > 0:
        inside = binary("&", compare(">=", item, start), compare("<", item, end))
        offset = item - start
    else:
        inside = binary("&", compare("<=", item, start), compare(">", item, end))
        offset = start - item
    if abs(step) == 1:
        return inside
    on_step = compare("==", offset % abs(step), 0)
    return binary("&", inside, on_step)


def identity(a, b, *, negate: bool) -> bool:
    """``a is b`` (``is not`` when ``negate``) at compile time.

    Raises:
        CompilationError: a device value compared with something other than ``None`` or itself
            (each computation makes a new object, so ``x[i] is x[i]`` would fold to False).
    """
    if a is not b and (isinstance(a, Value) or isinstance(b, Value)) and a is not None and b is not None:
        raise CompilationError("`is` compares compile-time objects, and each device value computed is a new "
                               "object; compare the values with `==` / `!=`")
    return (a is not b) if negate else (a is b)


# -- compile-time sizes ----------------------------------------------------------------------
def check_compile_time_size(op, left, right) -> None:
    """Refuse compile-time ``**``, ``<<`` and sequence ``*`` whose result would be enormous.

    Raises:
        CompilationError: an integer result of more than 65536 bits, or a string, list or tuple
            of more than 2**20 items.
    """
    if isinstance(left, Value) or isinstance(right, Value):
        return
    ints = isinstance(left, int) and isinstance(right, int)
    if ints and op is operator.pow and right > 0 and abs(left) > 1:
        bits = left.bit_length() * right
        if bits > _MAX_COMPILE_TIME_BITS:
            raise CompilationError(f"the compile-time integer {left} ** {right} would have about {bits} bits; "
                                   f"compile-time integers are limited to {_MAX_COMPILE_TIME_BITS} bits")
    if ints and op is operator.lshift and left and right > _MAX_COMPILE_TIME_BITS:
        raise CompilationError(f"the compile-time integer {left} << {right} would have over {right} bits; "
                               f"compile-time integers are limited to {_MAX_COMPILE_TIME_BITS} bits")
    if op is operator.mul:
        for seq, count in ((left, right), (right, left)):
            if isinstance(seq, (str, bytes, list, tuple)) and isinstance(count, int) \
                    and len(seq) * count > _MAX_COMPILE_TIME_LENGTH:
                raise CompilationError(f"repeating a {type(seq).__name__} of {len(seq)} items {count} times at "
                                       f"compile time is too large (limit {_MAX_COMPILE_TIME_LENGTH} items)")


# -- compile-time containers under run-time control flow -------------------------------------
_MUTABLE = (list, dict, set, bytearray)
_MUTATING_METHODS = frozenset({"append", "extend", "insert", "pop", "remove", "clear", "sort", "reverse",
                               "update", "setdefault", "popitem", "add", "discard", "intersection_update",
                               "difference_update", "symmetric_difference_update", "__setitem__",
                               "__delitem__", "__iadd__"})


def _contents(container) -> tuple:
    if isinstance(container, dict):
        return tuple((id(k), id(v)) for k, v in container.items())
    return tuple(map(id, container))


@dataclass
class RegionSnapshot:
    """The mutable compile-time containers reachable from the bindings when a run-time ``if`` arm
    or loop body began, with their contents (by identity) at that moment.

    Attributes:
        kind: ``"if"``, ``"loop"`` or ``"conditional expression"`` (for messages).
        containers: ``id(container) -> (name, container, contents)``.
    """

    kind: str
    containers: dict = field(default_factory=dict)

    @classmethod
    def take(cls, kind: str, bindings: dict) -> "RegionSnapshot":
        """The snapshot of every compile-time container reachable from ``bindings`` as a ``kind`` region begins."""
        snapshot = cls(kind)
        for name, obj in bindings.items():
            snapshot._walk(name, obj, 0)
        return snapshot

    def _walk(self, name: str, obj, depth: int) -> None:
        if depth > 3:
            return
        if isinstance(obj, _MUTABLE):
            if id(obj) in self.containers:
                return
            self.containers[id(obj)] = (name, obj, _contents(obj))
            items = obj.values() if isinstance(obj, dict) else obj
        elif isinstance(obj, tuple) and len(obj) <= 1024:
            items = obj
        else:
            return
        if isinstance(obj, (bytearray, set)):
            return
        for index, item in enumerate(items):
            self._walk(f"{name}[{index}]", item, depth + 1)

    def changed(self) -> str | None:
        """The name of a container whose contents changed since the snapshot, or ``None``."""
        for name, obj, contents in self.containers.values():
            if _contents(obj) != contents:
                return name
        return None


def _refusal(name: str, container, kind: str) -> CompilationError:
    return CompilationError(
        f"`{name}` (a Python {type(container).__name__}) is changed inside a run-time {kind}; it is a compile-time "
        f"object, so its contents cannot depend on a run-time condition or iteration (values added on one path "
        f"do not exist on the others).  Keep run-time results in variables (`acc = acc + v`), or make the "
        f"loop/condition compile-time (tsjit.range_constexpr, tsjit.const_expr)")


def check_mutation(regions: list, container, how: str) -> None:
    """Refuse ``container.append(...)`` / ``container[k] = v`` (``how``) on a compile-time container
    that existed before the innermost enclosing run-time ``if``/loop.

    Raises:
        CompilationError: naming the container and the region kind.
    """
    if not regions or not isinstance(container, _MUTABLE):
        return
    found = regions[-1].containers.get(id(container))
    if found is not None and found[1] is container:
        raise _refusal(found[0], container, regions[-1].kind)


def check_method_call(regions: list, func) -> None:
    """:func:`check_mutation` for a call of a bound mutating method (``xs.append``, ``d.update``)."""
    owner = getattr(func, "__self__", None)
    if isinstance(owner, _MUTABLE) and getattr(func, "__name__", "") in _MUTATING_METHODS:
        check_mutation(regions, owner, func.__name__)


def check_region_end(snapshot: RegionSnapshot) -> None:
    """At the end of a run-time region: refuse a change made out of sight (inside a called helper).

    Raises:
        CompilationError: naming the changed container.
    """
    name = snapshot.changed()
    if name is not None:
        obj = next(entry[1] for entry in snapshot.containers.values() if entry[0] == name)
        raise _refusal(name, obj, snapshot.kind)


__all__ = ["DEFAULT_UNROLL_LIMIT", "RegionSnapshot", "bounded_iteration", "check_compile_time_size",
           "check_method_call", "check_mutation", "check_region_end", "identity", "membership",
           "resolve_unroll_limit"]
