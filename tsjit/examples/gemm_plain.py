"""A plain (not warp-specialized) Hopper GEMM: ``C = A @ B^T`` (or ``A @ B``) in BFloat16 with
Float32 accumulation, written with ``tsjit.wgmma``, ``tsjit.Fragment`` and ``tsjit.epilogue``.
It validates those pieces; the warp-specialized, persistent GEMM is built on the same ones.

One CTA computes a ``BM x BN`` tile of C (BM = 64 or 128: one warpgroup per 64 rows; BN a
multiple of 64 up to 256):

* **Shared memory** (one dynamic block): a ring of ``STAGES`` slots, each holding the A tile
  (``BM x 64``) and the B tile (``BN x 64`` K-major, or ``64 x BN`` N-major) as 64 x 64 TMA
  boxes with 128-byte swizzle (one 128-byte swizzle row = 64 BFloat16 of K), plus ``full`` /
  ``empty`` mbarriers per slot; for the TMA epilogue, a C staging tile per warpgroup.
* **Producer**: thread 0 fills the ring in the prologue, then refills a slot as soon as every
  thread has released it (``empty``), with ``mbarrier.arrive.expect_tx`` + the TMA loads of the
  next K tile.  TMA zero-fills the parts of a box outside A / B, so ragged M, N, K need no
  special code in the main loop.
* **Consumers**: every warpgroup waits on ``full``, issues ``64 / 16 = 4`` wgmma per K tile
  (descriptor advanced by 32 bytes per K-step inside the swizzled row; ``wgmma_sw128.md``),
  commits, keeps one wgmma-group in flight (``wait_group(1)``) and then releases the slot the
  *previous* K tile used.
* **Epilogue** (``EPILOGUE``): ``"tma"`` converts the accumulators to BFloat16 with ``stmatrix``
  into a 128B-swizzled staging tile and stores it with TMA (clipped at C's edges); ``"direct"``
  stores from registers with bounds masks.

Host requirements: TMA needs 16-byte aligned row strides, so :func:`run_gemm_plain` pads rows
whose length is not a multiple of 8 elements and passes a strided view of the true shape.
"""
from __future__ import annotations

import numpy as np

import tsjit
from tsjit.runtime.arrays import DeviceArray, bfloat16_bits_to_float32, float_to_bfloat16_bits

BK = 64            # K elements per stage: one 128-byte swizzle row of BFloat16
BOX = 64           # TMA box edge (64 x 64 BFloat16 = 8 KiB, 128B swizzle)
WARPGROUP = 128


