"""The intrinsic table: signatures as LLVM 22 sees them, target gating, and, per target,
one kernel per supported intrinsic compiled to PTX (in a child process) and assembled
by ptxas."""
import re
import shutil
import subprocess

import llvmlite.binding as llvm
import pytest
from llvmlite import ir

from tsjit.backend import intrinsics
from tsjit.backend.nvptx import parse_and_verify
from tsjit.backend.targets import KNOWN_TARGETS, get_target
from tsjit.errors import CompilationError

from .intrinsic_kernels import build_module, cases_for, compile_batch

TARGETS = list(KNOWN_TARGETS)
ENTRIES = list(intrinsics.INTRINSICS.values())


def _ptxas():
    try:
        from cuda import pathfinder
        found = pathfinder.find_nvidia_binary_utility("ptxas")
    except Exception:
        found = None
    return found or shutil.which("ptxas")


# ---------------------------------------------------------------------------------
# Signatures (in process: parsing and verifying never aborts)
# ---------------------------------------------------------------------------------
def _printed_declaration(entry) -> str:
    module = parse_and_verify(build_module([(entry.name, {
        imm.index: (imm.values or (0,))[0] for imm in entry.immediates})]))
    lines = [line for line in str(module).splitlines()
             if line.startswith("declare") and f"@{entry.name}(" in line]
    assert lines, f"{entry.name} was renamed by LLVM (auto-upgrade?):\n{module}"
    return lines[0]


def test_every_declaration_is_canonical_and_immediates_match_llvm_immarg():
    llvm.initialize_all_targets()
    mismatched = []
    for entry in ENTRIES:
        declaration = _printed_declaration(entry)
        params = declaration[declaration.index("(", declaration.index("@")) + 1:]
        pieces = re.split(r",(?![^(]*\))", params.rsplit(")", 1)[0])
        immarg = [i for i, piece in enumerate(pieces) if "immarg" in piece]
        if immarg != [imm.index for imm in entry.immediates]:
            mismatched.append((entry.name, immarg, entry.immediates))
        for imm in entry.immediates:   # allowed values lie inside LLVM's range(...)
            bounds = re.search(r"range\(i\d+ (-?\d+), (-?\d+)\)", pieces[imm.index])
            values = list(imm.values or ()) + [v for extra in imm.extra_values.values()
                                               for v in extra]
            if bounds and values and not all(int(bounds.group(1)) <= v < int(bounds.group(2))
                                             for v in values):
                mismatched.append((entry.name, imm.name, bounds.group(0), values))
    assert not mismatched


def test_lookup_by_name_key_and_alias():
    entry = intrinsics.lookup("llvm.nvvm.elect.sync")
    assert intrinsics.lookup("elect.sync") is entry
    assert entry.key == "elect.sync"
    assert intrinsics.lookup("llvm.nvvm.ex2.approx.f").name == "llvm.nvvm.ex2.approx.f32"
    assert intrinsics.lookup("sqrt.f32").name == "llvm.sqrt.f32"
    assert entry.return_type == ir.LiteralStructType([ir.IntType(32), ir.IntType(1)])


def test_lookup_unknown_name_raises():
    with pytest.raises(CompilationError, match="llvm.nvvm.frobnicate"):
        intrinsics.lookup("llvm.nvvm.frobnicate")


def test_parameter_types_use_address_spaces():
    entry = intrinsics.lookup("llvm.nvvm.cp.async.bulk.tensor.g2s.tile.2d")
    assert entry.param_types[:3] == (ir.PointerType(addrspace=7), ir.PointerType(addrspace=3),
                                     ir.PointerType())
    assert [imm.name for imm in entry.immediates] == ["use_cta_mask", "use_cache_hint",
                                                      "cta_group"]


def test_declare_is_idempotent_and_matches_the_table():
    module = ir.Module()
    first = intrinsics.declare(module, "llvm.nvvm.mbarrier.try.wait.parity.scope.cta.space.cta")
    again = intrinsics.declare(module, "mbarrier.try.wait.parity.scope.cta.space.cta")
    assert first is again
    assert str(first.function_type) == "i1 (ptr addrspace(3), i32)"


def test_declare_refuses_a_conflicting_global():
    module = ir.Module()
    ir.Function(module, ir.FunctionType(ir.VoidType(), []), name="llvm.nvvm.elect.sync")
    with pytest.raises(CompilationError, match="internal"):
        intrinsics.declare(module, "llvm.nvvm.elect.sync")


