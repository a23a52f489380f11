"""FlashAttention-style forward attention on Hopper, written in Task Scheduling (issue 16).

``O = softmax(scale * Q K^T + mask) V`` per (batch, head), with the per-row log-sum-exp
``LSE = log(sum_j exp(scale * s_ij))`` (natural log, fp32).  Q, K, V and O are
``(batch, seqlen, heads, head_dim)`` tensors (FlashAttention's layout; any strides with the last
dimension contiguous), or packed ``(1, tokens, heads, head_dim)`` variable-length batches with ``cu_seqlens``,
BFloat16 or Float16, head_dim 64, 128 or 256; K and V may have fewer heads than Q (GQA / MQA: query head
``h`` reads KV head ``h // (heads // kv_heads)``).  Tiles, masks and the tile order: :mod:`attention_tiles`;
the resources (Q, K, V rings, the output) and their works: :mod:`attention_resources`.

Program (one CTA = 3 warpgroups, 384 threads, one 128-row Q tile per work tile; with ``WARPGROUPS=3``, head_dim 64
only, 4 warpgroups, 512 threads, one 192-row Q tile, ``setmaxnreg`` 32 / 160 and the turns round-robin over three):

* ``load_kv`` (warp 0) and ``load_q`` (warp 1), ``setmaxnreg`` down to 40 with the ``idle`` padding
  warps 2-3: per work tile ``load_q`` TMA-loads the Q tile once (``q`` resource, a TmaAsync ring of 2
  stages, so the next tile's Q arrives while the current one is still in use) and ``load_kv`` walks the KV
  tiles of the tile's domain, loading K tile ``j`` into the ``k`` ring and V tile ``j`` into the ``v``
  ring (separate rings, so the QK^T of a tile can start before its V has arrived).  All tiles are
  128-byte swizzled, ``head_dim / 64`` boxes of 64 columns each; TMA zero-fills rows past the end.
* ``softmax`` (warpgroups 1 and 2, ``setmaxnreg`` up to 232): each warpgroup owns 64 rows of the Q
  tile.  Its works, per KV tile ``j``:

  - ``k.issue_scores``: ``S = Q K_j^T`` with ``wgmma`` (A = Q and B = K from shared memory,
    N = BLOCK_N), committed as one wgmma group;
  - ``k.softmax``: waits for S, masks the columns past ``seqlen_k`` and outside the causal / sliding-window
    band (only where some row of the warp's 16 must not see some key of the tile: one compare and one select per
    score, ``attention_softmax.mask_scores``), and runs the online softmax in fp32: the running row max ``m``, the
    rescale factor ``alpha = exp2((m_old - m_new) * scale * log2 e)`` and ``P = exp2(S * scale * log2 e
    - m * scale * log2 e)`` (one FMA per element, the scale folded in), the running row sums ``l``
    (thread-partial; the 4 threads of a row are summed once, in the epilogue), with ``ex2.approx.ftz`` (one
    MUFU each) and 4-chain tree reductions;
  - ``k.convert``: P rounded to the input dtype and packed in pairs: the wgmma Float32 accumulator
    layout of a 16-column slice of S is exactly the register A-fragment layout of an m64k16 wgmma, so
    pair ``t`` of S is register ``t`` of the A operand (PTX ISA §9.7.15.5.1.1, Figures 148/149);
  - ``v.rescale`` (``O *= alpha``) and ``v.issue_accumulate``: ``O += P V_j`` with register-A wgmma
    (B = V, MN-major); ``v.retire`` waits for it.

  ``consumer_schedule`` with ``OVERLAP=True`` (the default) software-pipelines these: KV tile 0 is peeled,
  iteration ``j`` issues ``S_j``, then ``P_{j-1} V_{j-1}``, and runs the softmax of ``S_j`` while that PV is on
  the tensor cores (intra-warpgroup overlap; the V waits lag one tile behind the K waits, and the last PV
  follows the loop).  ptxas would hoist the PV's ``wgmma.wait_group 0`` above the softmax's exp2s; a
  never-taken store that depends on them keeps them before it (see ``KTiles.softmax``).  With ``PINGPONG`` the two warpgroups also take turns issuing their wgmmas through named
  barriers 3 and 4 (``bar.sync`` before a warpgroup's first wgmma of an iteration, ``bar.arrive`` for the
  other after its last), so one warpgroup's softmax runs while the other's GEMMs occupy the tensor cores.
  With ``OVERLAP=False`` it does one tile at a time (the reference schedule; ``DEFAULT_OVERLAP``).

  After the last tile ``out.store`` normalizes O by ``l``, writes it through a 128B-swizzled
  shared-memory staging buffer (``stmatrix``) with TMA stores (clipped at ``seqlen_q``), or from registers
  with row guards (variable-length batches, head_dim 256), and stores the LSE.
* Causal masking and sliding windows (bottom-right aligned as in FlashAttention: query row ``i`` sees keys
  ``i + d - left <= j <= i + d + right``, ``d = seqlen_k - seqlen_q``, ``right = 0`` for causal): each work
  tile's domain is the KV tiles with a visible key (``Tile.kv_range``, ``AttentionTask.get_domain``), so fully
  masked tiles are never loaded; the tiles run in the order of a host-built table (longest first, balanced
  over the persistent CTAs; ``attention_tiles.tile_table``).
* Every task ends each tile with the queue epilogue; the TaskManager verifies the whole program
  (bracketing, counts, bytes, register budget, the exhaustive interleaving check) before any code
  is emitted.

Conditional rescaling (``RESCALE_THRESHOLD``, FlashAttention-4's): a warp's running maxima move only when a row's
maximum grew by more than that many powers of 2, so most KV tiles skip ``O *= alpha`` (a warp-uniform branch).

Rows that see no key (causal with ``seqlen_q > seqlen_k``) get O = 0 and LSE = -inf.
"""
from __future__ import annotations

