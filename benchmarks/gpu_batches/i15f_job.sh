#!/usr/bin/env bash
# Issue 15 (helper i15f), batch 1: the sliced split-K reducer against main's in one process, then the split-K GPU tests.
RES=${RES:-/tmp/i15f-res}; mkdir -p "$RES"; export PYTHONUNBUFFERED=1
S=$(date +%s)
(cd benchmarks && timeout 24 python3 gemm_splitk_probe.py --reps 15 --seconds 14 \
  --only 384x384x16384,512x512x8192,256x256x16384) > "$RES/probe.txt" 2>&1
echo "probe rc=$? at $(( $(date +%s) - S )) s"; cat "$RES/probe.txt"
timeout $(( 39 - ($(date +%s) - S) )) python3 -m pytest -x -q -p no:cacheprovider -m "not interpret" \
  tests/gpu/test_gemm_splitk_gpu.py > "$RES/tests.txt" 2>&1
echo "tests rc=$? at $(( $(date +%s) - S )) s"; tail -5 "$RES/tests.txt"
