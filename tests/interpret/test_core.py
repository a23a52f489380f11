"""The interpreter's core: launch API, exact arithmetic, memory errors, collectives (issue 13)."""
import os
import re

import numpy as np
import pytest

import tsjit
from tsjit.errors import InterpretError, LaunchError


@tsjit.kernel
def scale_add(x, out, n, alpha):
    i = tsjit.block_idx().x * tsjit.block_dim().x + tsjit.thread_idx().x
    if i < n:
        out[i] = x[i] * alpha + tsjit.Float32(1)


@tsjit.kernel
def int_ops(a, out):
    i = tsjit.thread_idx().x
    v = a[i]
    out[4 * i] = v * 3 + 7
    out[4 * i + 1] = v >> 3
    out[4 * i + 2] = v // 5
    out[4 * i + 3] = v % 5


@tsjit.kernel
def out_of_bounds(x, out):
    i = tsjit.thread_idx().x
    out[i] = x[i + 1]


@tsjit.kernel
def bad_shuffle(x, out):
    i = tsjit.thread_idx().x
    v = x[i]
    if i < 16:
        v = tsjit.shuffle_xor(v, 16, mask=0x0000FFFF)
    out[i] = v


@pytest.mark.parametrize("launch", ["interpret", "TSJIT_INTERPRET"])
def test_dump_dir_gets_the_llvm_ir_the_interpreter_runs(tmp_path, monkeypatch, launch):
    """TSJIT_DUMP_DIR under the interpreter: the .ll it runs and the folded .py (no PTX or cubin exist)."""
    monkeypatch.setenv("TSJIT_DUMP_DIR", str(tmp_path))
    fresh = tsjit.kernel(scale_add.fn)               # a kernel object of its own: nothing lowered yet
    x = np.random.default_rng().standard_normal(64).astype(np.float32)
    out = np.full(64, np.nan, np.float32)
    if launch == "interpret":
        fresh.interpret[(1,), (64,)](x, out, 64, 2.0)
    else:
        monkeypatch.setenv("TSJIT_INTERPRET", "1")
        fresh[(1,), (64,)](x, out, 64, 2.0)
    np.testing.assert_array_equal(out, x * np.float32(2.0) + np.float32(1))
    names = sorted(os.listdir(tmp_path))
    assert [name.rsplit(".", 1)[1] for name in names] == ["ll", "py"]
    assert all(name.startswith("scale_add-interpret-") for name in names)
    lowered = tsjit.compile(fresh, x, out, 64, 2.0, interpret=True)
    assert (tmp_path / names[0]).read_text() == lowered.llir and "define" in lowered.llir
    assert "out[i] = x[i] * alpha" in (tmp_path / names[1]).read_text()


def test_numpy_arguments_are_written_in_place():
    rng = np.random.default_rng()
    x = rng.standard_normal(300).astype(np.float32)
    out = np.full(300, np.nan, np.float32)
    scale_add.interpret[(3,), (128,)](x, out, 300, 0.5)
    np.testing.assert_array_equal(out, x * np.float32(0.5) + np.float32(1))


def test_device_arrays_live_in_host_memory_under_tsjit_interpret(monkeypatch):
    monkeypatch.setenv("TSJIT_INTERPRET", "1")
    rng = np.random.default_rng()
    x = rng.standard_normal(100).astype(np.float32)
    out = tsjit.empty(100, tsjit.Float32).fill_bytes(0xFF)
    scale_add[(1,), (128,)](tsjit.to_device(x), out, 100, -2.0)
    np.testing.assert_array_equal(out.numpy(), x * np.float32(-2.0) + np.float32(1))


def test_compile_interpret_returns_a_cpu_launchable_kernel():
    x = np.arange(64, dtype=np.float32)
    out = np.zeros(64, np.float32)
    lowered = tsjit.compile(scale_add, x, out, 64, 1.0, interpret=True)
    assert "define ptx_kernel" in lowered.llir
    lowered[(1,), (64,)](x, out, 64, 3.0)
    np.testing.assert_array_equal(out, x * 3 + 1)


def test_int32_wraps_and_divides_toward_zero():
    a = np.array([2**31 - 1, -17, 123456789, -(2**31)] * 8, np.int32)
    out = np.zeros(4 * a.size, np.int32)
    int_ops.interpret[(1,), (a.size,)](a, out)
    wide = a.astype(np.int64)
    np.testing.assert_array_equal(out[0::4], ((wide * 3 + 7 + 2**31) % 2**32 - 2**31).astype(np.int32))
    np.testing.assert_array_equal(out[1::4], a >> 3)
    np.testing.assert_array_equal(out[2::4], np.trunc(wide / 5).astype(np.int32))
    np.testing.assert_array_equal(out[3::4], (wide - np.trunc(wide / 5) * 5).astype(np.int32))


