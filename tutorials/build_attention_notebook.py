"""Writes tutorial 30, "attention, warp-specialized" (``python tutorials/build_attention_notebook.py``).

The notebook compiles and verifies the attention program of ``tsjit.examples.attention`` on any machine (the
schedule table, the register budget, the rendered SVG of the program, the exhaustive checker's verdict and time,
the compiler's spill report); on a machine with an NVIDIA GPU and torch it also runs ``tsjit.ops.attention``
against a float64 reference with a poisoned output.  ``tests/test_tutorials.py`` executes it (CPU).
"""
from __future__ import annotations

import os

import nbformat

from notebook_source import source_cell

HERE = os.path.dirname(os.path.abspath(__file__))
NAME = "30_attention_warp_specialized.ipynb"

CELLS = [
    ("md", "# Tutorial 30: attention, warp-specialized\n\n"
           "`tsjit.ops.attention` is a FlashAttention-3-style forward kernel written as one Task Scheduling program "
           "(`tsjit/examples/attention.py`). One CTA has three warpgroups:\n\n"
           "| warps | task | does | registers (`setmaxnreg`) |\n|---|---|---|---|\n"
           "| 0 | `load_kv` | TMA loads of K and V tiles into two rings (`k`, `v`) | lowered to 40 |\n"
           "| 1 | `load_q` | the TMA load of each work tile's 128 Q rows (`q`, 2 stages) | lowered to 40 |\n"
           "| 2-3 | `idle` | nothing (the producer warpgroup is 4 warps; `setmaxnreg` is per warpgroup) | lowered to 40 |\n"
           "| 4-11 | `softmax` | two consumer warpgroups of 64 Q rows each: S = Q K^T (wgmma), the online softmax, "
           "O += P V (wgmma, P from registers), the epilogue | raised to 232 |\n\n"
           "The cells below build the program for head_dim 128 with a causal mask, print what the TaskManager "
           "checked, and render it."),
    ("code", "import os, time, inspect, shutil\n"
             "os.environ['TSJIT_DISABLE_CACHE'] = '1'   # compile (and so build the TaskManager) even if cached\n"
             "if shutil.which('ptxas'):   # assemble as on the H200 image (nvJitLink 13.5 spills this loop)\n"
             "    os.environ['TSJIT_ASSEMBLER'] = 'ptxas'\n"
             "import tsjit\nGPU = tsjit.gpu_available()\n"
             "print('GPU present:', GPU)\n"
             "from tsjit.examples import attention\n"
             "managers = []\nattention.MANAGER_OBSERVERS.append(managers.append)\n"
             "t0 = time.perf_counter()\nkernel = attention.compile_config(128, causal=True)\n"
             "print(f'compiled in {time.perf_counter() - t0:.1f} s')\nmanager = managers[-1]\n"
             "meta = kernel.metadata\n"
             "print('spill stores', meta['spill_stores_bytes'], 'B, spill loads', meta['spill_loads_bytes'], "
             "'B, stack', meta['stack_frame_bytes'], 'B')"),
    ("md", "## The consumer's schedule\n\n"
           "The default schedule is software-pipelined (`OVERLAP=True`) with the two consumer warpgroups taking "
           "turns at the tensor cores (`PINGPONG=True`). KV tile 0 is peeled: S_0, its softmax and P_0 run before "
           "the loop. Iteration j issues S_j = Q K_j^T, then O += P_{j-1} V_{j-1}, and computes the softmax of S_j "
           "while that PV is still on the tensor cores; the PV of the last tile follows the loop. The schedule is "
           "data: every call in `consumer_schedule` (in `run_program`, which the kernel below calls) records one "
           "step with its resource, "
           "pipeline role and the task-local variables it reads and writes."),
    ("source", "tsjit.examples.attention: attention_forward.fn, run_program"),
    ("md", "## The schedule table\n\n"
           "The TaskManager simulates one work tile of every task in lock step and prints each task's steps: "
           "`ProdAcq<-` / `ProdCmt->` acquire and commit a ring stage (the TMA load's bytes complete the stage's "
           "*full* barrier), `->ConsWai` / `<-ConsRel` wait for a full stage and release it (arrive on its *empty* "
           "barrier), `H` / `T` mark the steps before (Head) and after (Tail) the domain loop, the last column is "
           "the ring stage. Here `k` is acquired in Head (tile 0) and in the loop, `v` only in the loop and Tail: "
           "the V ring runs one tile behind the K ring."),
    ("code", "print(manager.schedule_table())"),
    ("code", "print(manager.register_report())"),
    ("md", "## The program, rendered\n\n"
           "`manager.render(path)` writes the dependency graph of resources and tasks with the schedule table as "
           "an SVG."),
    ("code", "from IPython.display import SVG, display\n"
             "path = manager.render('attention.svg')\nprint('wrote', path)\ndisplay(SVG(filename=path))"),
    ("md", "## Why each barrier is there\n\n"
           "| barrier | kind | orders |\n|---|---|---|\n"
           "| `q` full / empty (2 stages) | mbarrier, TMA transaction bytes | Q tile loaded before the first QK^T "
           "of its work tile; its stage reused only after both consumer warpgroups released it (after the tile's "
           "last QK^T) |\n"
           "| `k` full / empty | mbarrier, TMA bytes / 8 consumer-warp arrivals | K_j in shared memory before "
           "S_j's wgmma reads it; the stage refilled only after S_j completed in both warpgroups (`wgmma.wait_group`"
           " before the release) |\n"
           "| `v` full / empty | same | V_j before the PV wgmma; the stage refilled after that PV retired |\n"
           "| named barriers 3 and 4 | `bar.sync` / `bar.arrive`, 256 threads | ping-pong: a warpgroup waits for its "
           "turn before its first wgmma of an iteration and passes the turn after its last, so one warpgroup's "
           "softmax runs while the other's GEMMs hold the tensor cores |\n"
           "| named barriers 1 and 2 | `bar.sync`, 128 threads | each warpgroup's O staging buffer: the previous "
           "tile's TMA store has read it (`cp.async.bulk.wait_group.read`) before `stmatrix` overwrites it, and "
           "every thread's `stmatrix` (+ `fence.proxy.async`) precedes the TMA store |\n"
           "| `q` empty, with O staged in the Q stage | the same mbarrier, released later | the long-KV default "
           "(`o_in_q`: 160- or 176-key tiles from seqlen_k 8192) writes O into the tile's own Q stage: the "
           "warpgroup releases the stage only after its TMA stores have read it, so the producer's next Q load "
           "cannot overwrite O |\n"
           "| named barriers 4, 5, 6 (and 1-3) | `bar.sync` / `bar.arrive`, 256 threads (128) | head_dim 64 runs "
           "three consumer warpgroups (192-row Q tiles): the turns go round-robin, warpgroup w passing to (w + 1) "
           "mod 3 on its successor's barrier (each barrier has two parties: its owner waits, its predecessor "
           "arrives); 1-3 are the three warpgroups' epilogue barriers |\n"
           "| the work queue | static persistent schedule | every task walks the same tile sequence (a host-built "
           "table under a causal mask or for variable-length batches: longest tiles first, balanced over the "
           "CTAs) |\n\n"
           "One ordering is not a barrier: ptxas moves `wgmma.wait_group 0` (the PV's retirement) above the "
           "independent exp2 instructions of the softmax, which serializes the softmax after the PV. "
           "`KTiles.softmax` ends with a store that never runs (a row sum < 0) but depends on every exp2; "
           "ptxas keeps memory operations before the wait, so the softmax stays under the PV in flight "
           "(`tests/ts/lowering/test_attention_compile.py` checks the SASS where cuobjdump exists)."),
    ("md", "## The exhaustive checker\n\n"
           "Before any code is emitted the TaskManager explores every interleaving of the tasks' pipeline "
           "operations (per ring stage and phase) and proves the program free of deadlocks and races on shared "
           "memory:"),
    ("code", "result = manager.exhaustive_result\n"
             "print('verdict:', result.verdict)\n"
             "print(f'{result.states} states in {result.milliseconds:.0f} ms')\n"
             "assert result.verdict == 'SAFE' and result.milliseconds < 2000"),
    ("md", "## The PTX\n\nThe QK^T wgmma reads both operands from shared memory, the PV wgmma takes P from "
           "registers (the Float32 accumulator layout of S is the A-fragment layout), exp2 is one MUFU per "
           "element (`ex2.approx.ftz`, the softmax scale folded into one FMA)."),
    ("code", "import re\nptx = kernel.ptx\n"
             "for pattern in (r'wgmma\\.mma_async\\.sync\\.aligned\\.m64n128k16\\.f32\\.bf16\\.bf16 \\{[^}]*\\}, %rd',\n"
             "                r'wgmma\\.mma_async\\.sync\\.aligned\\.m64n128k16\\.f32\\.bf16\\.bf16 \\{[^}]*\\}, \\{%r',\n"
             "                r'ex2\\.approx\\.ftz\\.f32', r'setmaxnreg\\.\\w+\\.sync\\.aligned\\.u32\\s+\\d+',\n"
             "                r'bar\\.(sync|arrive)\\s+\\S+ 256;', r'cp\\.async\\.bulk\\.tensor\\.4d\\S*'):\n"
             "    found = re.findall(pattern, ptx)\n"
             "    print(f'{len(found):4d} x {pattern[:60]}')"),
    ("md", "## On the GPU\n\nWith a GPU and torch: `tsjit.ops.attention` on fresh random inputs in FlashAttention's "
           "layout, the output poisoned with NaN before the launch, against attention computed in float64."),
    ("code", "try:\n    import torch\nexcept ImportError:\n    torch = None\n"
             "if GPU and torch is not None and torch.cuda.is_available():\n"
             "    import tsjit.ops\n"
             "    q, k, v = (torch.randn(2, 1000, 4, 128, device='cuda', dtype=torch.bfloat16) for _ in range(3))\n"
             "    out = torch.full_like(q, float('nan'))\n"
             "    tsjit.ops.attention(q, k, v, causal=True, out=out)\n"
             "    s = (q.double().transpose(1, 2) @ k.double().transpose(1, 2).transpose(-1, -2)) / 128 ** 0.5\n"
             "    s = s.masked_fill(torch.ones(1000, 1000, dtype=torch.bool, device='cuda').triu(1), float('-inf'))\n"
             "    ref = (s.softmax(-1) @ v.double().transpose(1, 2)).transpose(1, 2)\n"
             "    print('max abs error vs float64:', (out.double() - ref).abs().max().item())\n"
             "else:\n    print('no GPU: compiled and verified only')"),
    ("md", "Measured speed (H200, against cuDNN and FlashAttention 2 through torch SDPA) is in BENCHMARKS.md; "
           "`benchmarks/attention.py --variants` times the other schedules (one tile at a time, no ping-pong, the "
           "grid tile order) against the default."),
]


def build() -> str:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_markdown_cell(text) if kind == "md" else source_cell(text) if kind == "source"
                else nbformat.v4.new_code_cell(text) for kind, text in CELLS]
    path = os.path.join(HERE, NAME)
    nbformat.write(nb, path)
    return path


if __name__ == "__main__":
    print("wrote", build())
