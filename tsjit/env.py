"""Every environment variable tsjit reads, in one typed registry.

Nothing else in tsjit reads ``os.environ`` for a ``TSJIT_*`` name: each variable is an
:class:`EnvVar` in :data:`VARIABLES`, read through an accessor (:func:`cache_dir`,
:func:`dump_dir`, :func:`assembler`, :func:`target`, :func:`always_compile`,
:func:`disable_cache`, :func:`debug`, :func:`debug_timeout_ms`, :func:`unroll_limit`,
:func:`autotune`).  Accessors read ``os.environ`` at call time (a dict lookup and a
parse, well under a microsecond), so a test may ``monkeypatch.setenv`` and see the
effect at once, and no value is frozen at import.

A value that cannot be parsed (``TSJIT_ASSEMBLER=foo``, ``TSJIT_ALWAYS_COMPILE=maybe``)
raises :class:`~tsjit.errors.TsjitError` naming the variable, the value given and the
values allowed.  An empty value counts as unset.

=======================  ========  ==============================================
variable                 type      default
=======================  ========  ==============================================
``TSJIT_CACHE_DIR``      path      ``platformdirs.user_cache_dir("tsjit")``
``TSJIT_DUMP_DIR``       path      unset: no dumps
``TSJIT_ASSEMBLER``      choice    ``auto`` (``auto``, ``nvptxcompiler``, ``ptxas``, ``nvjitlink``)
``TSJIT_TARGET``         target    unset: from the device, else ``sm_90a``
``TSJIT_ALWAYS_COMPILE`` bool      false
``TSJIT_DISABLE_CACHE``  bool      false
``TSJIT_DEBUG``          bool      false: waits are unbounded (release code)
``TSJIT_DEBUG_TIMEOUT_MS`` int     ``2000`` (ms a debug-build wait may take)
``TSJIT_UNROLL_LIMIT``   int       ``4096`` (iterations of one compile-time loop)
``TSJIT_AUTOTUNE``       bool      false: ``tsjit.ops.matmul`` uses its cost model alone
``TSJIT_INTERPRET``      bool      false: launches run on the GPU
``TSJIT_INTERPRET_CHECK`` choices  ``none`` (``race``, ``uninit`` or ``race,uninit``: the interpreter's checks)
=======================  ========  ==============================================

Variables marked ``affects_code`` change the generated cubin; the specialization key
must include their values (:func:`code_affecting_values`), and no other variable
(hashing all of ``os.environ`` into keys is a known Triton mistake).
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Callable

from tsjit.errors import TsjitError

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})
_TARGET_PATTERN = re.compile(r"^sm_[0-9]{2,3}[af]?$")


@dataclass(frozen=True)
class EnvVar:
    """One environment variable tsjit reads.

    Attributes:
        name: the variable's name (``"TSJIT_CACHE_DIR"``).
        type: ``"path"``, ``"bool"``, ``"choice"``, ``"choices"`` (a comma-separated list of
            choices), ``"target"`` or ``"int"`` (a positive decimal integer).
        default: the value when unset, or a zero-argument callable computing it, or
            ``None`` (meaning "off" / "decided elsewhere").
        doc: one sentence for ``tsjit.env.describe()`` and the docs.
        choices: the allowed values of a ``"choice"`` / ``"choices"`` variable (lower case).
        affects_code: whether the value changes the generated code (and so belongs in
            the specialization key).
    """

    name: str
    type: str
    default: object
    doc: str
    choices: tuple[str, ...] = ()
    affects_code: bool = False

    def raw(self) -> str | None:
        """The variable's text in ``os.environ``, stripped; ``None`` when unset or empty."""
        text = os.environ.get(self.name)
        if text is None:
            return None
        text = text.strip()
        return text or None

    def value(self):
        """The parsed value (or the default when unset).

        Raises:
            TsjitError: the text is not a valid value of this variable's type.
        """
        text = self.raw()
        if text is None:
            default = self.default
            return default() if callable(default) else default
        return _PARSERS[self.type](self, text)


