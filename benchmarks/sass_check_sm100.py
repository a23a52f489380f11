"""SASS evidence for the Blackwell builds (issue 14), on a machine without a Blackwell GPU: compile tutorial 3
(tsjit/examples/bw_gemm.py), the CLC persistent copy, the ported tutorials 9, 11, 12, 13 (sm_100a), 8
(sm_100f) and tutorial 6's cluster shapes (tsjit/examples/bw_persistent_gemm.py), disassemble with cuobjdump
(PATH, TSJIT_CUOBJDUMP, or the nvidia-cuda-cuobjdump wheel: ``pip download nvidia-cuda-cuobjdump`` and unpack) and
count the UMMA (UTC*MMA), commit (UTCBAR), TMEM copy / load (UTCCP, LDTM), TMA, cp.async (LDGSTS), CLC and
local-memory instructions.
PYTHONPATH=. python benchmarks/sass_check_sm100.py"""
import collections
import os
import re
import shutil
import subprocess
import tempfile

import numpy as np

import tsjit
from tsjit.examples import (bw_clc_copy, bw_fork_gemm, bw_gemm, bw_merge_gemm, bw_merge_resadd, bw_nvfp4_gemm,
                            bw_persistent_gemm, bw_splitk)

_OPCODE = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9]+)")
WATCHED = ("UTCHMMA", "UTCOMMA", "UTCBAR", "UTCCP", "LDTM", "UTMALDG", "LDGSTS", "UTCATOMSWS", "SYNCS", "LDL", "STL")


def cuobjdump() -> str | None:
    explicit = os.environ.get("TSJIT_CUOBJDUMP")
    return explicit if explicit and os.path.isfile(explicit) else shutil.which("cuobjdump")


def opcode_counts(cubin: bytes, tool: str) -> collections.Counter:
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "kernel.cubin")
        with open(path, "wb") as fh:
            fh.write(cubin)
        sass = subprocess.run([tool, "-sass", path], capture_output=True, text=True, check=True).stdout
    return collections.Counter(_OPCODE.findall(sass))


def main() -> None:
    tool = cuobjdump()
    f32 = np.zeros(4096, np.float32)
    builds = [("tutorial 3 GEMM 128x256 bf16 (sm_100a)", bw_gemm.compile_for("sm_100a")),
              ("tutorial 3, EPILOGUE='tma': stmatrix + TMA store (sm_100a)",
               bw_gemm.compile_for("sm_100a", epilogue="tma")),
              ("CLC persistent copy (sm_100a)", tsjit.compile(bw_clc_copy.clc_copy, f32, f32, 16, 256, 4,
                                                               target="sm_100a")),
              ("tutorial 9 split-K, DSMEM reduce-scatter, SPLIT=2 (sm_100a)", bw_splitk.compile_for("sm_100a")),
              ("tutorial 11 Merge(AsyncUmma + TmaUmma) GEMM+ReLU (sm_100a)", bw_merge_gemm.compile_for()),
              ("tutorial 12 Merge GEMM + residual, two groups (sm_100a)", bw_merge_resadd.compile_for()),
              ("tutorial 13 Fork(TmaUmma + TmaAsync) GEMM + ReLU(A) (sm_100a)", bw_fork_gemm.compile_for()),
              ("tutorial 8 NVFP4 block-scaled GEMM (sm_100f, compile-only)", bw_nvfp4_gemm.compile_for())]
    builds += [(f"tutorial 6 persistent GEMM {layout} {'CLC' if clc else 'static'} (sm_100a)",
                bw_persistent_gemm.compile_for("sm_100a", layout, clc=clc))
               for layout, clc in sorted(bw_persistent_gemm.PROVEN)]
    for name, k in builds:
        meta = k.metadata
        print(f"{name}: {meta['registers']} registers, spill stores {meta['spill_stores_bytes']} B, spill loads "
              f"{meta['spill_loads_bytes']} B, tool {meta['tool_version']}")
        if tool is None:
            print("  cuobjdump not found: SASS not inspected")
            continue
        counts = opcode_counts(k.cubin, tool)
        print("  " + ", ".join(f"{op} {counts[op]}" for op in WATCHED))
        umma = sorted(op for op in counts if op.startswith("UTC") and op not in WATCHED)
        if umma:
            print("  other UTC* (tcgen05) opcodes:", ", ".join(f"{op} {counts[op]}" for op in umma))
        clc = sorted(op for op in counts if op.startswith(("UCGA", "CLC", "UGETNEXT", "TRYCANCEL")))
        if clc:
            print("  CLC-class opcodes:", ", ".join(f"{op} {counts[op]}" for op in clc))


if __name__ == "__main__":
    main()
