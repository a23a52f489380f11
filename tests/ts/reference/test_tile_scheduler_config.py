"""Reference section ``TileSchedulerConfig``: the two factories taking the reference's params
objects, the reference's field names, and a persistent kernel built from a params object
(compiled for sm_90a; on the GPU it writes each tile's (m, n) coordinates).
"""
from dataclasses import dataclass

import numpy as np
import pytest

import tsjit
from tsjit import ts
from tsjit.errors import UsageTypeError, UsageValueError
from tsjit.ts import (ClcDynamicPersistentTileSchedulerParams, PersistentTileSchedulerParams,
                      TileSchedulerConfig, TileSchedulerType, WorkQueue)

conformance = pytest.mark.conformance


@conformance("A2", "create_static_persistent_tile_scheduler_params(params)")
def test_static_factory_takes_a_params_object():
    params = PersistentTileSchedulerParams((3, 4, 2), (1, 1, 1), 1, False)
    config = TileSchedulerConfig.create_static_persistent_tile_scheduler_params(params)
    assert config.tile_scheduler_type is TileSchedulerType.StaticPersistent
    assert config.tile_scheduler_params is params and config.num_tiles == 24
    assert [config.coords(t) for t in (0, 1, 4, 12)] == [(0, 0, 0), (0, 1, 0), (1, 0, 0), (0, 0, 1)]


@conformance("A2", "fields tile_scheduler_type / tile_scheduler_params / response_ptr")
def test_constructor_takes_the_reference_positional_form():
    """``TileSchedulerConfig(type, params)`` puts the params object in tile_scheduler_params, not in
    num_tiles_m (newcomer report 6, item 2)."""
    params = PersistentTileSchedulerParams((4, 3, 1))
    for config in (TileSchedulerConfig(TileSchedulerType.StaticPersistent, params),
                   TileSchedulerConfig(TileSchedulerType.StaticPersistent, params, None)):
        assert config.tile_scheduler_params is params and config.response_ptr is None
        assert (config.num_tiles_m, config.num_tiles_n, config.num_tiles_l, config.order) == (4, 3, 1, "column")
        assert config.num_tiles == 12


@conformance("A2", "fields tile_scheduler_type / tile_scheduler_params / response_ptr")
def test_constructor_and_factories_take_the_reference_keywords():
    params = PersistentTileSchedulerParams((2, 5, 1), raster_along_m=False)
    by_keyword = TileSchedulerConfig(tile_scheduler_type=TileSchedulerType.StaticPersistent,
                                     tile_scheduler_params=params, response_ptr=None)
    factory = TileSchedulerConfig.create_static_persistent_tile_scheduler_params(tile_scheduler_params=params)
    clc_params = ClcDynamicPersistentTileSchedulerParams((4, 3, 1), (1, 1, 1))
    clc = TileSchedulerConfig.create_clc_dynamic_persistent_tile_scheduler_params(
        tile_scheduler_params=clc_params, response_ptr=None)
    for config in (by_keyword, factory):
        assert config.tile_scheduler_type is TileSchedulerType.StaticPersistent
        assert config.tile_scheduler_params is params
        assert [config.coords(t) for t in range(6)] == [(0, n, 0) for n in range(5)] + [(1, 0, 0)]
    assert clc.tile_scheduler_type is TileSchedulerType.ClcDynamicPersistent and clc.num_tiles == 12


def test_params_object_next_to_tile_counts_names_both():
    params = PersistentTileSchedulerParams((4, 3, 1))
    with pytest.raises(UsageTypeError, match=r"tile_scheduler_params and num_tiles_l, order"):
        TileSchedulerConfig(TileSchedulerType.StaticPersistent, tile_scheduler_params=params, num_tiles_l=2,
                            order="grouped")
    with pytest.raises(UsageTypeError, match=r"both tile_scheduler_type and scheduler_type|both scheduler_type"):
        TileSchedulerConfig(TileSchedulerType.StaticPersistent, tile_scheduler_type=TileSchedulerType.StaticPersistent,
                            tile_scheduler_params=params)
    with pytest.raises(UsageTypeError, match=r"tile_scheduler_params must be a PersistentTileSchedulerParams"):
        TileSchedulerConfig(tile_scheduler_type=TileSchedulerType.StaticPersistent, tile_scheduler_params=(4, 3, 1))
    with pytest.raises(UsageTypeError, match=r"needs the tile grid"):
        TileSchedulerConfig(TileSchedulerType.StaticPersistent)


