"""Host time per call of ``tsjit.ops.matmul`` on a machine without a GPU (issue 15): this tree against another
tree's ``tsjit/ops/matmul.py`` (``--old``, e.g. ``git show main:tsjit/ops/matmul.py > /tmp/old.py``), timed in
turns, medians of ``--rounds`` rounds of 3000 calls.

What runs for real: argument reading, planning, the kernels' compilation for sm_90a, the packed launches and
their parameter blocks, the lookups.  What is replaced: the driver's few entry points (as in
tests/ops/test_matmul_host.py's ``fake_gpu``), and ``cuLaunchKernelEx`` itself by a C function with the same four
pointer arguments that returns 0 (compiled here with ``cc``), loaded through ctypes as tsjit loads libcuda;
the old tree's packed launches are called through
ctypes, this tree's through tsjit.runtime.native_launch where it builds (with ``--old`` a tree before it, that is the
old call); torch tensors by tests/ops/test_matmul_host.py's FakeTorchTensor (Python methods: their metadata reads cost more
than torch's).  So the numbers are tsjit's own Python per call, less the driver; on the GPU add the driver call.

    PYTHONPATH=. python benchmarks/matmul_host_cpu.py --old /tmp/old.py [--rounds 25]
"""
from __future__ import annotations

import argparse
import ctypes
import importlib.util
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

from _pytest.monkeypatch import MonkeyPatch

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "ops"))

import test_matmul_host as host_tests  # noqa: E402  (tests/ops/test_matmul_host.py: the fake driver, tensors)

import tsjit  # noqa: E402
from tsjit.runtime import launch, native_launch  # noqa: E402


def no_op_launch(directory: str):
    """(PyDLL, CDLL) handles of ``int f(void*, void*, void*, void*) { return 0; }``, built with ``cc``."""
    source, library = pathlib.Path(directory) / "noop.c", pathlib.Path(directory) / "libnoop.so"
    source.write_text("int noop4(void *a, void *b, void *c, void *d) { return 0; }\n")
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", str(library), str(source)], check=True)
    held = ctypes.PyDLL(str(library)).noop4
    held.restype = ctypes.c_int
    released = ctypes.CDLL(str(library)).noop4
    released.argtypes, released.restype = [ctypes.c_void_p] * 4, ctypes.c_int
    return held, released


def per_call_us(fn, calls: int = 3000) -> float:
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - t0) / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--old", required=True, help="another tree's tsjit/ops/matmul.py")
    parser.add_argument("--rounds", type=int, default=25)
    args = parser.parse_args()
    patch = MonkeyPatch()
    host_tests.fake_gpu._get_wrapped_function()(patch)
    host_tests.fake_driver_launches(patch)
    held, released = no_op_launch(tempfile.mkdtemp())
    patch.setattr(launch, "_RAW_LAUNCH_EX", [released])
    patch.setattr(launch, "_HELD_LAUNCH_EX", [held])
    fake_torch = host_tests.FakeTorchModule([0x7000 << 32, 0x7100 << 32])
    patch.setitem(sys.modules, "torch", fake_torch)
    patch.setattr(host_tests.FakeTorchTensor, "device", "cuda:0", raising=False)
    patch.setattr(host_tests.FakeTorchTensor, "element_size", lambda self: 2, raising=False)
    new = sys.modules["tsjit.ops.matmul"]
    spec = importlib.util.spec_from_file_location("tsjit_ops_matmul_old", args.old)
    old = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(old)
    for module in (new, old):
        module._RAW_STREAM[:] = [lambda device: 5]              # torch's current raw stream, faked
    FakeTorchTensor = host_tests.FakeTorchTensor
    a, b, c = FakeTorchTensor((64, 256)), FakeTorchTensor((256, 256)), FakeTorchTensor((64, 256))
    A, B, C = (tsjit.empty(shape, tsjit.BFloat16) for shape in ((64, 256), (256, 256), (64, 256)))
    for module, native in ((old, False), (new, True)):   # the old tree's launches packed as it packs them: ctypes
        native_launch.ENABLED = native
        for _ in range(4):
            module.matmul(a, b, out=c)
            module.matmul(a, b)
            module.matmul(A, B, out=C)
    native_launch.ENABLED = True
    bias = FakeTorchTensor((1, 256))
    for module, native in ((old, False), (new, True)):
        native_launch.ENABLED = native
        for _ in range(4):
            module.matmul(a, b, out=c, bias=bias, activation="relu")
            module.matmul(a, b, out=c, stream=5)
    native_launch.ENABLED = True
    pairs = {"matmul(a, b, out=c), torch stand-ins": (lambda: new.matmul(a, b, out=c), lambda: old.matmul(a, b, out=c)),
             "matmul(a, b, out=c, bias=, activation=), stand-ins": (
                 lambda: new.matmul(a, b, out=c, bias=bias, activation="relu"),
                 lambda: old.matmul(a, b, out=c, bias=bias, activation="relu")),
             "matmul(a, b, out=c, stream=5), stand-ins": (lambda: new.matmul(a, b, out=c, stream=5),
                                                          lambda: old.matmul(a, b, out=c, stream=5)),
             "matmul(a, b), torch stand-ins": (lambda: new.matmul(a, b), lambda: old.matmul(a, b)),
             "matmul(A, B, out=C), tsjit DeviceArrays": (lambda: new.matmul(A, B, out=C),
                                                         lambda: old.matmul(A, B, out=C))}
    samples = {name: ([], []) for name in pairs}
    for _ in range(args.rounds):
        for name, (ours, theirs) in pairs.items():
            samples[name][0].append(per_call_us(ours))
            samples[name][1].append(per_call_us(theirs))
    print(f"| call (64x256x256, no-op driver) | this tree us | {pathlib.Path(args.old).name} us | ratio |")
    print("|---|---|---|---|")
    for name, (ours, theirs) in samples.items():
        mine, other = statistics.median(ours), statistics.median(theirs)
        print(f"| {name} | {mine:.2f} | {other:.2f} | {other / mine:.2f} |")
    for name, fn in (("torch.empty stand-in alone", lambda: fake_torch.empty((64, 256))),
                     ("the no-op launch alone (PyDLL)", lambda: held(None, None, None, None))):
        print(f"| {name} | {statistics.median(per_call_us(fn) for _ in range(args.rounds)):.2f} | | |")


if __name__ == "__main__":
    main()
