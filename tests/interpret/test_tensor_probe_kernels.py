"""The hardware probes of the interpreter's tensor side (tests/interpret/tensor_probe_kernels.py)
compile and assemble for sm_90a on a machine without a GPU, for every case the GPU test runs."""
import numpy as np
import pytest

import tsjit
from interpret.tensor_probe_kernels import (SMEM_WORDS, THREADS, TMA_IMAGE_CASES, WGMMA_CASES, cvt_probe, tma_image,
                                           tile_words, wgmma_probe)
from lang.compiling import build

WORDS = np.zeros(SMEM_WORDS, np.uint32)


@pytest.mark.parametrize("case", WGMMA_CASES, ids=lambda c: c.name)
def test_wgmma_probe_assembles(case):
    out = np.zeros(THREADS * case.n // 2, np.float32)
    a_desc, b_desc = case.descriptors()
    compiled = build(wgmma_probe, WORDS, out, np.uint64(a_desc), np.uint64(b_desc), N=case.n, A_TYPE=case.a_type,
                     B_TYPE=case.b_type, TRANS_A=case.trans_a, TRANS_B=case.trans_b)
    assert f"m64n{case.n}k" in compiled.ptx


def test_cvt_probe_assembles():
    x = np.zeros(8, np.float32)
    build(cvt_probe, x, tsjit.spec((8,), tsjit.BFloat16), np.zeros(8, np.float16), np.zeros(8, np.int32), 8)


@pytest.mark.parametrize("case", TMA_IMAGE_CASES, ids=lambda c: c.name)
def test_tma_image_probe_assembles(case):
    words = tile_words(case)
    build(tma_image, tsjit.tensormap_spec(case.dtype, case.box, swizzle=case.swizzle), tsjit.spec((words,), tsjit.Uint32),
          *case.coords, TILE_WORDS=words, OFFSET_WORDS=case.offset // 4)
