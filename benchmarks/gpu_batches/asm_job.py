"""Helper asm's GPU probe: cubins of the same PTX from three assemblers, run on the H200 and timed interleaved.

The H200 image assembles with ptxas 13.0 (whole program); nvPTXCompiler 13.5 (whole program, in process) and
nvJitLink 13.5 (relocatable: drops ``setmaxnreg``, C7504) are not installed there, so their cubins are made on the
CPU machine from the PTX this probe records, and looked up by the PTX's SHA-256:

    phase 1 (no cubins yet): every PTX assembled goes to $RES/ptx/<sha>.ptx; the launches run with ptxas cubins;
    CPU:   python benchmarks/gpu_batches/asm_job.py --assemble $RES/ptx   (writes asm_cubins/<sha>.<tool>.cubin)
    phase 2: each workload compiled once per tool (a fresh kernel object; the ptxas compile supplies the statistics,
             the cubin is replaced), checked against a float64 torch reference (outputs poisoned first), then timed
             interleaved (benchmarks/timing.py: CUDA events, medians).

Workloads: the tutorial GEMM (tsjit/examples/gemm.py) 4096^3 bf16; ``tsjit.ops.attention`` bf16 (batch 2, 16
heads, 4096 tokens) head_dim 128 non-causal and head_dim 256 causal (their default configurations; nvJitLink's
cubins spill 192 and 764 bytes there).
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import sys

os.environ["TSJIT_DISABLE_CACHE"] = "1"
HERE = os.path.dirname(os.path.abspath(__file__))
CUBINS = os.path.join(HERE, "asm_cubins")
TOOLS = ("ptxas", "nvptxcompiler", "nvjitlink")


def assemble_recorded(ptx_dir: str) -> None:
    """CPU side: every recorded PTX through nvPTXCompiler and nvJitLink; the cubins into asm_cubins/."""
    from tsjit.backend import assemble
    os.makedirs(CUBINS, exist_ok=True)
    for name in sorted(os.listdir(ptx_dir)):
        if not name.endswith(".ptx"):
            continue
        ptx = open(os.path.join(ptx_dir, name)).read()
        kernel = json.load(open(os.path.join(ptx_dir, name[:-4] + ".json")))["kernel_name"]
        for tool in TOOLS[1:]:
            asm = assemble.assemble(ptx, "sm_90a", kernel_name=kernel, tool=tool)
            with open(os.path.join(CUBINS, f"{name[:-4]}.{tool}.cubin"), "wb") as fh:
                fh.write(asm.cubin)
            print(name, tool, asm.tool_version, asm.registers, asm.spill_stores_bytes)


def attention_workload(shape, causal, tools, run_attention, interleaved_time_ms, log, torch) -> None:
    """One attention shape ((batch, heads, seqlen, head_dim): SDPA's layout; ops.attention reads the
    (batch, seqlen, heads, head_dim) views) per tool: checked against float64 SDPA, then timed in turns."""
    q, k, v = (torch.randn(*shape, device="cuda").to(torch.bfloat16).transpose(1, 2) for _ in range(3))
    ref = torch.nn.functional.scaled_dot_product_attention(
        *(t.transpose(1, 2).double() for t in (q, k, v)), is_causal=causal).transpose(1, 2)
    name = f"attention {shape}{' causal' if causal else ''}"
    ok_tools = []
    for tool in tools:
        try:
            out = torch.full_like(q, float("nan"))      # poisoned: every element must be written
            run_attention(tool, q, k, v, causal, out)
            torch.cuda.synchronize()
        except Exception as err:   # noqa: BLE001 -- a missing cubin or a failed launch: reported
            log(f"{name} {tool}: {type(err).__name__}: {err}")
            continue
        err = (out.double() - ref).abs().max().item()
        log(f"{name} {tool}: max |err| = {err:.2e} {'OK' if err < 2e-2 else 'FAIL'}")
        if err < 2e-2:
            ok_tools.append(tool)
    del ref
    if ok_tools:
        times = interleaved_time_ms({t: (lambda t=t: run_attention(t, q, k, v, causal)) for t in ok_tools},
                                    reps=10, inner=5)
        flops = 4 * shape[0] * shape[1] * shape[2] * shape[2] * shape[3] // (2 if causal else 1)
        log(f"{name} ms: " + ", ".join(f"{t} {ms:.4f} ({flops / ms / 1e9:.0f} TFLOP/s)" for t, ms in times.items()))


def main() -> None:
    import torch
    import tsjit
    from tsjit.backend import assemble
    from tsjit.examples import attention as program
    from tsjit.examples import gemm
    import importlib
    ops_attention = importlib.import_module("tsjit.ops.attention")   # the module (tsjit.ops.attention is also the function)
    sys.path.insert(0, os.path.dirname(HERE))
    from timing import interleaved_time_ms

    res = os.environ.get("RES", "/tmp/asm_res")
    os.makedirs(os.path.join(res, "ptx"), exist_ok=True)
    state = {"tool": "ptxas"}
    used = []
    original = assemble.assemble

    def hooked(ptx, target, *, kernel_name, tool=None):
        asm = original(ptx, target, kernel_name=kernel_name, tool=tool)
        sha = hashlib.sha256(ptx.encode()).hexdigest()[:20]
        with open(os.path.join(res, "ptx", sha + ".ptx"), "w") as fh:
            fh.write(ptx)
        with open(os.path.join(res, "ptx", sha + ".json"), "w") as fh:
            json.dump({"kernel_name": kernel_name}, fh)
        if state["tool"] == "ptxas":
            used.append((state["tool"], sha, asm.tool_version))
            return asm
        path = os.path.join(CUBINS, f"{sha}.{state['tool']}.cubin")
        if not os.path.exists(path):
            used.append((state["tool"], sha, "MISSING"))
            raise LookupError(f"no {state['tool']} cubin for PTX {sha}")
        used.append((state["tool"], sha, "prebuilt"))
        return dataclasses.replace(asm, cubin=open(path, "rb").read(), tool=state["tool"])

    assemble.assemble = hooked
    # phase 1 (no cubins made on the CPU yet): ptxas only, recording the PTX
    tools = TOOLS if os.path.isdir(CUBINS) and os.listdir(CUBINS) else TOOLS[:1]
    torch.manual_seed(0)
    lines = []

    def log(text):
        print(text, flush=True)
        lines.append(text)

    # --- the tutorial GEMM --------------------------------------------------------------------------------
    M = N = K = 4096
    a = torch.randn(M, K, device="cuda").to(torch.bfloat16)
    b = torch.randn(N, K, device="cuda").to(torch.bfloat16)
    ref = a.double() @ b.double().T
    gemm_calls = {}
    for tool in tools:
        state["tool"] = tool
        c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
        gemm.gemm_ts = tsjit.kernel(gemm.gemm_ts.fn)
        call = gemm.gemm_launcher(a, b, c, stream=torch.cuda.current_stream().cuda_stream)
        try:
            call()
            torch.cuda.synchronize()
        except Exception as err:   # noqa: BLE001 -- a missing cubin (phase 1) or a failed launch: reported
            log(f"gemm {tool}: {type(err).__name__}: {err}")
            continue
        err = ((c.double() - ref).abs().max() / ref.abs().max()).item()
        log(f"gemm {tool}: max |err| / max |ref| = {err:.2e} {'OK' if err < 1e-2 else 'FAIL'}")
        if err < 1e-2:
            gemm_calls[tool] = call
    if gemm_calls:
        times = interleaved_time_ms(gemm_calls, reps=15, inner=5)
        flops = 2 * M * N * K
        log("gemm 4096^3 ms: " + ", ".join(f"{t} {ms:.4f} ({flops / ms / 1e9:.0f} TFLOP/s)"
                                           for t, ms in times.items()))

    # --- attention ----------------------------------------------------------------------------------------
    kernels = {}
    for tool in tools:
        kernels[tool] = tsjit.kernel(program.attention_forward.fn)

    def run_attention(tool, q, k, v, causal, out=None):
        state["tool"] = tool
        if program.attention_forward is not kernels[tool]:
            program.attention_forward = kernels[tool]
            ops_attention._FAST.clear()         # its packed launches are the other kernel object's
        return ops_attention.attention(q, k, v, causal=causal, out=out)

    for shape, causal in (((2, 16, 4096, 128), False), ((2, 16, 4096, 256), True)):
        attention_workload(shape, causal, tools, run_attention, interleaved_time_ms, log, torch)
    log("assembled: " + json.dumps(used))
    with open(os.path.join(res, "asm_job.txt"), "w") as fh:
        fh.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--assemble":
        assemble_recorded(sys.argv[2])
    else:
        main()
