"""The cells of tutorials 15-18: the CUTLASS Task Scheduling Blackwell tutorials 9, 11-12, 13 and 8 ported
(issue 14).  ``build_notebooks.py`` writes them with the others.

There is no Blackwell GPU here, so each notebook shows the evidence a CPU machine can give: the exhaustive
checker's verdict while the kernel compiles for sm_100a (sm_100f for NVFP4), the tcgen05 instructions in the PTX,
the SASS (``cuobjdump -sass``, when the tool is found), and a run on the CPU interpreter at a small size
against numpy float64 (tutorial 8 too: the interpreter models the block-scaled MMA).  The split-K
notebook also builds the same source for sm_90a and, on the H200, runs it.
"""
from __future__ import annotations

SETUP = r"""import collections, contextlib, inspect, os, re, shutil, subprocess, tempfile
import numpy as np
import tsjit
from tsjit.ts.verify import exhaustive
GPU = tsjit.gpu_available()
print("GPU present:", GPU)

def compile_verified(build):
    '''``build()`` (a compile), with the exhaustive checker's verdicts of the programs it built.'''
    verdicts, original = [], exhaustive.check_all_interleavings
    def recording(*args, **kwargs):
        result = original(*args, **kwargs)
        verdicts.append(result.verdict)
        return result
    exhaustive.check_all_interleavings = recording
    try:
        compiled = build()
    finally:
        exhaustive.check_all_interleavings = original
    return compiled, verdicts

def tcgen05_counts(compiled):
    return dict(sorted(collections.Counter(re.findall(r'tcgen05\.[a-z_]+', compiled.ptx)).items()))

def sass(compiled, watched):
    '''Counts of the ``watched`` opcodes in ``cuobjdump -sass`` of the cubin (TSJIT_CUOBJDUMP or PATH).'''
    tool = os.environ.get('TSJIT_CUOBJDUMP') or shutil.which('cuobjdump')
    if not tool:   # the nvidia-cuda-cuobjdump wheel that pip install -e '.[test]' brings
        try:
            from cuda import pathfinder
            tool = pathfinder.find_nvidia_binary_utility('cuobjdump')
        except Exception:
            tool = None
    if not tool:
        print('cuobjdump not found: pip install nvidia-cuda-cuobjdump, or set TSJIT_CUOBJDUMP')
        return
    path = os.path.join(tempfile.mkdtemp(), 'k.cubin')
    open(path, 'wb').write(compiled.cubin)
    text = subprocess.run([tool, '-sass', path], capture_output=True, text=True).stdout
    ops = collections.Counter(re.findall(r'/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9]+)', text))
    print({op: ops[op] for op in watched})

@contextlib.contextmanager
def blackwell_interpreter(target='sm_100a'):
    '''Launches inside this block run on tsjit's CPU interpreter as ``target`` code (no GPU needed).'''
    before = {k: os.environ.get(k) for k in ('TSJIT_INTERPRET', 'TSJIT_TARGET')}
    os.environ.update(TSJIT_INTERPRET='1', TSJIT_TARGET=target)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value

def bf16_check(got, ref, k):
    '''bf16 output: half an ulp plus the fp32 accumulation error; returns the relative Frobenius error.'''
    assert np.isfinite(got).all(), 'an output element was not written (still the NaN poison)'
    assert np.max(np.abs(got - ref) - (2.0 ** -8 * np.abs(ref) + 1e-3 * np.sqrt(k))) <= 0
    return np.linalg.norm(got - ref) / np.linalg.norm(ref)"""

UMMA_SASS = "('UTCHMMA', 'UTCBAR', 'LDTM', 'UTMALDG', 'LDL', 'STL')"

