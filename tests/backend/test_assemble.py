"""PTX → cubin with nvJitLink and ptxas: cubins, statistics, errors, tool selection."""
import struct
import warnings

import pytest

from tsjit.backend import assemble as asm
from tsjit.backend.nvptx import llvm_to_ptx
from tsjit.errors import CompilationError, TsjitError

from .test_nvptx import saxpy_ir

TOOLS = ["nvjitlink", "ptxas"]

STATIC_SMEM_PTX = """
.version 8.6
.target {target}
.address_size 64
.extern .shared .align 1024 .b8 smem[];

.visible .entry with_static(.param .u64 out)
{{
    .shared .align 8 .b64 bar;
    .reg .b32 %r<4>;
    .reg .b64 %rd<3>;
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, bar;
    st.shared.u32 [bar], %r1;
    ld.shared.u32 %r3, [smem];
    add.u32 %r3, %r3, %r2;
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd2, %rd1;
    st.global.u32 [%rd2], %r3;
    ret;
}}
"""

BROKEN_PTX = """.version 8.6
.target sm_90a
.address_size 64

.visible .entry broken()
{
    .reg .b32 %r<3>;
    mov.u32 %r1, %tid.x;
    frobnicate.b32 %r2, %r1;
    ret;
}
"""


def need(tool: str) -> None:
    if tool not in asm.available_tools():
        pytest.skip(f"{tool} is not installed here")


@pytest.fixture(params=TOOLS)
def tool(request):
    need(request.param)
    return request.param


@pytest.mark.parametrize("target_name", ["sm_90a", "sm_100a", "sm_90"])
def test_assembles_a_cubin_with_statistics(tool, target_name):
    kernel = asm.assemble(llvm_to_ptx(saxpy_ir(target_name), target_name), target_name,
                          kernel_name="saxpy", tool=tool)
    assert kernel.cubin[:4] == b"\x7fELF"
    assert kernel.tool == tool
    assert kernel.tool_version.startswith("nvJitLink 13." if tool == "nvjitlink" else "ptxas 13.")
    assert kernel.registers > 0
    assert (kernel.spill_stores_bytes, kernel.spill_loads_bytes, kernel.stack_frame_bytes,
            kernel.static_smem_bytes) == (0, 0, 0, 0)
    assert "saxpy" in kernel.info_log


def test_static_shared_memory_is_read_from_the_cubin(tool):
    kernel = asm.assemble(STATIC_SMEM_PTX.format(target="sm_90a"), "sm_90a",
                          kernel_name="with_static", tool=tool)
    # 8 bytes of `bar`, padded so the extern block keeps its 1024-byte alignment (the section also holds
    # the CTA's reserved kilobyte, which is not static memory: ptxas' own log says "1024 bytes smem").
    assert kernel.static_smem_bytes == 1024
    assert asm._elf_section(kernel.cubin, ".nv.shared.with_static")[0] == 1024 + asm.RESERVED_SMEM_BYTES


def test_a_kernel_with_only_the_dynamic_block_has_no_static_shared_memory(tool):
    ptx = STATIC_SMEM_PTX.format(target="sm_90a").replace("    .shared .align 8 .b64 bar;\n", "").replace(
        "mov.u32 %r2, bar;", "mov.u32 %r2, 0;").replace("    st.shared.u32 [bar], %r1;\n", "")
    kernel = asm.assemble(ptx, "sm_90a", kernel_name="with_static", tool=tool)
    assert asm._elf_section(kernel.cubin, ".nv.shared.with_static")[0] == asm.RESERVED_SMEM_BYTES
    assert kernel.static_smem_bytes == 0


def test_broken_ptx_reports_the_log_and_the_line(tool):
    with pytest.raises(CompilationError) as info:
        asm.assemble(BROKEN_PTX, "sm_90a", kernel_name="broken", tool=tool)
    message = str(info.value)
    assert message.startswith("ptxas rejected the generated PTX for sm_90a")
    assert "frobnicate" in message
    assert "> frobnicate.b32 %r2, %r1;" in message


def test_ptx_for_another_target_is_rejected(tool):
    ptx = llvm_to_ptx(saxpy_ir(), "sm_90a")
    with pytest.raises(CompilationError, match="sm_100a"):
        asm.assemble(ptx, "sm_100a", kernel_name="saxpy", tool=tool)


@pytest.mark.parametrize("setting", TOOLS)
def test_environment_variable_selects_the_tool(setting, monkeypatch):
    need(setting)
    monkeypatch.setenv(asm.ASSEMBLER_ENV, setting.upper())
    assert asm.assembler_setting() == setting
    assert asm.select_tool() == setting
    kernel = asm.assemble(llvm_to_ptx(saxpy_ir(), "sm_90a"), "sm_90a", kernel_name="saxpy")
    assert kernel.tool == setting
    assert asm.assembler_version() == kernel.tool_version


def test_tool_argument_overrides_the_environment(monkeypatch):
    need("ptxas")
    monkeypatch.setenv(asm.ASSEMBLER_ENV, "nvjitlink")
    assert asm.select_tool("ptxas") == "ptxas"


def test_bad_environment_value_raises(monkeypatch):
    monkeypatch.setenv(asm.ASSEMBLER_ENV, "nvcc")
    with pytest.raises(TsjitError, match="TSJIT_ASSEMBLER='nvcc'"):
        asm.select_tool()


