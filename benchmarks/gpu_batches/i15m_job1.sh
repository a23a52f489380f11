#!/usr/bin/env bash
# Issue 15 (helper i15m), GPU job 1 (batch 12:20 UTC, 2026-12-03): the aligned sweep shapes below 1.0x with forced
# tiles (128x224: 14336 and 28672 are multiples of 224), ring depths, ping-pong, grouped orders, split-K 1-2, fp8
# rows; every variant checked (NaN + sampled float64 block), then timed round-robin with cuBLAS, L2 flushed.
RES=${RES:-/tmp/i15m-res}; mkdir -p "$RES"; export PYTHONUNBUFFERED=1
S=$(date +%s)
cd benchmarks && timeout $(( 39 - ($(date +%s) - S) )) python3 gemm_mid_probe.py --table tiles --workers 15 --reps 15 \
  > "$RES/probe.txt" 2>&1
echo "probe rc=$? at $(( $(date +%s) - S )) s"; cat "$RES/probe.txt"
