"""The assemblers side by side on the same PTX (CPU only): compile time, registers, spills, and whether the SASS
keeps ``setmaxnreg`` (USETMAXREG) and is free of local memory (LDL / STL).

    PYTHONPATH=. python benchmarks/assemblers.py [--reps 3]

Kernels: a saxpy, the tutorial GEMM (tsjit/examples/gemm.py, 4096^3, 256-wide tiles, 4 stages), the library GEMM
``tsjit.ops.matmul`` chooses for 4096^3 bf16, and the bf16 attention defaults (head_dim 64 / 128 / 256, causal or
not, no LSE).  Tools: every one installed (nvPTXCompiler, ptxas, nvJitLink; ``tsjit.backend.assemble``), each
timed in turns with the others (one call of each per round; median of ``--reps`` rounds, milliseconds of wall
time in this process: in-process tools and the ptxas subprocess alike).  SASS counts need cuobjdump (the test
extras' wheel).
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import time

os.environ["TSJIT_DISABLE_CACHE"] = "1"

import numpy as np  # noqa: E402

import tsjit  # noqa: E402
from tsjit.backend import assemble  # noqa: E402
from sass_check import disassemble  # noqa: E402  benchmarks/sass_check.py


def kernels() -> list[tuple[str, str, str]]:
    """(label, PTX, kernel name) of each kernel measured."""
    from tsjit.examples import attention, basic, gemm
    from tsjit.ops import configs
    from tsjit.ops.gemm_program import compile_program
    x = np.zeros(16, np.float32)
    rows = [("saxpy", tsjit.compile(basic.saxpy, np.float32(1), x, x, x, 16))]
    a = tsjit.tensormap_spec(tsjit.BFloat16, (gemm.BM, gemm.BK), swizzle="128B")
    b = tsjit.tensormap_spec(tsjit.BFloat16, (256, gemm.BK), swizzle="128B")
    c_map = tsjit.tensormap_spec(tsjit.BFloat16, (64, 64), swizzle="128B")
    rows.append(("tutorial GEMM", tsjit.compile(gemm.gemm_ts, a, b, tsjit.spec((4096, 4096), tsjit.BFloat16), c_map,
                                                4096, 4096, 4096, 256, 4, 8, 1, "tma")))
    cfg = configs.choose(configs.Problem(4096, 4096, 4096))[0]
    rows.append((f"ops.matmul 4096^3 ({cfg.describe()})", compile_program(cfg)))
    for head_dim in attention.HEAD_DIMS:
        for causal in (False, True):
            rows.append((f"attention d{head_dim}{' causal' if causal else ''}",
                         attention.compile_config(head_dim=head_dim, causal=causal, store_lse=False)))
    return [(label, k.ptx, k.metadata["kernel_name"]) for label, k in rows]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    tools = assemble.available_tools()
    versions = {tool: assemble.assembler_version(tool) for tool in tools}
    print("| kernel | " + " | ".join(f"{versions[t]}: ms / registers / spill stores B / USETMAXREG / LDL+STL"
                                      for t in tools) + " |")
    print("|---|" + "---|" * len(tools))
    for label, ptx, name in kernels():
        times = {tool: [] for tool in tools}
        results = {}
        for _ in range(args.reps):
            for tool in tools:
                start = time.perf_counter()
                results[tool] = assemble.assemble(ptx, "sm_90a", kernel_name=name, tool=tool)
                times[tool].append((time.perf_counter() - start) * 1e3)
        cells = []
        for tool in tools:
            asm = results[tool]
            sass = disassemble(asm.cubin)
            counts = ("-", "-") if sass is None else (len(re.findall(r"\bUSETMAXREG\b", sass)),
                                                      len(re.findall(r"\b(?:LDL|STL)\b", sass)))
            cells.append(f"{statistics.median(times[tool]):.0f} / {asm.registers} / {asm.spill_stores_bytes} / "
                         f"{counts[0]} / {counts[1]}")
        print(f"| {label} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
