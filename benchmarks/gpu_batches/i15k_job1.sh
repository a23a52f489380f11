#!/usr/bin/env bash
# Issue 15 (helper i15k), GPU job 1 (batch 09:40 UTC, 2026-12-03): (1) the tutorial GEMM vs the library vs torch at
# 4096^3 with gemm.py's method (L2 flush, one call) and timing.py's (5 calls, no flush); (2) forced single-CTA and
# 2-CTA cluster configurations of tsjit.ops.matmul at the mid/large shapes of the sweep, against torch.matmul.
RES=${RES:-/tmp/i15k-res}; mkdir -p "$RES"; export PYTHONUNBUFFERED=1
S=$(date +%s)
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv,noheader
timeout 38 python3 benchmarks/gemm_cluster_lib_probe.py --reps 12 --workers 15 --method 4096,4096,4096 \
  --shapes 512,28672,4096 1024,14336,4096 2048,2048,2048 128,4096,4096 512,4096,4096 256,14336,4096 \
  2048,4096,4096 4096,28672,4096 8192,14336,4096 > "$RES/probe.txt" 2>&1
echo "probe rc=$? at $(( $(date +%s) - S )) s"; cat "$RES/probe.txt"
