#!/usr/bin/env bash
# Issue 15 (helper i15f), batch 3 (2026-12-03 10:15, the last): GPU tests of the sliced split-K reducer, then the
# reducers against main's in one process (batch 2's probe died on a variant name with a comma in it).
RES=${RES:-/tmp/i15f-res}; mkdir -p "$RES"; export PYTHONUNBUFFERED=1
S=$(date +%s)
timeout 16 python3 -m pytest -x -q -p no:cacheprovider -m "not interpret" tests/gpu/test_gemm_splitk_gpu.py \
  tests/gpu/test_ops_matmul_gpu.py -k "split or covers or (matches_float64 and 384-384-16384)" > "$RES/tests.txt" 2>&1
echo "tests rc=$? at $(( $(date +%s) - S )) s"; tail -4 "$RES/tests.txt"
(cd benchmarks && timeout $(( 40 - ($(date +%s) - S) )) python3 gemm_splitk_reducer_probe.py --reps 15 --seconds 10 \
  --variants main,sliced --all-variants-at 384x384x16384 \
  --only 384x384x16384,512x512x8192,256x256x16384,512x512x32768) > "$RES/splitk.txt" 2>&1
echo "splitk probe rc=$? at $(( $(date +%s) - S )) s"; cat "$RES/splitk.txt"
