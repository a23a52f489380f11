#!/bin/bash
# i16b job 1: the backward's first numbers (errors vs float64 autograd; guarded per case)
export TSJIT_ASSEMBLER=ptxas
timeout 38 python3 benchmarks/attention_bwd_probe.py --budget 26 --cases 0,1,3,2,4,5,6,7,8 2>&1 | tee $RES/probe.txt
