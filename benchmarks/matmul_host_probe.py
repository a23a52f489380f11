"""Where the host time of one ``tsjit.ops.matmul`` call goes, on the GPU (issue 15: <= 6 us per call).

In one process, timed in turns (rounds of ``--calls`` back-to-back calls of each callable, wall clock around each
burst, the GPU synchronized between bursts, medians over ``--rounds`` rounds, after warm-up):

* ``torch.matmul(a, b, out=c)`` and ``torch.matmul(a, b)``, the baseline;
* this tree's ``tsjit.ops.matmul`` (packed launches called through :mod:`tsjit.runtime.native_launch`);
* the same file loaded a second time with the native launcher off (its packed launches called through ctypes:
  the Python path alone changed);
* ``--old``: another tree's ``tsjit/ops/matmul.py`` (``git show main:tsjit/ops/matmul.py > old.py``), also with
  ctypes launches, as that tree launches;
* the parts: the packed launch alone (native, ctypes partial, ``BoundLaunch.__call__``), the torch metadata
  reads, the current raw stream, the environment check, and ``torch.empty`` in several spellings.

Before timing, every ``ops.matmul`` variant's warm call is checked: the output NaN-poisoned, then compared with a
float64 product (relative Frobenius error).  Writes a markdown table (``--table``) and prints it.

    PYTHONPATH=. python benchmarks/matmul_host_probe.py --old /tmp/old.py [--rounds 25 --calls 200]
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import time

import torch

import tsjit
import tsjit.ops
import tsjit.runtime.launch
from tsjit import env
from tsjit.runtime import native_launch

NEW = sys.modules["tsjit.ops.matmul"]


def load_copy(path: str, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def without_native(module) -> None:
    """Make ``module``'s general path pack its launches with ctypes calls (the native launcher off while it runs):
    also the launches it packs later, for allocator blocks first seen while timing."""
    general = module._call

    def call(*args, **kwargs):
        native_launch.ENABLED = False
        try:
            return general(*args, **kwargs)
        finally:
            native_launch.ENABLED = True
    module._call = call


def warm(module, a, b, c, arrays, bias, stream) -> None:
    """Fill ``module``'s caches: the out= and allocating entries of torch tensors, the out= entry of DeviceArrays,
    the general fast path's entries of a call with a bias and ReLU and of one with an explicit stream."""
    for _ in range(4):
        module.matmul(a, b, out=c)
        module.matmul(a, b)
        module.matmul(*arrays[:2], out=arrays[2])
        module.matmul(a, b, out=c, bias=bias, activation="relu")
        module.matmul(a, b, out=c, stream=stream)
    torch.cuda.synchronize()


def check(name: str, fn, c, ref) -> float:
    """Relative error of ``fn()``'s output: ``c`` NaN-poisoned first, and a block of ``c``'s size poisoned and freed
    (torch's caching allocator hands it to the next allocation of that size: an allocating call's output)."""
    c.fill_(float("nan"))
    block = torch.full_like(c, float("nan"))
    del block
    out = fn()
    torch.cuda.synchronize()
    if not torch.isfinite(out).all():
        raise SystemExit(f"{name}: NaN left in the output (a launch that did not run, or wrote elsewhere)")
    error = (torch.linalg.norm(out.double() - ref) / torch.linalg.norm(ref)).item()
    if error > 1e-2:
        raise SystemExit(f"{name}: relative error {error:.3g}")
    return error


C_LOOP = r"""
#include <stdint.h>
typedef int (*launch_ex_t)(void *, void *, void *, void *);
int no_launch(void *config, void *function, void *params, void *extra) { return 0; }
int launch_loop(uintptr_t fn, void *config, void *function, void *params, int n) {
    int err = 0;
    for (int i = 0; i < n && err == 0; i++)
        err = ((launch_ex_t)fn)(config, function, params, 0);
    return err;
}
"""


def c_loop(launch, calls: int):
    """``(loop, no_launch)``: a zero-argument callable making ``calls`` launches of a native ``Launch``'s packed
    launch from C (the driver alone: no Python between calls), and the C no-op ``no_launch`` of the same four
    pointers (a ctypes function); ``(None, None)`` without a C compiler.  It reads the launch's four pointers from
    the BoundLaunch that owns it."""
    import ctypes
    import subprocess
    import tempfile
    compiler = native_launch._compiler()
    if compiler is None or not hasattr(launch, "owner"):
        return None, None
    directory = tempfile.mkdtemp()
    with open(f"{directory}/loop.c", "w") as handle:
        handle.write(C_LOOP)
    subprocess.run([compiler, "-O2", "-shared", "-fPIC", f"{directory}/loop.c", "-o", f"{directory}/loop.so"], check=True)
    library = ctypes.PyDLL(f"{directory}/loop.so")
    loop = library.launch_loop
    loop.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_int]
    bound = launch.owner
    stream = next(iter(bound.pinned))
    args = (ctypes.cast(tsjit.runtime.launch.held_cu_launch_kernel_ex(), ctypes.c_void_p).value,
            bound.pinned[stream].getPtr(), bound.handle, bound.params, calls)
    return (lambda: loop(*args)), library.no_launch


