#!/usr/bin/env bash
# Issue 15 (helper i15v), job 1 (2026-12-03 09:40 batch): the roof of reading B once and tsjit / cuBLAS on the 16
# memory-bound small-M shapes, with the L2 eviction priorities of the TMA loads, under the benchmark's zero flush
# and a read flush (benchmarks/gemm_stream_probe.py).  Runs from the tree root; RES: where results go.
RES=${RES:-/tmp/i15v-res}; mkdir -p "$RES"; export PYTHONUNBUFFERED=1
S=$(date +%s)
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader > "$RES/gpu.txt" 2>&1
(cd benchmarks && timeout 38 python3 gemm_stream_probe.py --workers 14 --reps 21 --seconds 30) > "$RES/stream.txt" 2>&1
echo "probe rc=$? at $(( $(date +%s) - S )) s"
cat "$RES/stream.txt"
