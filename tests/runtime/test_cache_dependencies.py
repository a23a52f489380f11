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

import json
import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field

import pytest

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


def device(name: str, body: str, header: str = "import tsjit\n") -> str:
    return header + f"\n\n@tsjit.func\ndef {name}(v):\n    return {body}\n"


RESOURCE_MODULE = """
from dataclasses import dataclass
import tsjit
from tsjit import ts


@dataclass(kw_only=True)
class Source(ts.MemoryResource):
    src: object
    item: ts.TaskLocalVariable = ts.TaskLocalVariable.uninitialized()

    def __post_init__(self):
        self.item = ts.TaskLocalVariable(self.src.dtype, default=0, docs="the element in flight")

    @ts.consumer_work(returns="item")
    def load(self, stage_info):
        return self.src[stage_info.loop_offset] * @V@


@dataclass(kw_only=True)
class Dest(ts.MemoryResource):
    dst: object

    @ts.producer_work()
    def store(self, stage_info, item):
        self.dst[stage_info.loop_offset] = item
"""

RESOURCE_KERNEL = """
import numpy as np
import tsjit
from tsjit import ts
from dep_resource import Dest, Source


@tsjit.kernel
def k(src, dst, n, WARPS: tsjit.Constexpr[int]):
    tx = tsjit.thread_idx().x
    source = Source(name="source", src=src)
    dest = Dest(name="dest", dst=dst)

    @ts.schedule
    def copy_schedule(s: Source, d: Dest):
        with ts.domain_loop(tx, n, WARPS * 32):
            item = s.load()
            d.store(item)

    task = ts.Task("copy", [source], [dest], warp_idx=0, num_warps=WARPS, schedule=copy_schedule(source, dest))
    manager = ts.TaskManager([task], {dest: [source]}, verbose=False)
    manager.setup_resources_and_tasks()
    manager.run()


def args():
    return (np.zeros(64, np.float32), np.zeros(64, np.float32), 64, 1)
"""

