"""TS pipeline benchmarks (issue 4): the TMA copy (TMA load -> shared-memory ring -> TMA store, one load
warp and one store warp per CTA) vs torch's device copy, 64 MiB to 4 GiB, fp32 matrices of 8192 columns.
CUDA events, warm-up, median of repetitions; the best of a few (box, stages, CTAs per SM) per size.

    PYTHONPATH=. python benchmarks/pipelines.py
"""
from __future__ import annotations


import torch

from tsjit.examples import ts_tma_copy
from timing import event_time_ms  # benchmarks/timing.py




def main() -> None:
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    stream = torch.cuda.current_stream().cuda_stream
    cols = 8192
    print("| size | tsjit TMA copy | torch copy | ratio (torch time / tsjit time) | config |")
    print("|---|---|---|---|---|")
    for mib in (64, 256, 1024, 4096):
        rows = mib * (1 << 20) // (4 * cols)
        src = torch.randn(rows, cols, device="cuda")
        dst = torch.empty_like(src)
        best = None
        for box, stages, per_sm, in_flight in (((16, 256), 4, 3, 1), ((16, 256), 6, 2, 2), ((32, 256), 3, 2, 2),
                                               ((64, 256), 3, 1, 1), ((64, 256), 3, 1, 2), ((32, 256), 6, 1, 3),
                                               ((16, 256), 8, 1, 4)):
            launch = ts_tma_copy.make_tma_copy_bw(src, dst, box=box, stages=stages, blocks=sms * per_sm,
                                                  stream=stream, in_flight=in_flight)
            ms = event_time_ms(launch)
            if best is None or ms < best[0]:
                best = (ms, box, stages, per_sm, in_flight)
        torch.cuda.synchronize()
        assert torch.equal(src, dst), "TMA copy mismatch"
        ref = event_time_ms(lambda: dst.copy_(src))
        gbs = lambda ms: 2 * src.numel() * 4 / ms / 1e6
        print(f"| {mib} MiB | {gbs(best[0]):.0f} GB/s | {gbs(ref):.0f} GB/s | {ref / best[0]:.3f} | "
              f"box {best[1]}, {best[2]} stages, {best[3]} CTA/SM, {best[4]} stores in flight |")
        del src, dst
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