SPLIT_K = [
    ("md", "# Tutorial 15: split-K with a DSMEM reduce-scatter (CUTLASS TS tutorial 9, Blackwell and Hopper)\n\n"
           "The SPLIT CTAs of a `(1, 1, SPLIT)` cluster share one 128 x 128 tile of `C = A @ B^T`; each multiplies "
           "its own slice of K into an fp32 partial. The epilogue is a **reduce-scatter through distributed shared "
           "memory**: CTA `j` owns `128 / SPLIT` rows of the tile, every CTA writes the rows CTA `j` owns into slot "
           "`rank` of CTA `j`'s staging buffer (`mapa` + `st.shared::cluster`), and each CTA sums its slots in rank "
           "order (so reruns are bit-identical) and stores bf16.\n\n"
           "The staging buffer is an **alias group** with the A/B ring: the kernel hands the TaskManager an "
           "`SmemAllocator` whose two phases (main loop, epilogue) share one region, so the kernel needs the ring's "
           "128 KiB and not 128 + 66 KiB. Two mbarrier handshakes outside the TS pipelines (`free`: every peer's ring "
           "is retired; `full`: every writer of my rows is done) make the aliasing safe across the cluster.\n\n"
           "One source builds for **sm_100a** (a TmaUmma ring, `tcgen05.mma` into TMEM, an UmmaAsync hand-off to "
           "the epilogue warpgroup) and for **sm_90a** (a TmaAsync ring, two wgmma warpgroups with register "
           "partials): the MMA resources switch on `tsjit.const_expr(tsjit.tcgen05.available())`."),
    ("code", SETUP),
    ("code", "from tsjit.examples import bw_splitk"),
    ("source", "tsjit.examples.bw_splitk: smem_layout, ReduceScatter.scatter_tmem, splitk_gemm.fn"),
    ("md", "Compile both targets (the checker runs while each compiles). The shared-memory bytes show the alias: "
           "the ring alone is 131072 B."),
    ("code", "blackwell, v100 = compile_verified(lambda: bw_splitk.compile_for('sm_100a'))\n"
             "hopper, v90 = compile_verified(lambda: bw_splitk.compile_for('sm_90a', split=4))\n"
             "print('checker verdicts (sm_100a, sm_90a):', v100 + v90)\n"
             "print('sm_100a tcgen05:', tcgen05_counts(blackwell))\n"
             "print('sm_100a DSMEM stores', blackwell.ptx.count('st.shared::cluster'), '| cluster',\n"
             "      blackwell.metadata['launch_requirements'].cluster, '| shared memory', blackwell.metadata['smem_bytes'], 'B')\n"
             "print('sm_90a: wgmma', len(re.findall(r'wgmma\\.mma_async', hopper.ptx)), 'tcgen05', hopper.ptx.count('tcgen05'),\n"
             "      '| cluster', hopper.metadata['launch_requirements'].cluster)"),
    ("code", f"sass(blackwell, {UMMA_SASS})"),
    ("md", "Both builds on the CPU interpreter (a cluster of 2 CTAs on sm_100a, of 4 on sm_90a; ragged shapes; C "
           "poisoned with NaN), against numpy float64:"),
    ("code", "for target, (M, N, K, split) in (('sm_100a', (128, 128, 256, 2)), ('sm_90a', (64, 100, 8, 4))):\n"
             "    a, b = bw_splitk.random_operands(M, N, K)\n"
             "    with blackwell_interpreter(target):\n"
             "        got = bw_splitk.run_splitk(a, b, split, target=target)\n"
             "    err = bf16_check(got, a.astype(np.float64) @ b.astype(np.float64).T, K)\n"
             "    print(f'{target} interpreted, split {split}, {M}x{N}x{K}: relative error {err:.1e}')"),
    ("md", "On the H200 the sm_90a build runs (`tests/gpu/test_bw_splitk_sm90_gpu.py` covers more shapes and the "
           "bit-identical reruns):"),
    ("code", "if GPU:\n"
             "    for split in (2, 4):\n"
             "        a, b = bw_splitk.random_operands(1000, 1000, 4096)\n"
             "        got = bw_splitk.run_splitk(a, b, split)\n"
             "        err = bf16_check(got, a.astype(np.float64) @ b.astype(np.float64).T, 4096)\n"
             "        assert np.array_equal(got, bw_splitk.run_splitk(a, b, split))\n"
             "        print('split', split, 'relative error', err, 'rerun bit-identical')\n"
             "else:\n"
             "    print('no GPU: skipped launching')"),
]

