"""PTX → cubin with nvPTXCompiler, ptxas and nvJitLink: cubins, statistics, errors, tool selection; setmaxnreg
kept by the whole-program assemblers (the default) and reported when nvJitLink drops it."""
import ctypes
import os
import re
import struct
import warnings

import pytest

from tsjit.backend import assemble as asm
from tsjit.backend import native_build, ptx_compiler
from tsjit.backend.nvptx import llvm_to_ptx
from tsjit.errors import CompilationError, TsjitError

from .test_nvptx import saxpy_ir

TOOLS = ["nvptxcompiler", "nvjitlink", "ptxas"]
VERSION_PREFIX = {"nvptxcompiler": "nvPTXCompiler 13.", "nvjitlink": "nvJitLink 13.", "ptxas": "ptxas 13."}

# three warpgroups that trade registers (PTX ISA 8.0, "setmaxnreg"; the producer gives 168 - 40, the two consumers
# take 232 - 168): a whole-program compile keeps both instructions (SASS USETMAXREG); a relocatable one (nvJitLink,
# ptxas -c) drops them with C7504.  Without .maxnreg this tiny kernel's count at entry would be its own 8
# registers, and every assembler would ignore setmaxnreg (C7508)
SETMAXNREG_PTX = """.version 8.6
.target sm_90a
.address_size 64

.visible .entry regs(.param .u64 out)
.maxntid 384, 1, 1
.maxnreg 168
{
    .reg .pred %p<2>;
    .reg .b32 %r<3>;
    .reg .b64 %rd<3>;
    mov.u32 %r1, %tid.x;
    shr.u32 %r2, %r1, 7;
    setp.eq.u32 %p1, %r2, 0;
    @%p1 bra PRODUCER;
    setmaxnreg.inc.sync.aligned.u32 232;
    bra.uni DONE;
PRODUCER:
    setmaxnreg.dec.sync.aligned.u32 40;
DONE:
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd2, %rd1;
    st.global.u32 [%rd2], %r1;
    ret;
}
"""

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
    assert kernel.tool_version.startswith(VERSION_PREFIX[tool])
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
    assert first.split()[0] in ("nvPTXCompiler", "nvJitLink", "ptxas")


# --- the selection rule, without touching the machine --------------------------------
def test_auto_prefers_the_whole_program_assemblers_nvptxcompiler_first():
    assert asm.choose_tool("auto", (13, 5), True, True) == ("nvptxcompiler", None)
    assert asm.choose_tool("auto", None, False, True) == ("nvptxcompiler", None)
    assert asm.choose_tool("auto", (13, 5), True, False) == ("ptxas", None)   # nvJitLink drops setmaxnreg
    assert asm.choose_tool("auto", (13, 1), False, False) == ("nvjitlink", None)


def test_auto_prefers_ptxas_over_nvjitlink_13_0():
    assert asm.choose_tool("auto", (13, 0), True) == ("ptxas", None)
    assert asm.choose_tool("auto", None, True) == ("ptxas", None)


def test_auto_falls_back_to_nvjitlink_13_0_with_a_warning():
    tool, warning = asm.choose_tool("auto", (13, 0), False)
    assert tool == "nvjitlink"
    assert "nvidia-nvptxcompiler>=13.1" in warning and "misaligns" in warning


