"""Persistent tile scheduling: ``WorkQueue`` and ``TileSchedulerConfig``.

A persistent kernel launches fewer CTAs than there are output tiles; each CTA loops over
work tiles with ``with work_tile_loop(wq, skip_if=...):``.  The :class:`WorkQueue` is the
resource that hands tiles out.  Every task of a persistent kernel lists the queue in
``src_resources`` and ends each tile with the queue epilogue (check Q1)::

    wq.init_work_tile()                      # optional, before the loop (auxiliary)
    with work_tile_loop(wq, skip_if=...) as wtl:
        with wtl.skippable():
            with domain_loop(...):
                ...                           # per-tile work; stage_info.work_tile
        wq.try_wait()                         # optional
        wq.wait()
        wq.get_and_advance_work_tile()
        wq.release()

Static persistent scheduling (``TileSchedulerType.StaticPersistent``, any GPU; the queue
has no pipeline and no producer, so its wait/release are no-ops):

* the tile grid is ``num_tiles_m x num_tiles_n x num_tiles_l``; ``num_tiles`` is the
  product;
* CTA ``b = blockIdx.x`` processes the linear tiles ``b, b + gridDim.x, b + 2*gridDim.x,
  ...`` while they are ``< num_tiles`` (``init_work_tile`` gives tile ``b``,
  ``get_and_advance_work_tile`` adds ``gridDim.x``); ``is_valid`` is ``tile_idx <
  num_tiles`` and the work tile loop runs while the current tile is valid;
* linear index -> coordinates ``(m, n, l)``: ``l = t // (M*N)``, ``r = t % (M*N)``, then

  - ``order="row"``: ``m = r // N``, ``n = r % N`` (consecutive tiles walk along n);
  - ``order="column"``: ``m = r % M``, ``n = r // M`` (consecutive tiles walk along m);
  - ``order="grouped"`` (L2-friendly, as Triton's grouped ordering): with ``G =
    group_size_m``, ``group = r // (G*N)``, ``first_m = group*G``, ``rows = min(M -
    first_m, G)``, ``m = first_m + (r % (G*N)) % rows``, ``n = (r % (G*N)) // rows``
    (a group of G tile rows is walked column by column).

CLC dynamic persistent scheduling (``ClcDynamicPersistent``, sm_100a / sm_100f; clusters of
``cta_layout_vmnk`` (V, M, 1, 1), along x) steals tiles with cluster launch control (:mod:`tsjit.lang.clc`).  The grid is
launched over every tile (CTA ``b`` starts with tile ``b``); a ``ClcFetchAsync`` ring of 16-byte
responses carries the stolen ones.  Exactly one scheduler task (``dst_resources=[wq]``, one warp)
starts each tile epilogue with ``[try_acquire,] acquire, fetch_work_tile, commit``:
``fetch_work_tile`` issues ``clusterlaunchcontrol.try_cancel`` into the stage's response slot,
completing the stage's full barrier (armed with 16 bytes by the acquire).  Every task's
``get_and_advance_work_tile`` (after ``wait``) decodes the response with ``query_cancel``: the
canceled CTA's ``%ctaid.x`` is the next tile, valid while a cluster was canceled.  In a cluster of
C > 1 CTAs CTA 0 fetches for all: its acquire arms every CTA's full barrier (lane j arms CTA j),
``fetch_work_tile`` issues ``try_cancel.multicast::cluster::all`` (the response lands in every CTA),
and CTA r of the cluster takes tile ``first_ctaid.x + r``; every consumer thread of every CTA releases
to CTA 0's empty barrier.  The grid is a whole number of clusters (the launch contract).  On sm_90a
the lowering refuses the ring ("needs sm_100a").

Work bodies (compiled by the frontend with ``self`` bound to the queue) use only
``lang.builtins.block_idx()``, ``lang.builtins.grid_dim()``, integer arithmetic and
``lang.values.select`` (from ``tsjit.lang``, never the package face ``tsjit``); the
helpers they call (``tile_info``, ``initial_work_tile``, ``next_work_tile``) run at
compile time on run-time values and never branch on them, so they also work with plain
Python ints (host tests).

Task-local variables:

* ``work_tile`` (:class:`WorkTileInfo`): written by ``init_work_tile`` and
  ``get_and_advance_work_tile``; its default is ``initial_work_tile()`` (the lowering
  creates it inside the kernel).  The lowering exposes the current value as
  ``stage_info.work_tile``.
* ``skip_work_tile`` (Boolean): the value of ``skip_if(wq, work_tile)`` (or
  ``skip_if(work_tile)``) for the current tile; the lowering evaluates the predicate once
  per tile and ``wtl.skippable()`` blocks run when it is false.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from tsjit import lang  # the device language; its modules load when device code compiles
from tsjit.errors import CompilationError, UsageTypeError, UsageValueError, VerificationError
from tsjit.lang.dtypes import Boolean
from tsjit.ts.cluster_layout import cluster_size
from tsjit.ts.enums import WorkAttr
from tsjit.ts.memory import SmemAllocation
from tsjit.ts.memory_resource import MemoryResource, TaskLocalVariable
from tsjit.ts.work import consumer_work, producer_work

__all__ = ["TileSchedulerType", "TileSchedulerConfig", "WorkTileInfo", "WorkQueue",
           "CLC_RESPONSE_BYTES", "PersistentTileSchedulerParams",
           "ClcDynamicPersistentTileSchedulerParams"]

#: bytes of one ``clusterlaunchcontrol.try_cancel`` response.
CLC_RESPONSE_BYTES = 16


class TileSchedulerType(enum.Enum):
    """The flavour of a :class:`WorkQueue`."""

    StaticPersistent = "StaticPersistent"
    ClcDynamicPersistent = "ClcDynamicPersistent"

    def __str__(self) -> str:
        return self.value


class WorkTileInfo(NamedTuple):
    """One work tile: linear index, coordinates ``(m, n, l)``, validity.

    A NamedTuple so that the frontend merges it element by element at control-flow joins
    (one phi per field).  Fields may be run-time values or Python ints.
    """

    tile_idx: Any
    coords: tuple
    is_valid: Any


def _select(condition: Any, if_true: Any, if_false: Any) -> Any:
    return lang.values.select(condition, if_true, if_false)


def _one_of(name: str, value: Any, other_name: str, other: Any) -> Any:
    """``value`` or ``other`` (two spellings of one argument), refusing both."""
    if value is not None and other is not None:
        raise UsageTypeError(f"TileSchedulerConfig got both {name} and {other_name} (two spellings of one "
                             f"argument); pass it once.")
    return other if value is None else value


def _is_default(value: Any, default: Any) -> bool:
    """``value`` is the parameter's default (compared without ``==`` on device values)."""
    return value is default or (type(value) is type(default) and value == default)


