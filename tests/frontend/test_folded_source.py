"""``CompiledKernel.folded_source``: the kernel as it was compiled, printed with astor, one test per
folding kind (const_expr arm, range_constexpr unrolling, work-label folding, device-function
inlining), plus the TSJIT_DUMP_DIR ``.py`` file and the disk-cache rebuild."""
import ast
import os
import sys
from dataclasses import dataclass

import numpy as np

import tsjit
from tsjit import Float32, ts
from tsjit.examples.ts_copy import GmemDest

F32 = tsjit.spec(64, Float32)


def _folded(kernel, *args, **constexprs) -> str:
    text = tsjit.compile(kernel, *args, target="sm_90a", **constexprs).folded_source
    ast.parse(text)  # it is Python
    return text


def _code_lines(text: str) -> list[str]:
    """The statement lines of the folded function body (comments and the ``def`` left out)."""
    return [line.strip() for line in text.splitlines()[3:] if line.strip() and not line.strip().startswith("#")]


@tsjit.kernel
def constexpr_arms(out, MODE: tsjit.Constexpr[int]):
    if tsjit.const_expr(MODE == 1):
        out[0] = 1.5
    elif tsjit.const_expr(MODE == 2):
        out[0] = 2.5
    else:
        out[0] = 3.5


def test_const_expr_keeps_only_the_arm_taken():
    second = _folded(constexpr_arms, F32, 2)
    assert _code_lines(second) == ["out[0] = 2.5"]
    assert "# folded: if tsjit.const_expr(MODE == 1)  ->  the `else` arm" in second
    assert "# folded: if tsjit.const_expr(MODE == 2)  ->  the `if` arm" in second
    assert _code_lines(_folded(constexpr_arms, F32, 7)) == ["out[0] = 3.5"]


@tsjit.kernel
def unrolled(x, out, N: tsjit.Constexpr[int]):
    acc = 0.0
    for i in tsjit.range_constexpr(N):
        acc += x[i * 2]
    out[0] = acc


def test_range_constexpr_loop_is_unrolled_with_its_variable_bound():
    text = _folded(unrolled, F32, F32, 3)
    assert _code_lines(text) == ["acc = 0.0", "i = 0", "acc += x[i * 2]", "i = 1", "acc += x[i * 2]",
                                 "i = 2", "acc += x[i * 2]", "out[0] = acc"]
    assert text.count("# unrolled: for i in tsjit.range_constexpr(N)") == 3
    assert "for " not in "\n".join(_code_lines(text))


@tsjit.kernel
def runtime_flow(x, out, n):
    tx = tsjit.thread_idx().x
    acc = 0.0
    if tx < n:
        for j in range(n):
            if tsjit.const_expr(True):
                acc += x[j]
    out[tx] = acc


def test_runtime_control_flow_stays_with_folded_bodies():
    lines = _code_lines(_folded(runtime_flow, F32, F32, 64))
    assert lines == ["tx = tsjit.thread_idx().x", "acc = 0.0", "if tx < n:", "for j in range(n):",
                     "acc += x[j]", "out[tx] = acc"]


@tsjit.func
def twice_or_scale(v, k):
    if tsjit.const_expr(k == 2):
        return v + v
    return v * k


@tsjit.kernel
def calls_a_function(x, out, K: tsjit.Constexpr[int]):
    out[0] = twice_or_scale(x[0], K)


def test_device_function_is_inlined_with_its_call_site_marked():
    text = _folded(calls_a_function, F32, F32, 2)
    source_file = os.path.abspath(__file__)
    inline = [line.strip() for line in text.splitlines() if line.strip().startswith("# inline ")]
    assert len(inline) == 1
    assert inline[0].startswith("# inline twice_or_scale (" + source_file + ":")
    assert inline[0].endswith(f"called at {source_file}:{calls_a_function.fn.__code__.co_firstlineno + 2}")
    assert _code_lines(text) == ["v = x[0]", "k = K", "out[0] = twice_or_scale(x[0], K)"]
    assert "# return v + v  (result of twice_or_scale)" in text
    assert "v * k" not in text                      # the arm not taken is gone
    assert text.index("# end inline twice_or_scale") < text.index("out[0] = twice_or_scale")


