"""Every tutorial notebook runs top to bottom (on a CPU it compiles and verifies, and skips launches)."""
import glob
import os

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOTEBOOKS = sorted(glob.glob(os.path.join(ROOT, "tutorials", "*.ipynb")))

#: what each notebook's output must show besides running (issue 10 §3): the kernel source it
#: teaches, numbers measured rather than typed into the text, and the checker's messages.
EXPECTED_OUTPUT = {
    "02_tma_copy.ipynb": ["class SmemTiles", "class GmemTiles", "def tma_copy_ts(", "TaskManager("],
    "05_hopper_gemm.ipynb": ["registers per thread for the whole kernel", "raises the mma warpgroups to"],
    "06_async_pipelines.ipynb": ["class StagedChunks", "create_async_async_pipeline_cfg", "def pingpong_scale("],
    "30_attention_warp_specialized.ipynb": ["def consumer_schedule", "verdict: SAFE", "spill stores 0 B",
                                            "setmaxnreg.inc 232"],
    "08_when_the_checker_says_no.ipynb": ["[C0]", "Call ring.commit()", "[P2]", "Set num_bytes=16384",
                                          "[R0]", "0 of 1 slot(s) free", "'ring' is too shallow for this schedule",
                                          "Give 'ring' at least 2 stages", "[race] race on", "smem[0:4096]"],
    # pipeline groups: the barrier counts read from the PTX of the grouped and the separate-ring programs
    "09_merge_copy.ipynb": ["barriers: group 12, separate rings 16, saved 4", "[T5]", "The corrected program: SAFE"],
    "10_merge_gemm.ipynb": ["barriers: group 12, separate rings 16, saved 4", "class CpAsyncTiles"],
    "11_merge_gemm_residual.ipynb": ["barriers: group 15, separate rings 20, saved 5", "class AccumulatorStage"],
    # the interpreter's reports (issue 13): a deadlock with its barrier and phase, a race with both lines
    "14_interpreter_finds_bugs.ipynb": ["deadlock: all 32 live threads", "task 'consumer (warps 1-1)'",
                                        "mbarrier chunks.full[0]", "parity 0", "missing fence.proxy.async",
                                        "max relative error vs float64"],
    "12_fork.ipynb": ["barriers: group 15, separate rings 18, saved 3", "[PG]", "The corrected program: SAFE"],
    "19_blackwell_persistent_gemm.ipynb": ["def persistent_gemm(", "(2, 2, 1, 1) static verdict ['SAFE']",
                                           "(2, 2, 1, 1) CLC verdict ['SAFE']",
                                           "(2, 1, 1, 1) static verdict ['SAFE']",
                                           "(1, 1, 1, 1) CLC verdict ['SAFE']", "'tcgen05.mma.cta_group::2':",
                                           "interpreted one-CTA fallback: max relative error vs float64"],
    "13_blackwell_gemm.ipynb": ["class TmemAccumulator", "checker verdicts (sm_100a, sm_90a): ['SAFE', 'SAFE']",
                                "'tcgen05.mma': 4", "sm_90a: wgmma 4 tcgen05 0"],
    # the ported Blackwell tutorials (issue 14): the checker's verdicts, PTX counts, interpreted numerics
    "15_blackwell_split_k.ipynb": ["def scatter_tmem(",
                                   "checker verdicts (sm_100a, sm_90a): ['SAFE', 'SAFE']", "cluster (1, 1, 2)",
                                   "sm_100a interpreted, split 2", "sm_90a interpreted, split 4"],
    "16_blackwell_merge_gemm.ipynb": ["tutorial 11: checker ['SAFE'], barriers: group 16, separate rings 20, saved 4",
                                      "tutorial 12: checker ['SAFE'], barriers: group 18, separate rings 24, saved 6",
                                      "tutorial 11 interpreted", "tutorial 12 interpreted"],
    "17_blackwell_fork.ipynb": ["checker ['SAFE']; barriers: group 19, separate rings 22, saved 3",
                                "TMA loads per K tile: fork 2, separate 3", "R = relu(A) exact"],
    "18_blackwell_nvfp4.ipynb": ["checker ['SAFE'] | target sm_100f", "'tcgen05.cp': 8", "sm_100a:", "sm_100f",
                                 "interleaved scales (512, 16)", "interpreted: C relative error"],
}


