"""Where the TS GEMM's time goes: the same launches with and without the epilogue, several stage counts
and group sizes (CUDA events, medians).  PYTHONPATH=. python benchmarks/gemm_probe.py"""

import torch

from tsjit.examples import gemm
from timing import event_time_ms  # benchmarks/timing.py




stream = torch.cuda.current_stream().cuda_stream
for M, N, K in ((4096, 4096, 4096), (8192, 8192, 1024), (2048, 2048, 2048)):
    a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(N, K, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
    flops = 2.0 * M * N * K
    for stages, group_m, epi in ((4, 8, "tma"), (4, 8, "direct"), (4, 8, "none"), (3, 8, "tma")):
        t = event_time_ms(gemm.gemm_launcher(a, b, c, stages=stages, group_m=group_m, epilogue=epi, stream=stream))
        print(f"{M}x{N}x{K} stages={stages} group_m={group_m} epilogue={epi}: {t * 1e3:.1f} us, {flops / t / 1e9:.0f} TFLOP/s")
