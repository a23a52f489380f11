"""Issue 15 (2026-12-02, helper i15c): why the tutorial GEMM's 2-CTA clusters (``cluster_m=2``) run slower than
single CTAs.  One process, three parts:

1. occupancy: ``cuOccupancyMaxActiveClusters`` of the compiled cluster kernel at its shared memory (how many
   2-CTA clusters the H200 co-schedules), against the persistent grid the launcher asks for;
2. placement: a spin kernel (CuPy, ``__cluster_dims__(2,1,1)``, the GEMM's shared memory) records each CTA's
   ``%smid`` and ``%globaltimer`` start / end: CTAs that start after another one ended are a second wave;
3. timings: ``torch.matmul`` and the tutorial GEMM with cluster_m 1 / 2 (several persistent grid sizes) timed in
   turns (CUDA events, medians), each output NaN-poisoned and checked against float64 on a sampled block.

    PYTHONPATH=. python benchmarks/gemm_cluster_probe.py [--reps 15] [--shapes M,N,K[,BN] ...]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

try:
    import torch
except ImportError:       # compile-only use (use_arrive, compiled_gemm) on a machine without torch
    torch = None

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import tsjit                                        # noqa: E402
from tsjit import env                               # noqa: E402
from tsjit.examples import gemm                     # noqa: E402
from timing import interleaved_time_ms              # noqa: E402  (benchmarks/timing.py)


def use_arrive(kind: str) -> None:
    """Swap the consumer's remote release arrive of the pipeline lowering (``tsjit.ts.lower_pipeline``) for an
    A/B comparison; run each kind in its own process with its own ``TSJIT_CACHE_DIR`` (the disk cache does not
    see the swap).  ``fix``: the tree's (``fence.release.cta`` + relaxed arrive); ``cluster``: the old
    ``mbarrier.arrive.release.cluster`` per CTA; ``relaxed``: relaxed arrives, no fence; ``cta``:
    ``mbarrier.arrive.shared::cluster`` (release at CTA scope, CUTLASS's instruction)."""
    from tsjit.backend import emit, intrinsics
    from tsjit.lang import dtypes as dt, sync
    from tsjit.lang.values import constant
    if kind == "fix":
        return
    if kind == "cluster":
        def release(bar, ranks):
            for rank in ranks:
                sync.mbarrier_arrive_cluster(bar, rank)
    elif kind in ("relaxed", "cta"):
        name = "llvm.nvvm.mbarrier.arrive." + ("relaxed.scope.cluster" if kind == "relaxed" else "scope.cta") + \
            ".space.cluster"
        if name not in intrinsics.INTRINSICS:
            intrinsics._add(name, "void (p7 bar, i32 count)", intrinsics.PTX80, "mbarrier.arrive.shared::cluster")

        def release(bar, ranks):
            for rank in ranks:
                remote = sync.map_shared_rank(bar, rank)
                emit.current().intrinsic(name, [remote.ir, constant(1, dt.Int32).ir])
    else:
        raise SystemExit(f"--arrive: fix, cluster, relaxed or cta; got {kind!r}")
    sync.mbarrier_release_cluster = release     # the lowering calls it through the module


def compiled_gemm(cluster_m: int, stages: int, block_n: int = 256):
    """The compiled tutorial kernel (specs only: the kernel does not depend on the sizes' values)."""
    a = tsjit.tensormap_spec(tsjit.BFloat16, (gemm.BM, gemm.BK), swizzle="128B")
    b = tsjit.tensormap_spec(tsjit.BFloat16, (block_n // cluster_m, gemm.BK), swizzle="128B")
    c_map = tsjit.tensormap_spec(tsjit.BFloat16, (64, 64), swizzle="128B")
    return tsjit.compile(gemm.gemm_ts, a, b, tsjit.spec((4096, 4096), tsjit.BFloat16), c_map, 4096, 4096, 4096,
                         block_n, stages, 8, cluster_m, "tma")


def max_active_clusters(compiled, cluster: int) -> int:
    """``cuOccupancyMaxActiveClusters`` for ``compiled`` at its own shared memory, ``cluster`` x 1 x 1."""
    from cuda.bindings import driver as cu
    from tsjit.runtime import driver
    fn = compiled.function()
    smem = compiled.metadata["launch_requirements"].min_smem_bytes
    driver.set_max_dynamic_smem(fn, smem)
    cfg = cu.CUlaunchConfig()
    cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = 132, 1, 1
    cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = gemm.THREADS, 1, 1
    cfg.sharedMemBytes = smem
    attr = cu.CUlaunchAttribute()
    attr.id = cu.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
    attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = cluster, 1, 1
    cfg.attrs, cfg.numAttrs = [attr], 1
    err, n = cu.cuOccupancyMaxActiveClusters(fn.handle, cfg)
    if err != cu.CUresult.CUDA_SUCCESS:
        return -int(err)
    return int(n)


SPIN_SRC = r"""
extern "C" __global__ void __cluster_dims__(CLUSTER, 1, 1) spin(unsigned long long *rec, unsigned long long ns) {
    extern __shared__ char smem[];
    unsigned long long t0, t1;
    unsigned int sm;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
    if (threadIdx.x == 0) smem[0] = 1;
    do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1)); } while (t1 - t0 < ns);
    if (threadIdx.x == 0) {
        rec[3 * blockIdx.x] = sm; rec[3 * blockIdx.x + 1] = t0; rec[3 * blockIdx.x + 2] = t1;
    }
}
"""


_SPIN = {}


def spin_waves(cluster: int, grid: int, smem: int, ns: int = 30000) -> str:
    """Launch the spin kernel; a summary: distinct SMs used, CTAs that started after the first CTA ended."""
    import cupy as cp
    if cluster not in _SPIN:
        _SPIN[cluster] = cp.RawModule(code=SPIN_SRC.replace("CLUSTER", str(cluster)),
                                      options=("-arch=sm_90a", "-std=c++17")).get_function("spin")
    k = _SPIN[cluster]
    k.max_dynamic_shared_size_bytes = smem
    rec = cp.zeros(3 * grid, dtype=cp.uint64)
    for _ in range(2):
        k((grid,), (384,), (rec, cp.uint64(ns)), shared_mem=smem)
    cp.cuda.runtime.deviceSynchronize()
    r = rec.get().reshape(grid, 3).astype("int64")
    first_end = r[:, 2].min()
    late = int((r[:, 1] > first_end).sum())
    span_us = (r[:, 2].max() - r[:, 1].min()) / 1e3
    return (f"cluster {cluster} grid {grid} smem {smem}: {len(set(r[:, 0].tolist()))} distinct SMs, {late} CTAs "
            f"started after the first ended (second wave), span {span_us:.1f} us for {ns / 1e3:.0f} us spins")


def sampled_check(c, a, b, rows=64, cols=64) -> float:
    """Max |C - A B^T| / max|ref| over a few sampled blocks (float64)."""
    M, N = c.shape
    worst = 0.0
    for r0, c0 in ((0, 0), (M - rows, N - cols), (M // 2 - 7, N // 3 + 5)):
        r0, c0 = max(0, r0), max(0, c0)
        ref = a[r0:r0 + rows].double() @ b[c0:c0 + cols].double().T
        got = c[r0:r0 + rows, c0:c0 + cols].double()
        if torch.isnan(got).any():
            return float("nan")
        worst = max(worst, ((got - ref).abs().max() / ref.abs().max()).item())
    return worst


_BASELINE = {}


def launcher_with_arrive(kind, a, b, c, **kw):
    """``gemm.gemm_launcher`` on a second kernel object of the tutorial's function, compiled (its first call)
    with the consumer release arrive ``kind`` (:func:`use_arrive`), so the old and the new lowering run in one
    process.  Needs ``TSJIT_DISABLE_CACHE=1``: both builds have the same disk-cache key."""
    from tsjit.lang import sync
    if kind == "fix":
        fn = gemm.gemm_launcher(a, b, c, **kw)
        fn()
        return fn
    if kind not in _BASELINE:
        _BASELINE[kind] = tsjit.kernel(gemm.gemm_ts.fn)
    saved_kernel, saved_release = gemm.gemm_ts, sync.mbarrier_release_cluster
    try:
        gemm.gemm_ts = _BASELINE[kind]
        use_arrive(kind)
        fn = gemm.gemm_launcher(a, b, c, **kw)
        fn()                                   # compiles under the swapped lowering
    finally:
        gemm.gemm_ts, sync.mbarrier_release_cluster = saved_kernel, saved_release
    return fn


def time_shape(M, N, K, variants, reps):
    a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(N, K, device="cuda", dtype=torch.bfloat16)
    fns = {"torch": lambda: torch.matmul(a, b.T)}
    errors = {}
    for label, kw in variants:
        c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
        kw = dict(kw)
        fn = launcher_with_arrive(kw.pop("arrive", "fix"), a, b, c, **kw)
        torch.cuda.synchronize()
        errors[label] = sampled_check(c, a, b)
        fns[label] = fn
    t = interleaved_time_ms(fns, reps=reps)
    flops = 2.0 * M * N * K
    print(f"\n{M}x{N}x{K}: torch {t['torch'] * 1e3:.1f} us ({flops / t['torch'] / 1e9:.0f} TFLOP/s)")
    print("| variant | us | TFLOP/s | torch / variant | rel err |")
    print("|---|---|---|---|---|")
    for label, _ in variants:
        print(f"| {label} | {t[label] * 1e3:.1f} | {flops / t[label] / 1e9:.0f} | {t['torch'] / t[label]:.3f} | "
              f"{errors[label]:.1e} |")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--stages", type=int, default=4)
    parser.add_argument("--shapes", nargs="*", default=["4096,4096,4096", "2048,2048,2048"])
    parser.add_argument("--sms", nargs="*", type=int, default=[132, 128, 120])
    parser.add_argument("--no-spin", action="store_true")
    parser.add_argument("--no-occupancy", action="store_true")
    parser.add_argument("--arrive", default="fix", help="fix / cluster / relaxed / cta (see use_arrive)")
    parser.add_argument("--cluster-only", action="store_true", help="time torch and cluster_m=2 only")
    parser.add_argument("--ab", nargs="*", default=[], help="also time cluster_m=2 with these release arrives "
                        "(cluster / relaxed / cta) in the same process (needs TSJIT_DISABLE_CACHE=1)")
    args = parser.parse_args()
    use_arrive(args.arrive)
    if args.ab and not env.disable_cache():
        raise SystemExit("--ab needs TSJIT_DISABLE_CACHE=1 (the swapped builds share the disk-cache key)")
    t0 = time.time()
    props = torch.cuda.get_device_properties(0)
    print(f"{props.name}, {props.multi_processor_count} SMs, tsjit {tsjit.__file__}")
    print(f"consumer release arrive: {args.arrive}")
    if not args.no_occupancy:
        k1, k2 = compiled_gemm(1, args.stages), compiled_gemm(2, args.stages)
        smem = k2.metadata["launch_requirements"].min_smem_bytes
        print(f"stages {args.stages}: smem {smem} B/CTA; max active 1-CTA clusters {max_active_clusters(k1, 1)}, "
              f"2-CTA clusters {max_active_clusters(k2, 2)} (grid asks for {props.multi_processor_count // 2})")
    if not args.no_spin and not args.no_occupancy:
        for cluster, grid in ((1, 132), (2, 132), (2, 128), (2, 120)):
            print(spin_waves(cluster, grid, smem))
    print(f"[{time.time() - t0:.1f} s]")
    variants = [] if args.cluster_only else [("cluster_m=1", dict(stages=args.stages))]
    variants += [(f"cluster_m=2 sms={s} arrive={args.arrive}", dict(stages=args.stages, cluster_m=2, sms=s))
                 for s in args.sms]
    variants += [(f"cluster_m=2 sms={s} arrive={kind} (old)" if kind == "cluster" else
                  f"cluster_m=2 sms={s} arrive={kind}", dict(stages=args.stages, cluster_m=2, sms=s, arrive=kind))
                 for kind in args.ab for s in args.sms]
    for shape in args.shapes:
        M, N, K, *bn = (int(x) for x in shape.split(","))
        extra = dict(block_n=bn[0]) if bn else {}
        time_shape(M, N, K, [(f"{label} BN={bn[0]}" if bn else label, {**kw, **extra}) for label, kw in variants],
                   args.reps)
        print(f"[{time.time() - t0:.1f} s]")


if __name__ == "__main__":
    main()