# ---------------------------------------------------------------------------------
# The gate
# ---------------------------------------------------------------------------------
@pytest.mark.parametrize("target_name", TARGETS)
def test_gate_raises_for_every_unsupported_target(target_name):
    target = get_target(target_name)
    for entry in ENTRIES:
        if entry.supports(target):
            intrinsics.check_supported(entry.name, target)
            continue
        with pytest.raises(CompilationError) as info:
            intrinsics.check_supported(entry.name, target)
        assert f"`{entry.key}`" in str(info.value)


def test_gate_message_names_requirement_and_target():
    with pytest.raises(CompilationError) as info:
        intrinsics.check_supported("llvm.nvvm.setmaxnreg.inc.sync.aligned.u32", "sm_90")
    assert "`setmaxnreg.inc.sync.aligned.u32` needs sm_90a, sm_100a or sm_100f (PTX 8.0)" in str(info.value)
    assert "compiled for sm_90" in str(info.value)
    with pytest.raises(CompilationError, match=r"needs sm_90a \(PTX 8\.0\).*sm_100a"):
        intrinsics.check_supported("wgmma.fence.sync.aligned", "sm_100a")
    with pytest.raises(CompilationError, match=r"needs PTX 8\.6.*sm_90 \(PTX 8\.0\)"):
        intrinsics.check_supported("mbarrier.try.wait.parity.relaxed.scope.cta.space.cta",
                                   "sm_90")


@pytest.mark.parametrize("name", ["llvm.exp.f32", "llvm.log.f64", "llvm.sin.f32", "llvm.exp2.f64"])
def test_math_that_never_selects_names_the_alternative(name):
    with pytest.raises(CompilationError, match=r"cannot be compiled for NVPTX.*use "):
        intrinsics.check_supported(name, "sm_90a")


def test_tcgen05_and_clc_only_on_sm_100a():
    for name in ("tcgen05.alloc.shared.cg1", "tcgen05.mma.shared",
                 "clusterlaunchcontrol.try_cancel.async.shared"):
        assert intrinsics.lookup(name).supports("sm_100a")
        assert not intrinsics.lookup(name).supports("sm_90a")


def test_check_immediates():
    entry = intrinsics.lookup("setmaxnreg.dec.sync.aligned.u32")
    i32 = ir.IntType(32)
    entry.check_immediates([ir.Constant(i32, 40)], "sm_90a")
    with pytest.raises(CompilationError, match="'regs'.*is 44"):
        entry.check_immediates([ir.Constant(i32, 44)], "sm_90a")
    module = ir.Module()
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [i32]), name="f")
    with pytest.raises(CompilationError, match="compile-time integer constant"):
        entry.check_immediates([fn.args[0]], "sm_90a")
    g2s = intrinsics.lookup("cp.async.bulk.tensor.g2s.tile.1d")
    args = [None] * 6 + [ir.Constant(ir.IntType(1), 0)] * 2 + [ir.Constant(i32, 2)]
    g2s.check_immediates(args, "sm_100a")
    with pytest.raises(CompilationError, match="cta_group"):
        g2s.check_immediates(args, "sm_90a")


# ---------------------------------------------------------------------------------
# Compiling every intrinsic for every target it claims (child processes)
# ---------------------------------------------------------------------------------
@pytest.mark.parametrize("target_name", TARGETS)
def test_every_supported_intrinsic_compiles_and_assembles(target_name, tmp_path):
    cases = cases_for(target_name)
    ptx, failures = compile_batch(target_name, cases, tmp_path)
    assert not failures, "LLVM failed on: " + "; ".join(
        f"{cases[i][0]} {cases[i][1]}: {msg}" for i, msg in failures.items())
    assert f".target {target_name}" in ptx
    assert ptx.count(".entry k") == len(cases)
    ptxas = _ptxas()
    if ptxas is None:
        pytest.skip("ptxas not found; PTX was not assembled")
    source = tmp_path / "all.ptx"
    source.write_text(ptx)
    proc = subprocess.run([ptxas, f"-arch={target_name}", str(source), "-o",
                           str(tmp_path / "all.cubin")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]


@pytest.mark.parametrize("name, target_name", [
    ("llvm.nvvm.setmaxnreg.inc.sync.aligned.u32", "sm_90"),
    ("llvm.nvvm.wgmma.fence.sync.aligned", "sm_100a"),
    ("llvm.nvvm.tcgen05.alloc.shared.cg1", "sm_90a"),
    ("llvm.exp.f32", "sm_90a"),
])
def test_gated_intrinsics_really_kill_llvm(name, target_name, tmp_path):
    """Why the gate exists: these abort or exit the compiling process."""
    entry = intrinsics.lookup(name)
    case = (name, {imm.index: (imm.values or (0,))[0] for imm in entry.immediates})
    ptx, failures = compile_batch(target_name, [case], tmp_path)
    assert ptx is None and list(failures) == [0]
