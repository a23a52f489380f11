#!/usr/bin/env bash
# Issue 15 (helper i15m), GPU job 3 (last batch, 13:40 UTC, main as landed): the 224-wide tile's GPU numerics test, then
# a second sample of job 1's probe (the heuristic now picks 128x224 at the Llama FFN shapes), <= 35 s.
RES=${RES:-/tmp/i15m-res}; mkdir -p "$RES"; export PYTHONUNBUFFERED=1
S=$(date +%s)
timeout 12 python3 -m pytest -q -x -p no:cacheprovider -m gpu tests/gpu/test_ops_matmul_arrays_gpu.py -k "224 or 192" \
  > "$RES/tests.txt" 2>&1
echo "tests rc=$? at $(( $(date +%s) - S )) s"; tail -3 "$RES/tests.txt"
cd benchmarks && timeout $(( 34 - ($(date +%s) - S) )) python3 gemm_mid_probe.py --table tiles --workers 15 --reps 15 \
  > "$RES/probe.txt" 2>&1
echo "probe rc=$? at $(( $(date +%s) - S )) s"; cat "$RES/probe.txt"
