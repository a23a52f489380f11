#!/usr/bin/env bash
# Coordinator's final GPU batch: every GPU test file in its own process, then the benchmarks.
set -uo pipefail
OUT=${OUT:-/tmp/tsjit-gpu-batch}; mkdir -p "$OUT"   # logs land here
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TSJIT_CACHE_DIR=/tmp/tsjit-cache
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
T0=$(date +%s)
for f in abi_launch basic device_layer gemm_plain gemm_ts ts_copy ts_pipelines tma_ranks attention ops_matmul; do
  s=$(date +%s)
  r=$(timeout 150 python3 -m pytest -q -p no:cacheprovider --timeout=120 tests/gpu/test_${f}_gpu.py 2>&1 | tee $OUT/t_$f.log | tail -1)
  echo "tests/gpu/test_${f}_gpu.py: $r ($(( $(date +%s) - s )) s)"
done 2>&1 | tee $OUT/summary.txt
others=$(find tests -name "*_gpu.py" -not -path "tests/gpu/*" | tr '\n' ' ')
echo "others: $others"; timeout 120 python3 -m pytest -q -p no:cacheprovider --timeout=60 $others 2>&1 | tee $OUT/t_others.log | tail -1
echo "== debug hangs"
timeout 120 python3 -m pytest -q -p no:cacheprovider -s tests/gpu/test_debug_hangs_gpu.py 2>&1 > $OUT/debug_hangs.log; tail -1 $OUT/debug_hangs.log
grep -E "^\[|s to the message|hung \(TSJIT_DEBUG" $OUT/debug_hangs.log | head -12
echo "tests total $(( $(date +%s) - T0 )) s"
echo "== gemm sweep"; timeout 170 python3 benchmarks/gemm.py --max-seconds 140 2>&1 | tee $OUT/gemm.log | tail -70
echo "== attention"; timeout 110 python3 benchmarks/attention.py --variants 2>&1 | tee $OUT/attention.log | tail -25
echo "== core"; timeout 60 python3 benchmarks/core.py 2>&1 | tee $OUT/core.log | tail -16
echo "all $(( $(date +%s) - T0 )) s"
