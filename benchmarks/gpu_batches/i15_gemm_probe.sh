#!/usr/bin/env bash
# Issue 15 probe on the H200 (one run call): the fp8 and ops.matmul GPU tests in two processes while
# worker processes compile and check the forced configurations; then, the GPU free, the timings.
set -uo pipefail
OUT=${OUT:-/tmp/tsjit-i15}; mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TSJIT_CACHE_DIR=/tmp/tsjit-cache
rm -f /tmp/i15_tests_done
T0=$(date +%s)
( timeout 140 python3 -m pytest -q -p no:cacheprovider --timeout=100 -rfE tests/gpu/test_gemm_fp8_gpu.py > $OUT/t_fp8.log 2>&1; echo "fp8 tests $(( $(date +%s) - T0 )) s" >> $OUT/t_fp8.log ) &
P1=$!
( timeout 140 python3 -m pytest -q -p no:cacheprovider --timeout=100 -rfE tests/gpu/test_ops_matmul_gpu.py > $OUT/t_ops.log 2>&1; echo "ops tests $(( $(date +%s) - T0 )) s" >> $OUT/t_ops.log ) &
P2=$!
( wait $P1 $P2 2>/dev/null; while kill -0 $P1 2>/dev/null || kill -0 $P2 2>/dev/null; do sleep 0.5; done; touch /tmp/i15_tests_done ) &
timeout 185 python3 benchmarks/gemm_configs_probe.py --workers ${WORKERS:-10} --reps 15 --wait-for /tmp/i15_tests_done > $OUT/probe.log 2>&1
echo "probe rc $? at $(( $(date +%s) - T0 )) s"
wait
tail -3 $OUT/t_fp8.log $OUT/t_ops.log
grep -E "^host|^\||compiled|timing from|done in" $OUT/probe.log | head -100
grep -E "FAILED" $OUT/probe.log | head
