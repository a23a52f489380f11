#!/usr/bin/env bash
# Issue 15 (helper i15k), GPU job 4 (batch 10:30 UTC, 2026-12-03; tree rebased onto i15v's evict-first loads):
# (1) the cluster numerics tests on the GPU; (2) short-K shapes (is a cluster's cost per launch or per K tile?)
# and a one-row-of-tiles product (cluster_n2 with evict-first Y loads), rounds in a rotated order, L2 flushed.
RES=${RES:-/tmp/i15k-res}; mkdir -p "$RES"; export PYTHONUNBUFFERED=1
S=$(date +%s)
timeout 14 python3 -m pytest -q -x -p no:cacheprovider -n 8 -m gpu tests/gpu/test_ops_matmul_cluster_gpu.py \
  > "$RES/tests.txt" 2>&1
echo "tests rc=$? at $(( $(date +%s) - S )) s"; tail -3 "$RES/tests.txt"
timeout $(( 39 - ($(date +%s) - S) )) python3 benchmarks/gemm_cluster_lib_probe.py --reps 15 --workers 15 --method \
  --variants matmul 128x128:S1 128x256:S1 128x128:cluster_m2 128x256:cluster_m2 128x128:cluster_n2 \
  --shapes 2048,2048,256 2048,2048,1024 8192,8192,512 4096,4096,1024 128,8192,4096 4096,4096,4096 \
  > "$RES/probe.txt" 2>&1
echo "probe rc=$? at $(( $(date +%s) - S )) s"; cat "$RES/probe.txt"