def test_unset_environment_means_auto(monkeypatch):
    monkeypatch.delenv(asm.ASSEMBLER_ENV, raising=False)
    assert asm.assembler_setting() == "auto"
    assert asm.select_tool() in asm.available_tools()


def test_assembler_version_is_cached_text():
    first = asm.assembler_version()
    assert first == asm.assembler_version()
    assert first.split()[0] in ("nvJitLink", "ptxas")


# --- the selection rule, without touching the machine --------------------------------
def test_auto_prefers_fixed_nvjitlink():
    assert asm.choose_tool("auto", (13, 5), True) == ("nvjitlink", None)
    assert asm.choose_tool("auto", (13, 1), False) == ("nvjitlink", None)


def test_auto_prefers_ptxas_over_nvjitlink_13_0():
    assert asm.choose_tool("auto", (13, 0), True) == ("ptxas", None)
    assert asm.choose_tool("auto", None, True) == ("ptxas", None)


def test_auto_falls_back_to_nvjitlink_13_0_with_a_warning():
    tool, warning = asm.choose_tool("auto", (13, 0), False)
    assert tool == "nvjitlink"
    assert "nvidia-nvjitlink>=13.1" in warning and "misaligns" in warning


def test_select_tool_emits_the_warning(monkeypatch):
    monkeypatch.setattr(asm, "choose_tool", lambda *args: ("nvjitlink", "old nvJitLink"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        asm.select_tool("auto")
    assert [str(w.message) for w in caught] == ["old nvJitLink"]


def test_no_tool_at_all_says_what_to_install():
    with pytest.raises(CompilationError, match=r"pip install 'nvidia-nvjitlink>=13\.1'"):
        asm.choose_tool("auto", None, False)


def test_requested_tool_missing_says_what_to_install():
    with pytest.raises(CompilationError, match="nvidia-nvjitlink>=13.1"):
        asm.choose_tool("nvjitlink", None, True)
    with pytest.raises(CompilationError, match="nvidia-cuda-nvcc"):
        asm.choose_tool("ptxas", (13, 5), False)


# --- statistics parsing -------------------------------------------------------------------
PTXAS_LOG = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'other' for 'sm_90a'
ptxas info    : Function properties for other
    8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 200 registers, used 0 barriers, 16 bytes smem, 380 bytes cmem[0]
ptxas info    : Compiling entry function 'k' for 'sm_90a'
ptxas info    : Function properties for k
    16 bytes stack frame, 12 bytes spill stores, 8 bytes spill loads
ptxas info    : Used 168 registers, used 1 barriers, 1024 bytes smem, 380 bytes cmem[0]
"""

NVJITLINK_LOG = """ptxas info    : Compiling entry function 'k' for 'sm_90a'
ptxas info    : Function properties for k
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 22 registers, used 1 barriers, 16 bytes smem
ptxas info    : Compile time = 6.817 ms
info    : 0 bytes gmem
info    : Function properties for 'k':
info    : used 22 registers, used 1 barriers, 0 stack, 2048 bytes smem, 780 bytes cmem[0]
"""


def test_statistics_of_the_named_kernel_only():
    assert asm.parse_statistics(PTXAS_LOG, "k") == {
        "registers": 168, "spill_stores_bytes": 12, "spill_loads_bytes": 8,
        "stack_frame_bytes": 16, "static_smem_bytes": 1024}


def test_statistics_from_an_nvjitlink_log():
    stats = asm.parse_statistics(NVJITLINK_LOG, "k")
    assert stats["registers"] == 22 and stats["static_smem_bytes"] == 16


def test_missing_statistics_are_zero():
    assert set(asm.parse_statistics("garbage", "k").values()) == {0}


# --- the nvJitLink 13.0 guard ----------------------------------------------------------
def _patch_section(cubin: bytes, section: str, size: int, align: int) -> bytes:
    """A copy of an ELF64 cubin with one section's sh_size / sh_addralign replaced."""
    data = bytearray(cubin)
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    names = struct.unpack_from("<Q", data, shoff + shstrndx * shentsize + 0x18)[0]
    for i in range(shnum):
        header = shoff + i * shentsize
        start = names + struct.unpack_from("<I", data, header)[0]
        if data[start:data.index(b"\0", start)].decode() == section:
            struct.pack_into("<Q", data, header + 0x20, size)
            struct.pack_into("<Q", data, header + 0x30, align)
            return bytes(data)
    raise AssertionError(f"{section} not in cubin")


def test_misaligned_dynamic_shared_memory_is_refused():
    need("ptxas")
    ptx = STATIC_SMEM_PTX.format(target="sm_90a")
    good = asm.assemble(ptx, "sm_90a", kernel_name="with_static", tool="ptxas").cubin
    asm.check_dynamic_smem_alignment(good, ptx, "with_static", "ptxas 13.0.88")
    bad = _patch_section(good, ".nv.shared.with_static", 0x410, 16)   # what 13.0 produced
    with pytest.raises(CompilationError, match=r"align 16.*align 1024.*nvidia-nvjitlink>=13\.1"):
        asm.check_dynamic_smem_alignment(bad, ptx, "with_static", "nvJitLink 13.0")
