#!/usr/bin/env bash
# Issue 15 (helper i15v), job 3 (2026-12-03 ~10:30 batch): (1) gemm_stream_probe.py --final: the heuristic with
# STREAM_MAX_READS = 2 against main's configuration (no policies) and the one-read rule, cuBLAS interleaved, the
# rows' order rotated every round, zero and read flushes; (2) GPU numerics of the streamed configurations and of
# tsjit.ops.matmul's small-M / split-K shapes.  Runs from the tree root; RES: where results go.
RES=${RES:-/tmp/i15v-res}; mkdir -p "$RES"; export PYTHONUNBUFFERED=1
S=$(date +%s)
(cd benchmarks && timeout 20 python3 gemm_stream_probe.py --final --workers 12 --reps 25 --seconds 16) > "$RES/final.txt" 2>&1
echo "probe rc=$? at $(( $(date +%s) - S )) s"
cat "$RES/final.txt"
timeout $(( 40 - ($(date +%s) - S) )) python3 -m pytest -x -q -p no:cacheprovider -n 8 -m gpu \
  tests/gpu/test_gemm_stream_gpu.py tests/gpu/test_ops_matmul_gpu.py -k "stream or 4096 or split or bmm" \
  > "$RES/tests.txt" 2>&1
echo "tests rc=$? at $(( $(date +%s) - S )) s"
grep -E "passed|failed|error|FAILED|ERROR" "$RES/tests.txt" | tail -15
