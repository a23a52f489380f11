#!/bin/bash
# i16b job 1: the attention backward's first GPU numbers.
# 1) the kernel on device arrays (torch-free launch) vs float64; 2) tsjit.ops.attention_backward vs float64 autograd
# (guarded per case); 3) timing vs torch SDPA backward (flash, cuDNN) interleaved, dq_shared both ways
export TSJIT_ASSEMBLER=ptxas
timeout 13 python3 -m pytest -q -x -p no:cacheprovider -m gpu "tests/gpu/test_attention_bwd_arrays_gpu.py" -k "matches_float64 or preprocess" 2>&1 | tail -15 | tee $RES/arrays.txt
timeout 11 python3 benchmarks/attention_bwd_probe.py --budget 7 --cases 0,3,2,4,1,5,6,7,8 2>&1 | grep -v Warning | tee $RES/probe.txt
timeout 14 python3 benchmarks/attention_bwd_probe.py --cases 9 --budget 0 --time "4,2048,16,128 4,2048,16,128,c" --variants vred 2>&1 | grep -v Warning | tee $RES/timing.txt
