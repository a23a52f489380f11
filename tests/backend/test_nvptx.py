"""LLVM IR → PTX: target header, optimization, IR errors, data layout, speed."""
import time

import pytest
from llvmlite import ir

from tsjit.backend import intrinsics, nvptx
from tsjit.backend.targets import get_target
from tsjit.errors import CompilationError


def saxpy_ir(target_name: str = "sm_90a") -> str:
    """``out[tid] = a * x[tid] + out[tid]`` built with llvmlite.ir and the intrinsic table."""
    module = ir.Module(name="saxpy")
    module.triple, module.data_layout = nvptx.TRIPLE, nvptx.DATA_LAYOUT
    f32, global_ptr = ir.FloatType(), ir.PointerType(addrspace=1)
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [f32, global_ptr, global_ptr]),
                     name="saxpy")
    fn.calling_convention = "ptx_kernel"
    a, x, out = fn.args
    builder = ir.IRBuilder(fn.append_basic_block("entry"))
    intrinsics.check_supported("llvm.nvvm.read.ptx.sreg.tid.x", target_name)
    tid = builder.call(intrinsics.declare(module, "llvm.nvvm.read.ptx.sreg.tid.x"), [])
    index = builder.zext(tid, ir.IntType(64))
    x_slot = builder.gep(x, [index], source_etype=f32)
    out_slot = builder.gep(out, [index], source_etype=f32)
    fma = intrinsics.declare(module, "llvm.fma.f32")
    value = builder.call(fma, [a, builder.load(x_slot, typ=f32), builder.load(out_slot, typ=f32)])
    builder.store(value, out_slot)
    builder.ret_void()
    return str(module)


@pytest.mark.parametrize("target_name, version", [("sm_90a", "8.6"), ("sm_100a", "8.6"),
                                                  ("sm_90", "8.0")])
def test_ptx_header_names_target_and_version(target_name, version):
    ptx = nvptx.llvm_to_ptx(saxpy_ir(target_name), get_target(target_name))
    assert f".target {target_name}" in ptx
    assert f".version {version}" in ptx
    assert ".visible .entry saxpy(" in ptx
    assert "fma.rn.f32" in ptx


def test_target_name_string_is_accepted():
    assert ".target sm_100a" in nvptx.llvm_to_ptx(saxpy_ir(), "sm_100a")


def test_opt_levels_all_produce_ptx():
    for level in (0, 1, 2, 3):
        assert ".entry saxpy" in nvptx.llvm_to_ptx(saxpy_ir(), "sm_90a", opt_level=level)


def test_bad_opt_level_raises():
    with pytest.raises(CompilationError, match="opt_level"):
        nvptx.llvm_to_ptx(saxpy_ir(), "sm_90a", opt_level=4)


def test_optimize_llvm_runs_the_o3_pipeline():
    text = """
define ptx_kernel void @k(ptr addrspace(1) %out) {
entry:
  %slot = alloca i32
  store i32 20, ptr %slot
  %v = load i32, ptr %slot
  %w = add i32 %v, 22
  store i32 %w, ptr addrspace(1) %out
  ret void
}
"""
    optimized = nvptx.optimize_llvm(text, "sm_90a")
    assert "alloca" not in optimized
    assert "store i32 42, ptr addrspace(1) %out" in optimized
    assert f'target datalayout = "{nvptx.DATA_LAYOUT}"' in optimized
    assert "alloca" in nvptx.optimize_llvm(text, "sm_90a", opt_level=0)


def test_data_layout_matches_the_target_machine():
    for name in ("sm_90a", "sm_100a", "sm_90"):
        assert str(nvptx.target_machine(name).target_data) == nvptx.DATA_LAYOUT


def test_target_machine_is_cached():
    assert nvptx.target_machine("sm_90a") is nvptx.target_machine(get_target("sm_90a"))


def test_parse_error_is_internal_error_with_the_ir_line():
    broken = saxpy_ir().replace("ret void", "ret i32 %bogus")
    with pytest.raises(CompilationError) as info:
        nvptx.llvm_to_ptx(broken, "sm_90a")
    message = str(info.value)
    assert message.startswith("internal: LLVM rejected the generated IR: line ")
    assert "ret i32 %bogus" in message


def test_verifier_error_is_internal_error():
    text = """
declare void @llvm.nvvm.setmaxnreg.inc.sync.aligned.u32(i32)
define ptx_kernel void @k(i32 %n) {
  call void @llvm.nvvm.setmaxnreg.inc.sync.aligned.u32(i32 %n)
  ret void
}
"""
    with pytest.raises(CompilationError, match="internal: LLVM rejected the generated IR: "
                                               "immarg operand has non-immediate parameter"):
        nvptx.llvm_to_ptx(text, "sm_90a")


def test_warm_ir_to_ptx_is_fast():
    text = saxpy_ir()
    nvptx.llvm_to_ptx(text, "sm_90a")
    start = time.process_time()            # CPU time: the bound holds on a loaded machine too
    for _ in range(10):
        nvptx.llvm_to_ptx(text, "sm_90a")
    per_call = (time.process_time() - start) / 10
    assert per_call < 0.05, f"IR->PTX took {per_call * 1e3:.1f} ms per call"