def _parse_path(var: EnvVar, text: str) -> str:
    return os.path.abspath(os.path.expanduser(text))


def _parse_bool(var: EnvVar, text: str) -> bool:
    lowered = text.lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise TsjitError(f"environment variable {var.name}={text!r} is not a boolean; "
                     f"expected one of {sorted(_TRUE | _FALSE)}")


def _parse_choice(var: EnvVar, text: str) -> str:
    lowered = text.lower()
    if lowered not in var.choices:
        raise TsjitError(f"environment variable {var.name}={text!r} is not allowed; "
                         f"expected one of {list(var.choices)}")
    return lowered


def _parse_choices(var: EnvVar, text: str) -> frozenset:
    return frozenset(_parse_choice(var, part.strip()) for part in text.split(",") if part.strip())


def _parse_target(var: EnvVar, text: str) -> str:
    lowered = text.lower()
    if not _TARGET_PATTERN.match(lowered):
        raise TsjitError(f"environment variable {var.name}={text!r} is not a GPU target; "
                         f"expected a name like 'sm_90a' or 'sm_100a'")
    return lowered


def _parse_int(var: EnvVar, text: str) -> int:
    if not text.isdigit() or int(text) <= 0:
        raise TsjitError(f"environment variable {var.name}={text!r} is not a positive integer; "
                         f"expected e.g. {var.default!r}")
    return int(text)


_PARSERS: dict[str, Callable[[EnvVar, str], object]] = {
    "int": _parse_int,
    "path": _parse_path,
    "bool": _parse_bool,
    "choice": _parse_choice,
    "choices": _parse_choices,
    "target": _parse_target,
}


def _default_cache_dir() -> str:
    import platformdirs  # lazily: only needed when TSJIT_CACHE_DIR is unset

    return platformdirs.user_cache_dir("tsjit")


CACHE_DIR = EnvVar(
    "TSJIT_CACHE_DIR", "path", _default_cache_dir,
    "Directory of the on-disk kernel cache (one file per compiled specialization).")
DUMP_DIR = EnvVar(
    "TSJIT_DUMP_DIR", "path", None,
    "When set, every compilation writes its LLVM IR, PTX, cubin and folded Python source (.py) into this "
    "directory (a lowering for the CPU interpreter: its LLVM IR and .py, as <kernel>-interpret-<digest>.*).")
ASSEMBLER = EnvVar(
    "TSJIT_ASSEMBLER", "choice", "auto",
    "PTX to cubin assembler: nvptxcompiler, ptxas, nvjitlink, or auto (the first of them that is available; "
    "nvJitLink, which drops setmaxnreg, last).",
    choices=("auto", "nvjitlink", "ptxas", "nvptxcompiler"), affects_code=True)
TARGET = EnvVar(
    "TSJIT_TARGET", "target", None,
    "GPU target to compile for (e.g. sm_90a, sm_100a); unset means the current device's, "
    "or sm_90a without a device.", affects_code=True)
ALWAYS_COMPILE = EnvVar(
    "TSJIT_ALWAYS_COMPILE", "bool", False,
    "Compile on every first call in a process, ignoring cached cubins (results are still written).")
DISABLE_CACHE = EnvVar(
    "TSJIT_DISABLE_CACHE", "bool", False,
    "Neither read nor write the on-disk kernel cache.")

DEBUG = EnvVar(
    "TSJIT_DEBUG", "bool", False,
    "Debug builds: every mbarrier wait is bounded by TSJIT_DEBUG_TIMEOUT_MS; on expiry the kernel records "
    "where it hung (kernel, CTA, task, warp, resource, stage, iteration, phase) and traps, and the next "
    "CUDA call raises a LaunchError with that report.", affects_code=True)