def _tile_shape(value: Any, what: str) -> tuple:
    shape = tuple(value) if isinstance(value, (tuple, list)) else (value,)
    if not 1 <= len(shape) <= 3:
        raise UsageValueError(f"{what} must have 1 to 3 entries (m, n, l), got {value!r}")
    return shape + (1,) * (3 - len(shape))


@dataclass(frozen=True)
class PersistentTileSchedulerParams:
    """The reference's static persistent scheduler parameters (CUTLASS's params object).

    Attributes:
        problem_shape_ntile_mnl: the tile grid ``(tiles_m, tiles_n, tiles_l)`` (1-3 entries;
            ints or run-time values).
        cluster_shape_mnk: CTAs per cluster; tsjit's static queue hands out one tile per CTA,
            so only ``(1, 1, 1)`` is accepted (clustered tile hand-out is not lowered).
        swizzle_size: 1, or the rows of tiles per L2 group (tsjit's ``order="grouped"``,
            ``group_size_m=swizzle_size``; only with ``raster_along_m=False``).
        raster_along_m: consecutive tiles walk along m (``order="column"``); False: along n
            (``order="row"``).

    Raises:
        UsageValueError: a cluster shape other than (1, 1, 1), a swizzle with raster along m.
    """

    problem_shape_ntile_mnl: Any
    cluster_shape_mnk: tuple = (1, 1, 1)
    swizzle_size: int = 1
    raster_along_m: bool = True

    def __post_init__(self):
        _tile_shape(self.problem_shape_ntile_mnl, "problem_shape_ntile_mnl")
        if tuple(self.cluster_shape_mnk) != (1, 1, 1):
            raise UsageValueError(
                f"cluster_shape_mnk={self.cluster_shape_mnk!r}: tsjit's persistent queues hand out one tile per "
                f"CTA; pass cluster_shape_mnk=(1, 1, 1) and map a CTA's tile to its cluster in the work bodies.")
        if not isinstance(self.swizzle_size, int) or self.swizzle_size < 1:
            raise UsageValueError(f"swizzle_size must be an int >= 1, got {self.swizzle_size!r}")
        if self.swizzle_size > 1 and self.raster_along_m:
            raise UsageValueError(
                f"swizzle_size={self.swizzle_size} with raster_along_m=True: tsjit's L2 grouping walks groups of "
                f"tile rows column by column; pass raster_along_m=False for it.")

    def scheduler_fields(self) -> dict:
        """The equivalent :class:`TileSchedulerConfig` fields (tile counts, order, group size)."""
        m, n, l = _tile_shape(self.problem_shape_ntile_mnl, "problem_shape_ntile_mnl")
        if self.swizzle_size > 1:
            order, group = "grouped", self.swizzle_size
        else:
            order, group = ("column" if self.raster_along_m else "row"), 8
        return dict(num_tiles_m=m, num_tiles_n=n, num_tiles_l=l, order=order, group_size_m=group)