MERGE = [
    ("md", "# Tutorial 16: Merge GEMMs with UMMA members (CUTLASS TS tutorials 11 and 12, Blackwell)\n\n"
           "**Tutorial 11**, `C = relu(A @ B^T)`: A comes by `cp.async` from two producer warps into an **AsyncUmma** "
           "ring, B by TMA into a **TmaUmma** ring, and the two rings form a `PipelineGroup` in `Merge` mode before "
           "the MMA warp: one full barrier per member, one shared empty barrier, so one `tcgen05.commit` "
           "(`ab.release()`) frees a stage of both. The accumulator is a two-stage **UmmaAsync** ring in TMEM, so "
           "the epilogue of one tile overlaps the MMAs of the next (a persistent kernel).\n\n"
           "**Tutorial 12**, `D = relu(A @ B^T) + R`: A and B through `Merge(TmaUmma + TmaUmma)`, and a second group "
           "`Merge(UmmaAsync accumulator + TmaAsync residual)` before the epilogue, released once per tile. (The "
           "Hopper ports, tutorials 10 and 11, need an explicit accumulator stage in shared memory; here the "
           "accumulator member is the TMEM ring itself.)"),
    ("code", SETUP),
    ("code", "from tsjit.examples import bw_merge_gemm, bw_merge_resadd"),
    ("source", "tsjit.examples.bw_merge_gemm: operand_rings, merge_gemm_umma.fn"),
    ("code", "for name, module in (('tutorial 11', bw_merge_gemm), ('tutorial 12', bw_merge_resadd)):\n"
             "    grouped, verdicts = compile_verified(module.compile_for)\n"
             "    separate = module.compile_for(grouped=False)\n"
             "    g, s = grouped.ptx.count('mbarrier.init'), separate.ptx.count('mbarrier.init')\n"
             "    print(f'{name}: checker {verdicts}, barriers: group {g}, separate rings {s}, saved {s - g}')\n"
             "    print('  tcgen05:', tcgen05_counts(grouped))\n"
             f"    sass(grouped, {UMMA_SASS})"),
    ("md", "Both on the CPU interpreter (two persistent CTAs over 2 x 3 tiles of 128 x 128, ragged M and N, outputs "
           "poisoned), against numpy float64:"),
    ("code", "with blackwell_interpreter():\n"
             "    got, ref = bw_merge_gemm.run_merge_gemm_umma(200, 300, 136, block_n=128, stages=2)\n"
             "    print('tutorial 11 interpreted: relative error', f'{bf16_check(got, ref, 136):.1e}')\n"
             "    got, ref = bw_merge_resadd.run_resadd_umma(200, 256, 136, block_n=128, stages=2)\n"
             "    print('tutorial 12 interpreted: relative error', f'{bf16_check(got, ref, 136):.1e}')"),
]

FORK = [
    ("md", "# Tutorial 17: a Fork with UMMA members (CUTLASS TS tutorial 13, Blackwell)\n\n"
           "One TMA-loaded A tile feeds two consumers from the same shared-memory stage: the MMA warp "
           "(`C = A @ B^T` into TMEM) through a **TmaUmma** member, and an activation task (`R = relu(A)`) through a "
           "**TmaAsync** member. The load warp acquires both members (the primary arms the one shared full barrier), "
           "loads A once and commits the group once (`fork.commit()`); each consumer frees the stage on its own "
           "empty barrier by its own mechanism: a `tcgen05.commit` for the MMA warp, thread arrivals for the "
           "activation task."),
    ("code", SETUP),
    ("code", "from tsjit.examples import bw_fork_gemm"),
    ("source", "tsjit.examples.bw_fork_gemm: fork_gemm_act_umma.fn"),
    ("code", "grouped, verdicts = compile_verified(bw_fork_gemm.compile_for)\n"
             "separate = bw_fork_gemm.compile_for(grouped=False)\n"
             "loads = 'cp.async.bulk.tensor.2d.shared::cluster.global'\n"
             "g, s = grouped.ptx.count('mbarrier.init'), separate.ptx.count('mbarrier.init')\n"
             "print(f'checker {verdicts}; barriers: group {g}, separate rings {s}, saved {s - g}; '\n"
             "      f'TMA loads per K tile: fork {grouped.ptx.count(loads)}, separate {separate.ptx.count(loads)}')\n"
             "print('tcgen05:', tcgen05_counts(grouped))\n"
             f"sass(grouped, {UMMA_SASS})"),
    ("code", "with blackwell_interpreter():\n"
             "    c, c_ref, r, r_ref = bw_fork_gemm.run_fork_umma(200, 300, 136, block_n=128, stages=2)\n"
             "assert np.array_equal(r, r_ref)\n"
             "print('interpreted: C relative error', f'{bf16_check(c, c_ref, 136):.1e}', '| R = relu(A) exact')"),
]

