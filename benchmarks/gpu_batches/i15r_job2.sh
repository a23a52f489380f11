#!/usr/bin/env bash
# Issue 15 (helper i15r), GPU job 2 (2026-12-03, batch after 13:00 UTC): (1) the heuristic's new choice for
# misaligned rows (configs.misaligned_choice: the 128x256 cluster_m2 tile, 4 stages, no copy) against the old one
# (Y realigned) and variants of the cluster (tile order, L2 promotion, 128x192) at 3000x5000x1000 and 4096x4096x1000,
# against torch.matmul, L2 flushed; (2) the cluster GPU tests (with the new misaligned-rows test) and
# test_ops_matmul_gpu's realign / unaligned / 3000x5000x1000 tests.
RES=${RES:-/tmp/i15r-res}; mkdir -p "$RES"; export PYTHONUNBUFFERED=1
S=$(date +%s)
(cd benchmarks && timeout 17 python3 gemm_misaligned_probe.py --reps 15 --workers 15 --shape 3000,5000,1000 \
  4096,4096,1000 --variants matmul 128x256:S1/y 128x256:cluster_m2:deep/ 128x256:cluster_m2:deep:g4/ \
  128x256:cluster_m2:deep:g16/ 128x256:cluster_m2:deep:g2/ 128x192:cluster_m2/ 128x256:cluster_m2:deep:l2_128B/ \
  128x256:cluster_m2:deep:l2_256B/ pady:128x256:cluster_m2:deep/ pad:128x256:S1:deep/ > "$RES/probe.txt" 2>&1)
echo "probe rc=$? at $(( $(date +%s) - S )) s"; cat "$RES/probe.txt"
timeout 12 python3 -m pytest -q -x -p no:cacheprovider -n 8 -m gpu tests/gpu/test_ops_matmul_cluster_gpu.py \
  > "$RES/tests_cluster.txt" 2>&1
echo "cluster tests rc=$? at $(( $(date +%s) - S )) s"; tail -3 "$RES/tests_cluster.txt"
timeout $(( 39 - ($(date +%s) - S) )) python3 -m pytest -q -x -p no:cacheprovider -n 8 -m "not interpret" \
  tests/gpu/test_ops_matmul_gpu.py tests/gpu/test_ops_matmul_arrays_gpu.py \
  -k "realign or 3000-5000-1000 or unaligned or covers" > "$RES/tests_matmul.txt" 2>&1
echo "matmul tests rc=$? at $(( $(date +%s) - S )) s"; tail -3 "$RES/tests_matmul.txt"
