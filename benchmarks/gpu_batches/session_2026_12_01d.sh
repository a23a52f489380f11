#!/usr/bin/env bash
# Coordinator's final GPU run of the fourth 2026-12-01 session: the GPU tests and tutorials as in
# session_2026_12_01c.sh (every GPU test file in its own process, three lanes), then the benchmarks.
#   bash benchmarks/gpu_batches/session_2026_12_01d.sh        # logs in $OUT (default /tmp/tsjit-gpu-batch)
set -uo pipefail
OUT=${OUT:-/tmp/tsjit-gpu-batch}; mkdir -p "$OUT"; export OUT
T0=$(date +%s)
python3 -m compileall -q tsjit tests benchmarks > /dev/null 2>&1   # the copied tree carries no bytecode
bash benchmarks/gpu_batches/session_2026_12_01c.sh
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TSJIT_CACHE_DIR=/tmp/tsjit-cache
# Quick benchmarks after the tests (never alongside them), each timed against its baseline in one process.
bench() { local name=$1 t=$2; shift 2; echo "== bench $name"; timeout $t python3 "$@" 2>&1 | grep -v Warning | tee "$OUT/bench_$name.log" | tail -25; }
bench groups 40 benchmarks/groups.py --quick
bench attention 50 benchmarks/attention.py --quick
echo "== bench gemm (53-shape bf16 sweep)"; (cd benchmarks && timeout 75 python3 gemm.py --warm-workers 14 --reps 20 --no-fp8 2>&1 | grep -v Warning | tee "$OUT/bench_gemm.log" | tail -60)
echo "== bench gemm fp8"; (cd benchmarks && timeout 40 python3 gemm.py --warm-workers 14 --reps 20 --fp8-only 2>&1 | grep -v Warning | tee "$OUT/bench_gemm_fp8.log" | tail -12)
bench first_calls 60 benchmarks/first_calls.py --runs 2
echo "all total $(( $(date +%s) - T0 )) s"
