#!/usr/bin/env bash
# Issue 15 (helper i15f), batch 1 (2026-12-03 09:40): the sliced split-K reducer against main's in one process,
# the realigning copy of 3000 x 5000 x 1000 with streaming loads, then the split-K GPU tests.
RES=${RES:-/tmp/i15f-res}; mkdir -p "$RES"; export PYTHONUNBUFFERED=1
S=$(date +%s)
(cd benchmarks && timeout 15 python3 gemm_splitk_probe.py --reps 15 --seconds 6 --variants "main,sliced" \
  --only 384x384x16384,512x512x8192,256x256x16384) > "$RES/splitk.txt" 2>&1
echo "splitk probe rc=$? at $(( $(date +%s) - S )) s"; cat "$RES/splitk.txt"
(cd benchmarks && timeout 11 python3 gemm_realign_probe.py --reps 15) > "$RES/realign.txt" 2>&1
echo "realign probe rc=$? at $(( $(date +%s) - S )) s"; cat "$RES/realign.txt"
timeout $(( 40 - ($(date +%s) - S) )) python3 -m pytest -x -v -p no:cacheprovider -m "not interpret" \
  tests/gpu/test_gemm_splitk_gpu.py > "$RES/tests.txt" 2>&1
echo "tests rc=$? at $(( $(date +%s) - S )) s"; grep -E "PASSED|FAILED|ERROR|passed|failed" "$RES/tests.txt" | cut -c1-160 | tail -14
