#!/usr/bin/env bash
# Coordinator's benchmark batch of the seventh session (2026-12-02): each benchmark against its baseline in one
# process (interleaved timings, CUDA events, medians, results checked first), one after the other, never alongside
# the tests.  TESTS=1 runs every GPU test file first (session_2026_12_01c.sh: own process each, three lanes).
#   bash benchmarks/gpu_batches/session_2026_12_02.sh        # logs in $OUT (default /tmp/tsjit-gpu-batch)
set -uo pipefail
OUT=${OUT:-/tmp/tsjit-gpu-batch}; mkdir -p "$OUT"; export OUT
T0=$(date +%s)
python3 -m compileall -q tsjit tests benchmarks > /dev/null 2>&1   # the copied tree carries no bytecode
[ "${TESTS:-0}" = 1 ] && bash benchmarks/gpu_batches/session_2026_12_01c.sh
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TSJIT_CACHE_DIR=/tmp/tsjit-cache
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv,noheader
bench() { local name=$1 t=$2; shift 2; echo "== bench $name"; timeout $t python3 "$@" 2>&1 | grep -v Warning | tee "$OUT/bench_$name.log" | tail -25; }
bench groups 40 benchmarks/groups.py --quick
bench attention 50 benchmarks/attention.py --quick
bench attention_fp8 50 benchmarks/attention.py --fp8 --quick
echo "== bench gemm (53-shape bf16 sweep)"; (cd benchmarks && timeout 80 python3 gemm.py --warm-workers 14 --reps 20 --no-fp8 2>&1 | grep -v Warning | tee "$OUT/bench_gemm.log" | tail -62)
echo "== bench gemm fp8"; (cd benchmarks && timeout 40 python3 gemm.py --warm-workers 14 --reps 20 --fp8-only 2>&1 | grep -v Warning | tee "$OUT/bench_gemm_fp8.log" | tail -12)
bench first_calls 60 benchmarks/first_calls.py --runs 2
echo "all total $(( $(date +%s) - T0 )) s"
