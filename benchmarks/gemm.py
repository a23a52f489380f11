"""GEMM benchmark (issue 5): TFLOP/s of the TS GEMM (tsjit.examples.gemm) vs torch.matmul (cuBLAS) vs a
triton persistent TMA matmul written here, bf16 inputs, fp32 accumulation, bf16 output, C = A @ B^T.

Each row: same inputs for all three, CUDA events around repeated launches after warm-up, the median of
repetitions; the tsjit result is checked against torch (relative Frobenius error) first.

    PYTHONPATH=. python benchmarks/gemm.py [--quick]
"""
from __future__ import annotations

import argparse

import torch

import tsjit
from tsjit.examples import gemm
from timing import event_time_ms  # benchmarks/timing.py

SHAPES = [(2048, 2048, 2048), (4096, 4096, 4096), (8192, 8192, 8192), (16384, 16384, 16384),
          (8192, 8192, 1024), (1024, 8192, 8192), (16384, 4096, 4096)]




def _triton_matmul():
    """A persistent TMA matmul in triton (device-side tensor descriptors), or None if unavailable."""
    try:
        import triton
        import triton.language as tl
    except ImportError:
        return None
    if not hasattr(tl, "make_tensor_descriptor"):
        return None

    @triton.jit
    def kernel(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
               GROUP_M: tl.constexpr, NUM_SMS: tl.constexpr):
        a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BLOCK_M, BLOCK_K])
        b_desc = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[K, 1], block_shape=[BLOCK_N, BLOCK_K])
        c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BLOCK_M, BLOCK_N])
        pid = tl.program_id(0)
        tiles_m = tl.cdiv(M, BLOCK_M)
        tiles_n = tl.cdiv(N, BLOCK_N)
        k_tiles = tl.cdiv(K, BLOCK_K)
        num_tiles = tiles_m * tiles_n
        for tile in tl.range(pid, num_tiles, NUM_SMS, flatten=True):
            group = tile // (GROUP_M * tiles_n)
            first_m = group * GROUP_M
            rows = min(tiles_m - first_m, GROUP_M)
            pid_m = first_m + (tile % (GROUP_M * tiles_n)) % rows
            pid_n = (tile % (GROUP_M * tiles_n)) // rows
            acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
            for k in range(k_tiles):
                a = a_desc.load([pid_m * BLOCK_M, k * BLOCK_K])
                b = b_desc.load([pid_n * BLOCK_N, k * BLOCK_K])
                acc = tl.dot(a, b.T, acc)
            c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(tl.bfloat16))

    sms = torch.cuda.get_device_properties(0).multi_processor_count

    def alloc(size, alignment, stream):
        return torch.empty(size, device="cuda", dtype=torch.int8)

    triton.set_allocator(alloc)

    def run(a, b, c):
        M, K = a.shape
        N = b.shape[0]
        grid = (min(sms, triton.cdiv(M, 128) * triton.cdiv(N, 256)),)
        kernel[grid](a, b, c, M, N, K, BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=8, NUM_SMS=sms,
                     num_stages=3, num_warps=8)
    return run


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="only the first three shapes")
    args = parser.parse_args()
    triton_run = _triton_matmul()
    stream = torch.cuda.current_stream().cuda_stream
    print("| M x N x K | tsjit TFLOP/s | cuBLAS TFLOP/s | triton TFLOP/s | tsjit / cuBLAS | tsjit / triton | rel. error "
          "vs cuBLAS | tsjit config |")
    print("|---|---|---|---|---|---|---|---|")
    for M, N, K in SHAPES[:3] if args.quick else SHAPES:
        a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(N, K, device="cuda", dtype=torch.bfloat16)
        c = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
        c_ref = torch.empty_like(c)
        torch.matmul(a, b.T, out=c_ref)
        flops = 2.0 * M * N * K
        tf = lambda ms: flops / ms / 1e9
        t_ts, config, err = None, None, None
        for cluster_m, stages in ((1, 4), (2, 4), (1, 3)):
            c.fill_(float("nan"))
            run_tsjit = gemm.gemm_launcher(a, b, c, cluster_m=cluster_m, stages=stages, stream=stream)
            run_tsjit()
            torch.cuda.synchronize()
            e = (torch.linalg.norm((c.float() - c_ref.float())) / torch.linalg.norm(c_ref.float())).item()
            t = event_time_ms(run_tsjit)
            if t_ts is None or t < t_ts:
                t_ts, config, err = t, f"cluster {cluster_m}x1, {stages} stages", e
        t_cublas = event_time_ms(lambda: torch.matmul(a, b.T, out=c_ref))
        t_triton = None
        if triton_run is not None:
            c_tr = torch.empty_like(c)
            try:
                t_triton = event_time_ms(lambda: triton_run(a, b, c_tr))
            except Exception as exc:  # the baseline, not the subject: report and go on
                print(f"(triton failed: {type(exc).__name__}: {str(exc)[:200]})")
                triton_run = None
        tri = f"{tf(t_triton):.0f}" if t_triton else "n/a"
        ratio_tri = f"{t_triton / t_ts:.2f}" if t_triton else "n/a"
        print(f"| {M} x {N} x {K} | {tf(t_ts):.0f} | {tf(t_cublas):.0f} | {tri} | {t_cublas / t_ts:.3f} | "
              f"{ratio_tri} | {err:.1e} | {config} |")
        del a, b, c, c_ref
        torch.cuda.empty_cache()
    print(f"device: {torch.cuda.get_device_name(0)}, torch {torch.__version__}, tsjit {tsjit.__version__}")


if __name__ == "__main__":
    main()
