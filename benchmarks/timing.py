"""The one timing helper of the benchmark scripts: CUDA events around ``inner`` back-to-back calls,
after warm-up, median over ``reps`` repetitions (milliseconds per call)."""
from __future__ import annotations

import statistics


def event_time_ms(fn, reps: int = 15, inner: int = 5, warmup: int = 3) -> float:
    return interleaved_time_ms({"fn": fn}, reps=reps, inner=inner, warmup=warmup)["fn"]


def interleaved_time_ms(fns: dict, reps: int = 10, inner: int = 5, warmup: int = 2, prime: bool = False) -> dict:
    """``{name: median ms per call}`` for several callables timed in turns (one repetition of each, then the
    next round), so clock drift affects all of them alike.  ``prime``: one untimed call before each timed
    repetition, so no callable pays for the caches the previous one left behind (its position in the round)."""
    import torch
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    torch.cuda.synchronize()
    samples = {name: [] for name in fns}
    for _ in range(reps):
        for name, fn in fns.items():
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            if prime:
                fn()
            start.record()
            for _ in range(inner):
                fn()
            end.record()
            end.synchronize()
            samples[name].append(start.elapsed_time(end) / inner)
    return {name: statistics.median(values) for name, values in samples.items()}
