#!/usr/bin/env bash
# Issue 15 (helper i15r), GPU job 1 (batch 12:20 UTC, 2026-12-03): 3000x5000x1000 (2000-byte rows) with forced
# configurations -- 2-CTA clusters with multicast with and without the realigning copy, other tiles and tile
# orders, and the aligned references (rows given padded) -- against torch.matmul in one process, L2 flushed.
RES=${RES:-/tmp/i15r-res}; mkdir -p "$RES"; export PYTHONUNBUFFERED=1
S=$(date +%s)
cd benchmarks && timeout 39 python3 gemm_misaligned_probe.py --reps 15 --workers 15 > "$RES/probe.txt" 2>&1
echo "probe rc=$? at $(( $(date +%s) - S )) s"; cat "$RES/probe.txt"
