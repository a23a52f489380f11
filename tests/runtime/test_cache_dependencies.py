"""The disk cache never serves code for a changed source (issue 9 §1): a generated test per kind of
dependency a kernel can have.

Each case is a small set of modules (one kernel module ``case_<name>.py`` plus what it depends on)
with one edit point ``@V@``.  All cases live side by side in one directory and are compiled together
in fresh processes, so the whole generator costs four subprocesses:

1. compile every case (all misses);
2. compile again, unedited (all hits);
3. apply every case's edit -- each case's edit touches only that case's files -- and compile (every
   edited case misses and its code changes; the control case, edited nowhere, still hits);
4. compile again (all hits: the recompiled entries were stored).
"""
from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field

import pytest

from tsjit.examples import ts_copy

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

KERNEL = """
import numpy as np
import tsjit
{imports}
{pre}

@tsjit.kernel
def k(x, out, n{params}):
    i = tsjit.thread_idx().x
    if i < n:
{body}


def args():
    return (np.zeros(32, np.float32), np.zeros(32, np.float32), 32{extra})
"""


@dataclass
class Case:
    """One kind of dependency: ``files`` (path -> text, ``@V@`` marks the edit) besides the kernel module."""

    name: str
    before: str
    after: str
    expr: str = "x[i]"
    imports: str = ""
    pre: str = ""
    params: str = ""
    extra: str = ""
    body: str = ""
    files: dict = field(default_factory=dict)
    kernel_text: str | None = None
    expect_miss: bool = True
    changes_code: bool = True

    def kernel_module(self) -> str:
        if self.kernel_text is not None:
            return self.kernel_text
        body = self.body or f"out[i] = {self.expr}"
        return KERNEL.format(imports=self.imports, pre=self.pre, params=self.params, extra=self.extra,
                             body=textwrap.indent(textwrap.dedent(body).strip(), " " * 8))

    def write(self, directory: str, edited: bool) -> None:
        value = self.after if edited else self.before
        texts = {f"case_{self.name}.py": self.kernel_module(), **self.files}
        for path, text in texts.items():
            path = path.replace("@V@", value)
            full = os.path.join(directory, path)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, "w") as fh:
                fh.write(textwrap.dedent(text).replace("@V@", value))


def dep_case(name: str, before: str, after: str, module_text: str, more=None, **fields) -> Case:
    """A case whose kernel imports the module ``dep_<name>`` (``{m}`` in ``expr``/``body``/``extra``);
    ``more`` holds further files."""
    module = f"dep_{name}"
    for key in ("expr", "body", "extra"):
        if key in fields:
            fields[key] = fields[key].replace("{m}", module)
    return Case(name, before, after, imports=f"import {module}", files={f"{module}.py": module_text, **(more or {})},
                **fields)


def device(name: str, body: str, header: str = "import tsjit\n") -> str:
    return header + f"\n\n@tsjit.func\ndef {name}(v):\n    return {body}\n"


FACTORY_KERNEL = """
import numpy as np
import tsjit
import {module}


def make(made):
    @tsjit.kernel
    def k(x, out, n):
        i = tsjit.thread_idx().x
        if i < n:
            out[i] = {expr}
    return k


k = make({module}.{attribute})


def args():
    return (np.zeros(32, np.float32), np.zeros(32, np.float32), 32)
"""


def factory_kernel(module: str, expr: str, attribute: str) -> str:
    """A kernel made by a factory: it closes over ``made`` = ``module.attribute``."""
    return FACTORY_KERNEL.format(module=module, expr=expr, attribute=attribute)


