"""What a kernel depends on, recorded while it compiles, and a stable digest of each thing.

Recording
    The code generator calls :meth:`RecordingMixin.record_name` for every name it resolves
    outside the local scope of the function it compiles (a module global, a builtin, a closure
    cell of the kernel) and for every attribute chain rooted at such a name: ``pkg.helpers.scale``
    is one record, name ``pkg`` with the chain ``helpers.scale``, holding the digest of what the
    chain found.  Code that runs as Python at compile time (nested ``def``/``lambda``,
    comprehensions, f-strings) has the free names it mentions recorded when it is created
    (:meth:`RecordingMixin.record_references`).  Names resolved inside an inlined function's
    *closure* are not recorded: the digest of that function, taken where it was resolved, covers
    its closure cells.  Names in tsjit's own modules are not recorded: tsjit's version digest covers
    them.

Checking
    The records go into the disk-cache entry.  On a disk hit in a fresh process the runtime calls
    :func:`unchanged`, which resolves every record again (module globals through ``sys.modules``,
    then builtins; the kernel's closure cells) and compares digests: any difference is a miss.
    The in-memory launch path does none of this.

Accepted compile-time constants and their digests (:func:`value_digest`)
    * ``None``, ``bool``, ``int``, ``float``, ``complex``, ``str``, ``bytes``, ``Ellipsis``: type and value.
    * ``tuple``, ``list``, ``dict``, ``set``, ``frozenset``, ``range``, ``slice`` of accepted values.
    * numpy scalars (dtype and bytes), ``numpy.dtype``, numpy arrays of non-object dtype (dtype,
      shape, bytes).
    * tsjit dtypes; any object with a ``__tsjit_key__()`` method (the string it returns);
      ``enum`` members.
    * Callables of every kind: functions, lambdas, ``@tsjit.func`` device functions, kernels,
      classes (TS resource classes included), bound methods, ``staticmethod``/``classmethod``/
      ``property``, ``functools.partial``, callable instances.  A function's digest covers its
      source text and, recursively, what it reaches: closure cells, defaults, and every global and
      module attribute chain its code loads (``helpers.scale``).  A class's covers its source
      text, bases and members.
    * Other objects (dataclass instances, configuration objects, resources): their class and,
      recursively, their attributes (``__dict__`` and ``__slots__``).
    * Modules by name.  Code in tsjit is keyed by tsjit's version digest, code in an installed
      package (``site-packages``) by the distribution's version (``importlib.metadata``), the
      standard library by the Python version.

    Anything else (locks, files, generators, device values, numpy object arrays, C objects without
    readable state) raises :class:`UndigestableValue`; the code generator turns it into a located
    :class:`~tsjit.errors.CompilationError`.
"""
from __future__ import annotations

import ast
import builtins
import dis
import enum
import functools
import hashlib
import pickle
import sys
import types

import numpy as np

from tsjit.frontend.provenance import foreign_name, module_origin
from tsjit.frontend.source import source_text
from tsjit.lang.dtypes import DType

_MISSING = object()
_PLAIN = (bool, int, float, complex, str, bytes)
_MAX_TEXT = 96
_SKIPPED_CLASS_ATTRS = frozenset({
    "__dict__", "__weakref__", "__module__", "__qualname__", "__doc__", "__dataclass_fields__",
    "__dataclass_params__", "__match_args__", "__annotations__", "__orig_bases__", "__parameters__",
    "__abstractmethods__", "_abc_impl", "__firstlineno__", "__static_attributes__"})
_DESCRIPTOR_TYPES = (types.MethodWrapperType, types.WrapperDescriptorType, types.MethodDescriptorType,
                     types.ClassMethodDescriptorType, types.GetSetDescriptorType, types.MemberDescriptorType)
_HINT = ("pass the value as a tsjit.Constexpr argument of an accepted type (int, float, str, tuple, numpy "
         "scalar, dtype, ...), or give its class a __tsjit_key__() method returning a string that changes "
         "whenever the object would change the compiled code")


class UndigestableValue(TypeError):
    """A value has no stable digest, so it cannot be part of a cache key.

    Attributes:
        path: where the value was found (``"CFG.lock"``).
        reason: why it cannot be digested.
    """

    def __init__(self, path: str, reason: str):
        super().__init__(f"{path} is {reason}" if path else reason)
        self.path, self.reason = path, reason


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _short(text: str) -> str:
    return text if len(text) <= _MAX_TEXT else "sha256:" + _sha(text)


