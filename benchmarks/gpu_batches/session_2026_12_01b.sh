#!/usr/bin/env bash
# Coordinator's GPU batch of the second 2026-12-01 session (two run calls, back to back).
#   bash benchmarks/gpu_batches/session_2026_12_01b.sh tests   # every *_gpu.py file, each in its own process
#   bash benchmarks/gpu_batches/session_2026_12_01b.sh bench   # core, gemm sweep, attention, groups
# Logs go to $OUT (default /tmp/tsjit-gpu-batch).  A sticky CUDA error poisons a process, so every
# test file runs alone (two lanes: attention with xdist workers, the rest one after another).  The
# [interpret] variants are CPU tests (CI runs them) and are deselected here.
set -uo pipefail
OUT=${OUT:-/tmp/tsjit-gpu-batch}; mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TSJIT_CACHE_DIR=/tmp/tsjit-cache
T0=$(date +%s)
one() {  # one test file in its own process: prints "<file>: <pytest summary> (<s> s)"
  local f=$1; shift; local s=$(date +%s) name=$(echo "$1" | tr '/' '_')
  local r=$(timeout ${LIMIT:-200} python3 -m pytest -q -p no:cacheprovider --timeout=150 -m "not interpret" "$@" 2>&1 \
            | tee "$OUT/$f.log" | tail -1)
  echo "$f: $r ($(( $(date +%s) - s )) s)"
}
if [ "${1:-tests}" = tests ]; then
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
  ( LIMIT=330 one attention tests/gpu/test_attention_gpu.py -n 6 > "$OUT/lane_attention.txt" ) &
  ( timeout 400 python3 benchmarks/gpu_batches/run_notebook_cells.py tutorials/0[5-9]_*.ipynb tutorials/1[0-2]_*.ipynb \
      tutorials/30_*.ipynb > "$OUT/notebooks.log" 2>&1 ) &
  for f in $(find tests -name "*_gpu.py" -not -name "test_attention_gpu.py" | sort); do
    extra=""; case "$f" in *debug_hangs*) extra="-s";; *ops_matmul*|*fp8*) extra="-n 4";;
      *groups*) extra="--timeout=40";; esac   # first GPU run of the group programs: a hang costs 40 s, not 150
    one "$(basename $f .py)" "$f" $extra
  done
  for f in tests/ts/lowering/test_cta_leader.py tests/ts/lowering/test_split_producers.py; do  # gpu-marked tests
    one "$(basename $f .py)" "$f" -m gpu                                                   # outside *_gpu.py
  done
  wait; cat "$OUT/lane_attention.txt"
  python3 -m pytest -q -p no:cacheprovider tests/ts/lowering/test_attention_compile.py -k sass 2>&1 | tail -1
  echo "== notebooks (code cells as scripts)"; cat "$OUT/notebooks.log"
  grep -hE "s to the message" "$OUT"/*debug_hangs*.log 2>/dev/null | head -6
  echo "tests total $(( $(date +%s) - T0 )) s"
else   # a short bench phase (the full sweeps ran earlier this session, see BENCHMARKS.md)
  echo "== core"; timeout 90 python3 benchmarks/core.py 2>&1 | tee "$OUT/core.log" | tail -16
  echo "== attention --quick"; timeout 70 python3 benchmarks/attention.py --quick 2>&1 | tee "$OUT/attention.log" | tail -14
  echo "== groups --quick"; timeout 60 python3 benchmarks/groups.py --quick 2>&1 | tee "$OUT/groups.log" | tail -10
  echo "bench total $(( $(date +%s) - T0 )) s"
fi