@dataclass(kw_only=True)
class Source(ts.MemoryResource):
    src: object
    item: ts.TaskLocalVariable = ts.TaskLocalVariable.uninitialized()

    def __post_init__(self):
        self.item = ts.TaskLocalVariable(tsjit.Float32, default=0)

    @ts.consumer_work(returns="item")
    def triple(self, stage_info):
        if stage_info.label == "triple":
            result = self.src[stage_info.loop_offset] * 3.0
        else:
            result = self.src[stage_info.loop_offset] * 7.0
        return result


@tsjit.kernel
def labelled(src, dst, n):
    source = Source(name="source", src=src)
    sink = GmemDest(name="sink", dst=dst)

    @ts.schedule
    def sched(s: Source, d: GmemDest):
        with ts.domain_loop(tsjit.thread_idx().x, n, 32):
            d.store(s.triple())

    task = ts.Task("t", [source], [sink], warp_idx=0, num_warps=1, schedule=sched(source, sink))
    manager = ts.TaskManager([task], {sink: [source]}, verbose=False)
    manager.setup_resources_and_tasks()
    manager.run()


def test_work_label_switch_is_folded_inside_the_inlined_work_body():
    f32 = np.zeros(64, np.float32)
    text = _folded(labelled, f32, f32, 64)
    assert "# inline Source.triple (" in text and "# end inline Source.triple" in text
    assert "# stage_info = <StageInfo label='triple'>" in text
    assert "# folded: if stage_info.label == 'triple'  ->  the `if` arm" in text
    assert "result = self.src[stage_info.loop_offset] * 3.0" in text
    assert "* 7.0" not in text
    assert text.index("# end inline GmemDest.store") < text.index("manager.run()")


def test_dump_dir_gets_the_folded_source_as_py(tmp_path, monkeypatch):
    monkeypatch.setenv("TSJIT_DUMP_DIR", str(tmp_path))
    monkeypatch.setenv("TSJIT_ALWAYS_COMPILE", "1")
    compiled = tsjit.compile(unrolled, F32, F32, 2, target="sm_90a")
    [py] = [p for p in os.listdir(tmp_path) if p.endswith(".py")]
    assert py.startswith("unrolled-")
    assert (tmp_path / py).read_text() == compiled.folded_source
    assert {p.rsplit(".", 1)[1] for p in os.listdir(tmp_path)} == {"ll", "ptx", "cubin", "py"}


def test_a_kernel_loaded_from_the_disk_cache_rebuilds_its_folded_source(tmp_path, monkeypatch):
    monkeypatch.setenv("TSJIT_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("TSJIT_DISABLE_CACHE")  # tests/frontend/conftest.py turns the disk cache off
    first = tsjit.compile(unrolled, F32, F32, 4, target="sm_90a")
    assert not first.metadata["from_cache"]
    again = tsjit.Kernel(unrolled.fn).compile(F32, F32, 4, target="sm_90a")
    assert again.metadata["from_cache"]
    assert again.folded_source == first.folded_source
    assert again.folded_source.count("# unrolled:") == 4


def test_without_astor_the_standard_library_prints_the_same_lines(monkeypatch):
    with_astor = _folded(unrolled, F32, F32, 2)
    monkeypatch.setitem(sys.modules, "astor", None)  # import astor raises ImportError
    without = _folded(unrolled, F32, F32, 2)
    assert _code_lines(without) == _code_lines(with_astor)
    assert without.count("# unrolled:") == 2


NO_ASTOR_DUMP = '''
import os, sys
class BlockAstor:
    def find_spec(self, name, *args):
        if name == "astor":
            raise ImportError("blocked")
sys.meta_path.insert(0, BlockAstor())
import tsjit
from tsjit.examples import basic
f32 = tsjit.spec((1024,), tsjit.Float32)
tsjit.compile(basic.block_reduce_sum, f32, f32, 1024, THREADS=256)
print(sorted(name.rsplit(".", 1)[1] for name in os.listdir(os.environ["TSJIT_DUMP_DIR"])))
'''


def test_dump_of_a_kernel_with_nested_functions_works_without_astor(tmp_path):
    """The H200 image has no astor: the ast.unparse fallback must print inlined device functions
    (their FunctionDef nodes had no line numbers, which failed every dumped compile there)."""
    import subprocess
    import sys
    script = tmp_path / "no_astor.py"
    script.write_text(NO_ASTOR_DUMP)
    dump = tmp_path / "dump"
    env = dict(os.environ, TSJIT_DUMP_DIR=str(dump), TSJIT_CACHE_DIR=str(tmp_path / "cache"))
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "['cubin', 'll', 'ptx', 'py']" in result.stdout
