"""mbarriers, fences, warp election, register reallocation, clusters and PDL (sm_90).

An mbarrier is an 8-byte object in shared memory (``Pointer[Int64]`` in address space 3,
from :func:`tsjit.shared_array` or the TS SMEM allocator).  Its *phase* completes when the
expected number of arrivals and transaction bytes have arrived; waits test the phase
parity.  Sources: PTX ISA 8.6 §9.7.13.15 "mbarrier", §9.7.13.3 "elect.sync", §9.7.17.1
"setmaxnreg", §9.7.13.4 "barrier.cluster", §9.7.13.14 "griddepcontrol", §9.7.9.21 "mapa".
"""
from __future__ import annotations

from llvmlite import ir

from tsjit.backend import emit
from tsjit.errors import CompilationError
from tsjit.lang import bounded_wait
from tsjit.lang import dtypes as dt
from tsjit.lang.builtins import lane_mask_operand
from tsjit.lang.memory import Pointer
from tsjit.lang.values import Value, integer_operand

_TX_LIMIT = 1 << 20  # mbarrier transaction count range (PTX ISA: 2**20 - 1)


def _barrier(bar, name: str) -> Pointer:
    if not isinstance(bar, Pointer) or bar.address_space != emit.SHARED:
        raise CompilationError(f"tsjit.{name} needs an mbarrier: a shared-memory Int64 pointer "
                               f"(e.g. tsjit.shared_array(tsjit.Int64, n)[...] address), got {bar!r}")
    if bar.dtype.bits != 64:
        raise CompilationError(f"tsjit.{name}: an mbarrier is 8 bytes; got a pointer to {bar.dtype.name}")
    return bar


def _i32(x, what: str) -> Value:
    if isinstance(x, int) and not 0 <= x < _TX_LIMIT:
        raise CompilationError(f"{what} must be in 0..{_TX_LIMIT - 1}, got {x}")
    return integer_operand(x, dt.Int32, what)


def _call(name: str, args):
    return emit.current().intrinsic(name, args)


def mbarrier_init(bar, count) -> None:
    """Initialize mbarrier ``bar`` to expect ``count`` arrivals per phase (1 <= count < 2**20).

    Call from one thread, then :func:`fence_mbarrier_init` and a CTA (or cluster) barrier before
    any other thread or the TMA unit uses it."""
    if isinstance(count, int) and not 1 <= count < _TX_LIMIT:
        raise CompilationError(f"mbarrier arrival count must be in 1..{_TX_LIMIT - 1}, got {count}")
    _call("llvm.nvvm.mbarrier.init.shared", [_barrier(bar, "mbarrier_init").ir, _i32(count, "count").ir])


def mbarrier_arrive(bar, count=1) -> None:
    """Arrive on ``bar`` (``count`` arrivals, release semantics at CTA scope)."""
    _call("llvm.nvvm.mbarrier.arrive.scope.cta.space.cta", [_barrier(bar, "mbarrier_arrive").ir, _i32(count, "count").ir])


def mbarrier_arrive_expect_tx(bar, nbytes) -> None:
    """Arrive on ``bar`` and raise its expected transaction count by ``nbytes`` (what TMA copies
    signalling this barrier will deliver); PTX ``mbarrier.arrive.expect_tx``."""
    _call("llvm.nvvm.mbarrier.arrive.expect.tx.scope.cta.space.cta",
          [_barrier(bar, "mbarrier_arrive_expect_tx").ir, _i32(nbytes, "nbytes").ir])


def mbarrier_expect_tx(bar, nbytes) -> None:
    """Raise ``bar``'s expected transaction count by ``nbytes`` without arriving."""
    _call("llvm.nvvm.mbarrier.expect.tx.scope.cta.space.cta",
          [_barrier(bar, "mbarrier_expect_tx").ir, _i32(nbytes, "nbytes").ir])


def mbarrier_try_wait(bar, phase) -> Value:
    """One bounded wait for the phase with parity ``phase`` (0/1) of ``bar`` to complete; Boolean result."""
    p = integer_operand(phase, dt.Int32, "tsjit.mbarrier_try_wait: phase")
    return Value(_call("llvm.nvvm.mbarrier.try.wait.parity.scope.cta.space.cta",
                       [_barrier(bar, "mbarrier_try_wait").ir, p.ir]), dt.Boolean)