@functools.lru_cache(maxsize=4096)
def _global_chains(code: types.CodeType) -> tuple:
    """Every ``global.attr.attr`` chain the bytecode of ``code`` (and its nested code) loads."""
    chains: set = set()
    current = None
    for instruction in dis.get_instructions(code):
        if instruction.opname in ("LOAD_GLOBAL", "LOAD_NAME"):
            if current:
                chains.add(tuple(current))
            current = [instruction.argval]
        elif instruction.opname in ("LOAD_ATTR", "LOAD_METHOD") and current is not None:
            current.append(instruction.argval)
        elif current is not None:
            chains.add(tuple(current))
            current = None
    if current:
        chains.add(tuple(current))
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            chains.update(_global_chains(const))
    return tuple(sorted(chains))


def _code_digest(code: types.CodeType) -> str:
    """A function without source (generated by ``exec``): its bytecode, names and constants."""
    consts = [(_code_digest(c) if isinstance(c, types.CodeType) else repr(c)) for c in code.co_consts]
    return _sha("|".join([code.co_code.hex(), repr(code.co_names), repr(code.co_varnames), *consts]))


# -- digests -------------------------------------------------------------------------------------
class Digester:
    """Computes :func:`value_digest` for many values, sharing work (one per compile or check)."""

    def __init__(self):
        self._memo: dict[int, str] = {}
        self._active: dict[int, int] = {}
        self._keep: list = []

    def digest(self, value, path: str = "") -> str:
        """The digest of ``value`` (see the module docstring).

        Raises:
            UndigestableValue: ``value`` or something it holds has no stable digest.
        """
        kind = type(value)
        if value is None or value is Ellipsis or kind in _PLAIN:
            return _short(f"{kind.__name__}:{value!r}")
        key = id(value)
        memo = self._memo.get(key)
        if memo is not None:
            return memo
        if key in self._active:
            return f"cycle:{self._active[key]}"
        self._active[key] = len(self._active)
        try:
            result = self._compound(value, path)
        finally:
            del self._active[key]
        self._memo[key] = result
        self._keep.append(value)
        return result

    def _compound(self, value, path: str) -> str:
        kind = type(value)
        if kind in (tuple, list):
            return _short(f"{kind.__name__}(" + ",".join(
                self.digest(v, f"{path}[{i}]") for i, v in enumerate(value)) + ")")
        if kind is dict:
            return _short("dict(" + ",".join(
                f"{self.digest(k, path)}:{self.digest(v, f'{path}[{k!r}]')}" for k, v in value.items()) + ")")
        if kind in (set, frozenset):
            return _short(f"{kind.__name__}(" + ",".join(sorted(self.digest(v, path) for v in value)) + ")")
        if kind in (range, slice):
            return f"{kind.__name__}({self.digest((value.start, value.stop, value.step), path)})"
        if isinstance(value, DType):
            return f"dtype:{value.name}"
        if isinstance(value, (np.generic, np.ndarray, np.dtype)):
            return self._numpy(value, path)
        if isinstance(value, types.ModuleType):
            return f"module:{value.__name__}:{module_origin(value.__name__) or 'user'}"
        if not isinstance(value, type) and callable(getattr(value, "__tsjit_key__", None)):
            return _short(f"key:{type(value).__module__}.{type(value).__qualname__}:{value.__tsjit_key__()}")
        if isinstance(value, enum.Enum):
            return f"enum:{self.digest(type(value), path)}.{value.name}"
        wrapped = _tsjit_wrapped_function(value)
        if wrapped is not None:
            options = getattr(value, "options", None)
            return "tsjit-wrapper:" + _sha(self.digest(wrapped, path) + self.digest(options, path))
        if isinstance(value, types.FunctionType):
            return self._function(value, path)
        if isinstance(value, type):
            return self._class(value, path)
        if isinstance(value, types.MethodType):
            return "bound:" + _sha(self.digest(value.__func__, path) + "|" + self.digest(value.__self__, path))
        if isinstance(value, functools.partial):
            return "partial:" + _sha("|".join((self.digest(value.func, path), self.digest(value.args, path),
                                               self.digest(value.keywords, path))))
        if isinstance(value, (staticmethod, classmethod)):
            return f"{kind.__name__}:{self.digest(value.__func__, path)}"
        if isinstance(value, property):
            return "property:" + _sha("|".join(self.digest(f, path) for f in (value.fget, value.fset, value.fdel)))
        if isinstance(value, (types.BuiltinFunctionType, np.ufunc)) or kind in _DESCRIPTOR_TYPES:
            return self._builtin(value, path)
        inner = getattr(value, "__wrapped__", None)
        if isinstance(inner, types.FunctionType):  # functools.cache / lru_cache and other C-level wrappers
            return "wrapper:" + _sha(self.digest(kind, path) + "|" + self.digest(inner, path))
        return self._instance(value, path)

    def _numpy(self, value, path: str) -> str:
        if isinstance(value, np.dtype):
            return f"np.dtype:{value.str}:{value.descr!r}"
        if value.dtype.hasobject:
            raise UndigestableValue(path, "a numpy array of Python objects (dtype object); use a numeric dtype")
        if isinstance(value, np.generic):
            return f"np.{value.dtype.str}:{value.tobytes().hex()}"
        data = np.ascontiguousarray(value)
        return f"np.ndarray:{value.dtype.str}:{value.shape}:" + hashlib.sha256(data.tobytes()).hexdigest()

    def _function(self, fn: types.FunctionType, path: str) -> str:
        foreign = foreign_name(fn)
        if foreign is not None:
            return foreign
        qualname = f"{fn.__module__}.{fn.__qualname__}"
        where = path or qualname
        text = source_text(fn)
        code = fn.__code__
        strict = text is not None  # generated code (dataclass __init__, exec) has no source to edit
        parts = [f"fn:{qualname}", _sha(text) if text is not None else _code_digest(code)]
        parts.append("defaults=" + self._lenient(fn.__defaults__, f"{where} defaults", strict))
        parts.append("kwdefaults=" + self._lenient(fn.__kwdefaults__, f"{where} defaults", strict))
        for name, cell in zip(code.co_freevars, fn.__closure__ or ()):
            try:
                contents = cell.cell_contents
            except ValueError:
                parts.append(f"cell {name}=<empty>")
                continue
            parts.append(f"cell {name}=" + self._lenient(contents, f"{where}: closure variable `{name}`", strict))
        namespace = fn.__globals__
        for chain in _global_chains(code):
            used, value = _resolve_modules(namespace, chain)
            label = ".".join(used)
            digest = "<missing>" if value is _MISSING else self._lenient(value, f"{where}: global `{label}`", strict)
            parts.append(f"global {label}={digest}")
        return "fn:" + _sha("\n".join(parts))

    def _lenient(self, value, path: str, strict: bool) -> str:
        if strict:
            return self.digest(value, path)
        try:
            return self.digest(value, path)
        except UndigestableValue:
            return f"<{type(value).__qualname__}>"

    def _class(self, cls: type, path: str) -> str:
        foreign = foreign_name(cls)
        if foreign is not None:
            return foreign
        qualname = f"{cls.__module__}.{cls.__qualname__}"
        text = source_text(cls)
        parts = [f"class:{qualname}", _sha(text) if text is not None else "<no source>"]
        parts.extend("base=" + self.digest(base, f"{qualname} base") for base in cls.__bases__)
        for name, attr in sorted(vars(cls).items()):
            if name not in _SKIPPED_CLASS_ATTRS:
                # The class's source text covers how each member is written; an undigestable class
                # attribute (a lock, a cache) contributes its type only.
                parts.append(f"{name}=" + self._lenient(attr, f"{qualname}.{name}", False))
        return "class:" + _sha("\n".join(parts))

    def _builtin(self, value, path: str) -> str:
        if isinstance(value, np.ufunc):
            return f"{module_origin('numpy')}:numpy.{value.__name__}"
        owner = getattr(value, "__self__", None)
        if owner is not None and not isinstance(owner, types.ModuleType):
            return "bound-builtin:" + _sha(f"{type(value).__name__}.{value.__name__}|" + self.digest(owner, path))
        objclass = getattr(value, "__objclass__", None)
        if objclass is not None:
            return f"descriptor:{self.digest(objclass, path)}.{value.__name__}"
        foreign = foreign_name(value)
        return foreign or f"builtin:{getattr(value, '__module__', None)}.{value.__qualname__}"

    def _instance(self, value, path: str) -> str:
        kind = type(value)
        if _is_device_value(value):
            raise UndigestableValue(path, "a run-time device value, which has no compile-time value")
        origin = module_origin(kind.__module__)
        try:
            return self._attributes(value, path)
        except UndigestableValue:
            if origin is None or origin == "tsjit":
                raise
            # An object of the standard library or an installed package (a logger, a C type): its
            # pickle, which such classes define by value; functions inside are attributes, seen above.
            try:
                return f"pickle:{origin}:" + hashlib.sha256(pickle.dumps(value, protocol=4)).hexdigest()
            except Exception:  # noqa: BLE001 - not picklable either: report why the attributes failed
                pass
            raise

    def _attributes(self, value, path: str) -> str:
        """An object by its class and, recursively, its ``__dict__`` and ``__slots__`` attributes."""
        kind = type(value)
        state = getattr(value, "__dict__", None)
        slots = [name for klass in kind.__mro__ for name in getattr(klass, "__slots__", ())
                 if isinstance(name, str) and name not in ("__dict__", "__weakref__")]
        if not isinstance(state, dict) and not slots:
            raise UndigestableValue(path, f"a {kind.__module__}.{kind.__qualname__} object, which has no "
                                          f"attributes or value tsjit can digest")
        parts = ["obj", self.digest(kind, path)]
        for name, item in sorted((state or {}).items()):
            parts.append(f"{name}=" + self.digest(item, f"{path}.{name}" if path else name))
        for name in slots:
            item = getattr(value, name, _MISSING)
            if item is not _MISSING:
                parts.append(f"{name}=" + self.digest(item, f"{path}.{name}" if path else name))
        return "obj:" + _sha("\n".join(parts))