@dataclass(frozen=True)
class ClcDynamicPersistentTileSchedulerParams(PersistentTileSchedulerParams):
    """The reference's CLC dynamic scheduler parameters: the same fields as
    :class:`PersistentTileSchedulerParams` (the tile grid the CLC responses index)."""


@dataclass(frozen=True, eq=False, init=False)
class TileSchedulerConfig:
    """How a WorkQueue assigns tiles (build it with a ``create_*`` factory).

    Constructed in the reference's form, ``TileSchedulerConfig(tile_scheduler_type,
    tile_scheduler_params, response_ptr=None)`` (positional or by keyword; the params object carries
    the tile grid and order), or in tsjit's, ``TileSchedulerConfig(scheduler_type, num_tiles_m,
    num_tiles_n=1, num_tiles_l=1, order="row", group_size_m=8)``.

    Attributes:
        scheduler_type: :class:`TileSchedulerType`.
        num_tiles_m, num_tiles_n, num_tiles_l: the tile grid (ints or run-time values).
        order: ``"row"``, ``"column"`` or ``"grouped"`` (see the module docstring).
        group_size_m: rows of tiles per group for ``order="grouped"``.
        response_ptr: CLC only: where the 16-byte responses live (None: the SMEM allocator
            places them).
        params: the reference's params object this config was built from, or None.

    The reference's names ``tile_scheduler_type`` / ``tile_scheduler_params`` are properties.
    """

    scheduler_type: TileSchedulerType
    num_tiles_m: Any
    num_tiles_n: Any = 1
    num_tiles_l: Any = 1
    order: str = "row"
    group_size_m: int = 8
    response_ptr: Any = field(default=None)
    params: Any = field(default=None)

    def __init__(self, scheduler_type: Any = None, num_tiles_m: Any = None, num_tiles_n: Any = 1,
                 num_tiles_l: Any = 1, order: str = "row", group_size_m: int = 8, response_ptr: Any = None,
                 params: Any = None, *, tile_scheduler_type: Any = None, tile_scheduler_params: Any = None):
        """Raises:
            UsageTypeError: both spellings of one field, tile counts next to a params object, or a
                ``tile_scheduler_params`` that is not a ``PersistentTileSchedulerParams``.
            UsageValueError: a field out of range (see ``__post_init__``).
        """
        scheduler_type = _one_of("scheduler_type", scheduler_type, "tile_scheduler_type", tile_scheduler_type)
        params = _one_of("params", params, "tile_scheduler_params", tile_scheduler_params)
        if isinstance(num_tiles_m, PersistentTileSchedulerParams):   # the reference's positional form
            params = _one_of("the second argument", num_tiles_m, "tile_scheduler_params", params)
            num_tiles_m = None
            if not _is_default(num_tiles_n, 1):                      # its third argument is response_ptr
                response_ptr = _one_of("the third argument", num_tiles_n, "response_ptr", response_ptr)
                num_tiles_n = 1
        if params is not None:
            if not isinstance(params, PersistentTileSchedulerParams):
                raise UsageTypeError(
                    f"TileSchedulerConfig tile_scheduler_params must be a PersistentTileSchedulerParams or "
                    f"ClcDynamicPersistentTileSchedulerParams, got {params!r}; for tile counts write "
                    f"TileSchedulerConfig(scheduler_type, num_tiles_m, num_tiles_n, num_tiles_l).")
            given = {name: value for name, value, default in (
                ("num_tiles_m", num_tiles_m, None), ("num_tiles_n", num_tiles_n, 1), ("num_tiles_l", num_tiles_l, 1),
                ("order", order, "row"), ("group_size_m", group_size_m, 8)) if not _is_default(value, default)}
            if given:
                raise UsageTypeError(
                    f"TileSchedulerConfig got tile_scheduler_params and {', '.join(given)}: the params object "
                    f"already carries the tile grid and order (problem_shape_ntile_mnl, raster_along_m, "
                    f"swizzle_size); pass one or the other.")
            fields = params.scheduler_fields()
            num_tiles_m, num_tiles_n, num_tiles_l = fields["num_tiles_m"], fields["num_tiles_n"], fields["num_tiles_l"]
            order, group_size_m = fields["order"], fields["group_size_m"]
        elif num_tiles_m is None:
            raise UsageTypeError(
                "TileSchedulerConfig needs the tile grid: TileSchedulerConfig(tile_scheduler_type, "
                "tile_scheduler_params) with a PersistentTileSchedulerParams, or TileSchedulerConfig(scheduler_type, "
                "num_tiles_m, num_tiles_n, num_tiles_l); the create_*_tile_scheduler_params factories take either.")
        for name, value in (("scheduler_type", scheduler_type), ("num_tiles_m", num_tiles_m),
                            ("num_tiles_n", num_tiles_n), ("num_tiles_l", num_tiles_l), ("order", order),
                            ("group_size_m", group_size_m), ("response_ptr", response_ptr), ("params", params)):
            object.__setattr__(self, name, value)
        self.__post_init__()

    def __post_init__(self):
        if not isinstance(self.scheduler_type, TileSchedulerType):
            raise UsageTypeError(f"scheduler_type must be a TileSchedulerType, got "
                                 f"{self.scheduler_type!r}")
        if self.order not in ("row", "column", "grouped"):
            raise UsageValueError(f"TileSchedulerConfig order must be 'row', 'column' or 'grouped', got "
                                  f"{self.order!r}")
        if not isinstance(self.group_size_m, int) or isinstance(self.group_size_m, bool) \
                or self.group_size_m < 1:
            raise UsageValueError(f"TileSchedulerConfig group_size_m must be an int >= 1, got "
                                  f"{self.group_size_m!r}")
        if self.response_ptr is not None:
            raise UsageValueError(
                f"response_ptr={self.response_ptr!r}: tsjit places the CLC responses itself (16 bytes per "
                f"stage, laid out by the TaskManager's SmemAllocator next to the queue's barriers); pass "
                f"response_ptr=None.")
        for name in ("num_tiles_m", "num_tiles_n", "num_tiles_l"):
            value = getattr(self, name)
            if isinstance(value, bool) or value is None or (
                    isinstance(value, (int, float)) and (not isinstance(value, int) or value < 1)):
                raise UsageValueError(f"TileSchedulerConfig {name} must be an int >= 1 or a run-time "
                                      f"integer, got {value!r}")

    @classmethod
    def create_static_persistent_tile_scheduler_params(
            cls, num_tiles_m: Any = None, num_tiles_n: Any = 1, num_tiles_l: Any = 1, *,
            order: str = "row", group_size_m: int = 8, tile_scheduler_params: Any = None) -> "TileSchedulerConfig":
        """Static round-robin assignment: CTA b gets tiles b, b + gridDim.x, ... (any GPU).

        Takes the reference's ``PersistentTileSchedulerParams`` object as its only argument
        (positional or ``tile_scheduler_params=``), or tsjit's shorthand: the tile counts and
        ``order`` / ``group_size_m``.
        """
        if isinstance(num_tiles_m, PersistentTileSchedulerParams):
            num_tiles_m, tile_scheduler_params = None, _one_of(
                "the first argument", num_tiles_m, "tile_scheduler_params", tile_scheduler_params)
        return cls(TileSchedulerType.StaticPersistent, num_tiles_m, num_tiles_n, num_tiles_l,
                   order=order, group_size_m=group_size_m, tile_scheduler_params=tile_scheduler_params)

    @classmethod
    def create_clc_dynamic_persistent_tile_scheduler_params(
            cls, params: Any = None, response_ptr: Any = None, *,
            tile_scheduler_params: Any = None) -> "TileSchedulerConfig":
        """CLC work stealing (sm_100a).  ``params`` (or the reference's keyword
        ``tile_scheduler_params=``) is the reference's ``ClcDynamicPersistentTileSchedulerParams``
        (or ``PersistentTileSchedulerParams``), a static config (the tile grid and order) or a tuple
        ``(num_tiles_m, num_tiles_n, num_tiles_l)``."""
        params = _one_of("params", params, "tile_scheduler_params", tile_scheduler_params)
        if params is None:
            raise UsageTypeError("create_clc_dynamic_persistent_tile_scheduler_params needs "
                                 "tile_scheduler_params (a ClcDynamicPersistentTileSchedulerParams)")
        if isinstance(params, PersistentTileSchedulerParams):
            return cls(TileSchedulerType.ClcDynamicPersistent, response_ptr=response_ptr,
                       tile_scheduler_params=params)
        if isinstance(params, TileSchedulerConfig):
            return cls(TileSchedulerType.ClcDynamicPersistent, params.num_tiles_m,
                       params.num_tiles_n, params.num_tiles_l, order=params.order,
                       group_size_m=params.group_size_m, response_ptr=response_ptr)
        grid = tuple(params) if isinstance(params, (tuple, list)) else (params,)
        if not 1 <= len(grid) <= 3:
            raise UsageValueError(f"CLC tile scheduler params must be a TileSchedulerConfig or 1-3 "
                                  f"tile counts, got {params!r}")
        return cls(TileSchedulerType.ClcDynamicPersistent, *grid, response_ptr=response_ptr)

    @property
    def tile_scheduler_type(self) -> TileSchedulerType:
        """The reference's name of ``scheduler_type``."""
        return self.scheduler_type

    @property
    def tile_scheduler_params(self) -> PersistentTileSchedulerParams:
        """The reference's params object: the one given, or the equivalent of tsjit's fields
        (``order="grouped"`` becomes ``swizzle_size=group_size_m, raster_along_m=False``)."""
        if self.params is not None:
            return self.params
        klass = PersistentTileSchedulerParams if self.is_static else ClcDynamicPersistentTileSchedulerParams
        grid = (self.num_tiles_m, self.num_tiles_n, self.num_tiles_l)
        if self.order == "grouped":
            return klass(grid, swizzle_size=self.group_size_m, raster_along_m=False)
        return klass(grid, raster_along_m=self.order == "column")

    @property
    def is_static(self) -> bool:
        return self.scheduler_type is TileSchedulerType.StaticPersistent

    @property
    def num_tiles(self) -> Any:
        """``num_tiles_m * num_tiles_n * num_tiles_l``."""
        return self.num_tiles_m * self.num_tiles_n * self.num_tiles_l

    def coords(self, tile_idx: Any) -> tuple:
        """``(m, n, l)`` of linear tile ``tile_idx`` (formula in the module docstring)."""
        m_tiles, n_tiles = self.num_tiles_m, self.num_tiles_n
        per_l = m_tiles * n_tiles
        l = tile_idx // per_l
        r = tile_idx % per_l
        if self.order == "row":
            return (r // n_tiles, r % n_tiles, l)
        if self.order == "column":
            return (r % m_tiles, r // m_tiles, l)
        group_tiles = self.group_size_m * n_tiles
        first_m = (r // group_tiles) * self.group_size_m
        left = m_tiles - first_m
        rows = _select(left < self.group_size_m, left, self.group_size_m)
        within = r % group_tiles
        return (first_m + within % rows, within // rows, l)


@dataclass(kw_only=True, eq=False, repr=False)
class WorkQueue(MemoryResource):
    """The persistent tile queue (see the module docstring).

    Fields:
        tile_scheduler_config: a :class:`TileSchedulerConfig`.
        pipeline_config: None for static scheduling; a ``ClcFetchAsync`` config for CLC.

    Raises:
        UsageTypeError: ``tile_scheduler_config`` is not a TileSchedulerConfig.
        VerificationError: (Q1) the pipeline config does not match the scheduler type.
    """

    is_work_queue = True

    tile_scheduler_config: TileSchedulerConfig = None
    work_tile: TaskLocalVariable = TaskLocalVariable.uninitialized()
    skip_work_tile: TaskLocalVariable = TaskLocalVariable.uninitialized()

    def __post_init__(self):
        config = self.tile_scheduler_config
        if not isinstance(config, TileSchedulerConfig):
            raise UsageTypeError(
                f"WorkQueue {self.name!r} needs tile_scheduler_config=TileSchedulerConfig."
                f"create_static_persistent_tile_scheduler_params(num_tiles_m, ...), got "
                f"{type(config).__name__}")
        pipeline = self.pipeline_config
        if config.is_static and pipeline is not None:
            raise VerificationError(f"WorkQueue {self.name!r}: a static persistent queue has no "
                                    f"pipeline; drop pipeline_config.", check="Q1")
        if not config.is_static:
            kind = getattr(getattr(pipeline, "pipeline_type", None), "value", None)
            if kind != "ClcFetchAsync":
                raise VerificationError(
                    f"WorkQueue {self.name!r}: CLC scheduling needs pipeline_config="
                    f"PipelineConfig.create_clc_fetch_async_pipeline_cfg(...), got "
                    f"{kind or type(pipeline).__name__}.", check="Q1")
            layout = pipeline.cta_layout_vmnk
            if isinstance(layout, tuple) and len(layout) == 4 and tuple(layout[2:]) != (1, 1):
                raise VerificationError(
                    f"WorkQueue {self.name!r}: CLC scheduling over cta_layout_vmnk={tuple(layout)!r}: tsjit's CLC "
                    f"queue hands out tiles by %ctaid.x, so a cluster must lie along x; use (V, M, 1, 1).",
                    check="Q1")
        self.work_tile = TaskLocalVariable(WorkTileInfo, default_factory=self.initial_work_tile,
                                           docs="the current work tile")
        self.skip_work_tile = TaskLocalVariable(Boolean, default=False,
                                                docs="skip_if(work_tile) for the current tile")

    # -- properties ------------------------------------------------------------------------
    @property
    def scheduler_type(self) -> TileSchedulerType:
        return self.tile_scheduler_config.scheduler_type

    @property
    def is_static(self) -> bool:
        return self.tile_scheduler_config.is_static

    def get_smem_requirements(self) -> list:
        """CLC: one 16-byte response slot per stage; static: nothing."""
        if self.is_static:
            return []
        if getattr(self, "_clc_responses", None) is None:
            stages = self.pipeline_config.num_stages
            self._clc_responses = SmemAllocation(f"{self.name}.clc_responses", CLC_RESPONSE_BYTES * stages,
                                                 alignment=16, dtype=lang.dtypes.Uint8,
                                                 count=CLC_RESPONSE_BYTES * stages)
        return [self._clc_responses]

    @property
    def cluster_ctas(self) -> int:
        """CTAs per cluster of the CLC ring's ``cta_layout_vmnk`` (1 for a static queue).  Clusters lie along
        x (``cta_layout_vmnk`` (V, M, 1, 1)): a CTA's tile is its ``%ctaid.x``, and a canceled cluster's CTAs
        take the tiles ``first_ctaid.x + cluster rank``."""
        config = self.pipeline_config
        if config is None:
            return 1
        return cluster_size(config)

    def response_slot(self, stage):
        """CLC: the 16-byte response slot of ring stage ``stage`` (device code)."""
        (responses,) = self.get_smem_requirements()
        return lang.clc.response_slot(responses.tensor(), stage)

    # -- compile-time helpers (run on run-time values; no branching on them) ----------------
    def tile_info(self, tile_idx: Any) -> WorkTileInfo:
        """The :class:`WorkTileInfo` of linear tile ``tile_idx``."""
        config = self.tile_scheduler_config
        return WorkTileInfo(tile_idx, config.coords(tile_idx), tile_idx < config.num_tiles)

    def initial_work_tile(self) -> WorkTileInfo:
        """Tile ``blockIdx.x`` (call inside a kernel): static, and CLC (whose grid covers every tile)."""
        return self.tile_info(lang.builtins.block_idx().x)

    def stolen_work_tile(self, stage) -> WorkTileInfo:
        """CLC: the tile of the cluster the response of ring stage ``stage`` canceled (``%ctaid.x`` of its
        first CTA), valid when one was canceled (``query_cancel``, PTX ISA 9.1 §9.7.13.18)."""
        canceled, first = lang.clc.query_cancel(self.response_slot(stage))
        tile = first.x
        if self.cluster_ctas > 1:     # this CTA's counterpart in the canceled cluster (clusters along x)
            tile = tile + lang.builtins.cluster_ctarank()
        info = self.tile_info(tile)
        return info._replace(is_valid=canceled & info.is_valid)

    def next_work_tile(self, tile: WorkTileInfo) -> WorkTileInfo:
        """Static: the tile ``gridDim.x`` further on."""
        self.require_static("get_and_advance_work_tile")
        return self.tile_info(tile.tile_idx + lang.builtins.grid_dim().x)

    def require_static(self, what: str) -> None:
        if not self.is_static:
            raise CompilationError(
                f"WorkQueue {self.name!r}: {what} with {self.scheduler_type} scheduling needs "
                f"sm_100a (clusterlaunchcontrol.try_cancel); on sm_90a use "
                f"TileSchedulerConfig.create_static_persistent_tile_scheduler_params(...)")

    def require_clc(self, what: str) -> None:
        """Raise: ``what`` is the CLC scheduler's producer work and this queue is static."""
        raise CompilationError(
            f"WorkQueue {self.name!r}: {what} is the CLC scheduler's producer work; a "
            f"static persistent queue has no producer (remove it from the schedule)")

    def skip_work_tile_if(self, tile: WorkTileInfo) -> Any:
        """Default ``skip_if`` predicate: skip nothing.  Override in a subclass (and pass
        ``skip_if=wq.skip_work_tile_if``) or pass any ``(wq, tile)`` / ``(tile)`` callable."""
        return False

    # -- work methods (compiled by the frontend) -----------------------------------------------
    @consumer_work(returns="work_tile", work_attrs=WorkAttr.AUXILIARY)
    def init_work_tile(self, stage_info):
        """Seed the first tile of this CTA."""
        return self.initial_work_tile()

    @consumer_work(returns="work_tile")
    def get_and_advance_work_tile(self, stage_info):
        """Move to the next tile of this CTA (static: ``tile_idx + gridDim.x``; CLC: the stolen tile of
        the waited stage's response)."""
        if self.is_static:
            return self.next_work_tile(stage_info.work_tile)
        return self.stolen_work_tile(stage_info.stage_idx)

    @producer_work
    def fetch_work_tile(self, stage_info):
        """CLC scheduler task (one warp): one elected thread asks for the next tile,
        ``clusterlaunchcontrol.try_cancel`` into the stage's response slot, completing the stage's
        full barrier (``stage_info.barrier``)."""
        if self.is_static:
            self.require_clc("fetch_work_tile")
        if self.cluster_ctas == 1:
            if lang.sync.elect_one():
                lang.clc.try_cancel(self.response_slot(stage_info.stage_idx), stage_info.barrier)
        elif lang.builtins.cluster_ctarank() == 0:
            # CTA 0 cancels a whole cluster; the response lands in every CTA (each armed by CTA 0's acquire)
            if lang.sync.elect_one():
                lang.clc.try_cancel(self.response_slot(stage_info.stage_idx), stage_info.barrier, multicast=True)