def mbarrier_wait(bar, phase) -> None:
    """Block until the phase with parity ``phase`` of ``bar`` completes (a ``try_wait.parity`` loop).

    Under ``TSJIT_DEBUG=1`` the wait is bounded (``TSJIT_DEBUG_TIMEOUT_MS``): on expiry the kernel
    records where it hung and traps (:mod:`tsjit.lang.bounded_wait`)."""
    if bounded_wait.enabled():
        _barrier(bar, "mbarrier_wait")
        bounded_wait.bounded_wait(lambda: mbarrier_try_wait(bar, phase), phase)
        return
    km = emit.current()
    b = km.builder
    loop = km.function.append_basic_block("mbar.wait")
    done = km.function.append_basic_block("mbar.done")
    b.branch(loop)
    b.position_at_end(loop)
    ok = mbarrier_try_wait(bar, phase)
    b.cbranch(ok.ir, done, loop)
    b.position_at_end(done)


def mbarrier_arrive_cluster(bar, cta_rank, count=1) -> None:
    """Arrive on the mbarrier at ``bar``'s offset in the shared memory of cluster CTA ``cta_rank``
    (``mapa`` + ``mbarrier.arrive.release.cluster.shared::cluster``)."""
    remote = map_shared_rank(_barrier(bar, "mbarrier_arrive_cluster"), cta_rank)
    _call("llvm.nvvm.mbarrier.arrive.scope.cluster.space.cluster", [remote.ir, _i32(count, "count").ir])


def mbarrier_release_cluster(bar, cta_ranks) -> None:
    """A consumer's release of a pipeline stage: arrive once on the mbarrier at ``bar``'s offset in each
    cluster CTA of ``cta_ranks`` (ints or run-time Int32 values; this CTA's own rank may be among them),
    released at CTA scope: one ``fence.release.cta`` (SASS ``MEMBAR.ALL.CTA``), then ``mapa`` +
    ``mbarrier.arrive.relaxed.cluster.shared::cluster`` per CTA -- what CUTLASS's
    ``ClusterBarrier::arrive(cta_id)`` issues (``mbarrier.arrive.shared::cluster``, default ``.release.cta``).

    A consumer's release only orders this CTA's reads of the stage (retired wgmma, thread loads) before the
    producer's next writes into it (TMA copies issued after the producer's wait), so CTA scope suffices.
    :func:`mbarrier_arrive_cluster`'s ``.release.cluster`` (what a producer publishing data needs) makes
    ptxas put ``MEMBAR.ALL.CTA; MEMBAR.ALL.GPU; ERRBAR; CGAERRBAR`` before each arrive (SASS of the tutorial
    GEMM at cluster_m = 2, CUDA 13): in the MMA warps' K loop it stalled the next MMAs on every stage
    (BENCHMARKS.md, issue 15, helper i15c).  Sources: PTX ISA 8.6 §9.7.13.15.11 (``mbarrier.arrive``:
    ``.relaxed`` / ``.release``, ``.cta`` / ``.cluster``), §9.7.13.4 (``fence``)."""
    km = emit.current()
    bar = _barrier(bar, "mbarrier_release_cluster")
    km.builder.fence("release", "block")     # PTX fence.release.cta (LLVM's "block" sync scope)
    for rank in cta_ranks:
        remote = map_shared_rank(bar, rank)
        _call("llvm.nvvm.mbarrier.arrive.relaxed.scope.cluster.space.cluster", [remote.ir, _i32(1, "count").ir])


def mbarrier_arrive_expect_tx_cluster(bar, cta_rank, nbytes) -> None:
    """Arrive on the mbarrier at ``bar``'s offset in cluster CTA ``cta_rank`` and raise its expected
    transaction count by ``nbytes`` (``mapa`` + ``mbarrier.arrive.expect_tx.release.cluster.shared::cluster``;
    PTX ISA 8.0, sm_90): arming a peer CTA's barrier for the copies this CTA multicasts into it."""
    remote = map_shared_rank(_barrier(bar, "mbarrier_arrive_expect_tx_cluster"), cta_rank)
    _call("llvm.nvvm.mbarrier.arrive.expect.tx.scope.cluster.space.cluster", [remote.ir, _i32(nbytes, "nbytes").ir])