def value_digest(value) -> str:
    """The stable digest of one compile-time value (see the module docstring for the accepted types).

    Raises:
        UndigestableValue: the value, or something it holds, has no stable digest.
    """
    return Digester().digest(value)


def _tsjit_wrapped_function(value):
    """The Python function a ``@tsjit.func`` or ``@tsjit.kernel`` object compiles, else ``None``."""
    if getattr(type(value), "__tsjit_device_function__", False) or getattr(type(value), "__tsjit_kernel__", False):
        fn = getattr(value, "fn", None)
        return fn if isinstance(fn, types.FunctionType) else None
    return None


def _is_device_value(value) -> bool:
    """A run-time device value (``Value``, ``Pointer``, ``Tensor``).  Such an object exists only once its
    module is loaded, and a disk-cache hit checks its records without loading the device language (or
    llvmlite): look the classes up in ``sys.modules`` instead of importing them."""
    values, memory = sys.modules.get("tsjit.lang.values"), sys.modules.get("tsjit.lang.memory")
    return ((values is not None and isinstance(value, values.Value))
            or (memory is not None and isinstance(value, (memory.Pointer, memory.Tensor))))


def _resolve_modules(namespace: dict, chain: tuple):
    """Follow ``chain`` from ``namespace`` (then builtins) through modules only: ``(names used, value)``."""
    value = namespace.get(chain[0], _MISSING)
    if value is _MISSING:
        value = getattr(builtins, chain[0], _MISSING)
    used = [chain[0]]
    for attr in chain[1:]:
        if not isinstance(value, types.ModuleType):
            break
        nxt = getattr(value, attr, _MISSING)
        if nxt is _MISSING:
            break
        value = nxt
        used.append(attr)
    return tuple(used), value


