#!/usr/bin/env bash
# Issue 15 (helper i15v), job 4 (2026-12-03 10:30 batch, the last): (1) gemm_stream_probe.py --reads: B evict-first
# where 4-8 tile rows read it (M = 384-1024) against the heuristic (no policy there), cuBLAS interleaved, rotated
# order, zero and read flushes; (2) the streamed configurations' GPU numerics again.  RES: where results go.
RES=${RES:-/tmp/i15v-res}; mkdir -p "$RES"; export PYTHONUNBUFFERED=1
S=$(date +%s)
(cd benchmarks && timeout 24 python3 gemm_stream_probe.py --reads --workers 12 --reps 21 --seconds 20) > "$RES/reads.txt" 2>&1
echo "probe rc=$? at $(( $(date +%s) - S )) s"
cat "$RES/reads.txt"
timeout $(( 40 - ($(date +%s) - S) )) python3 -m pytest -x -q -p no:cacheprovider -n 8 -m gpu \
  tests/gpu/test_gemm_stream_gpu.py > "$RES/tests.txt" 2>&1
echo "tests rc=$? at $(( $(date +%s) - S )) s"
grep -E "passed|failed|error|FAILED|ERROR" "$RES/tests.txt" | tail -15
