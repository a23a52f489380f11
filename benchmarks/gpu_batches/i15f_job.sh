#!/usr/bin/env bash
# Issue 15 (helper i15f), batch 4 (2026-12-03 10:30, the last): the landed tree (the sliced split-K reducer on main
# with the 2-CTA clusters): split-K GPU tests, then main's reducer against it at the sweep's other split-K shapes.
RES=${RES:-/tmp/i15f-res}; mkdir -p "$RES"; export PYTHONUNBUFFERED=1
S=$(date +%s)
timeout 17 python3 -m pytest -x -q -p no:cacheprovider -m "not interpret" tests/gpu/test_gemm_splitk_gpu.py \
  tests/gpu/test_ops_matmul_gpu.py -k "split or covers or (matches_float64 and 384-384-16384)" > "$RES/tests.txt" 2>&1
echo "tests rc=$? at $(( $(date +%s) - S )) s"; tail -4 "$RES/tests.txt"
(cd benchmarks && timeout $(( 40 - ($(date +%s) - S) )) python3 gemm_splitk_reducer_probe.py --reps 15 --seconds 12 \
  --variants main,sliced --only 256x4096x14336,128x4096x14336,64x4096x14336,16x4096x14336,1x4096x14336) \
  > "$RES/splitk.txt" 2>&1
echo "splitk probe rc=$? at $(( $(date +%s) - S )) s"; cat "$RES/splitk.txt"
