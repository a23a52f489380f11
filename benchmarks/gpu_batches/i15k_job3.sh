#!/usr/bin/env bash
# Issue 15 (helper i15k), GPU job 3 (batch 10:15 UTC, 2026-12-03): (1) the cluster numerics tests on the GPU after
# the rebase; (2) the heuristic (tsjit.ops.matmul) and forced single-CTA / 2-CTA cluster tiles at the mid/large
# shapes of the sweep against torch.matmul, one call of each per round in a rotated order, L2 flushed before each.
# (Ran in the 09:55 batch without the three short-K shapes at the end, which job 4 measures.)
RES=${RES:-/tmp/i15k-res}; mkdir -p "$RES"; export PYTHONUNBUFFERED=1
S=$(date +%s)
timeout 14 python3 -m pytest -q -x -p no:cacheprovider -n 8 -m gpu tests/gpu/test_ops_matmul_cluster_gpu.py \
  > "$RES/tests.txt" 2>&1
echo "tests rc=$? at $(( $(date +%s) - S )) s"; tail -3 "$RES/tests.txt"
timeout $(( 39 - ($(date +%s) - S) )) python3 benchmarks/gemm_cluster_lib_probe.py --reps 15 --workers 15 --method \
  --variants matmul 128x128:S1 128x256:S1 128x128:cluster_m2 128x256:cluster_m2 128x128:cluster_n2 \
  --shapes 128,4096,4096 2048,2048,2048 512,28672,4096 1024,14336,4096 512,4096,4096 256,14336,4096 \
  2048,4096,4096 4096,4096,4096 4096,28672,4096 8192,14336,4096 2048,2048,256 2048,2048,1024 8192,8192,512 \
  > "$RES/probe.txt" 2>&1
echo "probe rc=$? at $(( $(date +%s) - S )) s"; cat "$RES/probe.txt"
