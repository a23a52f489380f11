#!/usr/bin/env bash
# Issue 15 (helper i15f), batch 2 (2026-12-03 ~09:45): the sliced split-K reducer (polling by atomics now: batch 1's
# volatile loads were hoisted out of the wait loop, so every split waited out its 10 us) against main's in one
# process; copy geometries for 3000 x 5000 x 1000's realigning copy; split-K GPU tests.
RES=${RES:-/tmp/i15f-res}; mkdir -p "$RES"; export PYTHONUNBUFFERED=1
S=$(date +%s)
(cd benchmarks && timeout 17 python3 gemm_splitk_probe.py --reps 15 --seconds 12 \
  --only 384x384x16384,512x512x8192,256x256x16384,512x512x32768) > "$RES/splitk.txt" 2>&1
echo "splitk probe rc=$? at $(( $(date +%s) - S )) s"; cat "$RES/splitk.txt"
timeout 11 python3 -m pytest -x -q -p no:cacheprovider -m "not interpret" tests/gpu/test_gemm_splitk_gpu.py \
  tests/gpu/test_ops_matmul_gpu.py -k "split or 384-384-16384 or 512-512-8192 or covers" > "$RES/tests.txt" 2>&1
echo "tests rc=$? at $(( $(date +%s) - S )) s"; tail -4 "$RES/tests.txt"
(cd benchmarks && timeout $(( 40 - ($(date +%s) - S) )) python3 gemm_realign_probe.py --reps 15) > "$RES/realign.txt" 2>&1
echo "realign probe rc=$? at $(( $(date +%s) - S )) s"; cat "$RES/realign.txt"