DEBUG_TIMEOUT_MS = EnvVar(
    "TSJIT_DEBUG_TIMEOUT_MS", "int", 2000,
    "Milliseconds (of %globaltimer) one wait of a TSJIT_DEBUG=1 build may take before it reports a hang.",
    affects_code=True)

UNROLL_LIMIT = EnvVar(
    "TSJIT_UNROLL_LIMIT", "int", 4096,
    "The most iterations one compile-time loop (range_constexpr, a loop over a tuple or iterator, "
    "unpacking) may take before the compile stops with an error; @tsjit.kernel(unroll_limit=N) wins.")

AUTOTUNE = EnvVar(
    "TSJIT_AUTOTUNE", "bool", False,
    "tsjit.ops.matmul times its cost model's best few configurations on the first call of each shape bucket "
    "and keeps the fastest, persisted in TSJIT_CACHE_DIR per (shape bucket, dtypes, layout, device).")

INTERPRET = EnvVar(
    "TSJIT_INTERPRET", "bool", False,
    "Run every kernel launch on the CPU interpreter (tsjit.interpret) instead of the GPU; device arrays and "
    "TensorMaps live in host memory, so no GPU is needed.")
INTERPRET_CHECK = EnvVar(
    "TSJIT_INTERPRET_CHECK", "choices", frozenset({"none"}),
    "Extra checks of the CPU interpreter: 'race' (shared-memory races between barrier epochs), 'uninit' "
    "(reads of never-written shared memory; includes race), both as 'race,uninit', or 'none'.",
    choices=("none", "race", "uninit"))

VARIABLES: dict[str, EnvVar] = {var.name: var for var in (
    CACHE_DIR, DUMP_DIR, ASSEMBLER, TARGET, ALWAYS_COMPILE, DISABLE_CACHE, DEBUG, DEBUG_TIMEOUT_MS,
    UNROLL_LIMIT, AUTOTUNE, INTERPRET, INTERPRET_CHECK)}


def get(name: str):
    """The parsed value of the registered variable ``name``.

    Raises:
        TsjitError: ``name`` is not a registered tsjit variable, or its value is invalid.
    """
    var = VARIABLES.get(name)
    if var is None:
        raise TsjitError(f"{name!r} is not a tsjit environment variable; "
                         f"known variables: {sorted(VARIABLES)}")
    return var.value()


def cache_dir() -> str:
    """Absolute path of the kernel cache directory (``TSJIT_CACHE_DIR``); it may not exist yet."""
    return CACHE_DIR.value()


def dump_dir() -> str | None:
    """Absolute path of the dump directory (``TSJIT_DUMP_DIR``), or ``None`` when dumping is off."""
    return DUMP_DIR.value()


def assembler() -> str:
    """``"auto"``, ``"nvptxcompiler"``, ``"ptxas"`` or ``"nvjitlink"`` (``TSJIT_ASSEMBLER``).

    Raises:
        TsjitError: the variable holds another value.
    """
    return ASSEMBLER.value()


def target() -> str | None:
    """The target override (``TSJIT_TARGET``, e.g. ``"sm_90a"``), or ``None`` when unset.

    ``None`` means the caller picks the current device's target, or ``sm_90a``.

    Raises:
        TsjitError: the value is not of the form ``sm_<digits>[a|f]``
            (:func:`tsjit.backend.targets.environment_target` also checks tsjit builds for it).
    """
    return TARGET.value()


def always_compile() -> bool:
    """Whether to compile even when a cached cubin exists (``TSJIT_ALWAYS_COMPILE``)."""
    return ALWAYS_COMPILE.value()


def disable_cache() -> bool:
    """Whether the on-disk cache is off entirely (``TSJIT_DISABLE_CACHE``)."""
    return DISABLE_CACHE.value()


def debug() -> bool:
    """Whether kernels are compiled with bounded waits and hang reports (``TSJIT_DEBUG``).

    Read when a kernel is compiled (and part of its cache key); a kernel already compiled in
    this process keeps the build it has."""
    return DEBUG.value()


