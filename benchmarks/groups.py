"""Pipeline-group GEMMs (issue 12 §4) against the plain TS GEMM and cuBLAS, interleaved.

For each shape: the merge GEMM (``tsjit/examples/ts_merge_gemm.py``: A by cp.async, B by TMA, one
Merge group, ReLU) grouped and with separate rings, the same with interleave lanes (``--lanes``, one per
producer warp, where the K tiles are a multiple of them; ``-`` elsewhere), the plain Task Scheduling GEMM
(``tsjit/examples/gemm.py``: A and B by TMA in one ring) and ``torch.relu(torch.matmul(a, b.T))``
(cuBLAS + a ReLU kernel) are timed in turns (CUDA events, warm-up, median of ``--reps``; see
``benchmarks/timing.py``), after a numerics check of the merge GEMM against torch.  The table gives
ms per call, TFLOP/s and the ratios merge / plain and merge-lanes / plain (issue 12: within 5 %, i.e. <= 1.05).

    PYTHONPATH=. python benchmarks/groups.py [--reps 20] [--stages 4] [--lanes 2 4] [--quick] [--prime]
"""
from __future__ import annotations

import argparse

import torch

from timing import interleaved_time_ms  # benchmarks/timing.py
from tsjit.examples import gemm, ts_merge_gemm

SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (2048, 8192, 8192), (4096, 14336, 4096), (1000, 3000, 777)]
QUICK = [(4096, 4096, 4096), (8192, 8192, 4096)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--stages", type=int, default=4)
    parser.add_argument("--lanes", type=int, nargs="*", default=[2, 4],
                        help="also time the merge GEMM with these interleave lanes (ts_merge_gemm.producer_tasks), "
                             "where the K tiles are a multiple of them")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--prime", action="store_true",
                        help="one untimed call before each timed repetition (no callable pays for the L2 state "
                             "its predecessor in the round left)")
    args = parser.parse_args()
    merges = ["merge"] + [f"lanes{n}" for n in args.lanes] + ["separate"]
    columns = merges + ["plain", "cublas"]
    print(f"{'M':>6} {'N':>6} {'K':>6} | " + " ".join(f"{c:>9}" for c in columns) + " ms | TFLOP/s "
          + " ".join(f"{c:>8}" for c in ("merge", "plain", "cublas")) + " | "
          + " ".join(f"{c + '/plain':>14}" for c in merges[:-1]))
    worst = dict.fromkeys(merges[:-1], 0.0)
    for M, N, K in (QUICK if args.quick else SHAPES):
        a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(N, K, device="cuda", dtype=torch.bfloat16)
        outputs = {name: torch.empty(M, N, device="cuda", dtype=torch.bfloat16) for name in columns[:-1]}
        # torch tensors are kernel arguments and TensorMap sources as they are (no copies)
        fns = {"merge": ts_merge_gemm.merge_gemm_launcher(a, b, outputs["merge"], stages=args.stages)}
        for n in args.lanes:
            if -(-K // ts_merge_gemm.BK) % n == 0:
                fns[f"lanes{n}"] = ts_merge_gemm.merge_gemm_launcher(a, b, outputs[f"lanes{n}"], stages=args.stages,
                                                                     lanes=n)
        fns["separate"] = ts_merge_gemm.merge_gemm_launcher(a, b, outputs["separate"], stages=args.stages,
                                                            grouped=False)
        ref = torch.relu(a.float() @ b.float().T)
        for name, fn in fns.items():            # every merge GEMM checked first, into a poisoned output
            outputs[name].fill_(float("nan"))
            fn()
            torch.cuda.synchronize()
            err = ((outputs[name].float() - ref).norm() / ref.norm()).item()
            if not err < 1e-2:
                raise SystemExit(f"{name} GEMM {M}x{N}x{K}: relative error {err:.3g} against torch")
        fns["plain"] = gemm.gemm_launcher(a, b, outputs["plain"], stages=args.stages)
        fns["cublas"] = lambda: torch.relu(torch.matmul(a, b.T))
        times = interleaved_time_ms(fns, reps=args.reps, prime=args.prime)
        flops = 2.0 * M * N * K
        ratios = {k: times[k] / times["plain"] for k in merges[:-1] if k in times}
        for k, r in ratios.items():
            worst[k] = max(worst[k], r)
        print(f"{M:>6} {N:>6} {K:>6} | " + " ".join(f"{times[c]:9.3f}" if c in times else f"{'-':>9}" for c in columns)
              + "    |         " + " ".join(f"{flops / times[c] / 1e9:8.1f}" for c in ("merge", "plain", "cublas"))
              + " | " + " ".join(f"{ratios[c]:14.3f}" if c in ratios else f"{'-':>14}" for c in merges[:-1]))
    for k, w in worst.items():
        if w:
            print(f"worst {k}/plain ratio {w:.3f} ({'within' if w <= 1.05 else 'OUTSIDE'} the 5% budget)")


if __name__ == "__main__":
    main()
