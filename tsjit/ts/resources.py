"""The reference's module path: ``task_scheduling.resources`` is ``tsjit.ts.resources``.

The Task Scheduling API reference documents its resource classes under
``cutlass.experimental.task_scheduling.resources``; a program ported from it writes
``from tsjit.ts.resources import PipelineConfig, MemoryResource, ...``.  This module only
re-exports those names from where tsjit defines them (every one is also on :mod:`tsjit.ts`):

==============================================================  =====================================
names                                                           defined in
==============================================================  =====================================
``MemoryResource``, ``TaskLocalVariable``, ``StageInfo``,       :mod:`tsjit.ts.memory_resource`
``ResourceContext``
``consumer_work``, ``producer_work``                            :mod:`tsjit.ts.work`
``PipelineConfig``                                              :mod:`tsjit.ts.pipeline`
``TileSchedulerConfig``, ``WorkQueue``, ``WorkTileInfo``,       :mod:`tsjit.ts.work_queue`
``PersistentTileSchedulerParams``,
``ClcDynamicPersistentTileSchedulerParams``
``PdlWaitBarrier``, ``PdlLaunchBarrier``                        :mod:`tsjit.ts.pdl`
==============================================================  =====================================

Nothing inside ``tsjit`` imports this module (it sits above the modules it re-exports).
"""
from tsjit.ts.memory_resource import MemoryResource, ResourceContext, StageInfo, TaskLocalVariable
from tsjit.ts.pdl import PdlLaunchBarrier, PdlWaitBarrier
from tsjit.ts.pipeline import PipelineConfig
from tsjit.ts.work import consumer_work, producer_work
from tsjit.ts.work_queue import (ClcDynamicPersistentTileSchedulerParams, PersistentTileSchedulerParams,
                                 TileSchedulerConfig, WorkQueue, WorkTileInfo)

__all__ = ["MemoryResource", "TaskLocalVariable", "StageInfo", "ResourceContext", "consumer_work",
           "producer_work", "PipelineConfig", "TileSchedulerConfig", "WorkQueue", "WorkTileInfo",
           "PersistentTileSchedulerParams", "ClcDynamicPersistentTileSchedulerParams", "PdlWaitBarrier",
           "PdlLaunchBarrier"]
