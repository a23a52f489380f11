"""Launch configurations and the launch call: validation against the device's limits, the
driver's ``CUlaunchConfig`` per stream, and ``cuLaunchKernelEx``.

:func:`launch` (= :func:`prepare_launch` + :func:`launch_prepared`) validates a configuration
once per ``(grid, block, smem_bytes, cluster, pdl)`` and function, caches a ``CUlaunchConfig``
per stream (with the cluster-dimension / programmatic-stream-serialization attributes when asked
for), then makes one ``cuLaunchKernelEx`` call through cuda-bindings.  The warm path of
``kernel[grid, block](...)`` (:mod:`tsjit.runtime.launch`) makes the same call through ctypes
with the address of the same ``CUlaunchConfig``.

Sources: CUDA Driver API reference ("Execution Control"); CUDA C++ Programming Guide ("Thread
Block Clusters", "Programmatic Dependent Launch").
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass
from operator import index as _as_int

from tsjit.errors import LaunchError, hide_from_pytest
from tsjit.runtime import driver
from tsjit.runtime.driver import DeviceProperties, Function
from tsjit.runtime.streams import stream_handle, thread_state

__tracebackhide__ = hide_from_pytest  # pytest shows a TsjitError without tsjit's frames

_PREPARED_CACHE_LIMIT = 256     # launch configurations remembered per Function


@dataclass(frozen=True)
class LaunchConfig:  # a validated launch configuration; dimension tuples are (x, y, z)

    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    smem_bytes: int
    cluster: tuple[int, int, int] | None
    pdl: bool


MAX_PORTABLE_CLUSTER_SIZE = 8  # CUDA C++ Programming Guide, "Thread Block Clusters"


def _dims(value, field: str, limits=None) -> tuple[int, int, int]:
    items = list(value) if isinstance(value, (tuple, list)) else [value]
    dims = ()
    if 1 <= len(items) <= 3:
        try:
            dims = tuple([_as_int(v) for v in items] + [1] * (3 - len(items)))
        except TypeError:
            dims = ()
    if not dims:
        raise LaunchError(f"launch field '{field}' must be an int or a tuple of 1-3 ints; got {value!r}")
    for axis, (extent, limit) in enumerate(zip(dims, limits or ())):
        if not 1 <= extent <= limit:
            raise LaunchError(f"launch field '{field}[{axis}]' must be in 1..{limit}; got {extent} "
                              f"({field}={dims})")
    return dims


def validate_launch_config(grid, block, *, smem_bytes: int = 0, cluster=None, pdl: bool = False,
                           properties: DeviceProperties, static_smem_bytes: int = 0,
                           kernel_max_threads: int | None = None) -> LaunchConfig:
    """Check a launch configuration against device limits, without calling the driver.

    Args:
        grid: CTAs per grid, an int or ``(x[, y[, z]])``; each in ``1..max_grid_dims[i]``.
        block: threads per CTA, likewise; each within ``max_block_dims[i]``, the product at
            most ``max_threads_per_block`` (and ``kernel_max_threads`` when given).
        smem_bytes: dynamic shared memory per CTA, bytes; at most the opt-in limit minus
            ``static_smem_bytes``.
        cluster: CTAs per cluster or ``None``; each divides the grid's dimension, the
            product at most 8 (portable cluster size); needs sm_90.
        pdl: programmatic dependent launch (``griddepcontrol``); needs sm_90.
        properties: the device's limits.

    Raises:
        LaunchError: naming the field (``grid[1]``, ``block``, ``smem_bytes``,
            ``cluster[0]``, ...), the allowed range and the value given.
    """
    g = _dims(grid, "grid", properties.max_grid_dims)
    b = _dims(block, "block", properties.max_block_dims)
    threads = b[0] * b[1] * b[2]
    for limit, who in ((properties.max_threads_per_block, "the device"),
                       (kernel_max_threads, "this kernel (register use, launch bounds)")):
        if limit is not None and threads > limit:
            raise LaunchError(f"launch field 'block' has {threads} threads per CTA; {who} allows at most "
                              f"{limit} (block={b})")
    smem_limit = properties.max_dynamic_smem_optin - static_smem_bytes
    if not hasattr(smem_bytes, "__index__") or not 0 <= smem_bytes <= smem_limit:
        raise LaunchError(f"launch field 'smem_bytes' must be an int in 0..{smem_limit} (opt-in limit "
                          f"{properties.max_dynamic_smem_optin} - {static_smem_bytes} static); got {smem_bytes!r}")
    c = None
    if cluster is not None:
        c = _dims(cluster, "cluster")
        for axis in range(3):
            if c[axis] < 1 or g[axis] % c[axis]:
                raise LaunchError(f"launch field 'cluster[{axis}]' must be >= 1 and divide grid[{axis}]="
                                  f"{g[axis]}; got {c[axis]} (cluster={c}, grid={g})")
        size = c[0] * c[1] * c[2]
        if size > MAX_PORTABLE_CLUSTER_SIZE:
            raise LaunchError(f"launch field 'cluster' has {size} CTAs per cluster; at most "
                              f"{MAX_PORTABLE_CLUSTER_SIZE} (portable cluster size) are allowed (cluster={c})")
    for field, used in (("cluster", c is not None), ("pdl", pdl)):
        if used and properties.capability < (9, 0):
            raise LaunchError(f"launch field '{field}' needs compute capability 9.0+; got {properties.capability}")
    return LaunchConfig(g, b, _as_int(smem_bytes), c, bool(pdl))


class PreparedLaunch:
    """A validated :class:`LaunchConfig` of one kernel and its ``CUlaunchConfig`` per stream
    (built once each and never mutated, so launches from several threads need no lock)."""

    __slots__ = ("config", "default", "by_stream")

    def __init__(self, config: LaunchConfig):
        self.config, self.by_stream = config, {}
        self.default = self.for_stream(0)  # the legacy default stream

    def for_stream(self, stream):
        value = stream if stream.__class__ is int else int(stream)
        cfg = self.by_stream.get(value)
        if cfg is None:
            cu = driver.bindings()
            cfg, config = cu.CUlaunchConfig(), self.config
            cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = config.grid
            cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = config.block
            cfg.sharedMemBytes, cfg.hStream = config.smem_bytes, cu.CUstream(value)
            ids, launch_attrs = cu.CUlaunchAttributeID, []
            if config.cluster is not None:
                launch_attrs.append(cu.CUlaunchAttribute())
                launch_attrs[-1].id = ids.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
                dim = launch_attrs[-1].value.clusterDim
                dim.x, dim.y, dim.z = config.cluster
            if config.pdl:
                launch_attrs.append(cu.CUlaunchAttribute())
                launch_attrs[-1].id = ids.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
                launch_attrs[-1].value.programmaticStreamSerializationAllowed = 1
            cfg.attrs, cfg.numAttrs = launch_attrs, len(launch_attrs)
            if len(self.by_stream) >= 64:
                self.by_stream.clear()
            self.by_stream[value] = cfg
        return cfg


def launch(fn: Function, grid, block, params, *, smem_bytes: int = 0, stream=None,
           cluster=None, pdl: bool = False) -> None:
    """Launch ``fn`` asynchronously on ``stream``.

    Args:
        fn: a :class:`Function`; grid, block, smem_bytes, cluster, pdl: see
            :func:`validate_launch_config` (a larger ``smem_bytes`` raises the kernel's limit).
        params: ``kernelParams``: the int address of a ``void*[N]`` whose entry ``i`` points
            at argument ``i``'s bytes (a TMA descriptor's entry is ``TensorMap.address()``),
            or a buffer-protocol object holding that array (ctypes array), or ``None``.
            The driver copies the arguments before returning; buffers may be reused.
        stream: ``None`` (:func:`current_stream`), a :class:`Stream`, an int handle, or a
            torch/cupy/cuda.core stream.

    Raises:
        LaunchError: invalid configuration (checked once per distinct configuration), no GPU,
            or the driver refused.  Faults inside the kernel surface at the next sync.
    """
    prepared = prepare_launch(fn, grid, block, smem_bytes, cluster, pdl)
    if stream is None:
        stream = thread_state.stream
    launch_prepared(fn, prepared, params, 0 if stream is None else stream_handle(stream))


def prepare_launch(fn: Function, grid, block, smem_bytes: int = 0, cluster=None,
                   pdl: bool = False) -> PreparedLaunch:
    """Validate a launch configuration once (cached on ``fn``; a larger ``smem_bytes`` raises
    the kernel's dynamic shared-memory limit) for :func:`launch_prepared`.  Raises like
    :func:`launch`."""
    key = (grid, block, smem_bytes, cluster, pdl)
    try:
        return fn._prepared[key]
    except (KeyError, TypeError):  # first use of this configuration, or unhashable (a list)
        pass
    attrs = driver.function_attributes(fn)
    config = validate_launch_config(grid, block, smem_bytes=smem_bytes, cluster=cluster, pdl=pdl,
                                    properties=driver.device_properties(), static_smem_bytes=attrs.static_smem_bytes,
                                    kernel_max_threads=attrs.max_threads_per_block)
    limit = attrs.max_dynamic_smem_bytes if fn.max_dynamic_smem is None else fn.max_dynamic_smem
    if config.smem_bytes > limit:
        driver.set_max_dynamic_smem(fn, config.smem_bytes)
    prepared = PreparedLaunch(config)
    with contextlib.suppress(TypeError):  # an unhashable configuration is validated every time
        if len(fn._prepared) >= _PREPARED_CACHE_LIMIT:
            fn._prepared.clear()
        fn._prepared[key] = prepared
    return prepared


def launch_prepared(fn: Function, prepared: PreparedLaunch, params, stream=0) -> None:
    """The hot path of ``kernel[grid, block](...)``: one ``cuLaunchKernelEx`` with the cached
    config for ``stream`` (an int handle or ``CUstream``; 0 is the legacy default stream).
    ``params`` as in :func:`launch`.  Raises ``LaunchError`` if the driver refuses."""
    cu = driver.bindings()   # with the context current on this thread
    cfg = prepared.default if stream.__class__ is int and stream == 0 else prepared.for_stream(stream)
    err = cu.cuLaunchKernelEx(cfg, fn.handle, params, 0)[0]
    if err:
        raise LaunchError(driver.with_notes(f"launch of kernel {fn.name!r} ({prepared.config}) failed: "
                                      f"{driver.describe_result(err)}"))