def debug_timeout_ms() -> int:
    """How long one wait of a debug build may take, in milliseconds (``TSJIT_DEBUG_TIMEOUT_MS``).

    Raises:
        TsjitError: the value is not a positive integer.
    """
    return DEBUG_TIMEOUT_MS.value()


def unroll_limit() -> int:
    """The most iterations of one compile-time loop (``TSJIT_UNROLL_LIMIT``, default 4096); a
    kernel's ``unroll_limit`` option wins over it.

    Raises:
        TsjitError: the value is not a positive integer.
    """
    return UNROLL_LIMIT.value()


def interpret() -> bool:
    """Whether launches run on the CPU interpreter (``TSJIT_INTERPRET``); read at each launch and
    allocation."""
    return INTERPRET.value()


# os.environ's own store (CPython: encoded key -> encoded value; kept in step by os.environ's setters)
_ENVIRON_DATA = getattr(os.environ, "_data", None)
_INTERPRET_KEY = os.environ.encodekey("TSJIT_INTERPRET") if hasattr(os.environ, "encodekey") else None


def interpret_requested() -> bool:
    """:func:`interpret` for the warm launch path: while ``TSJIT_INTERPRET`` is unset this is one dict
    lookup (``os.environ.get`` costs ~0.3 µs, a tenth of the launch budget); otherwise :func:`interpret`."""
    if _INTERPRET_KEY is not None and _INTERPRET_KEY not in _ENVIRON_DATA:
        return False
    return INTERPRET.value()


def _code_state_reader():
    keys = tuple(var.name for var in sorted(VARIABLES.values(), key=lambda v: v.name) if var.affects_code)
    if _ENVIRON_DATA is None or not hasattr(os.environ, "encodekey"):
        get = os.environ.get
        return lambda: tuple(get(name) for name in keys)
    get, encoded = _ENVIRON_DATA.get, tuple(os.environ.encodekey(name) for name in keys)
    if len(encoded) == 4:
        k0, k1, k2, k3 = encoded
        return lambda: (get(k0), get(k1), get(k2), get(k3))
    return lambda: tuple(get(key) for key in encoded)


#: ``code_state()``: the raw (unparsed) values of the variables that change generated code
#: (:func:`code_affecting_values`' names), as cheap as four dict lookups (~0.1 µs), for the
#: in-process caches: a compiled kernel or a warm launch record made under one state is never
#: reused under another (``TSJIT_DEBUG=1`` set between two launches gives the debug build).
code_state = _code_state_reader()


def interpret_checks() -> frozenset:
    """The interpreter's extra checks (``TSJIT_INTERPRET_CHECK``): a subset of {"race", "uninit"}."""
    value = INTERPRET_CHECK.value()
    return frozenset({"race", "uninit"}) if "uninit" in value else value & {"race"}


def code_affecting_values() -> tuple[tuple[str, str | None], ...]:
    """``(name, raw text or None)`` of each variable that changes generated code, sorted.

    This is the environment's whole contribution to a specialization key.
    """
    return tuple((var.name, var.raw()) for var in sorted(VARIABLES.values(), key=lambda v: v.name)
                 if var.affects_code)


def describe() -> list[tuple[str, object, str]]:
    """``(name, current value, doc)`` for every variable, in registry order.

    An invalid value is shown as ``"<invalid: message>"`` instead of raising, so this can
    back a ``tsjit env`` command that helps find the bad variable.
    """
    rows = []
    for var in VARIABLES.values():
        try:
            value = var.value()
        except TsjitError as err:
            value = f"<invalid: {err}>"
        rows.append((var.name, value, var.doc))
    return rows


def autotune() -> bool:
    """Whether ``tsjit.ops.matmul`` measures its candidate configurations (``TSJIT_AUTOTUNE``)."""
    return AUTOTUNE.value()
