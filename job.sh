#!/bin/bash
# i16b job 3: the attention backward's GPU tests after the own-dQ TMA fix (float64 checks of tsjit.ops.attention_backward,
# its dQ variants, the autograd path), then timings vs torch SDPA backward (flash, cuDNN), interleaved
export TSJIT_ASSEMBLER=ptxas
timeout 18 python3 -m pytest -q -n 8 -p no:cacheprovider -m "not interpret" tests/gpu/test_attention_bwd_gpu.py 2>&1 | tail -12 | tee $RES/tests.txt
timeout 12 python3 benchmarks/attention_bwd_probe.py --cases 9 --budget 0 --time "4,2048,16,128 4,2048,16,128,c" --variants own 2>&1 | grep -v Warning | tee $RES/timing128.txt
timeout 8 python3 benchmarks/attention_bwd_probe.py --cases 9 --budget 0 --time "4,2048,16,64 4,2048,16,64,c" 2>&1 | grep -v Warning | tee $RES/timing64.txt