CASES = [
    Case("kernel_source", "3.0", "5.0", expr="x[i] * @V@"),
    Case("device_function_imported_by_name", "3.0", "5.0", imports="from dep_imported import scale",
         expr="scale(x[i])", files={"dep_imported.py": device("scale", "v * @V@")}),
    Case("device_function_two_attribute_levels", "3.0", "5.0", imports="import pkg_two.helpers",
         expr="pkg_two.helpers.scale(x[i])",
         files={"pkg_two/__init__.py": "from . import helpers\n",
                "pkg_two/helpers.py": device("scale", "v * @V@")}),
    Case("device_function_calls_device_function", "3.0", "5.0", imports="import dep_outer",
         expr="dep_outer.outer(x[i])",
         files={"dep_outer.py": device("outer", "inner(v) + 1.0", "import tsjit\nfrom dep_inner import inner\n"),
                "dep_inner.py": device("inner", "v * @V@")}),
    Case("constexpr_device_function_argument", "3.0", "5.0", imports="import dep_fn_arg",
         params=", FN: tsjit.Constexpr", extra=", dep_fn_arg.g", expr="FN(x[i])",
         files={"dep_fn_arg.py": device("g", "v * @V@")}),
    Case("constexpr_function_reaching_another_module", "3.0", "5.0", imports="import dep_fn_outer",
         params=", FN: tsjit.Constexpr", extra=", dep_fn_outer.g", expr="FN(x[i])",
         files={"dep_fn_outer.py": device("g", "dep_fn_inner.h(v)", "import tsjit\nimport dep_fn_inner\n"),
                "dep_fn_inner.py": device("h", "v * @V@")}),
    Case("constexpr_lambda_argument", "3.0", "5.0", imports="import dep_lambda",
         params=", FN: tsjit.Constexpr", extra=", dep_lambda.F", expr="FN(x[i])",
         files={"dep_lambda.py": "F = lambda v: v * @V@\n"}),
    Case("device_function_default_argument", "3.0", "5.0", imports="import dep_default",
         expr="dep_default.scale(x[i])",
         files={"dep_default.py": "import tsjit\nK = @V@\n\n@tsjit.func\ndef scale(v, k=K):\n    return v * k\n"}),
    Case("module_int", "3", "5", imports="import dep_int", expr="x[i] * dep_int.K",
         files={"dep_int.py": "K = @V@\n"}),
    Case("module_float", "3.0", "5.0", imports="import dep_float", expr="x[i] * dep_float.K",
         files={"dep_float.py": "K = @V@\n"}),
    Case("module_numpy_scalar", "3.0", "5.0", imports="import dep_np_scalar", expr="x[i] * float(dep_np_scalar.K)",
         files={"dep_np_scalar.py": "import numpy as np\nK = np.float32(@V@)\n"}),
    Case("module_numpy_array", "3.0", "5.0", imports="import dep_np_array",
         expr="x[i] * float(dep_np_array.TABLE[1])",
         files={"dep_np_array.py": "import numpy as np\nTABLE = np.array([1.0, @V@, 2.0])\n"}),
    Case("module_list", "3.0", "5.0", imports="import dep_list", expr="x[i] * dep_list.L[1]",
         files={"dep_list.py": "L = [1.0, @V@, 2.0]\n"}),
    Case("module_nested_tuple", "3.0", "5.0", imports="import dep_tuple", expr="x[i] * dep_tuple.T[1][1]",
         files={"dep_tuple.py": "T = (1.0, (2.0, @V@))\n"}),
    Case("module_dict", "3.0", "5.0", imports="import dep_dict", expr='x[i] * dep_dict.D["scale"]',
         files={"dep_dict.py": 'D = {"scale": @V@}\n'}),
    Case("module_str", "mul", "add", imports="import dep_str",
         body='if dep_str.MODE == "mul":\n    out[i] = x[i] * 2.0\nelse:\n    out[i] = x[i] + 2.0',
         files={"dep_str.py": 'MODE = "@V@"\n'}),
    Case("module_dtype", "Float32", "Float64", imports="import dep_dtype", expr="dep_dtype.ACC(x[i]) * 0.1",
         files={"dep_dtype.py": "import tsjit\nACC = tsjit.@V@\n"}),
    Case("enum_member", "MUL", "ADD", imports="import dep_enum",
         body="if dep_enum.CHOICE == dep_enum.Mode.MUL:\n    out[i] = x[i] * 2.0\nelse:\n    out[i] = x[i] + 2.0",
         files={"dep_enum.py": "import enum\n\nclass Mode(enum.Enum):\n    ADD = 1\n    MUL = 2\n\n"
                               "CHOICE = Mode.@V@\n"}),
    Case("kernel_closure_cell", "3.0", "5.0",
         kernel_text=textwrap.dedent("""
             import numpy as np
             import tsjit
             import dep_closure


             def make(scale):
                 @tsjit.kernel
                 def k(x, out, n):
                     i = tsjit.thread_idx().x
                     if i < n:
                         out[i] = x[i] * scale
                 return k


             k = make(dep_closure.SCALE)


             def args():
                 return (np.zeros(32, np.float32), np.zeros(32, np.float32), 32)
             """), files={"dep_closure.py": "SCALE = @V@\n"}),
    Case("kernel_closure_device_function", "3.0", "5.0",
         kernel_text=textwrap.dedent("""
             import numpy as np
             import tsjit
             import dep_closure_fn


             def make(fn):
                 @tsjit.kernel
                 def k(x, out, n):
                     i = tsjit.thread_idx().x
                     if i < n:
                         out[i] = fn(x[i])
                 return k


             k = make(dep_closure_fn.scale)


             def args():
                 return (np.zeros(32, np.float32), np.zeros(32, np.float32), 32)
             """), files={"dep_closure_fn.py": device("scale", "v * @V@")}),
    Case("python_function", "3.0", "5.0", imports="import dep_py", expr="dep_py.affine(x[i])",
         files={"dep_py.py": "def affine(v):\n    return v * @V@ + 1.0\n"}),
    Case("python_function_global", "3.0", "5.0", imports="import dep_py_global", expr="dep_py_global.affine(x[i])",
         files={"dep_py_global.py": "FACTOR = @V@\n\ndef affine(v):\n    return v * FACTOR\n"}),
    Case("python_function_module_attribute", "3.0", "5.0", imports="import dep_py_chain",
         expr="dep_py_chain.affine(x[i])",
         files={"dep_py_chain.py": "import dep_py_chain_cfg\n\ndef affine(v):\n    return v * dep_py_chain_cfg.FACTOR\n",
                "dep_py_chain_cfg.py": "FACTOR = @V@\n"}),
    Case("functools_partial", "3.0", "5.0", imports="import dep_partial", expr="dep_partial.P(x[i])",
         files={"dep_partial.py": "import functools\n\ndef mul(a, v):\n    return v * a\n\n"
                                  "P = functools.partial(mul, @V@)\n"}),
    Case("bound_method", "3.0", "5.0", imports="import dep_bound", expr="dep_bound.APPLY(x[i])",
         files={"dep_bound.py": "class Scaler:\n    def __init__(self, s):\n        self.s = s\n\n"
                                "    def apply(self, v):\n        return v * self.s\n\nAPPLY = Scaler(@V@).apply\n"}),
    Case("callable_instance", "3.0", "5.0", imports="import dep_callable", expr="dep_callable.C(x[i])",
         files={"dep_callable.py": "class Scaler:\n    def __init__(self, s):\n        self.s = s\n\n"
                                   "    def __call__(self, v):\n        return v * self.s\n\nC = Scaler(@V@)\n"}),
    Case("staticmethod_source", "3.0", "5.0", imports="import dep_static", expr="dep_static.Ops.twice(x[i])",
         files={"dep_static.py": "class Ops:\n    @staticmethod\n    def twice(v):\n        return v * @V@\n"}),
    Case("class_attribute", "3.0", "5.0", imports="import dep_class_attr", expr="x[i] * dep_class_attr.Ops.K",
         files={"dep_class_attr.py": "class Ops:\n    K = @V@\n"}),
    Case("dataclass_instance", "3.0", "5.0", imports="import dep_dataclass",
         expr="dep_dataclass.apply(dep_dataclass.CFG, x[i])",
         files={"dep_dataclass.py": "from dataclasses import dataclass\n\n@dataclass\nclass Config:\n"
                                    "    scale: float\n\nCFG = Config(@V@)\n\n"
                                    "def apply(cfg, v):\n    return v * cfg.scale\n"}),
    Case("nested_def_global", "3.0", "5.0", imports="import dep_nested",
         body="def f(v):\n    return v * dep_nested.K\nout[i] = f(x[i])", files={"dep_nested.py": "K = @V@\n"}),
    Case("comprehension_global", "3.0", "5.0", imports="import dep_comprehension",
         expr="x[i] * sum([dep_comprehension.W[j] for j in range(3)])",
         files={"dep_comprehension.py": "W = (1.0, 2.0, @V@)\n"}),
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
    Case("control_not_edited", "", "", imports="import dep_control", expr="x[i] * dep_control.K",
         expect_miss=False, files={"dep_control.py": "K = 3.0\n"}),
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