def test_raster_along_m_walks_m_first():
    config = TileSchedulerConfig.create_static_persistent_tile_scheduler_params(
        PersistentTileSchedulerParams((3, 4, 1)))
    assert config.order == "column"
    assert [config.coords(t) for t in range(4)] == [(0, 0, 0), (1, 0, 0), (2, 0, 0), (0, 1, 0)]


def test_swizzle_is_the_grouped_order():
    config = TileSchedulerConfig.create_static_persistent_tile_scheduler_params(
        PersistentTileSchedulerParams((4, 3, 1), swizzle_size=2, raster_along_m=False))
    same = TileSchedulerConfig.create_static_persistent_tile_scheduler_params(4, 3, order="grouped", group_size_m=2)
    assert [config.coords(t) for t in range(12)] == [same.coords(t) for t in range(12)]


@conformance("A2", "fields tile_scheduler_type / tile_scheduler_params / response_ptr")
def test_reference_field_names_on_a_tile_count_config():
    config = TileSchedulerConfig.create_static_persistent_tile_scheduler_params(5, 2, order="grouped", group_size_m=4)
    params = config.tile_scheduler_params
    assert isinstance(params, PersistentTileSchedulerParams)
    assert (params.problem_shape_ntile_mnl, params.swizzle_size, params.raster_along_m) == ((5, 2, 1), 4, False)
    assert config.response_ptr is None


CLC_RESPONSES = "tsjit lays out the CLC responses itself: response_ptr must be None (an error says so)"


@conformance("A2", "create_clc_dynamic_persistent_tile_scheduler_params(params, response_ptr)", reason=CLC_RESPONSES)
@conformance("§1.5", "create_clc_dynamic_persistent_tile_scheduler_params(params, response_ptr)", reason=CLC_RESPONSES)
def test_clc_factory_takes_a_params_object():
    params = ClcDynamicPersistentTileSchedulerParams((8, 8, 1), (1, 1, 1))
    config = TileSchedulerConfig.create_clc_dynamic_persistent_tile_scheduler_params(params, None)
    assert config.tile_scheduler_type is TileSchedulerType.ClcDynamicPersistent
    assert config.tile_scheduler_params is params and config.num_tiles == 64
    with pytest.raises(UsageValueError, match="response_ptr"):
        TileSchedulerConfig.create_clc_dynamic_persistent_tile_scheduler_params(params, 0x1000)


def test_cluster_shape_other_than_one_cta_says_why():
    with pytest.raises(UsageValueError, match="one tile per CTA"):
        PersistentTileSchedulerParams((4, 4, 1), (2, 1, 1))


@dataclass(kw_only=True)
class TileCoords(ts.MemoryResource):
    """Writes (m, n) of each work tile at out[2 * tile], out[2 * tile + 1]."""

    out: object

    @ts.producer_work
    def record(self, stage_info):
        tile = stage_info.work_tile
        if tsjit.thread_idx().x == 0:
            self.out[2 * tile.tile_idx] = tile.coords[0]
            self.out[2 * tile.tile_idx + 1] = tile.coords[1]


@tsjit.kernel
def tile_coords(out, tiles_m, tiles_n):
    params = ts.PersistentTileSchedulerParams((tiles_m, tiles_n, 1), (1, 1, 1), 1, True)
    wq = WorkQueue(name="wq",
                   tile_scheduler_config=ts.TileSchedulerConfig.create_static_persistent_tile_scheduler_params(params))
    coords = TileCoords(name="coords", out=out)

    @ts.schedule
    def per_tile(q: WorkQueue, c: TileCoords):
        with ts.work_tile_loop(q):
            with ts.domain_loop(0, 1, 1):
                c.record()
            q.wait()
            q.get_and_advance_work_tile()
            q.release()

    task = ts.Task([wq], [coords], 0, 1, schedule=per_tile(wq, coords), name="tiles")
    manager = ts.TaskManager([task], {coords: [wq]}, verbose=False)
    manager.setup_resources_and_tasks()
    manager.run()


def test_params_object_queue_compiles_for_sm90a():
    kernel = tsjit.compile(tile_coords, np.zeros(64, np.int32), 4, 8, target="sm_90a")
    assert kernel.cubin[:4] == b"\x7fELF"


@pytest.mark.gpu_or_interpret
def test_params_object_queue_visits_every_tile_in_m_first_order():
    tiles_m, tiles_n = 5, 3
    out = tsjit.empty(2 * tiles_m * tiles_n, tsjit.Int32).fill_bytes(0xFF)
    tile_coords[(4,), (32,)](out, tiles_m, tiles_n)
    got = out.numpy().reshape(-1, 2)
    expected = [(t % tiles_m, t // tiles_m) for t in range(tiles_m * tiles_n)]
    assert [tuple(row) for row in got] == expected
