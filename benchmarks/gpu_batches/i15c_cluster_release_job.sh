#!/usr/bin/env bash
# Issue 15 (helper i15c), the one GPU job of 2026-12-02 18:50: (1) the tutorial GEMM's 2-CTA clusters with the new
# consumer release (CTA-scope) against the old one (.release.cluster) and single CTAs and torch, interleaved in one
# process; (2) the GPU numerics tests of the cluster pipelines the change touches (pytest -x -v).
# Runs from the tree root; RES: where results go.
RES=${RES:-/tmp/i15c-res}; mkdir -p "$RES"; export PYTHONUNBUFFERED=1
S=$(date +%s)
TSJIT_DISABLE_CACHE=1 timeout 18 python3 benchmarks/gemm_cluster_probe.py --no-spin --reps 10 --sms 132 --ab cluster \
  --shapes 4096,4096,4096 256,4096,4096,128 8192,8192,4096 2048,2048,2048 > "$RES/ab.txt" 2>&1
echo "probe rc=$? at $(( $(date +%s) - S )) s"; cat "$RES/ab.txt"
G=tests/gpu/test_gemm_ts_gpu.py
timeout $(( 39 - ($(date +%s) - S) )) python3 -m pytest -x -v -p no:cacheprovider -m gpu \
  "$G::test_ts_gemm_matches_numpy[gpu-128-128-128-2]" "$G::test_ts_gemm_matches_numpy[gpu-257-511-136-2]" \
  "$G::test_ts_gemm_matches_numpy[gpu-1000-1000-1000-2]" "$G::test_ts_gemm_matches_numpy[gpu-64-300-64-2]" \
  "$G::test_ts_gemm_with_b_as_k_by_n[gpu-257-512-136-2]" "$G::test_ts_gemm_matches_numpy[gpu-4096-4096-4096-2]" \
  tests/ts/lowering/test_cluster_release_gpu.py tests/ts/lowering/test_cta_leader.py \
  "$G::test_ts_gemm_matches_numpy[gpu-8192-8192-1024-2]" "$G::test_ts_gemm_with_b_as_k_by_n[gpu-1000-1000-1000-2]" \
  tests/gpu/test_bw_splitk_sm90_gpu.py > "$RES/tests.txt" 2>&1
echo "tests rc=$? at $(( $(date +%s) - S )) s"
grep -E "PASSED|FAILED|ERROR|passed|failed|error" "$RES/tests.txt" | sed 's/^tests\///' | cut -c1-150 | tail -45
