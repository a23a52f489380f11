#!/usr/bin/env bash
# Issue 15 (helper i15m), GPU job 2: gemm.py's own method (torch.matmul / tsjit.ops.matmul pairs, L2 flushed, medians of
# 20, every result checked first) on the shapes whose heuristic choice changed to 128x224 and neighbours that must not
# regress; 2048^3 first and again after the sweep's two predecessors (3000x5000x1000, 127x255x64): does the position
# in the sweep move it?
RES=${RES:-/tmp/i15m-res}; mkdir -p "$RES"; export PYTHONUNBUFFERED=1
S=$(date +%s)
cd benchmarks && timeout $(( 39 - ($(date +%s) - S) )) python3 gemm.py --warm-workers 14 --reps 20 \
  --shapes 2048,2048,2048 128,28672,4096 256,28672,4096 512,28672,4096 1024,28672,4096 256,14336,4096 \
           512,14336,4096 1024,14336,4096 2048,14336,4096 2048,4096,4096 4096,4096,4096 3000,5000,1000 127,255,64 \
           2048,2048,2048 \
  --fp8-shapes 1024,14336,4096 4096,4096,4096 16,4096,4096 > "$RES/gemm.txt" 2>&1
echo "gemm.py rc=$? at $(( $(date +%s) - S )) s"; cat "$RES/gemm.txt"