def resource_files() -> tuple[str, str]:
    """Tutorial 1's TS copy program moved into user modules: (kernel module, resource module), the
    resource's consumer work body scaled by ``@V@``."""
    header = "from dataclasses import dataclass\nimport numpy as np\nimport tsjit\nfrom tsjit import ts\n\n\n"
    resources = header + inspect.getsource(ts_copy.GmemSource) + "\n\n" + inspect.getsource(ts_copy.GmemDest)
    load = "return self.src[stage_info.loop_offset]"
    assert load in resources
    resources = resources.replace(load, load + " * @V@")
    kernel = (header + "from dep_resource import GmemDest, GmemSource\n\n\n" + inspect.getsource(ts_copy.copy_ts.fn) +
              "\n\nk = copy_ts\n\n\ndef args():\n"
              "    return (np.zeros(64, np.float32), np.zeros(64, np.float32), 64, 1)\n")
    return kernel, resources


RESOURCE_KERNEL, RESOURCE_MODULE = resource_files()

CASES = [
    Case("kernel_source", "3.0", "5.0", expr="x[i] * @V@"),
    Case("device_function_imported_by_name", "3.0", "5.0", imports="from dep_imported import scale",
         expr="scale(x[i])", files={"dep_imported.py": device("scale", "v * @V@")}),
    Case("device_function_two_attribute_levels", "3.0", "5.0", imports="import pkg_two.helpers",
         expr="pkg_two.helpers.scale(x[i])",
         files={"pkg_two/__init__.py": "from . import helpers\n",
                "pkg_two/helpers.py": device("scale", "v * @V@")}),
    dep_case("device_function_calls_device_function", "3.0", "5.0",
             device("outer", "inner(v) + 1.0", "import tsjit\nfrom dep_inner import inner\n"),
             more={"dep_inner.py": device("inner", "v * @V@")}, expr="{m}.outer(x[i])"),
    dep_case("constexpr_device_function_argument", "3.0", "5.0", device("g", "v * @V@"),
             params=", FN: tsjit.Constexpr", extra=", {m}.g", expr="FN(x[i])"),
    dep_case("constexpr_function_reaching_another_module", "3.0", "5.0",
             device("g", "dep_fn_inner.h(v)", "import tsjit\nimport dep_fn_inner\n"),
             more={"dep_fn_inner.py": device("h", "v * @V@")}, params=", FN: tsjit.Constexpr", extra=", {m}.g",
             expr="FN(x[i])"),
    dep_case("constexpr_lambda_argument", "3.0", "5.0", "F = lambda v: v * @V@\n",
             params=", FN: tsjit.Constexpr", extra=", {m}.F", expr="FN(x[i])"),
    dep_case("device_function_default_argument", "3.0", "5.0",
             "import tsjit\nK = @V@\n\n@tsjit.func\ndef scale(v, k=K):\n    return v * k\n",
             expr="{m}.scale(x[i])"),
    dep_case("module_int", "3", "5", "K = @V@\n", expr="x[i] * {m}.K"),
    dep_case("module_float", "3.0", "5.0", "K = @V@\n", expr="x[i] * {m}.K"),
    dep_case("module_numpy_scalar", "3.0", "5.0", "import numpy as np\nK = np.float32(@V@)\n",
             expr="x[i] * float({m}.K)"),
    dep_case("module_numpy_array", "3.0", "5.0", "import numpy as np\nTABLE = np.array([1.0, @V@, 2.0])\n",
             expr="x[i] * float({m}.TABLE[1])"),
    dep_case("module_list", "3.0", "5.0", "L = [1.0, @V@, 2.0]\n", expr="x[i] * {m}.L[1]"),
    dep_case("module_nested_tuple", "3.0", "5.0", "T = (1.0, (2.0, @V@))\n", expr="x[i] * {m}.T[1][1]"),
    dep_case("module_dict", "3.0", "5.0", 'D = {"scale": @V@}\n', expr='x[i] * {m}.D["scale"]'),
    dep_case("module_str", "mul", "add", 'MODE = "@V@"\n',
             body='if {m}.MODE == "mul":\n    out[i] = x[i] * 2.0\nelse:\n    out[i] = x[i] + 2.0'),
    dep_case("module_dtype", "Float32", "Float64", "import tsjit\nACC = tsjit.@V@\n", expr="{m}.ACC(x[i]) * 0.1"),
    dep_case("enum_member", "MUL", "ADD", "import enum\n\nclass Mode(enum.Enum):\n    ADD = 1\n    MUL = 2\n\n"
                               "CHOICE = Mode.@V@\n",
             body="if {m}.CHOICE == {m}.Mode.MUL:\n    out[i] = x[i] * 2.0\nelse:\n    out[i] = x[i] + 2.0"),
    Case("kernel_closure_cell", "3.0", "5.0", kernel_text=factory_kernel("dep_closure", "x[i] * made", "SCALE"),
         files={"dep_closure.py": "SCALE = @V@\n"}),
    Case("kernel_closure_device_function", "3.0", "5.0",
         kernel_text=factory_kernel("dep_closure_fn", "made(x[i])", "scale"),
         files={"dep_closure_fn.py": device("scale", "v * @V@")}),
    dep_case("python_function", "3.0", "5.0", "def affine(v):\n    return v * @V@ + 1.0\n", expr="{m}.affine(x[i])"),
    dep_case("python_function_global", "3.0", "5.0", "FACTOR = @V@\n\ndef affine(v):\n    return v * FACTOR\n",
             expr="{m}.affine(x[i])"),
    dep_case("python_function_module_attribute", "3.0", "5.0",
             "import dep_py_chain_cfg\n\ndef affine(v):\n    return v * dep_py_chain_cfg.FACTOR\n",
             more={"dep_py_chain_cfg.py": "FACTOR = @V@\n"}, expr="{m}.affine(x[i])"),
    dep_case("functools_cache_wrapped_function", "3.0", "5.0",
             "import functools\n\n@functools.cache\ndef factor():\n    return @V@\n", expr="x[i] * {m}.factor()"),
    dep_case("functools_partial", "3.0", "5.0", "import functools\n\ndef mul(a, v):\n    return v * a\n\n"
                                  "P = functools.partial(mul, @V@)\n", expr="{m}.P(x[i])"),
    dep_case("bound_method", "3.0", "5.0", "class Scaler:\n    def __init__(self, s):\n        self.s = s\n\n"
                                "    def apply(self, v):\n        return v * self.s\n\nAPPLY = Scaler(@V@).apply\n",
             expr="{m}.APPLY(x[i])"),
    dep_case("callable_instance", "3.0", "5.0", "class Scaler:\n    def __init__(self, s):\n        self.s = s\n\n"
                                   "    def __call__(self, v):\n        return v * self.s\n\nC = Scaler(@V@)\n",
             expr="{m}.C(x[i])"),
    dep_case("staticmethod_source", "3.0", "5.0",
             "class Ops:\n    @staticmethod\n    def twice(v):\n        return v * @V@\n",
             expr="{m}.Ops.twice(x[i])"),
    dep_case("class_attribute", "3.0", "5.0", "class Ops:\n    K = @V@\n", expr="x[i] * {m}.Ops.K"),
    dep_case("dataclass_instance", "3.0", "5.0", "from dataclasses import dataclass\n\n@dataclass\nclass Config:\n"
                                    "    scale: float\n\nCFG = Config(@V@)\n\n"
                                    "def apply(cfg, v):\n    return v * cfg.scale\n", expr="{m}.apply({m}.CFG, x[i])"),
    dep_case("nested_def_global", "3.0", "5.0", "K = @V@\n", body="def f(v):\n    return v * {m}.K\nout[i] = f(x[i])"),
    dep_case("comprehension_global", "3.0", "5.0", "W = (1.0, 2.0, @V@)\n",
             expr="x[i] * sum([{m}.W[j] for j in range(3)])"),
    Case("global_shadowing_a_builtin", "pass", "def abs(v):\n    return v * 7.0", expr="abs(x[i])",
         pre="@V@"),
    Case("ts_resource_work_body", "3.0", "5.0", kernel_text=RESOURCE_KERNEL,
         files={"dep_resource.py": RESOURCE_MODULE}),
    Case("installed_package_version", "1.0", "1.1", imports="import fakepkg", expr="fakepkg.scale(x[i])",
         changes_code=False,
         files={"site-packages/fakepkg/__init__.py": device("scale", "v * 3.0"),
                "site-packages/fakepkg-@V@.dist-info/METADATA": "Metadata-Version: 2.1\nName: fakepkg\n"
                                                                 "Version: @V@\n"}),
    # Installed packages are keyed by their version, not their source: an edit without a new version hits.
    Case("installed_package_source_without_new_version", "3.0", "5.0", imports="import fakepkg2",
         expr="fakepkg2.scale(x[i])", expect_miss=False,
         files={"site-packages/fakepkg2/__init__.py": device("scale", "v * @V@"),
                "site-packages/fakepkg2-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: fakepkg2\n"
                                                                  "Version: 1.0\n"}),
    dep_case("control_not_edited", "", "", "K = 3.0\n", expr="x[i] * {m}.K", expect_miss=False),
]

