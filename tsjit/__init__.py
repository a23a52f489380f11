"""tsjit: a Triton-style JIT for warp-specialized NVIDIA GPU kernels.

Public API (everything a kernel author needs is re-exported here)::

    @tsjit.kernel
    def add(x, y, out, n):
        i = tsjit.block_idx().x * tsjit.block_dim().x + tsjit.thread_idx().x
        if i < n:
            out[i] = x[i] + y[i]

    add[(blocks,), (256,)](x, y, out, n)

The Task Scheduling model lives in :mod:`tsjit.ts`.
"""
from tsjit.errors import (CacheError, CompilationError, LaunchError, ScheduleError, TsjitError,
                          VerificationError)
from tsjit.lang.dtypes import (BFloat16, Boolean, DType, Float8E4M3, Float8E5M2, Float16, Float32, Float64, Int8,
                               Int16, Int32, Int64, Uint8, Uint16, Uint32, Uint64)
from tsjit.lang.constexpr import Constexpr, const_expr, range, range_constexpr
from tsjit.lang import math
from tsjit.lang.values import Value, select
from tsjit.lang.memory import Pointer, Tensor, dynamic_shared, shared_array
from tsjit.lang.builtins import (address_of, atomic_add, atomic_cas, atomic_max, atomic_min, block_dim,
                                 block_idx, clock64, cluster_ctarank, cluster_size, device_print, grid_dim,
                                 lane_idx, named_barrier_arrive, named_barrier_sync, shuffle, shuffle_down,
                                 shuffle_up, shuffle_xor, syncthreads, syncwarp, thread_idx, threadfence,
                                 vote_all, vote_any, vote_ballot, warp_idx)
from tsjit.lang.sync import (cluster_arrive, cluster_sync, cluster_wait, elect_one, fence_mbarrier_init,
                             fence_proxy_async, griddepcontrol_launch_dependents, griddepcontrol_wait,
                             map_shared_rank, mbarrier_arrive, mbarrier_arrive_cluster, mbarrier_arrive_expect_tx,
                             mbarrier_expect_tx, mbarrier_init, mbarrier_try_wait, mbarrier_wait, setmaxnreg)
from tsjit.lang.async_copy import cp_async, cp_async_commit_group, cp_async_mbarrier_arrive, cp_async_wait_group
from tsjit.lang.tma import bulk_commit_group, bulk_wait_group, prefetch_tensormap, tma_load, tma_store
from tsjit.lang.fragment import Fragment
from tsjit.lang import epilogue, wgmma
from tsjit.frontend.calls import DeviceFunction, func
from tsjit.frontend.specs import tensormap_spec
from tsjit.runtime.kernel import CompiledKernel, Kernel, compile, kernel
from tsjit.runtime.arrays import DeviceArray, empty, spec, to_device, zeros
from tsjit.runtime.tensormap import TensorMap

__version__ = "0.1.0"


def static_print(*args) -> None:
    """Print compile-time values while a kernel compiles (Python's ``print`` at trace time)."""
    print(*args)
