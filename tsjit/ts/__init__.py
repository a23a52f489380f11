"""The Task Scheduling (TS) model: resources, schedules, tasks and the TaskManager.

Host-side Python only (no GPU, no LLVM): a kernel describes resources
(:class:`MemoryResource` subclasses with ``@consumer_work`` / ``@producer_work``
methods and :class:`TaskLocalVariable` slots), captures a ``@schedule`` per task, binds
each to warps with :class:`Task`, and hands the tasks to :class:`TaskManager`, which
prints and verifies everything before ``setup_resources_and_tasks()`` / ``run()`` lower
it (``tsjit/ts/lowering.py``).  The data model the lowering walks is documented in
:mod:`tsjit.ts.schedule`.

Modules: ``enums``, ``memory_resource`` (``MemoryResource``, ``TaskLocalVariable``,
``StageInfo``), ``resources`` (the reference's module path: a re-export), ``work`` (work
decorators, ``WorkSpec``, ``resolve_work``), ``schedule`` (captured tree), ``capture`` (``@schedule``,
``domain_loop``, guards, ``work_tile_loop``), ``proxy``, ``raw_schedule``, ``task``,
``task_manager``, ``options`` (``TaskManagerOptions``), ``simulate``, ``printout``, ``diagnostics``, ``pipeline``
(``PipelineConfig``), ``memory`` (SMEM/TMEM allocators), ``work_queue`` (persistent
scheduling), ``pdl`` (programmatic dependent launch), ``group`` / ``group_schedule`` /
``group_protocol`` (pipeline groups), ``verify/``.
"""
from tsjit.ts.capture import (DomainLoopHandle, ScheduleFunction, WorkTileLoopHandle,
                              domain_loop, schedule, when_false, when_true, work_tile_loop)
from tsjit.ts.diagnostics import ScheduleWarning, VerificationWarning
from tsjit.ts.enums import (BlockCondition, LoopGuard, ScheduleStage, ScheduleStageType,
                            WorkAttr, WorkRole)
from tsjit.ts.raw_schedule import schedule_from_entries
from tsjit.ts.memory_resource import MemoryResource, ResourceContext, StageInfo, TaskLocalVariable
from tsjit.ts.schedule import (DataFlowToken, DomainLoop, Guard, GuardBlock, Route, Schedule,
                               SkipPredicate, Step, WorkTileLoop)
from tsjit.ts.task import Task
from tsjit.ts.options import TaskManagerOptions
from tsjit.ts.task_manager import TaskManager
from tsjit.ts.work import (WorkLabelError, WorkSpec, consumer_work, producer_work,
                           resolve_work, work_methods)

__all__ = [
    "MemoryResource", "TaskLocalVariable", "StageInfo", "ResourceContext", "WorkAttr", "consumer_work",
    "producer_work", "WorkSpec", "WorkLabelError", "resolve_work", "work_methods",
    "schedule", "ScheduleFunction", "domain_loop", "when_true", "when_false",
    "work_tile_loop", "DomainLoopHandle", "WorkTileLoopHandle", "schedule_from_entries",
    "Schedule", "Step", "DomainLoop", "GuardBlock", "WorkTileLoop", "Guard", "SkipPredicate",
    "DataFlowToken", "Route", "Task", "TaskManager", "TaskManagerOptions", "ScheduleStage", "ScheduleStageType",
    "LoopGuard", "BlockCondition", "WorkRole", "ScheduleWarning", "VerificationWarning",
    "PipelineConfig", "PipelineType", "SignalingThreads", "CooperativeGroup", "Agent", "PipelineOp",
    "SmemAllocation", "SmemAllocator", "TmemAllocation", "TmemAllocator",
    "WorkQueue", "TileSchedulerConfig", "TileSchedulerType", "WorkTileInfo",
    "PersistentTileSchedulerParams", "ClcDynamicPersistentTileSchedulerParams",
    "PdlWaitBarrier", "PdlLaunchBarrier", "PipelineGroup", "PipelineGroupMode", "GroupMember",
]

from tsjit.ts.pipeline import (Agent, CooperativeGroup, PipelineConfig, PipelineOp,  # noqa: E402
                                PipelineType, SignalingThreads)
from tsjit.ts.memory import (SmemAllocation, SmemAllocator, TmemAllocation,  # noqa: E402
                              TmemAllocator)
from tsjit.ts.work_queue import (ClcDynamicPersistentTileSchedulerParams,  # noqa: E402
                                  PersistentTileSchedulerParams, TileSchedulerConfig,
                                  TileSchedulerType, WorkQueue, WorkTileInfo)
from tsjit.ts.pdl import PdlLaunchBarrier, PdlWaitBarrier  # noqa: E402
from tsjit.ts.group import GroupMember, PipelineGroup, PipelineGroupMode  # noqa: E402
