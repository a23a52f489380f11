#!/usr/bin/env bash
# Coordinator's final GPU run of the fifth 2026-12-01 session: everything session_2026_12_01d.sh runs
# (every GPU test file in its own process, the tutorials' code cells, the groups / attention / 53-shape
# GEMM / fp8 GEMM / first-call benchmarks), then the fp8 attention forward against our bf16 and cuDNN.
#   bash benchmarks/gpu_batches/session_2026_12_01e.sh        # logs in $OUT (default /tmp/tsjit-gpu-batch)
set -uo pipefail
OUT=${OUT:-/tmp/tsjit-gpu-batch}; mkdir -p "$OUT"; export OUT
bash benchmarks/gpu_batches/session_2026_12_01d.sh
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TSJIT_CACHE_DIR=/tmp/tsjit-cache
echo "== bench attention fp8"
timeout 50 python3 benchmarks/attention.py --fp8 --quick 2>&1 | grep -v Warning | tee "$OUT/bench_attention_fp8.log" | tail -12
