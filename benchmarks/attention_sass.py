"""CPU evidence for the attention kernel (issue 16): every configuration ``tsjit.ops.attention`` launches by default
compiles for sm_90a, its TaskManager proves it SAFE, and its cubin has 0 spills, HGMMA (wgmma), UTMALDG (TMA loads),
USETMAXREG (setmaxnreg) and no LDL/STL (local memory).  No GPU needed: one markdown row per configuration.

    PYTHONPATH=. python benchmarks/attention_sass.py [--quick]

Configurations: head_dim 64 / 128 / 256, causal or not, with the LSE stored and without (``return_lse``), bf16; the
long-KV tiles of head_dim 128 (``LONG_KV_CONFIG`` / ``LONG_KV_FULL_CONFIG``, seqlen_k >= 8192); a sliding window; a
variable-length batch (``cu_seqlens``) per head_dim; fp16 per head_dim.  ``--quick``: the six bf16 defaults only.
The assembler is the default (``TSJIT_ASSEMBLER`` unless set: ``auto``, nvPTXCompiler where its wheel is
installed, else ptxas as on the H200 image; both keep setmaxnreg); cuobjdump comes from PATH, the test extras'
wheel or triton's.  The verification time is the CPU time of ``TaskManager.print_and_verify`` (all checks,
the exhaustive one included) in this thread, the disk cache off so every configuration is built.
"""
from __future__ import annotations

import argparse
import os
import time

os.environ["TSJIT_DISABLE_CACHE"] = "1"

import tsjit  # noqa: E402
from tsjit.examples import attention  # noqa: E402
from tsjit.examples.attention_config import default_kv_tiles  # noqa: E402
from tsjit.ts import task_manager  # noqa: E402
from sass_check import disassemble, sass_counts  # noqa: E402  benchmarks/sass_check.py


def configurations(quick: bool) -> list:
    """(label, compile_config keyword arguments) of the default launches."""
    rows = []
    for head_dim in attention.HEAD_DIMS:
        for causal in (False, True):
            for lse in ((True, False) if not quick else (False,)):
                rows.append((f"d{head_dim} {'causal' if causal else 'full'}{' lse' if lse else ''}",
                             dict(head_dim=head_dim, causal=causal, store_lse=lse)))
    if quick:
        return rows
    for causal in (False, True):
        block_n, stages, o_in_q, q_stages = default_kv_tiles(128, 16384, True, causal)
        rows.append((f"d128 {'causal' if causal else 'full'} long-KV (seqlen_k >= 8192)",
                     dict(head_dim=128, causal=causal, store_lse=False, block_n=block_n, stages=stages,
                          o_in_q=o_in_q, q_stages=q_stages)))
    rows.append(("d128 causal window", dict(head_dim=128, causal=True, window=True, store_lse=False)))
    rows.append(("d128 full window", dict(head_dim=128, causal=False, window=True, store_lse=False)))
    for head_dim in attention.HEAD_DIMS:
        rows.append((f"d{head_dim} causal varlen", dict(head_dim=head_dim, causal=True, varlen=True, store_lse=False)))
    for head_dim in attention.HEAD_DIMS:
        rows.append((f"d{head_dim} full fp16", dict(head_dim=head_dim, causal=False, dtype=tsjit.Float16,
                                                    store_lse=False)))
    return rows


def measure(options: dict) -> dict:
    """Compile one configuration; its ptxas statistics, SASS counts and verification (verdict, states, seconds)."""
    managers, seconds = [], []
    original = task_manager.TaskManager.print_and_verify

    def timed(self, *args, **kwargs):
        t0 = time.thread_time()
        try:
            return original(self, *args, **kwargs)
        finally:
            seconds.append(time.thread_time() - t0)
    task_manager.TaskManager.print_and_verify = timed
    attention.MANAGER_OBSERVERS.append(managers.append)
    try:
        kernel = attention.compile_config(**options)
    finally:
        task_manager.TaskManager.print_and_verify = original
        attention.MANAGER_OBSERVERS.remove(managers.append)
    sass = disassemble(kernel.cubin)
    result = managers[-1].exhaustive_result
    return dict(meta=kernel.metadata, counts=None if sass is None else sass_counts(sass), verdict=result.verdict,
                states=result.states, seconds=max(seconds))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    names = ["HGMMA", "UTMALDG (TMA load)", "UTMASTG (TMA store)", "USETMAXREG (setmaxnreg)", "LDL/STL (local memory)"]
    print("| configuration | registers | spill stores / loads / stack B | " + " | ".join(n.split(" ")[0] for n in names)
          + " | checker | verify s (CPU) | tool |")
    print("|---|---|---|" + "---|" * len(names) + "---|---|---|")
    for label, options in configurations(args.quick):
        r = measure(options)
        meta, counts = r["meta"], r["counts"]
        cells = [str(counts[n]) for n in names] if counts else ["no cuobjdump"] * len(names)
        print(f"| {label} | {meta['registers']} | {meta['spill_stores_bytes']} / {meta['spill_loads_bytes']} / "
              f"{meta['stack_frame_bytes']} | " + " | ".join(cells) +
              f" | {r['verdict']}, {r['states']} states | {r['seconds']:.2f} | {meta['tool_version']} |", flush=True)


if __name__ == "__main__":
    main()
