#!/bin/bash
# i16b job 1: the backward's first GPU numbers: errors vs float64 autograd (guarded per case), then a timing against
# torch SDPA's backward (flash, cuDNN) interleaved
export TSJIT_ASSEMBLER=ptxas
timeout 39 python3 benchmarks/attention_bwd_probe.py --budget 14 --cases 0,3,2,4,1,5,6,7,8 --time "4,2048,16,128 4,2048,16,128,c" 2>&1 | grep -v Warning | tee $RES/probe.txt
