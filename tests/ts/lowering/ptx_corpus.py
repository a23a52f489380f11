"""The TS example programs whose PTX ``test_ptx_golden.py`` pins (sha256 per program, for sm_90a).

Every entry compiles one kernel of ``tsjit/examples`` with fixed arguments.  A refactoring of the
TS lowering must leave these byte-identical (GPU time is scarce: identical PTX needs no rerun);
a change that means to alter them re-records the file::

    UPDATE_PTX_GOLDEN=1 python -m pytest -q -p no:cacheprovider tests/ts/lowering/test_ptx_golden.py

and says in its commit why the PTX changed.
"""
import hashlib
import json
import os

import numpy as np

import tsjit
from tsjit.examples import attention, gemm, ts_async, ts_copy, ts_pdl, ts_persistent, ts_tma_copy

GOLDEN = os.path.join(os.path.dirname(__file__), "ptx_golden.json")
TARGET = "sm_90a"


def _gemm(cluster_m):
    a = tsjit.tensormap_spec(tsjit.BFloat16, (gemm.BM, gemm.BK), swizzle="128B")
    b = tsjit.tensormap_spec(tsjit.BFloat16, (256 // cluster_m, gemm.BK), swizzle="128B")
    c_map = tsjit.tensormap_spec(tsjit.BFloat16, (64, 64), swizzle="128B")
    return (gemm.gemm_ts, a, b, tsjit.spec((1024, 1024), tsjit.BFloat16), c_map, 1024, 1024, 1024, 256, 4, 8,
            cluster_m, "tma")


def _attention():
    """The default attention configuration for head_dim 128, causal (tsjit.ops.attention's), compiled."""
    return attention.compile_config(128, True, tsjit.BFloat16)


def programs() -> dict:
    """name -> (kernel, *args) of every pinned program (or ``(compile,)``: a function returning it compiled)."""
    i16, f32 = np.zeros(64, np.int16), np.zeros(64, np.float32)
    box = tsjit.tensormap_spec(tsjit.Float32, (64, 64))
    wide = tsjit.tensormap_spec(tsjit.Float32, (32, 256))
    return {
        "ts_copy.copy_ts": (ts_copy.copy_ts, i16, i16, 64, 4),
        "ts_copy.copy_ts_vectorized": (ts_copy.copy_ts_vectorized, i16, i16, 64, 3),
        "ts_tma_copy.tma_copy_ts": (ts_tma_copy.tma_copy_ts, box, np.zeros((256, 256), np.float32), 16, 4, 64,
                                    64, 4),
        "ts_tma_copy.tma_copy_bw": (ts_tma_copy.tma_copy_bw, wide, wide, 16, 4, 32, 256, 4, 2),
        "ts_async.pingpong_scale": (ts_async.pingpong_scale, f32, f32, 64, 1024),
        "ts_async.interleaved_scale": (ts_async.interleaved_scale, f32, f32, 64, 1024),
        "ts_async.asyncload_scale": (ts_async.asyncload_scale, f32, f32, 64, 1024),
        "ts_persistent.persistent_copy": (ts_persistent.persistent_copy, f32, f32, 8, 64, 2048, 4),
        "ts_persistent.varlen_copy": (ts_persistent.varlen_copy, f32, np.zeros(9, np.int32),
                                      np.zeros((8, 64), np.float32), 8, 4),
        "ts_pdl.scale_producer": (ts_pdl.scale_producer, f32, f32, 64, 2),
        "ts_pdl.scale_consumer": (ts_pdl.scale_consumer, f32, f32, 64, 2),
        "gemm.gemm_ts": _gemm(1),
        "gemm.gemm_ts[cluster 2]": _gemm(2),
        "attention.attention_forward[d128 causal]": (_attention,),
        # the bounded-wait build (TSJIT_DEBUG=1) of the TMA copy and of the ping-pong ring
        "ts_tma_copy.tma_copy_ts[TSJIT_DEBUG=1]": (ts_tma_copy.tma_copy_ts, box, np.zeros((256, 256), np.float32), 16,
                                                  4, 64, 64, 4),
        "ts_async.pingpong_scale[TSJIT_DEBUG=1]": (ts_async.pingpong_scale, f32, f32, 64, 1024),
    }


def digest(name: str, entry) -> str:
    """sha256 of the PTX of one program (compiled for :data:`TARGET`)."""
    kernel, *args = entry
    if not args:                     # a function that compiles the program itself
        return hashlib.sha256(kernel().ptx.encode()).hexdigest()
    if "[TSJIT_DEBUG=1]" not in name:
        ptx = tsjit.compile(kernel, *args, target=TARGET).ptx
        return hashlib.sha256(ptx.encode()).hexdigest()
    saved = os.environ.get("TSJIT_DEBUG")
    os.environ["TSJIT_DEBUG"] = "1"
    try:   # the in-memory memo is keyed by the variable too (tsjit.env.code_state)
        ptx = tsjit.compile(kernel, *args, target=TARGET).ptx
    finally:
        if saved is None:
            del os.environ["TSJIT_DEBUG"]
        else:
            os.environ["TSJIT_DEBUG"] = saved
    return hashlib.sha256(ptx.encode()).hexdigest()


def _digest_by_name(name: str) -> str:
    return digest(name, programs()[name])


def digests(names) -> dict:
    """``{name: digest}``, each program compiled in a fresh process: a compile must not see what an earlier
    one in the same process left behind (the TaskManager's checks are not order-independent on main
    d302b6f: gemm.gemm_ts compiled first makes ts_tma_copy.tma_copy_bw fail the race check)."""
    import concurrent.futures
    import multiprocessing
    names = list(names)
    with concurrent.futures.ProcessPoolExecutor(max_workers=2, mp_context=multiprocessing.get_context("spawn"),
                                                max_tasks_per_child=1) as pool:
        return dict(zip(names, pool.map(_digest_by_name, names)))


def llvm_version() -> str:
    import llvmlite
    import llvmlite.binding as llvm
    return f"llvmlite {llvmlite.__version__}, LLVM {'.'.join(map(str, llvm.llvm_version_info))}"


def record() -> dict:
    """Compile every program and write :data:`GOLDEN`; returns what it wrote."""
    data = {"llvm": llvm_version(), "ptx_sha256": digests(programs())}
    with open(GOLDEN, "w") as fh:
        json.dump(data, fh, indent=1, sort_keys=True)
        fh.write("\n")
    return data
