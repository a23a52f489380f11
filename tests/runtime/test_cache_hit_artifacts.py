"""A disk-cache hit leaves the same files behind as a compile (issue 10 §3): ``TSJIT_DUMP_DIR``'s
``.ll``/``.ptx``/``.cubin`` and the SVG a ``TaskManager.render()`` call in the kernel writes; and a
``CompiledKernel``'s repr is one short line."""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np

import tsjit
from tsjit.examples.ts_copy import copy_ts

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

KERNEL_MODULE = """
import tsjit
from tsjit import ts
from tsjit.examples.ts_copy import GmemDest, GmemSource

SVG = {svg!r}

@tsjit.kernel
def rendered_copy(src, dst, num_entries):
    source = GmemSource(name="source", src=src)
    dest = GmemDest(name="dest", dst=dst)

    @ts.schedule
    def copy_schedule(s: GmemSource, d: GmemDest):
        with ts.domain_loop(tsjit.thread_idx().x, num_entries, 32):
            item = s.load()
            d.store(item)

    task = ts.Task("copy", [source], [dest], warp_idx=0, num_warps=1, schedule=copy_schedule(source, dest))
    manager = ts.TaskManager([task], {{dest: [source]}}, verbose=False)
    manager.render(SVG, engine="svg")
    manager.setup_resources_and_tasks()
    manager.run()
"""

DRIVER = """
import json, sys, numpy as np
sys.path.insert(0, sys.argv[1])
import rendered_mod, tsjit
c = tsjit.compile(rendered_mod.rendered_copy, np.zeros(32, np.float32), np.zeros(32, np.float32), 32)
print(json.dumps({"from_cache": c.metadata["from_cache"], "key": c.metadata["key"]}))
"""


def _compile_in_new_process(src_dir, cache_dir, dump_dir):
    env = dict(os.environ, TSJIT_CACHE_DIR=str(cache_dir), TSJIT_DUMP_DIR=str(dump_dir), PYTHONPATH=ROOT,
               PYTHONDONTWRITEBYTECODE="1")
    env.pop("TSJIT_ALWAYS_COMPILE", None)
    env.pop("TSJIT_DISABLE_CACHE", None)
    out = subprocess.run([sys.executable, "-c", DRIVER, str(src_dir)], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_dump_dir_and_render_are_written_on_a_disk_cache_hit(tmp_path):
    svg = tmp_path / "out" / "graph.svg"
    dump = tmp_path / "dump"
    src = tmp_path / "src"
    src.mkdir()
    (src / "rendered_mod.py").write_text(textwrap.dedent(KERNEL_MODULE.format(svg=str(svg))))
    svg.parent.mkdir()
    first = _compile_in_new_process(src, tmp_path / "cache", dump)
    assert first["from_cache"] is False
    written = svg.read_text()
    assert written.startswith("<svg") or "<svg" in written[:200]
    dumped = sorted(os.listdir(dump))
    assert {"cubin", "ll", "ptx"} <= {name.rsplit(".", 1)[1] for name in dumped}
    svg.unlink()
    os.rmdir(svg.parent)  # the hit recreates the directory the compile wrote into
    for name in dumped:
        os.remove(dump / name)
    os.rmdir(dump)

    second = _compile_in_new_process(src, tmp_path / "cache", dump)
    assert second["from_cache"] is True and second["key"] == first["key"]
    assert svg.read_text() == written
    assert sorted(os.listdir(dump)) == [name for name in dumped if not name.endswith(".py")]  # .py: compiles only


def test_compiled_kernel_repr_is_one_short_line():
    compiled = tsjit.compile(copy_ts, np.zeros(64, np.float32), np.zeros(64, np.float32), 64, 2)
    text = repr(compiled)
    assert "\n" not in text and len(text) < 200
    assert compiled.name in text and compiled.metadata["target"] in text
    assert f"registers={compiled.metadata['registers']}" in text
