#!/usr/bin/env bash
# Issue 15 (helper i15k), GPU job 2 (batch ~09:45 UTC, 2026-12-03): (1) the cluster numerics tests on the GPU
# (float64 references, poisoned outputs); (2) single-CTA vs 2-CTA cluster tiles at large shapes, timed as
# benchmarks/gemm.py times (torch, variant) pairs; (3) gemm.py --quick itself (the torch baseline's sanity).
RES=${RES:-/tmp/i15k-res}; mkdir -p "$RES"; export PYTHONUNBUFFERED=1
S=$(date +%s)
timeout 17 python3 -m pytest -q -x -p no:cacheprovider -n 8 -m gpu -k "gpu" tests/gpu/test_ops_matmul_cluster_gpu.py \
  > "$RES/tests.txt" 2>&1
echo "tests rc=$? at $(( $(date +%s) - S )) s"; tail -5 "$RES/tests.txt"
timeout $(( 31 - ($(date +%s) - S) )) python3 benchmarks/gemm_cluster_lib_probe.py --reps 10 --workers 15 --method --paired \
  --variants matmul 128x256:S1 128x128:S1 128x128:cluster_m2 128x256:cluster_m2 \
  --shapes 8192,14336,4096 4096,28672,4096 4096,4096,4096 8192,8192,8192 2048,8192,8192 4096,14336,4096 \
  8192,4096,4096 1024,14336,4096 2048,2048,2048 > "$RES/probe.txt" 2>&1
echo "probe rc=$? at $(( $(date +%s) - S )) s"; cat "$RES/probe.txt"
cd benchmarks && timeout $(( 39 - ($(date +%s) - S) )) python3 gemm.py --quick --no-fp8 --warm-workers 5 --reps 10 \
  > "$RES/gemm_quick.txt" 2>&1
echo "gemm.py rc=$? at $(( $(date +%s) - S )) s"; cat "$RES/gemm_quick.txt"
