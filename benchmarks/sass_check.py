"""SASS evidence for the TS GEMM (issue 5): compile it, disassemble the cubin with cuobjdump (the CUDA
toolkit's, or the one triton ships), and count HGMMA, local-memory traffic (spills) and the register
reallocation instructions.  PYTHONPATH=. python benchmarks/sass_check.py

``--library SCHEDULE BM BN`` checks a configuration of the library GEMM instead (``tsjit.ops.matmul``'s
program for a 4096^3 bf16 problem, e.g. ``--library pingpong-shared 128 256``)."""
import os
import re
import shutil
import subprocess
import tempfile

import tsjit
from tsjit.examples import gemm


def cuobjdump() -> str | None:
    found = shutil.which("cuobjdump")
    if found:
        return found
    try:
        from cuda import pathfinder     # the nvidia-cuda-cuobjdump wheel (the test extras)
        found = pathfinder.find_nvidia_binary_utility("cuobjdump")
        if found:
            return found
    except Exception:   # noqa: BLE001 -- no cuda-pathfinder, or it failed: try triton's
        pass
    try:
        import triton
        path = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
        return path if os.path.exists(path) else None
    except ImportError:
        return None


def library(schedule: str, block_m: int, block_n: int) -> None:
    """The SASS report of one ``tsjit.ops.matmul`` configuration (4096^3, bf16, K-major operands)."""
    from tsjit.ops import configs
    from tsjit.ops.gemm_pingpong import compile_config
    cfg = configs.make_config(configs.Problem(4096, 4096, 4096), block_m, block_n, 1, schedule=schedule)
    k = compile_config(cfg)
    meta = k.metadata
    print(f"{cfg.describe()}: {meta['registers']} registers, spill stores {meta['spill_stores_bytes']} B, spill "
          f"loads {meta['spill_loads_bytes']} B, stack {meta['stack_frame_bytes']} B, tool {meta['tool_version']}")
    sass_report(k.cubin)


def main() -> None:
    import sys
    if len(sys.argv) == 5 and sys.argv[1] == "--library":
        library(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
        return
    a = tsjit.tensormap_spec(tsjit.BFloat16, (gemm.BM, gemm.BK), swizzle="128B")
    b = tsjit.tensormap_spec(tsjit.BFloat16, (256, gemm.BK), swizzle="128B")
    c_map = tsjit.tensormap_spec(tsjit.BFloat16, (64, 64), swizzle="128B")
    k = tsjit.compile(gemm.gemm_ts, a, b, tsjit.spec((4096, 4096), tsjit.BFloat16), c_map, 4096, 4096, 4096, 256, 4,
                      8, 1, "tma")
    meta = k.metadata
    print(f"ptxas: {meta['registers']} registers, spill stores {meta['spill_stores_bytes']} B, spill loads "
          f"{meta['spill_loads_bytes']} B, stack {meta['stack_frame_bytes']} B, tool {meta['tool_version']}")
    sass_report(k.cubin)


def disassemble(cubin: bytes) -> str | None:
    """The SASS text of ``cubin`` (``cuobjdump --dump-sass``), or None where cuobjdump is not found."""
    tool = cuobjdump()
    if tool is None:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "kernel.cubin")
        with open(path, "wb") as fh:
            fh.write(cubin)
        return subprocess.run([tool, "--dump-sass", path], capture_output=True, text=True, check=True).stdout


def sass_counts(sass: str) -> dict:
    """The counts of the instructions that matter in the SASS text ``sass`` (name -> count)."""
    return {name: len(re.findall(pattern, sass)) for name, pattern in (
        ("HGMMA", r"\bHGMMA\."), ("UTMALDG (TMA load)", r"\bUTMALDG"), ("UTMASTG (TMA store)", r"\bUTMASTG"),
        ("USETMAXREG (setmaxnreg)", r"\bUSETMAXREG"), ("STSM (stmatrix)", r"\bSTSM"),
        ("LDL/STL (local memory)", r"\b(LDL|STL)\b"), ("SYNCS (mbarrier)", r"\bSYNCS\."),
        ("WARPGROUP.ARRIVE (wgmma.fence)", r"\bWARPGROUP\.ARRIVE"),
        ("WARPGROUP.DEPBAR (wait_group)", r"\bWARPGROUP\.DEPBAR"), ("BAR (named barriers)", r"\bBAR\."))}


def sass_report(cubin: bytes) -> dict | None:
    """Disassemble ``cubin`` and print (and return) the counts of the instructions that matter."""
    sass = disassemble(cubin)
    if sass is None:
        print("cuobjdump not found: SASS not inspected")
        return None
    counts = sass_counts(sass)
    for name, count in counts.items():
        print(f"  {name:<26} {count}")
    print("HGMMA lines:", *sorted(set(re.findall(r"HGMMA\.[\w.]+", sass)))[:4])
    print("USETMAXREG lines:", *sorted(set(re.findall(r"USETMAXREG[^;]*", sass)))[:4])
    print("WARPGROUP.DEPBAR lines:", *sorted(set(re.findall(r"WARPGROUP\.DEPBAR[^;]*", sass)))[:6])
    if os.environ.get("SASS_DUMP"):
        with open(os.environ["SASS_DUMP"], "w") as fh:
            fh.write(sass)
    return counts


if __name__ == "__main__":
    main()