def plain_entry(module, a, b, c):
    """``(direct, bound)`` of ``module``'s out= entry for (a, b, c) on the current stream."""
    s = torch.cuda.current_stream().cuda_stream
    entry = module._PLAIN.get((a.data_ptr(), b.data_ptr(), c.data_ptr(), s, 1.0, 0.0))
    if entry is None:
        raise SystemExit(f"{module.__name__}: no out= entry after warm-up")
    return entry[1], entry[2], s


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--old", help="another tree's tsjit/ops/matmul.py (timed with ctypes launches)")
    parser.add_argument("--rounds", type=int, default=25)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--shape", default="64,256,256", help="M,N,K")
    parser.add_argument("--table", help="write the markdown table here")
    parser.add_argument("--json", help="write the medians here")
    args = parser.parse_args()
    M, N, K = (int(x) for x in args.shape.split(","))
    a = torch.randn(M, K, device="cuda").to(torch.bfloat16)
    b = torch.randn(K, N, device="cuda").to(torch.bfloat16)
    c = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
    ref = a.double() @ b.double()
    modules = {"new": NEW, "new, ctypes launches": load_copy(NEW.__file__, "tsjit_ops_matmul_ctypes")}
    if args.old:
        modules["old"] = load_copy(args.old, "tsjit_ops_matmul_old")
    import tempfile
    scratch = tempfile.mkdtemp()
    t0 = time.perf_counter()
    built = native_launch.build(scratch)                  # the one-time cost in a fresh cache directory
    t1 = time.perf_counter()
    if built is not None:
        native_launch.load(built)
    t2 = time.perf_counter()
    print(f"native launcher build in a fresh directory: {(t1 - t0) * 1e3:.0f} ms, load {(t2 - t1) * 1e3:.1f} ms")
    native_available = native_launch.launch_type() is not None
    A, B, C = (tsjit.empty(shape, tsjit.BFloat16) for shape in ((M, K), (K, N), (M, N)))
    bias, stream = torch.randn(N, device="cuda").to(torch.bfloat16), torch.cuda.current_stream().cuda_stream
    for name, module in modules.items():
        if name != "new":
            without_native(module)
        warm(module, a, b, c, (A, B, C), bias, stream)
    errors = {}
    for name, module in modules.items():
        errors[f"{name} out="] = check(f"{name} out=", lambda m=module: m.matmul(a, b, out=c), c, ref)
        errors[f"{name} allocating"] = check(f"{name} allocating", lambda m=module: m.matmul(a, b), c, ref)
    direct_native, bound, s = plain_entry(NEW, a, b, c)
    direct_ctypes, _, _ = plain_entry(modules["new, ctypes launches"], a, b, c)
    print(f"native launcher: {native_available} ({type(direct_native).__name__}); ctypes: "
          f"{type(direct_ctypes).__name__}; errors {errors}")

    dev, dt, raw = a.device, a.dtype, torch._C._cuda_getCurrentRawStream
    template, cf = torch.empty((1,), dtype=dt, device=dev).expand(M, N), torch.contiguous_format
    for made in (torch.empty_like(template), torch.empty_like(template, memory_format=cf)):
        assert made.shape == (M, N) and made.stride() == (N, 1) and made.dtype == dt and made.device == dev
    table = {"torch.matmul(a, b, out=c)": lambda: torch.matmul(a, b, out=c),
             "torch.matmul(a, b)": lambda: torch.matmul(a, b)}
    for name, module in modules.items():
        table[f"ops.matmul(a, b, out=c) [{name}]"] = lambda m=module: m.matmul(a, b, out=c)
        table[f"ops.matmul(a, b) [{name}]"] = lambda m=module: m.matmul(a, b)
        table[f"ops.matmul(A, B, out=C) DeviceArrays [{name}]"] = lambda m=module: m.matmul(A, B, out=C)
        table[f"ops.matmul(a, b, out=c, bias=, activation='relu') [{name}]"] = \
            lambda m=module: m.matmul(a, b, out=c, bias=bias, activation="relu")
        table[f"ops.matmul(a, b, out=c, stream=) [{name}]"] = lambda m=module: m.matmul(a, b, out=c, stream=stream)
    table.update({
        "packed launch alone: native Launch": direct_native,
        "packed launch alone: ctypes partial (PyDLL)": direct_ctypes,
        "packed launch alone: BoundLaunch(stream) (CDLL)": lambda: bound(s),
        "a.shape": lambda: a.shape, "a.stride()": lambda: a.stride(), "a.dtype": lambda: a.dtype,
        "a.data_ptr()": lambda: a.data_ptr(), "a.get_device()": lambda: a.get_device(),
        "raw current stream (_cuda_getCurrentRawStream(0))": lambda: raw(0),
        "env.code_state() check": lambda: env.code_state() != NEW._CODE_STATE[0],
        "9 metadata reads as one tuple": lambda: (a.shape, a.stride(), a.dtype, b.shape, b.stride(), b.dtype,
                                                  c.shape, c.stride(), c.dtype),
        "empty lambda (loop floor)": lambda: None,
        "torch.empty((M, N), dtype=, device=)": lambda: torch.empty((M, N), dtype=dt, device=dev),
        "torch.empty(M, N, dtype=, device=)": lambda: torch.empty(M, N, dtype=dt, device=dev),
        "torch.empty(M, N, dtype=, device=0)": lambda: torch.empty(M, N, dtype=dt, device=0),
        "a.new_empty((M, N))": lambda: a.new_empty((M, N)),
        "torch.empty_like(c)": lambda: torch.empty_like(c),
        "torch.empty_like(1-element template expanded to (M, N))": lambda: torch.empty_like(template),
        "torch.empty_like(template, memory_format=contiguous)": lambda: torch.empty_like(template, memory_format=cf),
    })
    looped, no_launch = c_loop(direct_native, args.calls)
    if looped is not None:
        table["packed launch, C loop (the driver alone)"] = looped
        # this tree's out= call with the driver replaced by a C no-op: the Python path and the reads alone
        silent = load_copy(NEW.__file__, "tsjit_ops_matmul_no_driver")
        warm(silent, a, b, c, (A, B, C), bias, stream)
        key = (a.data_ptr(), b.data_ptr(), c.data_ptr(), s, 1.0, 0.0)
        meta, launch, owner = silent._PLAIN[key]
        pinned = owner.pinned[s]
        silent._PLAIN[key] = (meta, native_launch.packed_launch(no_launch, pinned.getPtr(), owner.handle,
                                                                owner.params, owner), owner)
        table["ops.matmul(a, b, out=c) [new], the driver call replaced by a C no-op"] = \
            lambda: silent.matmul(a, b, out=c)

    def signature(a, b, *, bias=None, activation=None, residual=None, alpha=1.0, beta=0.0, out=None, out_dtype=None,
                  scale_a=None, scale_b=None, stream=None, epilogue_fn=None):
        return out
    table["a function of matmul's signature called with out= (returns at once)"] = lambda: signature(a, b, out=c)
    stats = {name: module.cache_statistics() for name, module in modules.items()}
    samples = {name: [] for name in table}
    for name, fn in table.items():            # warm-up
        for _ in range(1 if fn is looped else 20):
            fn()
    torch.cuda.synchronize()
    clock = time.perf_counter_ns
    for _ in range(args.rounds):
        for name, fn in table.items():
            t0 = clock()
            if fn is looped:
                fn()
            else:
                for _ in range(args.calls):
                    fn()
            t1 = clock()
            samples[name].append((t1 - t0) / args.calls / 1e3)
            torch.cuda.synchronize()
    medians = {name: statistics.median(v) for name, v in samples.items()}
    torch_out, torch_alloc = medians["torch.matmul(a, b, out=c)"], medians["torch.matmul(a, b)"]
    lines = [f"| call ({M}x{N}x{K} bf16) | host us/call (median) | min | x torch.matmul (same kind) |", "|---|---|---|---|"]
    for name, value in medians.items():
        base = torch_alloc if ("(a, b)" in name and "out=" not in name) else torch_out
        ratio = f"{value / base:.2f}" if name.startswith(("ops.", "torch.matmul")) else ""
        lines.append(f"| {name} | {value:.2f} | {min(samples[name]):.2f} | {ratio} |")
    text = "\n".join(lines)
    print(text)
    for name, module in modules.items():       # launches packed after warm-up (new allocator blocks) would show here
        print(f"cache statistics [{name}]: before timing {stats[name]}, after {module.cache_statistics()}")
    if args.table:
        with open(args.table, "w") as handle:
            handle.write(text + "\n")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"medians": medians, "errors": errors, "native": native_available}, handle, indent=1)


if __name__ == "__main__":
    main()