#: notebooks whose launch cell, without a GPU, runs the same checks at small sizes on the CPU interpreter
INTERPRETED_WITHOUT_GPU = {"01_copy_grid_stride.ipynb", "02_tma_copy.ipynb", "03_persistent_copy.ipynb",
                           "04_varlen_and_pdl.ipynb", "05_hopper_gemm.ipynb", "06_async_pipelines.ipynb",
                           "07_library_gemm.ipynb"}
#: what the interpreted launch cells print, per notebook (the copies are exact; the GEMMs print their errors)
INTERPRETED_RESULTS = {"05_hopper_gemm.ipynb": ["at small sizes: relative errors below 1e-2"],
                       "07_library_gemm.ipynb": ["at small sizes: relative errors below 1e-4",
                                                 "at small sizes: fp8 e4m3 with row / column scales: relative error"]}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[os.path.basename(p) for p in NOTEBOOKS])
def test_notebook_runs(path, tmp_path, monkeypatch):
    monkeypatch.setenv("TSJIT_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    nb = nbformat.read(path, as_version=4)
    nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    assert "GPU present" in outputs
    shown = outputs + "".join(c.source for c in nb.cells if c.cell_type == "markdown")   # source cells too
    for text in EXPECTED_OUTPUT.get(os.path.basename(path), ()):
        assert text in shown, f"{os.path.basename(path)}: {text!r} missing from the output"
    name = os.path.basename(path)
    if name in INTERPRETED_WITHOUT_GPU and "GPU present: False" in outputs:
        assert "no GPU: skipped launching" not in outputs, name
        for result in INTERPRETED_RESULTS.get(name, ["at small sizes: exact"]):
            assert f"no GPU: ran on the CPU interpreter (TSJIT_INTERPRET=1) {result}" in outputs, (name, result)
    if os.path.basename(path) == "08_when_the_checker_says_no.ipynb":
        assert outputs.count("The corrected program: SAFE") == 5


def test_tutorial_text_quotes_no_register_count_the_output_does_not_show():
    """Tutorial 5's prose once said 232 registers while its cell printed 154: counts come from cells."""
    nb = nbformat.read(os.path.join(ROOT, "tutorials", "05_hopper_gemm.ipynb"), as_version=4)
    prose = " ".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert "232 registers" not in prose and "setmaxnreg" in prose


#: device code a reader of the stored notebook (no outputs) sees in its cells
_CODE = ("@tsjit.kernel", "@tsjit.func", "@ts.schedule", "(ts.MemoryResource)")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[os.path.basename(p) for p in NOTEBOOKS])
def test_notebook_shows_its_code_in_a_cell_and_the_pasted_code_is_current(path):
    """The notebooks are stored without outputs: the code they teach is pasted into source cells
    (``tutorials/notebook_source.py``), which must equal the code that runs."""
    import sys
    sys.path.insert(0, os.path.join(ROOT, "tutorials"))
    from notebook_source import SOURCE_KEY, render
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        spec = cell.metadata.get(SOURCE_KEY)
        if spec is not None:
            assert cell.source == render(spec), f"{spec}: stale; rebuild with python tutorials/build_notebooks.py"
    name = os.path.basename(path)
    assert any(marker in cell.source for cell in nb.cells for marker in _CODE), \
        f"{name} shows no kernel, work function or schedule in its cells"
    printed = [cell.source for cell in nb.cells if cell.cell_type == "code" and "inspect.getsource(" in cell.source]
    assert not printed, f"{name} prints source a reader of the stored notebook cannot see: {printed}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[os.path.basename(p) for p in NOTEBOOKS])
def test_notebook_is_self_contained(path):
    """A notebook runs from an installed tsjit: it imports nothing from the test suite (``tests/``)."""
    nb = nbformat.read(path, as_version=4)
    code = "\n".join(cell.source for cell in nb.cells if cell.cell_type == "code")
    for marker in ('"tests"', "'tests'", "tests/", "from broken", "import broken", "verify_schedules"):
        assert marker not in code, f"{os.path.basename(path)} reaches into the test suite ({marker})"