# -- records ---------------------------------------------------------------------------------------
def _is_tsjit_module(name: str) -> bool:
    return name == "tsjit" or name.startswith("tsjit.")


def record_key(scope: str, module: str, name: str, path: tuple) -> str:
    """The text form of one record, as stored in a cache entry: ``"global:pkg.mod:helpers.scale"``."""
    return f"{scope}:{module}:{'.'.join((name, *path))}"


class DependencyRecorder:
    """The dependencies of one kernel compile: record key (:func:`record_key`) -> digest."""

    def __init__(self):
        self.records: dict[str, str] = {}
        self._digester = Digester()

    def record(self, scope: str, module: str, name: str, path: tuple, value) -> None:
        """Record that ``name.path`` (``scope`` ``"global"`` in ``module``, or ``"closure"`` of the
        kernel) resolved to ``value``.

        Raises:
            UndigestableValue: ``value`` has no stable digest.
        """
        key = record_key(scope, module, name, path)
        if key not in self.records:
            self.records[key] = self._digester.digest(value, ".".join((name, *path)))


def unchanged(records, kernel_fn) -> bool:
    """True when every record (``{record key: digest}``, as stored in a cache entry) still resolves
    to a value of the same digest in this process; any problem resolving one is ``False``."""
    if not isinstance(records, dict):
        return False
    digester = Digester()
    for key, digest in records.items():
        try:
            scope, module, dotted = key.split(":", 2)
            name, *path = dotted.split(".")
            value = _find(scope, module, name, path, kernel_fn)
            if value is _MISSING or digester.digest(value) != digest:
                return False
        except Exception:  # noqa: BLE001 - a record that cannot be checked is a change
            return False
    return True


