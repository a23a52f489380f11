"""Tutorial 9's split-K GEMM (``tsjit/examples/bw_splitk.py``, the sm_90a build of the Blackwell source) on K-heavy
shapes, against tutorial 3's GEMM (``bw_gemm.py``, no split, 128 x 256 tiles) and ``torch.matmul`` (cuBLAS), timed in
turns (CUDA events, warm-up, median; ``benchmarks/timing.py``) after a numerics check against torch.  Few output
tiles and a long K are where splitting K across a cluster pays: more CTAs share the same tiles.

    PYTHONPATH=. python benchmarks/bw_splitk.py [--reps 10]
"""
from __future__ import annotations

import argparse

import torch

import tsjit
from timing import interleaved_time_ms  # benchmarks/timing.py
from tsjit.examples import bw_gemm, bw_splitk

SHAPES = [(512, 512, 16384), (1024, 1024, 8192), (4096, 4096, 4096)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=10)
    args = parser.parse_args()
    print(f"{'M':>5} {'N':>5} {'K':>6} | {'split 2':>8} {'split 4':>8} {'tut. 3':>8} {'cuBLAS':>8} ms | TFLOP/s split4")
    for M, N, K in SHAPES:
        a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(N, K, device="cuda", dtype=torch.bfloat16)
        outs = {name: torch.empty(M, N, device="cuda", dtype=torch.bfloat16) for name in ("s2", "s4", "t3", "ref")}
        t3 = bw_gemm.gemm_tutorial3[((N + 255) // 256, (M + 127) // 128), (bw_gemm.threads_for("sm_90a"),)]
        t3_maps = (tsjit.TensorMap(a, (bw_gemm.BM, bw_gemm.BK), swizzle="128B"),
                   tsjit.TensorMap(b, (bw_gemm.BN, bw_gemm.BK), swizzle="128B"))
        fns = {"s2": bw_splitk.splitk_launcher(a, b, outs["s2"], 2), "s4": bw_splitk.splitk_launcher(a, b, outs["s4"], 4),
               "t3": lambda: t3(*t3_maps, outs["t3"], K), "ref": lambda: torch.matmul(a, b.T, out=outs["ref"])}
        for fn in fns.values():
            fn()
        torch.cuda.synchronize()
        ref = outs["ref"].float()
        for name in ("s2", "s4", "t3"):
            err = ((outs[name].float() - ref).norm() / ref.norm()).item()
            assert err < 1e-2, (name, M, N, K, err)
        ms = interleaved_time_ms(fns, reps=args.reps)
        print(f"{M:>5} {N:>5} {K:>6} | {ms['s2']:8.3f} {ms['s4']:8.3f} {ms['t3']:8.3f} {ms['ref']:8.3f}    | "
              f"{2 * M * N * K / ms['s4'] / 1e9:.0f}")


if __name__ == "__main__":
    main()
