"""The test suite writes its kernel cache into a session temporary directory, never the user's."""
import os
import subprocess
import sys
import tempfile

from tsjit import env


def test_suite_cache_is_a_session_temporary_directory_inherited_by_subprocesses():
    directory = env.cache_dir()
    assert os.path.basename(directory).startswith("tsjit-test-cache-")
    assert os.path.commonpath([directory, tempfile.gettempdir()]) == tempfile.gettempdir()
    child = subprocess.run([sys.executable, "-c", "from tsjit import env; print(env.cache_dir())"],
                           capture_output=True, text=True, timeout=60,
                           env=dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    assert child.returncode == 0, child.stderr
    assert child.stdout.strip() == directory
