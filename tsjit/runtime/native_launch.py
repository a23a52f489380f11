"""A compiled caller of ``cuLaunchKernelEx`` for packed launches (:meth:`BoundLaunch.direct`).

A packed launch's arguments are four pointers fixed in advance (the ``CUlaunchConfig`` of a stream, the
``CUfunction``, the ``void*[]`` of parameters, no extras).  Called through ctypes, each call still converts its
arguments and prepares a libffi call: 0.2-1 us of host time per launch on the machines measured (BENCHMARKS.md,
issue 10: a ctypes no-op of four pointers took 0.54-1.2 us on the H200 host), a tenth to a fifth of the whole
``tsjit.ops.matmul`` call.  :class:`Launch` objects of the small CPython extension below do the call from C: a
zero-argument call of one is the driver call alone.

The extension is built once per (source, Python version, platform) with the system C compiler into tsjit's cache
directory (``TSJIT_CACHE_DIR``), as Triton builds its launchers, and loaded from there by later processes.  Where
that cannot work -- no C compiler (``cc``, ``gcc`` or ``clang`` on ``PATH``), no ``Python.h``, the cache turned off
(``TSJIT_DISABLE_CACHE``) or not writable, a compiler error (remembered next to the cache entry, so it is not
retried) -- :func:`launch_type` is ``None`` and callers keep ctypes.  :data:`ENABLED` switches it off (measurements).
The extension is host code loaded from the cache directory, so that directory must be as private as Triton's cache
(the default, under the user's cache directory, is).

The launch semantics are ctypes.PyDLL's (:func:`tsjit.runtime.launch.held_cu_launch_kernel_ex`): the GIL is held
during the driver call, whose ``CUresult`` is returned as an int (0: launched).  Source: CUDA driver API,
"Execution Control", ``cuLaunchKernelEx``.
"""
from __future__ import annotations

import ctypes
import hashlib
import importlib.machinery
import importlib.util
import os
import sys
import sysconfig
import threading

from tsjit import env
from tsjit.backend.native_build import build_once, c_compiler

#: False: :func:`launch_type` returns None (every packed launch goes through ctypes), for measurements
ENABLED = True

MODULE = "tsjit_native_launch"

SOURCE = r"""
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <stdint.h>

typedef int (*launch_ex_t)(void *, void *, void *, void *);

/* One packed launch: cuLaunchKernelEx(config, function, params, NULL), the four pointers fixed. */
typedef struct {
    PyObject_HEAD
    launch_ex_t launch_ex;
    void *config, *function, *params;
    PyObject *owner;              /* what keeps the three blocks alive (a BoundLaunch) */
    vectorcallfunc vectorcall;
} Launch;

static PyObject *launch_call(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    if (PyVectorcall_NARGS(nargsf) != 0 || (kwnames != NULL && PyTuple_GET_SIZE(kwnames) != 0)) {
        PyErr_SetString(PyExc_TypeError, "a packed launch takes no arguments");
        return NULL;
    }
    Launch *launch = (Launch *)self;
    return PyLong_FromLong(launch->launch_ex(launch->config, launch->function, launch->params, NULL));
}

static PyObject *launch_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    unsigned long long launch_ex, config, function, params;
    PyObject *owner;
    if (kwargs != NULL && PyDict_GET_SIZE(kwargs) != 0) {
        PyErr_SetString(PyExc_TypeError, "Launch takes positional arguments only");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "KKKKO", &launch_ex, &config, &function, &params, &owner))
        return NULL;
    if (launch_ex == 0) {
        PyErr_SetString(PyExc_ValueError, "Launch: the cuLaunchKernelEx address is 0");
        return NULL;
    }
    Launch *launch = (Launch *)type->tp_alloc(type, 0);
    if (launch == NULL)
        return NULL;
    launch->launch_ex = (launch_ex_t)(uintptr_t)launch_ex;
    launch->config = (void *)(uintptr_t)config;
    launch->function = (void *)(uintptr_t)function;
    launch->params = (void *)(uintptr_t)params;
    Py_INCREF(owner);
    launch->owner = owner;
    launch->vectorcall = launch_call;
    return (PyObject *)launch;
}

static int launch_traverse(PyObject *self, visitproc visit, void *arg) {
    Py_VISIT(((Launch *)self)->owner);
    return 0;
}

static int launch_clear(PyObject *self) {
    Py_CLEAR(((Launch *)self)->owner);
    return 0;
}

static void launch_dealloc(PyObject *self) {
    PyObject_GC_UnTrack(self);
    launch_clear(self);
    Py_TYPE(self)->tp_free(self);
}

static PyObject *launch_owner(PyObject *self, void *closure) {
    PyObject *owner = ((Launch *)self)->owner;
    if (owner == NULL)
        Py_RETURN_NONE;
    Py_INCREF(owner);
    return owner;
}

static PyGetSetDef launch_getset[] = {
    {"owner", launch_owner, NULL, "the object keeping the launch's blocks alive", NULL},
    {NULL}
};

static PyTypeObject LaunchType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tsjit_native_launch.Launch",
    .tp_doc = "Launch(cuLaunchKernelEx address, config, function, params, owner): calling it (no arguments) "
              "returns cuLaunchKernelEx(config, function, params, NULL)",
    .tp_basicsize = sizeof(Launch),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_vectorcall_offset = offsetof(Launch, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_new = launch_new,
    .tp_traverse = launch_traverse,
    .tp_clear = launch_clear,
    .tp_dealloc = launch_dealloc,
    .tp_getset = launch_getset,
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "tsjit_native_launch", NULL, -1, NULL};

PyMODINIT_FUNC PyInit_tsjit_native_launch(void) {
    if (PyType_Ready(&LaunchType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&LaunchType);
    if (PyModule_AddObject(m, "Launch", (PyObject *)&LaunchType) < 0) {
        Py_DECREF(&LaunchType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
"""

