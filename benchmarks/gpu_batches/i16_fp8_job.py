"""Issue 16 GPU job (helper i16, 2026-12-02, one process, <= 30 s): the fp8 forward's default path (V in
FlashAttention's layout, transposed by the tsjit kernel of tsjit/examples/attention_v_transpose.py) against a float64
reference, the transpose kernel against the host layout, then the interleaved fp8 table of benchmarks/attention.py
(bf16 ours, fp8 default, fp8-vt, the 224-key and polynomial-exp2 variants, cuDNN bf16) at (4, 16, 4096, 128) and
(2, 16, 8192, 128) non-causal; last, the same at (4, 16, 4096, 128) causal.  The checks and the table are the tests'
and the benchmark's own code.

    PYTHONPATH=. python benchmarks/gpu_batches/i16_fp8_job.py
"""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))          # benchmarks/ (attention, timing)
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))    # the tree (tests.gpu)

import attention  # noqa: E402  benchmarks/attention.py
from tests.gpu import test_attention_fp8_gpu as fp8_tests  # noqa: E402

T0 = time.time()


def step(name, fn, *args, **kwargs):
    start = time.time()
    try:
        result = fn(*args, **kwargs)
        print(f"{name}: ok {result if result is not None else ''} ({time.time() - start:.1f} s)", flush=True)
    except Exception as error:      # report and go on: the table is the main result
        print(f"{name}: FAILED {type(error).__name__}: {str(error)[:300]} ({time.time() - start:.1f} s)", flush=True)


step("fp8 default path (V transposed in the call) vs float64, (2, 1000, 4, 128): (max err, bound)",
     fp8_tests.check, 2, 1000, 1000, 4, 4, 128, False)
step("transpose_v_fp8 kernel vs host layout (2, 4000, 3, 128)", fp8_tests.test_transpose_v_fp8_matches_the_host_layout,
     (2, 4000, 3, 128))
VARIANTS = {"bn224": dict(block_n=224, stages=2), "p3": dict(exp2_polynomial=3),
            "bn224p3": dict(block_n=224, stages=2, exp2_polynomial=3), "p2": dict(exp2_polynomial=2),
            "p4": dict(exp2_polynomial=4)}
attention.fp8_table([(4, 16, 16, 4096, 128, False), (2, 16, 16, 8192, 128, False)], 10, VARIANTS)
print(f"table done at {time.time() - T0:.1f} s", flush=True)
step("fp8 224-key tiles, 3 of 16 exp2 polynomial, vs float64, (2, 1000, 4, 128)", fp8_tests.check, 2, 1000, 1000, 4,
     4, 128, False, block_n=224, stages=2, exp2_polynomial=3)
step("transpose_v_fp8 kernel vs host layout (1, 37, 2, 64)", fp8_tests.test_transpose_v_fp8_matches_the_host_layout,
     (1, 37, 2, 64))
step("transpose_v_fp8 kernel vs host layout (1, 300, 1, 256)", fp8_tests.test_transpose_v_fp8_matches_the_host_layout,
     (1, 300, 1, 256))
print(f"checks done at {time.time() - T0:.1f} s; causal (the default causal tile is 128 x 2):", flush=True)
attention.fp8_table([(4, 16, 16, 4096, 128, True)], 10, VARIANTS)
print(f"done in {time.time() - T0:.1f} s", flush=True)