@tsjit.func
def load_stage(a_map, b_map, a_tiles, b_tiles, bar, slot, kt, m0, n0, WARPGROUPS, BN, B_MAJOR, STAGE_BYTES):
    """Arm ``bar`` for one stage and issue its TMA loads (one thread)."""
    tsjit.mbarrier_arrive_expect_tx(bar, STAGE_BYTES)
    k0 = kt * BK
    for w in tsjit.range_constexpr(WARPGROUPS):
        tsjit.tma_load(a_map, a_tiles[slot, w], bar, (m0 + w * BOX, k0))
    for j in tsjit.range_constexpr(BN // BOX):
        if tsjit.const_expr(B_MAJOR == "K"):
            tsjit.tma_load(b_map, b_tiles[slot, j], bar, (n0 + j * BOX, k0))   # B is (N, K)
        else:
            tsjit.tma_load(b_map, b_tiles[slot, j], bar, (k0, n0 + j * BOX))   # B is (K, N)


@tsjit.kernel
def gemm_plain(a_map, b_map, c_map, c, M, N, K, BM: tsjit.Constexpr[int], BN: tsjit.Constexpr[int],
               STAGES: tsjit.Constexpr[int], B_MAJOR: tsjit.Constexpr[str], EPILOGUE: tsjit.Constexpr[str]):
    """C[M, N] (BFloat16) = A[M, K] @ B^T (B_MAJOR "K": B is (N, K)) or A @ B ("MN": B is (K, N)).
    Launch with grid (ceil(N / BN), ceil(M / BM)) and BM / 64 * 128 threads."""
    WARPGROUPS = BM // 64
    THREADS = WARPGROUPS * WARPGROUP
    STAGE_BYTES = (BM + BN) * BK * 2
    a_tiles = tsjit.shared_array(tsjit.BFloat16, (STAGES, WARPGROUPS, BOX, BK), align=1024)
    if tsjit.const_expr(B_MAJOR == "K"):
        b_tiles = tsjit.shared_array(tsjit.BFloat16, (STAGES, BN // BOX, BOX, BK), align=1024)    # [n-box][n][k]
    else:
        b_tiles = tsjit.shared_array(tsjit.BFloat16, (STAGES, BN // BOX, BK, BOX), align=1024)    # [n-box][k][n]
    full = tsjit.shared_array(tsjit.Int64, STAGES, align=8)
    empty = tsjit.shared_array(tsjit.Int64, STAGES, align=8)

    tid = tsjit.thread_idx().x
    wg = tsjit.warp_idx() // 4                     # this thread's warpgroup (warp-uniform)
    m0 = tsjit.block_idx().y * BM
    n0 = tsjit.block_idx().x * BN
    k_tiles = (K + BK - 1) // BK

    if tid == 0:
        for s in tsjit.range_constexpr(STAGES):
            tsjit.mbarrier_init(full.ptr + s, 1)
            tsjit.mbarrier_init(empty.ptr + s, THREADS)
        tsjit.fence_mbarrier_init()
    tsjit.syncthreads()
    if tid == 0:
        for s in tsjit.range_constexpr(STAGES):
            if s < k_tiles:
                load_stage(a_map, b_map, a_tiles, b_tiles, full.ptr + s, s, s, m0, n0, WARPGROUPS, BN, B_MAJOR,
                           STAGE_BYTES)

    acc = tsjit.Fragment.zeros(BN // 2)
    slot = 0
    phase = 0
    for kt in range(k_tiles):
        tsjit.mbarrier_wait(full.ptr + slot, phase)
        a_desc = tsjit.wgmma.make_descriptor(a_tiles[slot, wg], major="K", swizzle="128B")
        b_desc = tsjit.wgmma.make_descriptor(b_tiles[slot], major=B_MAJOR, swizzle="128B")
        tsjit.wgmma.fence()
        for k in tsjit.range_constexpr(BK // 16):
            acc = tsjit.wgmma.mma_async(acc, a_desc.k_step(k), b_desc.k_step(k), n=BN)
        tsjit.wgmma.commit_group()
        tsjit.wgmma.wait_group(1)                  # the previous K tile's MMAs are done
        if kt > 0:
            prev = slot - 1 if slot > 0 else STAGES - 1
            tsjit.mbarrier_arrive(empty.ptr + prev)
            if tid == 0:
                refill = kt - 1 + STAGES
                if refill < k_tiles:
                    prev_phase = phase if slot > 0 else phase ^ 1
                    tsjit.mbarrier_wait(empty.ptr + prev, prev_phase)
                    load_stage(a_map, b_map, a_tiles, b_tiles, full.ptr + prev, prev, refill, m0, n0, WARPGROUPS,
                               BN, B_MAJOR, STAGE_BYTES)
        slot += 1
        if slot == STAGES:
            slot = 0
            phase ^= 1
    tsjit.wgmma.wait_group(0)
    acc = tsjit.wgmma.fence_operand(acc)           # no accumulator read moves above the wait

    row0 = m0 + wg * 64
    if tsjit.const_expr(EPILOGUE == "tma"):
        c_tiles = tsjit.shared_array(tsjit.BFloat16, (WARPGROUPS, BN // BOX, BOX, BOX), align=1024)
        tsjit.epilogue.store_fragment_shared(acc, c_tiles[wg], swizzle="128B")
        tsjit.fence_proxy_async()                  # stmatrix writes -> visible to the TMA unit
        tsjit.named_barrier_sync(1 + wg, WARPGROUP)
        if tid % WARPGROUP == 0:
            tsjit.epilogue.tma_store_tile(c_map, c_tiles[wg], (row0, n0))
            tsjit.bulk_commit_group()
            tsjit.bulk_wait_group(0)
    else:
        tsjit.epilogue.store_fragment_global(acc, c, row0, n0, M, N)


# -- host side ---------------------------------------------------------------------------------
def _padded(cols: int) -> int:
    """Row length (elements) giving 16-byte aligned BFloat16 rows."""
    return (cols + 7) // 8 * 8


def _device_matrix(bits: np.ndarray) -> DeviceArray:
    """A device BFloat16 matrix with ``bits``' shape whose rows start 16-byte aligned (a strided
    view of a padded allocation when the row length is not a multiple of 8)."""
    rows, cols = bits.shape
    width = _padded(cols)
    host = np.zeros((rows, width), np.uint16)
    host[:, :cols] = bits
    storage = tsjit.to_device(host, dtype=tsjit.BFloat16)
    if width == cols:
        return storage
    return DeviceArray((rows, cols), tsjit.BFloat16, strides=(width, 1), data_ptr=storage.data_ptr, owner=storage)


SMEM_LIMIT = 232448   # dynamic shared memory a CTA may opt in to on an H100/H200 (227 KiB)


def gemm_plain_config(*, BM: int = 128, BN: int = 256, stages: int | None = None, epilogue: str = "tma"):
    """(BM, BN, STAGES): STAGES defaults to the most (2..4) that fit in 227 KiB of shared memory
    next to the epilogue's staging tile."""
    if BM not in (64, 128) or BN % BOX or not BOX <= BN <= 256:
        raise ValueError(f"BM must be 64 or 128 and BN a multiple of 64 up to 256; got {BM}, {BN}")
    if stages is None:
        stage = (BM + BN) * BK * 2
        staging = BM * BN * 2 if epilogue == "tma" else 0
        stages = max(2, min(4, (SMEM_LIMIT - staging - 1024) // stage))
    return BM, BN, stages


def run_gemm_plain(M: int, N: int, K: int, *, b_layout: str = "NK", epilogue: str = "tma", BM: int = 128,
                   BN: int = 256, stages: int | None = None, rng=None):
    """Launch :func:`gemm_plain` on fresh random BFloat16 inputs into a NaN-poisoned output.

    Args:
        M, N, K: problem size (any positive ints; rows are padded to 16 bytes on the host).
        b_layout: ``"NK"`` (B is (N, K): C = A @ B^T, K-major B) or ``"KN"`` (B is (K, N): C = A @ B,
            N-major B).
        epilogue: ``"tma"`` (stmatrix + TMA store) or ``"direct"`` (masked register stores).
        BM, BN, stages: tile configuration (see :func:`gemm_plain_config`).

    Returns:
        ``(result, reference)``: C as float64 and the float64 numpy product of the same
        BFloat16-rounded inputs.
    """
    if b_layout not in ("NK", "KN") or epilogue not in ("tma", "direct"):
        raise ValueError(f"b_layout must be 'NK' or 'KN' and epilogue 'tma' or 'direct'; got {b_layout!r}, "
                         f"{epilogue!r}")
    rng = rng or np.random.default_rng()
    BM, BN, stages = gemm_plain_config(BM=BM, BN=BN, stages=stages, epilogue=epilogue)
    a_bits = float_to_bfloat16_bits(rng.standard_normal((M, K)))
    b_shape = (N, K) if b_layout == "NK" else (K, N)
    b_bits = float_to_bfloat16_bits(rng.standard_normal(b_shape))
    a = _device_matrix(a_bits)
    b = _device_matrix(b_bits)
    c_storage = tsjit.empty((M, _padded(N)), tsjit.BFloat16).fill_bytes(0xFF)      # NaN poison
    c = DeviceArray((M, N), tsjit.BFloat16, strides=(c_storage.shape[1], 1), data_ptr=c_storage.data_ptr,
                    owner=c_storage)
    box = (BOX, BOX)
    a_map = tsjit.TensorMap(a, box, swizzle="128B", l2_promotion="256B")
    b_map = tsjit.TensorMap(b, box, swizzle="128B", l2_promotion="256B")
    c_map = tsjit.TensorMap(c, box, swizzle="128B")
    grid = ((N + BN - 1) // BN, (M + BM - 1) // BM)
    b_major = "K" if b_layout == "NK" else "MN"
    gemm_plain[grid, (BM // 64 * WARPGROUP,)](a_map, b_map, c_map, c, np.int32(M), np.int32(N), np.int32(K), BM, BN,
                                              stages, b_major, epilogue)
    result = bfloat16_bits_to_float32(c.numpy()).astype(np.float64)
    a64 = bfloat16_bits_to_float32(a_bits).astype(np.float64)
    b64 = bfloat16_bits_to_float32(b_bits).astype(np.float64)
    reference = a64 @ (b64.T if b_layout == "NK" else b64)
    return result, reference


def compile_gemm_plain(*, b_layout: str = "NK", epilogue: str = "tma", BM: int = 128, BN: int = 256,
                       stages: int | None = None, target: str = "sm_90a") -> tsjit.CompiledKernel:
    """Compile :func:`gemm_plain` without a GPU (numpy stand-ins for the arrays)."""
    BM, BN, stages = gemm_plain_config(BM=BM, BN=BN, stages=stages, epilogue=epilogue)
    spec = tsjit.tensormap_spec(tsjit.BFloat16, (BOX, BOX), swizzle="128B")
    c = tsjit.spec((256, 256), tsjit.BFloat16)
    b_major = "K" if b_layout == "NK" else "MN"
    return tsjit.compile(gemm_plain, spec, spec, spec, c, np.int32(1), np.int32(1), np.int32(1), BM, BN, stages,
                         b_major, epilogue, target=target)
