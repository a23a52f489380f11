#!/usr/bin/env bash
# Issue 15 sweep on the H200 (one run call): the fp8 and ops.matmul GPU tests in two processes while
# worker processes compile every sweep shape's kernel; then, the GPU free, the timed sweep + fp8 table.
set -uo pipefail
OUT=${OUT:-/tmp/tsjit-i15}; mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TSJIT_CACHE_DIR=/tmp/tsjit-cache
rm -f /tmp/i15_tests_done
T0=$(date +%s)
( timeout 120 python3 -m pytest -q -p no:cacheprovider --timeout=100 -rfE tests/gpu/test_gemm_fp8_gpu.py tests/gpu/test_gemm_ts_gpu.py tests/gpu/test_gemm_autotune_gpu.py > $OUT/t_fp8.log 2>&1; echo "fp8 tests $(( $(date +%s) - T0 )) s" >> $OUT/t_fp8.log ) &
P1=$!
( timeout 120 python3 -m pytest -q -p no:cacheprovider --timeout=100 -rfE tests/gpu/test_ops_matmul_gpu.py > $OUT/t_ops.log 2>&1; echo "ops tests $(( $(date +%s) - T0 )) s" >> $OUT/t_ops.log ) &
P2=$!
( timeout 100 python3 -m pytest -q -p no:cacheprovider -rfE tests/test_tutorials.py -k 07 > $OUT/t_notebook.log 2>&1 ) &
P3=$!
( while kill -0 $P3 2>/dev/null || kill -0 $P1 2>/dev/null || kill -0 $P2 2>/dev/null; do sleep 0.5; done; touch /tmp/i15_tests_done ) &
timeout ${SWEEP_TIMEOUT:-130} python3 benchmarks/gemm.py --warm-workers ${WORKERS:-12} --wait-for /tmp/i15_tests_done --reps 20 > $OUT/gemm.log 2>&1
echo "sweep rc $? at $(( $(date +%s) - T0 )) s"
wait
# the quick shapes again with TSJIT_AUTOTUNE=1 (each shape's first call measures the model's best four)
TSJIT_AUTOTUNE=1 timeout ${AUTOTUNE_TIMEOUT:-55} python3 benchmarks/gemm.py --quick --no-fp8 --reps 20 > $OUT/gemm_autotune.log 2>&1
echo "autotuned quick sweep rc $? at $(( $(date +%s) - T0 )) s"
cp /tmp/tsjit-cache/tsjit-autotune-gemm.json $OUT/ 2>/dev/null
tail -n 4 $OUT/t_fp8.log; tail -n 4 $OUT/t_ops.log; tail -n 3 $OUT/t_notebook.log
cat $OUT/gemm.log | grep -v "^$" | tail -n 75
echo "== TSJIT_AUTOTUNE=1 quick"; grep -v "^$" $OUT/gemm_autotune.log | tail -n 12
