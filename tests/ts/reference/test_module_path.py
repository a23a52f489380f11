"""Reference module path: the API reference documents its classes as
``cutlass.experimental.task_scheduling.resources.<Name>``; in tsjit that module is
``tsjit.ts.resources`` and a ported ``from ... resources import ...`` line works unchanged.
"""
import importlib
import subprocess
import sys

import pytest

from tsjit import ts

#: every class and function the reference documents under ``task_scheduling.resources`` (its module
#: summary lists WorkQueue and the PDL barriers too).
REFERENCE_RESOURCES_NAMES = ("PipelineConfig", "TileSchedulerConfig", "StageInfo", "MemoryResource",
                             "TaskLocalVariable", "consumer_work", "producer_work", "WorkQueue",
                             "PdlWaitBarrier", "PdlLaunchBarrier")


@pytest.mark.conformance("A9", "module path task_scheduling.resources -> tsjit.ts.resources")
def test_reference_module_path_imports_every_documented_name():
    resources = importlib.import_module("tsjit.ts.resources")
    for name in REFERENCE_RESOURCES_NAMES:
        assert getattr(resources, name) is getattr(ts, name), name
    assert set(REFERENCE_RESOURCES_NAMES) <= set(resources.__all__)


def test_from_resources_import_works_in_a_fresh_interpreter():
    """The first import of a ported program may be this one (no ``import tsjit.ts`` before it)."""
    code = ("from tsjit.ts.resources import PipelineConfig, TileSchedulerConfig, consumer_work, "
            "producer_work, PdlWaitBarrier, PdlLaunchBarrier, WorkQueue; print(PipelineConfig.__module__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "tsjit.ts.pipeline"


def test_cute_compat_stands_in_for_cute_jit_and_cutlass_const_expr():
    """The reference's examples use ``@cute.jit`` and ``cutlass.const_expr`` (newcomer report 6, item 11)."""
    import tsjit
    from tsjit.ts.cute_compat import cute, cutlass

    def body(self, stage_info):
        return stage_info

    assert cute.jit(body) is body and cute.jit()(body) is body
    assert cutlass.const_expr is tsjit.const_expr
    with pytest.raises(AttributeError, match=r"cute\.make_tensor is CuTe DSL's, not tsjit's"):
        cute.make_tensor


def test_reference_enums_module_path():
    """The reference types its fields with ``task_scheduling.enums.PipelineType`` / ``SignalingThreads`` /
    ``WorkAttr``: the same names import from ``tsjit.ts.enums`` (first import of a fresh interpreter too),
    and are the objects ``tsjit.ts`` exports."""
    code = ("from tsjit.ts.enums import PipelineType, SignalingThreads, WorkAttr, PipelineOp; "
            "import tsjit.ts as ts; "
            "assert (PipelineType, SignalingThreads, WorkAttr, PipelineOp) == "
            "(ts.PipelineType, ts.SignalingThreads, ts.WorkAttr, ts.PipelineOp); "
            "print(PipelineType.TmaAsync.row.producer, SignalingThreads.CtaLeader | SignalingThreads.TaskWarpLeader)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[0] == "SideKind.Tma"
    enums = importlib.import_module("tsjit.ts.enums")
    assert {"PipelineType", "SignalingThreads", "WorkAttr", "PipelineOp"} <= set(enums.__all__)