DRIVER = """
import hashlib, importlib, json, sys
directory = sys.argv[1]
sys.path[:0] = [directory, directory + "/site-packages"]
import tsjit
results = {}
for name in sys.argv[2:]:
    try:
        module = importlib.import_module("case_" + name)
        compiled = tsjit.compile(module.k, *module.args())
        results[name] = {"from_cache": compiled.metadata["from_cache"],
                         "code": hashlib.sha256(compiled.cubin).hexdigest()}
    except Exception as exc:
        results[name] = {"error": f"{type(exc).__name__}: {exc}"}
print(json.dumps(results))
"""


def compile_all(directory: str, cache: str, names) -> dict:
    env = dict(os.environ, TSJIT_CACHE_DIR=cache, PYTHONPATH=ROOT, PYTHONDONTWRITEBYTECODE="1")
    env.pop("TSJIT_ALWAYS_COMPILE", None)
    env.pop("TSJIT_DISABLE_CACHE", None)
    out = subprocess.run([sys.executable, "-c", DRIVER, directory, *names], env=env, capture_output=True,
                         text=True, timeout=600, cwd=directory)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The four compile passes over every case (see the module docstring)."""
    directory = str(tmp_path_factory.mktemp("cases"))
    cache = str(tmp_path_factory.mktemp("cache"))
    names = [case.name for case in CASES]
    for case in CASES:
        case.write(directory, edited=False)
    first = compile_all(directory, cache, names)
    second = compile_all(directory, cache, names)
    for case in CASES:
        if case.before != case.after:
            for path in case.files:  # a renamed path (a dist-info version): drop the old one
                old = os.path.join(directory, path.replace("@V@", case.before))
                if "@V@" in path and os.path.isdir(old):
                    for leftover in os.listdir(old):
                        os.unlink(os.path.join(old, leftover))
                    os.rmdir(old)
        case.write(directory, edited=True)
    third = compile_all(directory, cache, names)
    fourth = compile_all(directory, cache, names)
    return first, second, third, fourth


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_editing_one_dependency_misses_in_a_fresh_process(runs, case):
    first, second, third, fourth = (run[case.name] for run in runs)
    for run in (first, second, third, fourth):
        assert "error" not in run, run.get("error")
    assert first["from_cache"] is False
    assert second["from_cache"] is True, "an unedited rerun must hit"
    if case.expect_miss:
        assert third["from_cache"] is False, f"editing the {case.name} dependency must miss"
        if case.changes_code:
            assert third["code"] != first["code"], "the edit must change the compiled code (else the case is void)"
    else:
        assert third["from_cache"] is True
        assert third["code"] == first["code"]
    assert fourth["from_cache"] is True
    assert fourth["code"] == third["code"]