def fence_mbarrier_init() -> None:
    """Make prior ``mbarrier.init`` visible to the cluster and the async proxy (``fence.mbarrier_init``)."""
    _call("llvm.nvvm.fence.mbarrier_init.release.cluster", [])


def fence_proxy_async() -> None:
    """Order this thread's generic-proxy shared-memory accesses before later async-proxy ones
    (TMA store of data written by threads; ``fence.proxy.async.shared::cta``)."""
    _call("llvm.nvvm.fence.proxy.async.shared_cta", [])


def elect_one(mask: int = 0xFFFFFFFF) -> Value:
    """True on exactly one active lane of the warp (``elect.sync``); Boolean."""
    pair = _call("llvm.nvvm.elect.sync", [lane_mask_operand(mask, "elect_one")])
    return Value(emit.current().builder.extract_value(pair, 1), dt.Boolean)


def setmaxnreg(registers: int, *, increase: bool) -> None:
    """Reallocate the warpgroup's per-thread register budget to ``registers`` (24..256, multiple of 8).

    All warps of the warpgroup must execute it (``setmaxnreg.inc/dec.sync.aligned.u32``, sm_90a)."""
    if not isinstance(registers, int) or not 24 <= registers <= 256 or registers % 8:
        raise CompilationError(f"setmaxnreg needs a compile-time register count in 24..256, multiple of 8; "
                               f"got {registers!r}")
    direction = "inc" if increase else "dec"
    _call(f"llvm.nvvm.setmaxnreg.{direction}.sync.aligned.u32", [ir.Constant(emit.I32, registers)])


def map_shared_rank(ptr: Pointer, cta_rank) -> Pointer:
    """The address of ``ptr``'s location in the shared memory of cluster CTA ``cta_rank`` (DSMEM);
    loads/stores through the result are ``ld/st.shared::cluster``."""
    if not isinstance(ptr, Pointer) or ptr.address_space != emit.SHARED:
        raise CompilationError("tsjit.map_shared_rank needs a shared-memory pointer")
    rank = integer_operand(cta_rank, dt.Int32, "tsjit.map_shared_rank: cta_rank")
    remote = _call("llvm.nvvm.mapa.shared.cluster", [ptr.ir, rank.ir])
    return Pointer(remote, ptr.dtype, emit.SHARED_CLUSTER, ptr.alignment)


def cluster_arrive(relaxed: bool = False) -> None:
    """Arrive at the cluster-wide barrier (``barrier.cluster.arrive[.relaxed].aligned``)."""
    _call("llvm.nvvm.barrier.cluster.arrive" + (".relaxed" if relaxed else "") + ".aligned", [])


def cluster_wait() -> None:
    """Wait at the cluster-wide barrier (``barrier.cluster.wait.aligned``)."""
    _call("llvm.nvvm.barrier.cluster.wait.aligned", [])


def cluster_sync() -> None:
    """All threads of all CTAs of the cluster synchronize (arrive + wait)."""
    cluster_arrive()
    cluster_wait()


def _declare_pdl() -> None:
    km = emit.current()
    km.launch_requirements = km.launch_requirements.merged(pdl=True)


def griddepcontrol_wait() -> None:
    """PDL: wait until the preceding grid's memory operations are visible (``griddepcontrol.wait``).
    The kernel's launch contract records that it has PDL barriers (``LaunchRequirements.pdl``)."""
    _call("llvm.nvvm.griddepcontrol.wait", [])
    _declare_pdl()


def griddepcontrol_launch_dependents() -> None:
    """PDL: allow the dependent grid to launch (``griddepcontrol.launch_dependents``)."""
    _call("llvm.nvvm.griddepcontrol.launch.dependents", [])
    _declare_pdl()
