#!/usr/bin/env bash
# Issue 15 (helper i15v), job 2 (2026-12-03 ~09:45 batch): (1) benchmarks/gemm_stream_probe.py: the roof of reading B
# once, cuBLAS, main's configuration and the evict-first streamed ones on the 16 memory-bound small-M shapes, zero
# and read L2 flushes, interleaved in one process; (2) GPU numerics of the streamed configurations (float64,
# poisoned outputs, both B layouts, split-K bit-identical).  Runs from the tree root; RES: where results go.
RES=${RES:-/tmp/i15v-res}; mkdir -p "$RES"; export PYTHONUNBUFFERED=1
S=$(date +%s)
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader > "$RES/gpu.txt" 2>&1
(cd benchmarks && timeout 27 python3 gemm_stream_probe.py --workers 14 --reps 21 --seconds 22) > "$RES/stream.txt" 2>&1
echo "probe rc=$? at $(( $(date +%s) - S )) s"
cat "$RES/stream.txt"
timeout $(( 40 - ($(date +%s) - S) )) python3 -m pytest -x -q -p no:cacheprovider -n 8 -m gpu \
  tests/gpu/test_gemm_stream_gpu.py tests/gpu/test_ops_matmul_gpu.py -k "stream or 4096-4096 or split" \
  > "$RES/tests.txt" 2>&1
echo "tests rc=$? at $(( $(date +%s) - S )) s"
tail -25 "$RES/tests.txt"
