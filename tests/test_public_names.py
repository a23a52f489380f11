"""A name that is not tsjit's: the error names the tsjit spelling (Triton / CUDA users) or the closest names."""
import numpy as np
import pytest

import tsjit


@tsjit.kernel
def _uses_program_id(x):
    x[tsjit.program_id(0)] = 1.0


@tsjit.kernel
def _misspells_syncthreads(x):
    tsjit.syncthread()
    x[0] = 1.0


def test_triton_program_id_in_a_kernel_names_block_idx_at_the_call():
    with pytest.raises(tsjit.CompilationError) as info:
        tsjit.compile(_uses_program_id, np.zeros(4, np.float32))
    message = str(info.value)
    assert "module `tsjit` has no attribute `program_id`" in message
    assert "tsjit.block_idx().x" in message
    assert info.value.location.line == _uses_program_id.fn.__code__.co_firstlineno + 2


def test_misspelled_builtin_in_a_kernel_suggests_the_closest_name():
    with pytest.raises(tsjit.CompilationError, match=r"did you mean tsjit\.syncthreads"):
        tsjit.compile(_misspells_syncthreads, np.zeros(4, np.float32))


def test_host_attribute_error_suggests_the_closest_name():
    with pytest.raises(AttributeError, match=r"no attribute 'kernal'; did you mean tsjit\.kernel"):
        tsjit.kernal
    with pytest.raises(AttributeError, match=r"tsjit\.grid_dim\(\)\.x"):
        tsjit.num_programs
    assert not hasattr(tsjit, "__wrapped__")   # dunder probes (inspect, pickle) stay plain AttributeErrors


def test_interpret_error_is_public_and_a_tsjit_error():
    from tsjit.errors import InterpretError
    assert tsjit.InterpretError is InterpretError and issubclass(InterpretError, tsjit.TsjitError)
    assert "InterpretError" in tsjit.__all__ and "InterpretError" in tsjit.__doc__


def test_dir_lists_the_public_names_and_not_this_files_own_imports():
    names = dir(tsjit)
    assert {"kernel", "compile", "InterpretError", "math"} <= set(names)
    assert "annotations" not in names and "importlib" not in names


def test_tsjit_ops_resolves_in_a_fresh_interpreter():
    """``import tsjit; tsjit.ops.matmul`` (README, help(tsjit)) without importing tsjit.ops first."""
    import subprocess
    import sys
    code = "import tsjit, sys; assert 'tsjit.ops' not in sys.modules; print(tsjit.ops.matmul.__module__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "tsjit.ops.matmul"
    assert "ops" in dir(tsjit)


@tsjit.kernel
def _reads_thread_idx_w(x):
    x[0] = tsjit.thread_idx().w


def test_a_dim3_field_that_does_not_exist_lists_x_y_z():
    with pytest.raises(tsjit.CompilationError, match=r"no attribute `w`.*\.x, \.y and \.z only"):
        _reads_thread_idx_w.compile(tsjit.spec((4,), tsjit.Int32), interpret=True)


def test_gpu_available_is_a_public_name_that_never_raises():
    """The tutorials ask ``tsjit.gpu_available()`` (newcomer report: they imported it from tsjit.runtime.driver)."""
    assert "gpu_available" in tsjit.__all__ and "gpu_available" in dir(tsjit)
    assert tsjit.gpu_available() in (True, False)
