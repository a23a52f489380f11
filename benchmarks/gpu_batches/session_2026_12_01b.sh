#!/usr/bin/env bash
# Coordinator's GPU batch of the second 2026-12-01 session.
#   bash benchmarks/gpu_batches/session_2026_12_01b.sh tests   # every *_gpu.py file, each in its own process
#   bash benchmarks/gpu_batches/session_2026_12_01b.sh bench   # gemm sweep, attention, core, groups timing
# Logs go to $OUT (default /tmp/tsjit-gpu-batch).  A sticky CUDA error poisons a process, so
# every test file runs alone; the summary line of each is printed with its wall time.  The
# [interpret] variants are CPU tests (CI runs them) and are deselected here.
set -uo pipefail
OUT=${OUT:-/tmp/tsjit-gpu-batch}; mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TSJIT_CACHE_DIR=/tmp/tsjit-cache
T0=$(date +%s)
phase=${1:-tests}
if [ "$phase" = tests ]; then
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
  git log --oneline -1 2>/dev/null || true
  for f in $(find tests -name "*_gpu.py" | sort); do
    s=$(date +%s); name=$(echo "$f" | tr '/' '_')
    extra=""; case "$f" in *debug_hangs*) extra="-s";; esac
    r=$(timeout 170 python3 -m pytest -q -p no:cacheprovider --timeout=150 -m "not interpret" $extra "$f" 2>&1 | tee "$OUT/$name.log" | tail -1)
    echo "$f: $r ($(( $(date +%s) - s )) s)"
  done 2>&1 | tee "$OUT/summary.txt"
  grep -hE "s to the message|hung \(TSJIT_DEBUG" "$OUT"/*debug_hangs*.log 2>/dev/null | head -8
  echo "tests total $(( $(date +%s) - T0 )) s"
else
  echo "== core"; timeout 100 python3 benchmarks/core.py 2>&1 | tee "$OUT/core.log" | tail -16
  echo "== gemm sweep"; timeout 200 python3 benchmarks/gemm.py --max-seconds 170 2>&1 | tee "$OUT/gemm.log" | tail -60
  echo "== attention"; timeout 150 python3 benchmarks/attention.py 2>&1 | tee "$OUT/attention.log" | tail -30
  for b in benchmarks/groups.py benchmarks/fp8_gemm.py; do
    [ -f "$b" ] && { echo "== $b"; timeout 90 python3 "$b" 2>&1 | tee "$OUT/$(basename $b).log" | tail -20; }
  done
  echo "bench total $(( $(date +%s) - T0 )) s"
fi
