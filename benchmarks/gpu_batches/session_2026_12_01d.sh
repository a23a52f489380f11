#!/usr/bin/env bash
# Coordinator's final GPU run of the fourth 2026-12-01 session: every GPU test of the tree, each file in
# its own process (a sticky CUDA error poisons a process), three lanes at once, plus the tutorials' code
# cells.  The [interpret] variants are CPU tests (CI runs them) and are deselected.
#   bash benchmarks/gpu_batches/session_2026_12_01d.sh        # logs in $OUT (default /tmp/tsjit-gpu-batch)
set -uo pipefail
OUT=${OUT:-/tmp/tsjit-gpu-batch}; mkdir -p "$OUT/logs"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TSJIT_CACHE_DIR=/tmp/tsjit-cache OUT
T0=$(date +%s)
python3 -m compileall -q tsjit tests benchmarks > /dev/null 2>&1   # the copied tree carries no bytecode
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
one() {  # one test file in its own process: prints "<file>: <pytest summary> (<s> s)"
  local f=$1 s=$(date +%s) name=$(basename $1 .py) extra="" mark="not interpret"
  case "$f" in *_gpu.py) ;; *) mark="gpu and not interpret";; esac
  case "$f" in *attention_gpu*) extra="-n 6";; *debug_hangs*) extra="-s";; *ops_matmul*|*fp8*|*pingpong*) extra="-n 4";; esac
  local r=$(timeout 300 python3 -m pytest -q -p no:cacheprovider --timeout=150 -m "$mark" $extra "$f" 2>&1 \
            | tee "$OUT/logs/$name.log" | tail -1)
  echo "$name: $r ($(( $(date +%s) - s )) s)"
}
export -f one
( timeout 300 python3 benchmarks/gpu_batches/run_notebook_cells.py tutorials/0[5-9]_*.ipynb tutorials/1[0-2]_*.ipynb \
    tutorials/30_*.ipynb > "$OUT/notebooks.log" 2>&1 ) &
{ find tests -name "test_attention_gpu.py"; find tests -name "*_gpu.py" -not -name "test_attention_gpu.py" | sort;
  grep -rlE "mark\.gpu\b|gpu_or_interpret" tests --include="test_*.py" | grep -v "_gpu\.py$" | sort; } \
  | xargs -P 3 -I{} bash -c 'one {}' | tee "$OUT/summary.txt"
wait
echo "== notebooks (code cells as scripts)"; tail -20 "$OUT/notebooks.log"
echo "tests total $(( $(date +%s) - T0 )) s"
# Quick benchmarks after the tests (never alongside them), each timed against its baseline in one process.
bench() { local name=$1 t=$2; shift 2; echo "== bench $name"; timeout $t python3 "$@" 2>&1 | grep -v Warning | tee "$OUT/bench_$name.log" | tail -25; }
bench groups 40 benchmarks/groups.py --quick
bench attention 50 benchmarks/attention.py --quick
echo "== bench gemm (53-shape bf16 sweep)"; (cd benchmarks && timeout 75 python3 gemm.py --warm-workers 14 --reps 20 --no-fp8 2>&1 | grep -v Warning | tee "$OUT/bench_gemm.log" | tail -60)
echo "== bench gemm fp8"; (cd benchmarks && timeout 40 python3 gemm.py --warm-workers 14 --reps 20 --fp8-only 2>&1 | grep -v Warning | tee "$OUT/bench_gemm_fp8.log" | tail -12)
bench first_calls 60 benchmarks/first_calls.py --runs 2
echo "all total $(( $(date +%s) - T0 )) s"
