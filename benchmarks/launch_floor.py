"""Where the host time of a warm launch goes (issue 10 §2): the driver, the binding, or tsjit's Python.

Every launcher below launches an empty kernel (1 CTA x 32 threads) and is timed in the same process, in
turns (interleaved rounds), as host time per launch:

* ``burst N``: after a full synchronize (the GPU idle, its launch queue empty), ``N`` back-to-back launches
  timed with ``perf_counter_ns``; median over rounds of (burst time / N).  N = 16 and 64 stay far from the
  queue's capacity; N = 2000 is the old method (``benchmarks/core.py`` before this script): once the queue is
  full the host waits for the GPU, so it measures the GPU's rate, not the host's cost.
* ``C loop``: the same driver call made ``N`` times from C (``cc``-built helper, no Python between calls):
  the driver's own cost, the floor any Python launcher sits on.
* ``queue profile``: each of 4096 launches timed alone from C: where the per-launch cost jumps is where
  the queue filled and the host started waiting on the GPU.
* ``GPU rate``: CUDA events around 2000 launches from the C loop: the GPU's back-to-back rate for empty
  kernels (µs per kernel).

The launchers: the driver entry points (``cuLaunchKernelEx`` / ``cuLaunchKernel``) through ctypes (``CDLL``
releases the GIL around the call, ``PyDLL`` keeps it) and through cuda-bindings; a ctypes call of a C
no-op with the same four pointer arguments (the ctypes cost alone); tsjit's ``Kernel.bind`` replay, its
warm ``kernel[grid, block](...)`` with a tsjit array and with a torch tensor; an empty triton kernel; a
16-element ``torch`` ``add_``.  Streams: the legacy default stream (0), and a non-blocking stream for a
subset.

    PYTHONPATH=. python benchmarks/launch_floor.py [--rounds 25] [--json out.json]
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time

import torch

import tsjit
from tsjit.runtime import driver, streams
from tsjit.runtime.launch import config_address

C_SOURCE = r"""
#include <time.h>
typedef int (*launch_ex_t)(const void *, void *, void **, void **);
typedef int (*launch_t)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                        void *, void **, void **);
static long long now_ns(void) {
    struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1000000000LL + t.tv_nsec;
}
int noop4(void *a, void *b, void *c, void *d) { (void)a; (void)b; (void)c; (void)d; return 0; }
/* n launches through cuLaunchKernelEx; returns total ns; *err = OR of the results */
long long loop_ex(void *fp, const void *cfg, void *f, void **params, int n, int *err) {
    launch_ex_t launch = (launch_ex_t)fp; int e = 0; long long t0 = now_ns();
    for (int i = 0; i < n; i++) e |= launch(cfg, f, params, 0);
    *err = e; return now_ns() - t0;
}
long long loop_k(void *fp, void *f, void *stream, void **params, int n, int *err) {
    launch_t launch = (launch_t)fp; int e = 0; long long t0 = now_ns();
    for (int i = 0; i < n; i++) e |= launch(f, 1, 1, 1, 32, 1, 1, 0, stream, params, 0);
    *err = e; return now_ns() - t0;
}
/* each launch timed alone: out[i] = ns of launch i */
int profile_ex(void *fp, const void *cfg, void *f, void **params, int n, long long *out) {
    launch_ex_t launch = (launch_ex_t)fp; int e = 0;
    for (int i = 0; i < n; i++) { long long t0 = now_ns(); e |= launch(cfg, f, params, 0); out[i] = now_ns() - t0; }
    return e;
}
"""


def build_helper(prebuilt: str | None):
    """The C helper as a ctypes library, or None (no C compiler and no ``--clib``)."""
    if prebuilt:
        return ctypes.CDLL(prebuilt)
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        return None
    folder = tempfile.mkdtemp()
    src, lib = os.path.join(folder, "floor.c"), os.path.join(folder, "floor.so")
    with open(src, "w") as fh:
        fh.write(C_SOURCE)
    subprocess.run([cc, "-O2", "-shared", "-fPIC", "-o", lib, src], check=True)
    return ctypes.CDLL(lib)


@tsjit.kernel
def empty_kernel(x, n):
    pass


def python_pieces(x, darr, results: dict) -> None:
    """Host time of the Python steps of a warm launch alone (no driver call), µs per call."""
    from tsjit.runtime.launch import argument_signature
    kinds = empty_kernel.kinds
    pieces = {"argument_signature(tsjit array, n)": lambda: argument_signature((darr, 16), kinds),
              "argument_signature(torch tensor, n)": lambda: argument_signature((x, 16), kinds),
              "streams.stream_value(None)": lambda: streams.stream_value(None),
              "x.data_ptr() (torch)": x.data_ptr, "empty lambda": lambda: None}
    out = {}
    for name, fn in pieces.items():
        best = []
        for _ in range(7):
            t0 = time.perf_counter_ns()
            for _ in range(5000):
                fn()
            best.append((time.perf_counter_ns() - t0) / 5000 / 1e3)
        out[name] = statistics.median(best)
    results["python_pieces_us"] = out
    print("Python pieces, µs per call (median of 7 x 5000): " + ", ".join(f"{k} {v:.3f}" for k, v in out.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=25)
    parser.add_argument("--clib", default=None, help="a prebuilt helper .so (default: build with cc)")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()

    helper = build_helper(args.clib)
    x = torch.empty(16, device="cuda")
    darr = tsjit.empty(16, tsjit.Float32)
    created = streams.Stream.create()
    handles = {"legacy": 0, "nonblocking": created.value}
    bound = empty_kernel.bind(darr, 16, grid=(1,), block=(32,))
    bound(0)
    torch.cuda.synchronize()
    handle, params = bound.handle, bound.params
    cfg = {name: config_address(bound.prepared, bound.addresses, s) for name, s in handles.items()}
    cu = driver.bindings()
    cb_cfg = {name: bound.prepared.for_stream(s) for name, s in handles.items()}
    cb_fn = bound.function.handle
    cb_stream = {name: cu.CUstream(s) for name, s in handles.items()}

    libcuda = ctypes.CDLL("libcuda.so.1")
    ex = libcuda.cuLaunchKernelEx
    ex.argtypes, ex.restype = [ctypes.c_void_p] * 4, ctypes.c_int
    k = libcuda.cuLaunchKernel
    k.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p] * 3
    k.restype = ctypes.c_int
    ex_plain = ctypes.CDLL("libcuda.so.1").cuLaunchKernelEx   # no argtypes: ctypes objects passed as they are
    ex_plain.restype = ctypes.c_int
    cv_cfg, cv_handle, cv_params = (ctypes.c_void_p(v) for v in (cfg["legacy"], handle, params))
    py_ex = ctypes.PyDLL("libcuda.so.1").cuLaunchKernelEx
    py_ex.argtypes, py_ex.restype = [ctypes.c_void_p] * 4, ctypes.c_int

    import triton

    @triton.jit
    def empty_triton(x, n):
        pass

    t16 = torch.zeros(16, device="cuda")
    launch = empty_kernel[(1,), (32,)]
    from tsjit.runtime.launcher import Launcher
    base_launch = Launcher(empty_kernel, (1,), (32,), 0)   # the warm launch one call deeper (before hot_method)
    s_nb = handles["nonblocking"]
    torch_nb = torch.cuda.ExternalStream(s_nb)
    launchers = {
        "ctypes cuLaunchKernelEx (CDLL)": lambda: ex(cfg["legacy"], handle, params, None),
        "ctypes cuLaunchKernelEx (PyDLL, GIL kept)": lambda: py_ex(cfg["legacy"], handle, params, None),
        "ctypes cuLaunchKernelEx (c_void_p objects, no argtypes)": lambda: ex_plain(cv_cfg, cv_handle, cv_params,
                                                                                  None),
        "ctypes cuLaunchKernel (11 args)": lambda: k(handle, 1, 1, 1, 32, 1, 1, 0, 0, params, None),
        "cuda-bindings cuLaunchKernelEx": lambda: cu.cuLaunchKernelEx(cb_cfg["legacy"], cb_fn, params, 0),
        "cuda-bindings cuLaunchKernel": lambda: cu.cuLaunchKernel(cb_fn, 1, 1, 1, 32, 1, 1, 0, cb_stream["legacy"],
                                                                  params, 0),
        "tsjit Kernel.bind replay": lambda: bound(0),
        "tsjit k[g, b](tsjit array, n)": lambda: launch(darr, 16),
        "tsjit k[g, b](torch tensor, n)": lambda: launch(x, 16),
        "tsjit base Launcher (two frames), tsjit array": lambda: base_launch(darr, 16),
        "tsjit base Launcher (two frames), torch tensor": lambda: base_launch(x, 16),
        "triton empty kernel": lambda: empty_triton[(1,)](x, 16),
        "torch add_ (16 elements)": lambda: t16.add_(1.0),
        "ctypes cuLaunchKernelEx, non-blocking stream": lambda: ex(cfg["nonblocking"], handle, params, None),
        "tsjit k[g, b](tsjit array, n), non-blocking stream": lambda: launch(darr, 16, stream=s_nb),
        "tsjit Kernel.bind replay, non-blocking stream": lambda: bound(s_nb),
    }
    if helper is not None:
        noop = helper.noop4
        noop.argtypes, noop.restype = [ctypes.c_void_p] * 4, ctypes.c_int
        launchers["ctypes no-op C call, 4 pointers (no driver)"] = lambda: noop(cfg["legacy"], handle, params, None)

    def sync():
        torch.cuda.synchronize()
        created.synchronize()

    def burst_us(fn, n):
        sync()
        t0 = time.perf_counter_ns()
        for _ in range(n):
            fn()
        return (time.perf_counter_ns() - t0) / n / 1e3

    c_loops = {}
    if helper is not None:
        helper.loop_ex.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_int, ctypes.POINTER(ctypes.c_int)]
        helper.loop_ex.restype = ctypes.c_longlong
        helper.loop_k.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_int, ctypes.POINTER(ctypes.c_int)]
        helper.loop_k.restype = ctypes.c_longlong
        ex_ptr = ctypes.cast(ex, ctypes.c_void_p).value
        k_ptr = ctypes.cast(k, ctypes.c_void_p).value
        err = ctypes.c_int()

        def c_loop(kind, stream_name):
            def run(n):
                sync()
                if kind == "ex":
                    ns = helper.loop_ex(ex_ptr, cfg[stream_name], handle, params, n, ctypes.byref(err))
                else:
                    ns = helper.loop_k(k_ptr, handle, handles[stream_name], params, n, ctypes.byref(err))
                assert err.value == 0, f"C loop launch failed: {err.value}"
                return ns / n / 1e3
            return run
        c_loops = {"C loop cuLaunchKernelEx": c_loop("ex", "legacy"), "C loop cuLaunchKernel": c_loop("k", "legacy"),
                   "C loop cuLaunchKernelEx, non-blocking stream": c_loop("ex", "nonblocking")}

    for name, fn in list(launchers.items()):   # warm-up: compile, plans, hot records; a failing launcher is dropped
        try:
            for _ in range(50):
                result = fn()
                code = result[0] if isinstance(result, tuple) else result   # cuda-bindings: (CUresult,)
                if isinstance(code, int) and code:   # a driver result; launchers of objects return others
                    raise RuntimeError(f"the launch returned {code!r}")
            sync()
        except Exception as exc:  # noqa: BLE001 - report and measure the others
            print(f"launcher {name!r} dropped: {type(exc).__name__}: {exc}")
            del launchers[name]
    sync()
    sizes = (16, 64, 2000)
    samples = {(name, n): [] for name in list(launchers) + list(c_loops) for n in sizes}
    for r in range(args.rounds):
        for n in sizes:
            if n == 2000 and r % 5:   # the long bursts only every fifth round (they cost 2000 launches each)
                continue
            for name, fn in launchers.items():
                samples[(name, n)].append(burst_us(fn, n))
            for name, run in c_loops.items():
                samples[(name, n)].append(run(n))
    sync()
    results = {"rounds": args.rounds, "device": torch.cuda.get_device_name(0), "rows": [], "queue": None}
    print(f"device {results['device']}, torch {torch.__version__}, triton {triton.__version__}; "
          f"host time per launch, µs (median over rounds; min in brackets)")
    header = f"| {'launcher':52s} | " + " | ".join(f"burst {n:>4d}" for n in sizes) + " |"
    print(header)
    print("|" + "-" * 54 + "|" + "|".join("-" * 19 for _ in sizes) + "|")
    for name in list(c_loops) + list(launchers):
        cells, row = [], {"launcher": name}
        for n in sizes:
            values = samples[(name, n)]
            med, low = statistics.median(values), min(values)
            row[f"burst{n}_median_us"], row[f"burst{n}_min_us"] = med, low
            cells.append(f"{med:6.2f} ({low:5.2f})")
        results["rows"].append(row)
        print(f"| {name:52s} | " + " | ".join(f"{c:>17s}" for c in cells) + " |")

    if helper is not None:
        n = 4096
        out = (ctypes.c_longlong * n)()
        helper.profile_ex.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_int, ctypes.c_void_p]
        helper.profile_ex.restype = ctypes.c_int
        sync()
        assert helper.profile_ex(ex_ptr, cfg["legacy"], handle, params, n, ctypes.addressof(out)) == 0
        sync()
        ns = list(out)
        windows = [(0, 16), (16, 64), (64, 256), (256, 512), (512, 1024), (1024, 2048), (2048, 4096)]
        queue = {f"{a}-{b}": statistics.median(ns[a:b]) / 1e3 for a, b in windows}
        results["queue"] = queue
        print("queue profile (C, cuLaunchKernelEx on the legacy stream, each launch timed alone), median µs per "
              "launch by launch index: " + ", ".join(f"[{k}] {v:.2f}" for k, v in queue.items()))
        for stream_name in ("legacy", "nonblocking"):
            rates = []
            for _ in range(5):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                stream = torch.cuda.default_stream() if stream_name == "legacy" else torch_nb
                start.record(stream)
                helper.loop_ex(ex_ptr, cfg[stream_name], handle, params, 2000, ctypes.byref(err))
                end.record(stream)
                end.synchronize()
                rates.append(start.elapsed_time(end) / 2000 * 1e3)
            results[f"gpu_rate_{stream_name}_us"] = statistics.median(rates)
            print(f"GPU back-to-back empty kernels ({stream_name} stream, CUDA events around 2000 launches from "
                  f"the C loop): {statistics.median(rates):.2f} µs per kernel (min {min(rates):.2f})")
    python_pieces(x, darr, results)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=1)


if __name__ == "__main__":
    main()