_LOADED: list = []            # [the extension's Launch type, or None], once per process
_LOCK = threading.Lock()


def library_path(directory: str) -> str:
    """Where the extension for this source, Python and platform lives under ``directory``."""
    digest = hashlib.sha256("\0".join((SOURCE, sys.version, sys.platform, sysconfig.get_platform()))
                            .encode()).hexdigest()[:20]
    return os.path.join(directory, f"native_launch_{digest}{importlib.machinery.EXTENSION_SUFFIXES[0]}")


def _compiler() -> str | None:
    """The system C compiler (:func:`tsjit.backend.native_build.c_compiler`), or None."""
    return c_compiler()


def build(directory: str) -> str | None:
    """The path of the built extension under ``directory`` (built now if missing), or None where it cannot be
    built (no compiler or ``Python.h``, a compiler error: its output is kept in ``<path>.failed`` and the build is
    not tried again): :func:`tsjit.backend.native_build.build_once`."""
    path = library_path(directory)
    if os.path.exists(path) or os.path.exists(path + ".failed"):
        return path if os.path.exists(path) else None
    include = sysconfig.get_paths().get("include") or ""
    if _compiler() is None or not os.path.exists(os.path.join(include, "Python.h")):
        return None

    def command(compiler: str, output: str) -> list[str]:
        source = os.path.join(os.path.dirname(output), "native_launch.c")
        with open(source, "w") as handle:
            handle.write(SOURCE)
        return [compiler, "-O2", "-shared", "-fPIC", f"-I{include}", source, "-o", output]
    return build_once(path, command)


def load(path: str):
    """The extension module at ``path``."""
    loader = importlib.machinery.ExtensionFileLoader(MODULE, path)
    spec = importlib.util.spec_from_file_location(MODULE, path, loader=loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def launch_type():
    """The extension's ``Launch`` type (built or loaded on the first call of a process), or None where it is not
    available (module docstring) or :data:`ENABLED` is False."""
    if not ENABLED:
        return None
    if not _LOADED:
        with _LOCK:
            if not _LOADED:
                _LOADED.append(_load_or_none())
    return _LOADED[0]


def _load_or_none():
    if env.disable_cache():
        return None
    try:
        path = build(env.cache_dir())
        return None if path is None else load(path).Launch
    except (OSError, ImportError):
        return None


def packed_launch(launch_ex, config: int, function: int, params: int, owner):
    """A zero-argument callable returning ``launch_ex(config, function, params, NULL)`` (a ``CUresult``), made in C
    (:class:`Launch`), or None where the extension is not available or ``launch_ex`` is not a ctypes function
    (a test's stand-in).  ``owner`` is kept alive by the callable (the blocks' owner)."""
    try:
        address = ctypes.cast(launch_ex, ctypes.c_void_p).value
    except (ctypes.ArgumentError, TypeError):
        return None                         # checked first: a stand-in never builds the extension
    kind = launch_type() if address else None
    return None if kind is None else kind(address, config, function, params, owner)