import warnings

import tsjit
from tsjit import ts
from tsjit.examples.attention_config import (BLOCK_NS, BOX, CONSUMER_REGISTERS, CONSUMER_WARPGROUPS,  # noqa: F401
                                             DEFAULT_CONFIG, DEFAULT_OVERLAP, DEFAULT_PINGPONG, DEFAULT_Q_STAGES,
                                             DEFAULT_RESCALE_THRESHOLD, DEFAULT_WARPGROUPS, DEFAULT_DIRECT_STORE,
                                             DEFAULT_O_IN_Q, HEAD_DIMS, LOG2_E,
                                             PINGPONG_BARRIER, PRODUCER_REGISTERS, REGISTERS, THREADS, TURN_BARRIERS,
                                             box_columns, box_swizzle, threads)
from tsjit.examples.attention_tiles import BLOCK_M, AttentionShape  # noqa: F401
from tsjit.examples.attention_resources import (AttentionOutput, KTiles, KVRing, QTile, VTiles,  # noqa: F401
                                                k_step)
from tsjit.ts.work_queue import TileSchedulerConfig, WorkQueue


class AttentionTask(ts.Task):
    """A task whose domain (the KV tiles of a Q tile) depends on the tile: see :meth:`Tile.kv_range`."""

    shape = None

    def get_domain(self, tile_coord):
        return self.shape.tile(tile_coord).kv_range()[1]


def queue_epilogue(q):
    """The end of every task's work tile (check Q1): wait for, take and release the next tile."""
    q.wait()
    q.get_and_advance_work_tile()
    q.release()