def test_select_tool_emits_the_warning(monkeypatch):
    monkeypatch.setattr(asm, "choose_tool", lambda *args: ("nvjitlink", "old nvJitLink"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        asm.select_tool("auto")
    assert [str(w.message) for w in caught] == ["old nvJitLink"]


def test_no_tool_at_all_says_what_to_install():
    with pytest.raises(CompilationError, match=r"pip install 'nvidia-nvptxcompiler>=13\.1,<14'.*C compiler"):
        asm.choose_tool("auto", None, False)


def test_requested_tool_missing_says_what_to_install():
    with pytest.raises(CompilationError, match="nvidia-nvjitlink>=13.1"):
        asm.choose_tool("nvjitlink", None, True)
    with pytest.raises(CompilationError, match="nvidia-cuda-nvcc"):
        asm.choose_tool("ptxas", (13, 5), False)
    with pytest.raises(CompilationError, match=r"TSJIT_ASSEMBLER=nvptxcompiler.*nvidia-nvptxcompiler.*C compiler"):
        asm.choose_tool("nvptxcompiler", (13, 5), True, False)


# --- setmaxnreg: kept by default, reported when nvJitLink drops it -----------------------------
def test_the_default_assembler_keeps_setmaxnreg(monkeypatch, tmp_path):
    """``auto`` picks a whole-program assembler where one is installed (nvPTXCompiler, else ptxas): the log has
    no C7504 and the SASS has both USETMAXREG."""
    monkeypatch.delenv(asm.ASSEMBLER_ENV, raising=False)
    if asm.select_tool() == "nvjitlink":
        pytest.fail("only nvJitLink is installed: it drops setmaxnreg; " + asm._INSTALL_PTX_COMPILER)
    with warnings.catch_warnings():
        warnings.simplefilter("error")       # no "ignored setmaxnreg" warning either
        kernel = asm.assemble(SETMAXNREG_PTX, "sm_90a", kernel_name="regs")
    assert kernel.tool in ("nvptxcompiler", "ptxas")
    assert "C7504" not in kernel.info_log and "setmaxnreg" not in kernel.info_log and kernel.performance_notes == ()
    from blackwell.toolchain import cuobjdump, sass
    if cuobjdump() is not None:
        assert len(re.findall(r"\bUSETMAXREG\b", sass(kernel.cubin, tmp_path))) == 2


def test_nvjitlink_drops_setmaxnreg_and_auto_says_what_to_install(monkeypatch):
    need("nvjitlink")
    monkeypatch.delenv(asm.ASSEMBLER_ENV, raising=False)
    monkeypatch.setattr(ptx_compiler, "state", lambda: ("unavailable", "not installed (a test's stand-in)"))
    monkeypatch.setattr(asm, "_known_ptxas", [])
    monkeypatch.setattr(asm, "_find_ptxas", asm.functools.cache(lambda: (None, "ptxas not found")))
    with pytest.warns(UserWarning, match=r"nvJitLink 13\.\d+.* ignored setmaxnreg in 'regs' \(\(C7504\).*"
                                         r"nvidia-nvptxcompiler.*nvidia-cuda-nvcc"):
        kernel = asm.assemble(SETMAXNREG_PTX, "sm_90a", kernel_name="regs")
    assert kernel.tool == "nvjitlink" and kernel.performance_notes == (
        "(C7504) Potential Performance Loss: 'setmaxnreg' ignored to maintain compatibility across compilation units.",)
    with warnings.catch_warnings():
        warnings.simplefilter("error")       # asked for by name: no warning
        asm.assemble(SETMAXNREG_PTX, "sm_90a", kernel_name="regs", tool="nvjitlink")


# --- nvPTXCompiler's library ------------------------------------------------------------------
def test_the_ptx_compiler_library_is_linked_once_and_exports_only_its_api(monkeypatch, tmp_path):
    need("nvptxcompiler")
    text, archive = ptx_compiler.wheel()
    path = ptx_compiler.library_path(archive)
    assert os.path.exists(path) and ptx_compiler.state() == ("ready", text)
    monkeypatch.setenv("TSJIT_CACHE_DIR", str(tmp_path))       # another cache directory: the same library
    if os.access(os.path.dirname(archive), os.W_OK):
        assert ptx_compiler.library_path(archive) == path == os.path.join(os.path.dirname(archive),
                                                                          os.path.basename(path))
    monkeypatch.setattr(native_build, "c_compiler", lambda: pytest.fail("linked again"))
    assert native_build.build_once(path, lambda compiler, output: pytest.fail("linked again")) == path
    library = ctypes.CDLL(path)
    assert hasattr(library, "nvPTXCompilerCompile")
    internal = [name for name in ("libnvptxcompiler_static_15403a7853e71d2bc2cca8d5866df52418fff44c",)]
    assert not any(hasattr(library, name) for name in internal)     # the archive's own symbols stay local
    major, minor = ctypes.c_uint(), ctypes.c_uint()
    assert library.nvPTXCompilerGetVersion(ctypes.byref(major), ctypes.byref(minor)) == 0
    assert text.startswith(f"nvPTXCompiler {major.value}.{minor.value}.")


def test_a_failed_link_is_marked_reported_and_not_retried(tmp_path, monkeypatch):
    path = str(tmp_path / "lib" / "libbroken.so")
    assert native_build.build_once(path, lambda compiler, output: [compiler, "-shared", "-o", output,
                                                                   "no-such-input.a"]) is None
    assert "no-such-input.a" in native_build.failure_text(path)
    assert native_build.build_once(path, lambda compiler, output: pytest.fail("retried")) is None


def test_no_c_compiler_leaves_the_ptx_compiler_unavailable_with_the_reason(monkeypatch, tmp_path):
    if ptx_compiler.wheel() is None:
        pytest.skip("the nvidia-nvptxcompiler wheel is not installed")
    monkeypatch.setattr(ptx_compiler, "library_path", lambda archive: str(tmp_path / "nvptxcompiler" / "lib.so"))
    monkeypatch.setattr(ptx_compiler, "_loaded", asm.functools.cache(ptx_compiler._loaded.__wrapped__))
    monkeypatch.setattr(native_build, "c_compiler", lambda: None)
    assert ptx_compiler.state() == ("unavailable", ptx_compiler.state()[1])
    assert "no C compiler" in ptx_compiler.state()[1]
    library, reason = ptx_compiler.load()
    assert library is None and "no C compiler" in reason
    assert not os.path.exists(tmp_path / "nvptxcompiler")
    with pytest.raises(CompilationError, match=r"nvPTXCompiler is unavailable \(no C compiler"):
        asm.select_tool("nvptxcompiler")


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
