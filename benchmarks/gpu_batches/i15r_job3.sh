#!/usr/bin/env bash
# Issue 15 (helper i15r), GPU job 3 (2026-12-03, last batch ~13:40 UTC, <= 35 s): other shapes with 2000-byte (and
# 4000-byte) rows where realign.misaligned_choice takes the cluster_m2 tile: the tsjit.ops.matmul call against the
# old choices (the single-CTA tile as given, or with Y realigned), the 128x192 cluster, and torch.matmul, L2 flushed;
# then the GPU tests of the path once more on main as landed.
RES=${RES:-/tmp/i15r-res}; mkdir -p "$RES"; export PYTHONUNBUFFERED=1
S=$(date +%s)
(cd benchmarks && timeout 19 python3 gemm_misaligned_probe.py --reps 12 --workers 15 --shape 3000,5000,1000 \
  2048,2048,1000 1024,4096,1000 8192,8192,1000 3000,5000,2000 --variants matmul 128x256:S1/ 128x256:S1/y \
  128x192:cluster_m2/ > "$RES/probe.txt" 2>&1)
echo "probe rc=$? at $(( $(date +%s) - S )) s"; cat "$RES/probe.txt"
timeout $(( 34 - ($(date +%s) - S) )) python3 -m pytest -q -x -p no:cacheprovider -n 4 -m "not interpret" \
  tests/gpu/test_ops_matmul_cluster_gpu.py tests/gpu/test_ops_matmul_gpu.py -k "misaligned or 3000-5000-1000" \
  > "$RES/tests.txt" 2>&1
echo "tests rc=$? at $(( $(date +%s) - S )) s"; tail -3 "$RES/tests.txt"