NVFP4 = [
    ("md", "# Tutorial 18: a block-scaled NVFP4 GEMM (CUTLASS TS tutorial 8, Blackwell)\n\n"
           "`C = (A * SFA) @ (B * SFB)^T` with A and B in NVFP4: E2M1 values (two per byte) and one UE4M3 scale per 16 "
           "elements. Two **TmaUmma** rings -- the packed operands and the scale-factor tiles -- form a Merge group; "
           "the MMA warp copies each MMA's scale factors into TMEM with `tcgen05.cp.32x128b.warpx4` (duplicated into "
           "the four 32-lane quarters, as PTX ISA §9.7.16.10.7 requires) and issues "
           "`tcgen05.mma.kind::mxf4nvf4.block_scale.block16`, then hands the TMEM accumulator to the epilogue "
           "(**UmmaAsync**).\n\n"
           "No Blackwell GPU is here: the kernel compiles, verifies and assembles, and it runs on tsjit's CPU "
           "interpreter, whose block-scaled MMA reads A, B and the scale matrices as the PTX ISA describes them "
           "(the row-to-lane placement of the scales comes from the ISA's figures via public secondary documentation: "
           "`tsjit/interpret/tcgen05_scaled.py`). The host packs the data (`quantize_nvfp4`), lays the scales out as "
           "the MMA reads them (`interleave_scales`), and `reference` is the float64 product of the dequantized "
           "operands. It builds for **sm_100f**: `kind::mxf4nvf4` with UE4M3 scales needs PTX ISA 8.7, and tsjit's "
           "sm_100a emits PTX 8.6."),
    ("code", SETUP),
    ("code", "from tsjit.examples import bw_nvfp4_gemm as nvfp4"),
    ("source", "tsjit.examples.bw_nvfp4_gemm: BlockScaledAccumulator, ScaleTiles.copy_to_tmem, nvfp4_gemm.fn"),
    ("code", "compiled, verdicts = compile_verified(nvfp4.compile_for)\n"
             "print('checker', verdicts, '| target', compiled.metadata['target'], '| registers', compiled.metadata['registers'],\n"
             "      '| spilled', compiled.metadata['spill_stores_bytes'], 'B')\n"
             "print('tcgen05:', tcgen05_counts(compiled))\n"
             "sass(compiled, ('UTCOMMA', 'UTCCP', 'UTCBAR', 'LDTM', 'UTMALDG', 'LDL', 'STL'))\n"
             "try:\n"
             "    nvfp4.compile_for('sm_100a')\n"
             "except tsjit.CompilationError as err:\n"
             "    print('sm_100a:', str(err).splitlines()[0][-150:])"),
    ("md", "The host path: NVFP4 quantization of a random matrix and the interleaved scale layout."),
    ("code", "x = np.random.default_rng().standard_normal((256, 512))\n"
             "packed, scales, values = nvfp4.quantize_nvfp4(x)\n"
             "print('packed', packed.shape, packed.dtype, '| scales', scales.shape, '| max |x - dequantized| / |x|max',\n"
             "      f'{np.abs(values - x).max() / np.abs(x).max():.3f}')\n"
             "print('interleaved scales', nvfp4.interleave_scales(scales).shape)"),
    ("md", "The kernel on the CPU interpreter at 128 x 256 x 1024 (two CTAs, four K tiles: the 3-stage rings wrap), "
           "C poisoned with NaN first, against the float64 reference."),
    ("code", "with blackwell_interpreter('sm_100f'):\n"
             "    got, want = nvfp4.run_tutorial8(128, 256, 1024)\n"
             "assert np.isfinite(got).all()\n"
             "assert np.all(np.abs(got - want) <= 2.0 ** -8 * np.abs(want) + 1e-5 * np.abs(want).max())\n"
             "print('interpreted: C relative error', f'{np.linalg.norm(got - want) / np.linalg.norm(want):.1e}', "
             "'(bf16 C)')"),
]

NOTEBOOKS = {
    "15_blackwell_split_k.ipynb": SPLIT_K,
    "16_blackwell_merge_gemm.ipynb": MERGE,
    "17_blackwell_fork.ipynb": FORK,
    "18_blackwell_nvfp4.ipynb": NVFP4,
}