# -- the kernel ---------------------------------------------------------------------------------
@tsjit.kernel
def attention_forward(q_map, k_map, v_map, o_map, out, lse, tiles, cu_seqlens_q, cu_seqlens_k, seqlen_q, seqlen_k,
                      heads, group, scale_log2, window_left, window_right,
                      HEAD_DIM: tsjit.Constexpr[int], BLOCK_N: tsjit.Constexpr[int], STAGES: tsjit.Constexpr[int],
                      CAUSAL: tsjit.Constexpr[bool], STORE_LSE: tsjit.Constexpr[bool] = True,
                      OVERLAP: tsjit.Constexpr[bool] = False, PINGPONG: tsjit.Constexpr[bool] = False,
                      Q_STAGES: tsjit.Constexpr[int] = 1, WINDOW: tsjit.Constexpr[bool] = False,
                      TABLE: tsjit.Constexpr[bool] = False, VARLEN: tsjit.Constexpr[bool] = False,
                      DIRECT_STORE: tsjit.Constexpr[bool] = False, RESCALE_THRESHOLD: tsjit.Constexpr[float] = -1.0,
                      WARPGROUPS: tsjit.Constexpr[int] = CONSUMER_WARPGROUPS,
                      O_IN_Q: tsjit.Constexpr[object] = None):
    """Forward attention (module docstring).

    ``q_map`` / ``o_map``: TensorMaps of Q and O (B, S_q, H, D) with boxes (1, 128, 1, 64) and (1, 64, 1, 64);
    ``k_map`` / ``v_map``: of K and V (B, S_k, H_kv, D) with box (1, BLOCK_N, 1, 64), all 128B-swizzled (packed
    variable-length tensors as B = 1); ``out``: O as a rank-2 (B * S_q, H * D) tensor (``DIRECT_STORE``);
    ``lse``: Float32 (B, H, S_q); ``tiles``: the Int32 (tiles, 2) tile table (``TABLE``:
    :func:`~tsjit.examples.attention_tiles.tile_table`); ``cu_seqlens_q/k``: Int32 (batch + 1) prefix sums of the
    sequence lengths (``VARLEN``, which needs ``TABLE``); ``seqlen_q/k``: the lengths (fixed-length problems;
    ``seqlen_q`` is S_q of ``out``); ``group = H // H_kv``; ``scale_log2 = softmax scale * log2(e)``;
    ``window_left`` / ``window_right``: the mask's bounds (``WINDOW`` / ``CAUSAL``; 0 right for causal);
    ``RESCALE_THRESHOLD`` >= 0: conditional rescaling (log2 units, :func:`~attention_softmax.online_softmax`),
    negative: O is rescaled after every KV tile; ``WARPGROUPS``: consumer warpgroups (2, or 3 for head_dim 64),
    64 Q rows each (``q_map``'s box is (1, 64 * WARPGROUPS, 1, 64)); ``O_IN_Q``: O staged in the tile's Q stage (:class:`AttentionOutput`; None: ``DEFAULT_O_IN_Q``
    of the head_dim unless ``DIRECT_STORE``).
    Launch with :func:`threads` (WARPGROUPS) threads (384 with two) and a persistent grid."""
    if tsjit.const_expr(WARPGROUPS not in REGISTERS):
        raise tsjit.CompilationError(f"attention_forward: WARPGROUPS must be one of {sorted(REGISTERS)}, "
                                     f"got {WARPGROUPS}")
    block_m = 64 * WARPGROUPS
    if tsjit.const_expr(VARLEN and not TABLE):
        raise tsjit.CompilationError("attention_forward: VARLEN needs TABLE (the tiles of the sequences)")
    if tsjit.const_expr(TABLE):
        queue_config = TileSchedulerConfig.create_static_persistent_tile_scheduler_params(tiles.shape[0])
    else:
        queue_config = TileSchedulerConfig.create_static_persistent_tile_scheduler_params(
            lse.shape[0] * heads, (seqlen_q + block_m - 1) // block_m)
    wq = WorkQueue(name="tiles", tile_scheduler_config=queue_config)
    itemsize = q_map.dtype.itemsize
    producer = ts.CooperativeGroup(ts.Agent.Thread, 1)
    consumers = ts.CooperativeGroup(ts.Agent.Thread, WARPGROUPS * 4)
    q_cfg = ts.PipelineConfig.create_tma_async_pipeline_cfg(Q_STAGES, block_m * HEAD_DIM * itemsize, producer,
                                                            consumers)
    kv_bytes = BLOCK_N * HEAD_DIM * itemsize
    k_cfg = ts.PipelineConfig.create_tma_async_pipeline_cfg(STAGES, kv_bytes, producer, consumers)
    v_cfg = ts.PipelineConfig.create_tma_async_pipeline_cfg(STAGES, kv_bytes, producer, consumers)
    shape = AttentionShape(seqlen_q=seqlen_q, seqlen_k=seqlen_k, heads=heads, group=group,
                           num_m_blocks=(seqlen_q + block_m - 1) // block_m, scale_log2=scale_log2, head_dim=HEAD_DIM,
                           block_n=BLOCK_N, causal=CAUSAL, pingpong=PINGPONG and OVERLAP, window=WINDOW,
                           window_left=window_left, window_right=window_right, table=tiles if TABLE else None,
                           cu_q=cu_seqlens_q if VARLEN else None, cu_k=cu_seqlens_k if VARLEN else None,
                           direct_store=DIRECT_STORE,
                           rescale_threshold=RESCALE_THRESHOLD if RESCALE_THRESHOLD >= 0 else None, block_m=block_m)
    qs = QTile(name="q", pipeline_config=q_cfg, q_map=q_map, shape=shape)
    ks = KTiles(name="k", pipeline_config=k_cfg, tmap=k_map, q=qs, shape=shape)
    vs = VTiles(name="v", pipeline_config=v_cfg, tmap=v_map, shape=shape)
    o_in_q = (DEFAULT_O_IN_Q[HEAD_DIM] and not DIRECT_STORE) if O_IN_Q is None else O_IN_Q
    if tsjit.const_expr(o_in_q and DIRECT_STORE):
        raise tsjit.CompilationError("attention_forward: O_IN_Q stages O for TMA stores; DIRECT_STORE stores it "
                                     "from registers: choose one")
    output = AttentionOutput(name="o", o_map=o_map, out=out, lse=lse, shape=shape, store_lse=STORE_LSE,
                             q=qs if o_in_q else None)
    run_program(wq, qs, ks, vs, output, shape, OVERLAP, WARPGROUPS)


def run_program(wq, qs, ks, vs, output, shape, OVERLAP, WARPGROUPS):
    """The schedules, tasks and verified TaskManager of the forward program over its resources, lowered into the
    kernel being compiled (compile-time Python; :func:`attention_forward` and the fp8 forward of
    :mod:`tsjit.examples.attention_fp8` share it)."""
    o_in_q = output.q is not None                      # O staged in the tile's Q stage (AttentionOutput)

    @ts.schedule
    def load_q_schedule(q: WorkQueue, qt: QTile):
        with ts.work_tile_loop(q):
            qt.acquire()
            qt.tma_load()
            qt.commit()
            with ts.domain_loop(0, 0, 1):
                pass
            queue_epilogue(q)

    @ts.schedule
    def load_kv_schedule(q: WorkQueue, kt: KTiles, vt: VTiles):
        with ts.work_tile_loop(q):
            if OVERLAP:
                kt.acquire()
                kt.tma_load(lagging=True)         # K tile 0, for the peeled first iteration
                kt.commit()
            with ts.domain_loop(1 if OVERLAP else 0, AttentionTask.get_domain, 1):
                kt.acquire()
                kt.tma_load()
                kt.commit()
                vt.acquire()
                vt.tma_load(lagging=OVERLAP)      # the pipelined loop's PV uses the previous V tile
                vt.commit()
            if OVERLAP:
                vt.acquire()
                vt.tma_load()                     # the last V tile, for the PV after the loop
                vt.commit()
            queue_epilogue(q)

    @ts.schedule
    def idle_schedule(q: WorkQueue):
        with ts.work_tile_loop(q):
            with ts.domain_loop(0, 0, 1):
                pass
            queue_epilogue(q)

    @ts.schedule
    def consumer_schedule(q: WorkQueue, qt: QTile, kt: KTiles, vt: VTiles, o: AttentionOutput):
        """``OVERLAP=False``: one KV tile at a time (S, softmax, then O = alpha O + P V, each waited for).

        ``OVERLAP=True``, software-pipelined (intra-warpgroup overlap): KV tile 0 is peeled (S_0, its softmax
        and P_0 before the loop); iteration j = 1 .. n-1 issues S_j = Q K_j^T and then O += P_{j-1} V_{j-1}, and
        runs the softmax of S_j while that PV is on the tensor cores; once the PV has retired, P_j is packed
        (into the old P's registers) and O is rescaled by alpha_j.  The loop body has no branch around a wgmma
        and touches no wgmma operand while one is in flight (ptxas keeps the wgmma pipeline only then, else it
        serializes or injects waits: C7513 / C7517); the PV of the last tile follows the loop."""
        if OVERLAP:
            vt.start_turns()
        with ts.work_tile_loop(q):
            stats = kt.reset_statistics()
            acc = vt.zero_output()
            qt.wait()
            q_stage = qt.current_stage()
            if OVERLAP:                                        # KV tile 0, peeled: S_0 and P_0, no PV yet
                kt.wait()
                s = kt.issue_scores(q_stage, peeled=True)
                s, stats = kt.softmax(s, stats, peeled=True)
                kt.release()
                p = kt.convert(s)
            with ts.domain_loop(1 if OVERLAP else 0, AttentionTask.get_domain, 1):
                kt.wait()
                s = kt.issue_scores(q_stage)
                if OVERLAP:
                    vt.wait()
                    acc = vt.issue_accumulate(p, acc)          # P_{j-1} V_{j-1}
                s, stats = kt.softmax(s, stats, overlapped=OVERLAP)
                kt.release()
                if OVERLAP:
                    acc = vt.retire(acc)
                    vt.release()
                p = kt.convert(s)
                acc = vt.rescale(acc, stats)                   # alpha_j, with no wgmma in flight
                if not OVERLAP:
                    vt.wait()
                    acc = vt.issue_accumulate(p, acc)          # P_j V_j
                    acc = vt.retire(acc)
                    vt.release()
            if OVERLAP:
                vt.wait()
                acc = vt.issue_accumulate(p, acc, last=True)
                acc = vt.retire(acc)
                vt.release()
            if o_in_q:                                         # O is staged in the tile's Q stage
                o.store(acc, stats, q_stage)
                qt.release()
            else:
                qt.release()
                o.store(acc, stats, q_stage)
            queue_epilogue(q)
        o.flush()

    def attention_task(name, sources, destinations, warp_idx, num_warps, schedule, registers):
        task = AttentionTask(name, sources, destinations, warp_idx=warp_idx, num_warps=num_warps, schedule=schedule,
                             num_registers=registers)
        task.shape = shape
        return task

    producer_registers, consumer_registers = REGISTERS[WARPGROUPS]
    load_kv = attention_task("load_kv", [wq], [ks, vs], 0, 1, load_kv_schedule(wq, ks, vs), producer_registers)
    load_q = ts.Task("load_q", [wq], [qs], warp_idx=1, num_warps=1, schedule=load_q_schedule(wq, qs),
                     num_registers=producer_registers)
    idle = ts.Task("idle", [wq], [], warp_idx=2, num_warps=2, schedule=idle_schedule(wq),
                   num_registers=producer_registers)
    softmax = attention_task("softmax", [wq, qs, ks, vs], [output], 4, 4 * WARPGROUPS,
                             consumer_schedule(wq, qs, ks, vs, output), consumer_registers)
    manager = build_manager([load_kv, load_q, idle, softmax], {ks: [wq], vs: [wq], qs: [wq], output: [ks, vs]})
    manager.setup_resources_and_tasks()
    manager.run()


def build_manager(tasks, graph):
    """The verified TaskManager of the program (compile-time Python).  Check H1 (a producer work in Head and in
    Loop, both at ``loop_offset`` = the loop start) is a heuristic that does not apply to the pipelined
    schedule's K ring: its Head load reads KV tile ``loop_offset - 1`` (``lagging``; the loop starts at 1), so
    that one warning is filtered; every other finding is reported as usual."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"\[H1\] \[head-loop-overlap\].* produces 'k' in Head",
                                category=ts.VerificationWarning)
        manager = ts.TaskManager(tasks, graph, verbose=False)
    for observer in MANAGER_OBSERVERS:
        observer(manager)
    return manager


#: callables given each verified TaskManager a compile of :func:`attention_forward` builds (a disk-cache hit builds
#: none): tutorial 30 renders the program from it (``manager.render``, ``manager.schedule_table()``)
MANAGER_OBSERVERS: list = []


def log2_scale(scale: float) -> float:
    """The softmax scale folded with log2(e): scores enter ``exp2`` as ``s * scale * log2 e``."""
    return float(scale) * LOG2_E


def compile_config(head_dim=128, causal=False, dtype=None, *, block_n=None, stages=None, store_lse=True,
                   overlap=None, pingpong=None, q_stages=None, window=False, table=None, varlen=False,
                   direct_store=None, rescale_threshold=None, warpgroups=None, o_in_q=None):
    """Compile :func:`attention_forward` for sm_90a from argument specs alone (no GPU, no tensors): the
    configuration ``tsjit.ops.attention`` would launch for these options (defaults per head_dim as there;
    ``table`` defaults to ``causal or window or varlen``, ``direct_store`` to ``varlen or head_dim == 256``).
    Returns the CompiledKernel (``.ptx``, ``.cubin``, ``.metadata``)."""
    dtype = tsjit.BFloat16 if dtype is None else dtype
    default_n, default_stages = DEFAULT_CONFIG[head_dim]
    block_n, stages = block_n or default_n, stages or default_stages
    overlap = DEFAULT_OVERLAP[head_dim] if overlap is None else overlap
    pingpong = DEFAULT_PINGPONG[head_dim] if pingpong is None else pingpong
    q_stages = q_stages or DEFAULT_Q_STAGES[head_dim]
    table = (causal or window or varlen) if table is None else table
    direct_store = (varlen or DEFAULT_DIRECT_STORE[head_dim]) if direct_store is None else direct_store
    rescale_threshold = DEFAULT_RESCALE_THRESHOLD[head_dim] if rescale_threshold is None else rescale_threshold
    warpgroups = DEFAULT_WARPGROUPS[head_dim] if warpgroups is None else warpgroups
    o_in_q = (DEFAULT_O_IN_Q[head_dim] and not direct_store) if o_in_q is None else o_in_q
    q = tsjit.tensormap_spec(dtype, (1, 64 * warpgroups, 1, BOX), swizzle="128B")
    kv = tsjit.tensormap_spec(dtype, (1, block_n, 1, BOX), swizzle="128B")
    o = tsjit.tensormap_spec(dtype, (1, 64, 1, BOX), swizzle="128B")
    out = tsjit.spec((2000, 16 * head_dim), dtype)
    lse = tsjit.spec((1 if varlen else 2, 16, 1000), tsjit.Float32)
    tiles = tsjit.spec((300, 2), tsjit.Int32)
    cu = tsjit.spec((3,), tsjit.Int32)
    return tsjit.compile(attention_forward, q, kv, kv, o, out, lse, tiles, cu, cu, 1000, 1000, 16, 2, 0.18, 200, 0,
                         head_dim, block_n, stages, causal, store_lse, overlap, pingpong and overlap, q_stages, window,
                         table, varlen, direct_store, float(rescale_threshold), warpgroups, o_in_q)