def _find(scope: str, module: str, name: str, path: list, kernel_fn):
    if scope == "closure":
        code = getattr(kernel_fn, "__code__", None)
        if code is None or name not in code.co_freevars:
            return _MISSING
        value = kernel_fn.__closure__[code.co_freevars.index(name)].cell_contents
    elif scope == "global":
        mod = sys.modules.get(module)
        if mod is None:
            return _MISSING
        value = vars(mod).get(name, _MISSING)
        if value is _MISSING:
            value = getattr(builtins, name, _MISSING)
    else:
        return _MISSING
    for attr in path:
        if value is _MISSING:
            break
        value = getattr(value, attr, _MISSING)
    return value


# -- the code generator's side ------------------------------------------------------------------------
def attribute_chain(node) -> tuple | None:
    """``("pkg", ("helpers", "scale"))`` for the expression ``pkg.helpers.scale``, else ``None``."""
    path = []
    while isinstance(node, ast.Attribute):
        path.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name) or not path:
        return None
    return node.id, tuple(reversed(path))


class RecordingMixin:
    """Dependency recording for :class:`~tsjit.frontend.codegen.CodeGenerator` (needs ``frame``,
    ``error`` and ``recorder``); raises a located :class:`~tsjit.errors.CompilationError` for a
    value it cannot digest."""

    def record_name(self, name: str, path: tuple, value, node) -> None:
        """Record that the free name ``name`` (then ``path``) resolved to ``value`` in the current frame.

        Raises:
            CompilationError: ``value`` cannot be digested (says why and what to pass instead).
        """
        frame = self.frame
        if path:
            root = frame.parsed.closure.get(name, frame.parsed.globals.get(name, getattr(builtins, name, None)))
            if isinstance(root, types.ModuleType) and _is_tsjit_module(root.__name__):
                # `tsjit.thread_idx`: the chain stays inside tsjit, which its version digest covers; record
                # the root's binding only, which a re-check resolves without importing tsjit submodules.
                value, path = root, ()
        if name in frame.parsed.closure:
            if not frame.is_kernel:
                return  # covered by the digest of the function that owns the closure
            scope, module = "closure", ""
        else:
            scope, module = "global", str(frame.parsed.globals.get("__name__", ""))
            if _is_tsjit_module(module):
                return
        try:
            self.recorder.record(scope, module, name, path, value)
        except UndigestableValue as exc:
            where = "closure variable" if scope == "closure" else "global"
            label = ".".join((name, *path))
            detail = str(exc) if exc.path != label else exc.reason
            raise self.error(node, f"{where} `{label}` cannot be a compile-time constant: {detail}, so tsjit "
                                   f"cannot tell when it changes (the kernel cache key must cover every value a "
                                   f"kernel uses); {_HINT}") from None

    def record_references(self, node) -> None:
        """Record the free names (and attribute chains) that Python code in ``node`` mentions: a nested
        ``def``/``lambda`` or an expression evaluated as Python, which the generator does not visit."""
        frame = self.frame
        bound = _bound_names(node)
        for name, path, sub in _free_chains(node):
            if name in bound or name in frame.scope:
                continue
            value = frame.parsed.closure.get(name, _MISSING)
            if value is _MISSING:
                value = frame.parsed.globals.get(name, _MISSING)
            if value is _MISSING:
                value = getattr(builtins, name, _MISSING)
            if value is _MISSING:
                continue  # a NameError when the code runs, reported there
            used = []
            for attr in path:
                nxt = getattr(value, attr, _MISSING)
                if nxt is _MISSING:
                    break
                value = nxt
                used.append(attr)
            self.record_name(name, tuple(used), value, sub)


def _bound_names(node) -> set:
    """Names bound anywhere inside ``node`` (parameters, assignments, loop and comprehension targets)."""
    bound = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, (ast.Store, ast.Del)):
            bound.add(sub.id)
        elif isinstance(sub, ast.arg):
            bound.add(sub.arg)
        elif isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and sub is not node:
            bound.add(sub.name)
        elif isinstance(sub, (ast.Import, ast.ImportFrom)):
            bound.update((alias.asname or alias.name).partition(".")[0] for alias in sub.names)
    return bound


def _free_chains(node):
    """``(name, attribute path, node)`` for every maximal ``name.attr...`` load in ``node``."""
    found = []

    class Finder(ast.NodeVisitor):
        def visit_Attribute(self, sub):
            chain = attribute_chain(sub)
            if chain is not None and isinstance(sub.ctx, ast.Load):
                found.append((chain[0], chain[1], sub))
            else:
                self.generic_visit(sub)

        def visit_Name(self, sub):
            if isinstance(sub.ctx, ast.Load):
                found.append((sub.id, (), sub))

    Finder().visit(node)
    return found


__all__ = ["DependencyRecorder", "Digester", "RecordingMixin", "UndigestableValue",
           "attribute_chain", "module_origin", "record_key", "unchanged", "value_digest"]
