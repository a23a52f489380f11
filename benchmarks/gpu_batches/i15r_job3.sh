#!/usr/bin/env bash
# Issue 15 (helper i15r), GPU job 3 (2026-12-03, last batch ~13:30 UTC): other shapes with 2000-byte (and 4000-byte)
# rows where configs' new misaligned_choice takes the cluster_m2 tile: the tsjit.ops.matmul call against the old
# choices (the single-CTA tile as given, or with Y realigned) and torch.matmul, L2 flushed; then the GPU tests of the
# path once more on the rebased tree.
RES=${RES:-/tmp/i15r-res}; mkdir -p "$RES"; export PYTHONUNBUFFERED=1
S=$(date +%s)
(cd benchmarks && timeout 22 python3 gemm_misaligned_probe.py --reps 12 --workers 15 --shape 2048,2048,1000 \
  1024,4096,1000 8192,8192,1000 3000,5000,2000 3000,5000,1000 --variants matmul 128x256:S1/ 128x256:S1/y \
  128x256:cluster_m2:deep/ > "$RES/probe.txt" 2>&1)
echo "probe rc=$? at $(( $(date +%s) - S )) s"; cat "$RES/probe.txt"
timeout $(( 39 - ($(date +%s) - S) )) python3 -m pytest -q -x -p no:cacheprovider -n 8 -m "not interpret" \
  tests/gpu/test_ops_matmul_cluster_gpu.py tests/gpu/test_ops_matmul_gpu.py -k "misaligned or realign or 3000-5000-1000 or cluster" \
  > "$RES/tests.txt" 2>&1
echo "tests rc=$? at $(( $(date +%s) - S )) s"; tail -3 "$RES/tests.txt"
