#!/bin/bash
# i16b job 2: the attention backward's GPU tests (float64 checks of tsjit.ops.attention_backward, its dQ variants,
# the autograd path, the torch-free launch), then timings vs torch SDPA backward (flash, cuDNN), interleaved
export TSJIT_ASSEMBLER=ptxas
timeout 21 python3 -m pytest -q -n 8 -p no:cacheprovider -m "not interpret" tests/gpu/test_attention_bwd_gpu.py tests/gpu/test_attention_bwd_arrays_gpu.py 2>&1 | tail -25 | tee $RES/tests.txt
timeout 10 python3 benchmarks/attention_bwd_probe.py --cases 9 --budget 0 --time "4,2048,16,128 4,2048,16,128,c" --variants s3,own 2>&1 | grep -v Warning | tee $RES/timing128.txt
timeout 8 python3 benchmarks/attention_bwd_probe.py --cases 9 --budget 0 --time "4,2048,16,64 4,2048,16,64,c" --variants kv2 2>&1 | grep -v Warning | tee $RES/timing64.txt