def test_out_of_bounds_read_names_the_array_index_and_line():
    x = np.zeros(32, np.float32)
    out = np.zeros(32, np.float32)
    with pytest.raises(InterpretError) as info:
        out_of_bounds.interpret[(1,), (32,)](x, out)
    text = str(info.value)
    assert "argument 'x'" in text and "element 32" in text and "test_core.py:" in text


def test_interpreter_fault_shows_the_source_line_and_a_caret():
    """README: errors show the line and a caret; an InterpretError too (newcomer report 6, item 12)."""
    x, out = np.zeros(32, np.float32), np.zeros(32, np.float32)
    with pytest.raises(InterpretError) as info:
        out_of_bounds.interpret[(1,), (32,)](x, out)
    lines = str(info.value).splitlines()
    faulting = next(i for i, text in enumerate(lines) if "test_core.py:" in text)
    source, caret = lines[faulting + 1], lines[faulting + 2]
    assert "x[" in source and caret.strip() == "^"
    assert caret.index("^") == len(source) - len(source.lstrip())     # under the statement's start
    assert lines[faulting + 3].startswith("  in CTA ")


@tsjit.kernel
def shared_out_of_bounds(out, shift):
    s = tsjit.shared_array(tsjit.Float32, 32)
    i = tsjit.thread_idx().x
    s[i] = 1.0
    tsjit.syncthreads()
    out[i] = s[i + shift]


def test_out_of_bounds_shared_read_names_the_reservation_the_index_and_line():
    out = np.zeros(32, np.float32)
    shared_out_of_bounds.interpret[(1,), (32,)](out, 0)
    assert (out == 1).all()
    with pytest.raises(InterpretError) as info:
        shared_out_of_bounds.interpret[(1,), (32,)](out, 9)
    text = str(info.value)
    assert text.startswith("out-of-bounds shared-memory load"), text
    element, thread = map(int, re.search(r"element (\d+) \(4-byte\).* thread (\d+) ", text, re.S).groups())
    assert element == thread + 9 and 32 <= element < 41, text       # the faulting thread's index
    line = shared_out_of_bounds.fn.__code__.co_firstlineno            # the @tsjit.kernel line
    assert f"reserved at {__file__}:{line + 2}" in text and f"test_core.py:{line + 6};" in text, text


def test_shuffle_reading_a_lane_outside_its_mask_is_an_error():
    x = np.zeros(32, np.float32)
    with pytest.raises(InterpretError, match="not in the member mask"):
        bad_shuffle.interpret[(1,), (32,)](x, np.zeros(32, np.float32))


def test_gpu_device_array_is_refused_with_advice():
    class FakeCuda:
        __cuda_array_interface__ = {"shape": (4,), "typestr": "<f4", "data": (0x7000_0000_0000, False), "version": 3}
    with pytest.raises(LaunchError, match="GPU memory"):
        scale_add.interpret[(1,), (32,)](FakeCuda(), np.zeros(4, np.float32), 4, 1.0)


@pytest.mark.parametrize("grid, block, named", [
    ((0,), (32,), "grid (0, 1, 1) has no CTA"), ((1,), (32, 33), "block (32, 33, 1) has 1056 threads"),
    ((1,), (0,), "block (0, 1, 1) has no threads")])
def test_a_bad_grid_or_block_names_the_one_that_is_wrong(grid, block, named):
    x = np.zeros(4, np.float32)
    with pytest.raises(LaunchError) as info:
        scale_add.interpret[grid, block](x, np.zeros(4, np.float32), 4, 1.0)
    message = str(info.value)
    assert named in message, message
    assert ("grid" in message) != ("block" in message), f"names only the wrong one: {message}"


@tsjit.kernel
def prints(x):
    i = tsjit.thread_idx().x
    if i < 2:
        tsjit.device_print("thread {} sees {}", i, x[i])


def test_device_print_prints_each_thread_after_the_launch(capsys):
    prints.interpret[(1,), (32,)](np.array([1.5, -2.25], np.float32))
    out = capsys.readouterr().out
    assert "thread 0 sees 1.5" in out and "thread 1 sees -2.25" in out


@tsjit.kernel
def regs(out):
    tsjit.setmaxnreg(232, increase=True)
    out[tsjit.thread_idx().x] = 1


def test_setmaxnreg_is_a_warpgroup_collective():
    out = np.zeros(128, np.int32)
    regs.interpret[(1,), (128,)](out)
    assert (out == 1).all()
    with pytest.raises(InterpretError, match="warpgroup"):
        regs.interpret[(1,), (64,)](np.zeros(64, np.int32))
