"""The one timing helper of the benchmark scripts: CUDA events around ``inner`` back-to-back calls,
after warm-up, median over ``reps`` repetitions (milliseconds per call)."""
from __future__ import annotations

import statistics


def event_time_ms(fn, reps: int = 15, inner: int = 5, warmup: int = 3) -> float:
    import torch
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(inner):
            fn()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) / inner)
    return statistics.median(samples)
