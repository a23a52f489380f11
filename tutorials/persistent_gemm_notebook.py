"""Cells of tutorial 19, the persistent clustered Blackwell GEMM (CUTLASS TS tutorial 6, issue 14), for
``build_notebooks.py``: the source, the checker's verdicts and the tcgen05 / CLC / PDL instructions of each
cluster shape, the SASS, the fallback choice, and a run of the one-CTA fallback on the CPU interpreter."""
from __future__ import annotations

SETUP = """import numpy as np
import tsjit
GPU = tsjit.gpu_available()
print("GPU present:", GPU)"""

NOTEBOOKS = {
    "19_blackwell_persistent_gemm.ipynb": [
        ("md", "# Tutorial 19: a persistent clustered Blackwell GEMM (CUTLASS TS tutorial 6)\n\n"
               "`C = A @ B^T + bias` in bf16 with fp32 accumulation, persistent over output tiles. One source shows "
               "the Blackwell Task Scheduling features together:\n\n"
               "* **split A/B loads**: two TMA tasks fill one **TmaUmma** ring (`producer_group` of 2 arming warps, "
               "`num_bytes_per_warp_per_cta`);\n"
               "* **2-CTA MMA**: with `cta_layout_vmnk = (2, CM, 1, 1)` the two CTAs of a pair share one "
               "`tcgen05.mma.cta_group::2` (M = 256); both CTAs' TMA copies complete on the **pair leader's** full "
               "barrier (leader-routed completion), the MMA task's sides are `SignalingThreads.CtaLeader` (the peer "
               "CTA's copy of the task skips them), commits are multicast, TMEM is allocated with `cta_group::2`;\n"
               "* **multicast**: with CM = 2 pairs per cluster, each CTA loads half of its B half and multicasts it "
               "to the same CTA of the other pair;\n"
               "* **CLC**: a scheduler task steals tiles with `clusterlaunchcontrol.try_cancel` (CTA 0 fetches for "
               "the cluster), or a static persistent queue;\n"
               "* **PDL** (`griddepcontrol.wait` / `launch_dependents`), a **bias** epilogue, and **fallback "
               "cluster shapes** (`CLUSTER_SHAPES`, picked per problem by `pick_cluster_shape`).\n\n"
               "There is no Blackwell GPU here: the evidence is the exhaustive checker's proof, ptxas for sm_100a, "
               "the SASS, and the CPU interpreter (the one-CTA fallback runs at the end of this notebook)."),
        ("code", SETUP),
        ("code", "from tsjit.examples import bw_persistent_gemm as t6"),
        ("source", "tsjit.examples.bw_persistent_gemm: _configs, Accumulators.mma, persistent_gemm.fn"),
        ("md", "Compile each cluster shape for sm_100a: the preferred two pairs (`t6.TWO_PAIRS`, CUTLASS's 4 x 1 "
               "cluster) with the static queue and with CLC, the pair and the multicast fallback with the static "
               "queue, the one-CTA fallback with CLC. The exhaustive checker runs while the kernel compiles; over "
               "pairs it models every CTA (the peer's copy of the MMA task skips its gated sides): for the two pairs, "
               "5 tasks on each of 4 CTAs, about 4 300 states with the static queue and 4 900 with CLC (every task "
               "of every CTA on CTA 0's CLC ring), a few seconds of CPU each. Every shape is proven with both "
               "schedulers (`t6.PROVEN`; `tests/blackwell/test_tutorial6.py`). The PDL, CLC and tcgen05 "
               "instructions of each build:"),
        ("code", "import collections, re\nfrom tsjit.ts.verify import exhaustive\n"
                 "original = exhaustive.check_all_interleavings\nbuilds = {}\n"
                 "for layout, clc in [((2, 2, 1, 1), False), ((2, 2, 1, 1), True), ((2, 1, 1, 1), False), ((1, 2, 1, 1), False),\n"
                 "                    ((1, 1, 1, 1), True)]:\n"
                 "    verdicts = []\n"
                 "    exhaustive.check_all_interleavings = lambda *a, **k: verdicts.append(original(*a, **k)) or verdicts[-1]\n"
                 "    builds[layout, clc] = compiled = t6.compile_for('sm_100a', layout, clc=clc)\n"
                 "    exhaustive.check_all_interleavings = original\n"
                 "    ops = collections.Counter(re.findall(r'(tcgen05\\.(?:mma|commit|alloc)\\.cta_group::\\d|griddepcontrol\\.\\w+|"
                 "clusterlaunchcontrol\\.try_cancel[\\w.:]*multicast|cta_group::2 \\[)', compiled.ptx))\n"
                 "    print(layout, 'CLC' if clc else 'static', 'verdict', [v.verdict for v in verdicts],\n"
                 "          'spills', compiled.metadata['spill_stores_bytes'], dict(ops))\n"
                 "    if verdicts:\n"
                 "        print('   ', verdicts[0].summary())"),
        ("md", "The SASS of the two-pair build (`cuobjdump -sass`): `UTC*MMA` is the UMMA, `UTCBAR` the commit, "
               "`LDTM` the TMEM load, `UTMALDG` the TMA load; no `LDL`/`STL` (local memory)."),
        ("code", "import os, shutil, subprocess, tempfile\n"
                 "tool = os.environ.get('TSJIT_CUOBJDUMP') or shutil.which('cuobjdump')\n"
                 "if tool is None:\n"
                 "    try:\n"
                 "        from cuda import pathfinder\n"
                 "        tool = pathfinder.find_nvidia_binary_utility('cuobjdump')\n"
                 "    except Exception:\n"
                 "        tool = None\n"
                 "if tool:\n"
                 "    path = os.path.join(tempfile.mkdtemp(), 'k.cubin')\n"
                 "    open(path, 'wb').write(builds[(2, 2, 1, 1), False].cubin)\n"
                 "    sass = subprocess.run([tool, '-sass', path], capture_output=True, text=True).stdout\n"
                 "    ops = collections.Counter(re.findall(r'/\\*[0-9a-f]{4,}\\*/\\s+(?:@!?U?P\\w+\\s+)?([A-Z][A-Z0-9]+)', sass))\n"
                 "    print({op: n for op, n in sorted(ops.items()) if op.startswith(('UTC', 'LDTM', 'UTMA', 'LDL', 'STL'))})\n"
                 "else:\n"
                 "    print('cuobjdump not found: pip install nvidia-cuda-cuobjdump, or set TSJIT_CUOBJDUMP')"),
        ("md", "The fallback, picked on the host per problem among the proven builds (`t6.PROVEN`): the "
               "preferred shape is two pairs sharing B by multicast (512 x 256 of C per cluster); a problem with "
               "fewer than 512 rows falls back to one pair (256 x 256), one with fewer than 256 columns to two "
               "one-CTA MMAs sharing B by multicast, one with fewer than 256 rows to one CTA; the same with CLC "
               "(every shape is proven with both schedulers)."),
        ("code", "for M, N in [(4096, 4096), (256, 4096), (4096, 128), (128, 512)]:\n"
                 "    layout = t6.pick_cluster_shape(M, N)\n"
                 "    print((M, N), '->', layout, 'tiles', t6.tile_count(M, N, layout),\n"
                 "          'static grid', t6.launch_grid(M, N, layout, clc=False), '| with CLC ->', t6.pick_cluster_shape(M, N, clc=True))"),
        ("md", "The one-CTA fallback with the static queue on the CPU interpreter (`TSJIT_INTERPRET=1`, target "
               "sm_100a): 2 persistent CTAs over 4 tiles, C poisoned (NaN) first, compared with numpy float64."),
        ("code", "import os\nos.environ['TSJIT_INTERPRET'] = '1'\nos.environ['TSJIT_TARGET'] = 'sm_100a'\n"
                 "try:\n"
                 "    got, want = t6.run_tutorial6(256, 256, 128, layout=(1, 1, 1, 1), clc=False, sms=2)\n"
                 "finally:\n"
                 "    del os.environ['TSJIT_INTERPRET'], os.environ['TSJIT_TARGET']\n"
                 "err = np.linalg.norm(got - want) / np.linalg.norm(want)\n"
                 "assert np.isfinite(got).all() and err < 4e-3, err\n"
                 "print('interpreted one-CTA fallback: max relative error vs float64', err)"),
    ],
}
