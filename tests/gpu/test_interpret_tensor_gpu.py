"""The interpreter's tensor side (tsjit.interpret.{tma,wgmma,numerics}) against the H200, bit for bit
where the hardware is deterministic: the raw shared-memory image of TMA loads (every swizzle, box rows
narrower than the span, NaN fill), one wgmma per operand layout (K-/MN-major, each swizzle, no swizzle,
TF32, FP8) on identical shared-memory bytes, and Float32 conversions (NaN, overflow, ties).  Kernels:
tests/interpret/tensor_probe_kernels.py.  ``gpu_or_interpret``: the ``[interpret]`` runs check the
interpreter's plumbing of the same instructions (kernel arguments to descriptors, register order,
multicast-free TMA delivery) against the tensor-side functions called directly."""
import os

import numpy as np
import pytest

import tsjit
from interpret.tensor_memory import ArrayMemory
from interpret.tensor_probe_kernels import (B_OFFSET, SMEM_WORDS, THREADS, TMA_IMAGE_CASES, WGMMA_CASES, cvt_probe,
                                            random_operand_bytes, tile_words, tma_image, wgmma_probe)
from tsjit.interpret import numerics
from tsjit.interpret.tma import load_box
from tsjit.interpret.wgmma import mma
from tsjit.lang import dtypes
from tsjit.lang.wgmma import MMA_K
from tsjit.runtime.tensormap import validate_tensormap

pytestmark = pytest.mark.gpu_or_interpret


def _dump(name, **arrays):
    """With TSJIT_PROBE_DUMP=<dir>, keep each probe's input, hardware and model images (.npz) for study."""
    folder = os.environ.get("TSJIT_PROBE_DUMP")
    if folder:
        os.makedirs(folder, exist_ok=True)
        np.savez_compressed(os.path.join(folder, name + ".npz"), **arrays)


@pytest.mark.parametrize("case", TMA_IMAGE_CASES, ids=lambda c: c.name)
def test_tma_shared_memory_image_is_the_interpreters(case, device_backend):
    rng = np.random.default_rng()
    if case.dtype is dtypes.Float32:
        host = rng.standard_normal(case.shape).astype(np.float32)
    else:
        host = numerics.encode(rng.standard_normal(case.shape), case.dtype)    # BFloat16: uint16 bits
        if case.dtype is dtypes.Float16:
            host = host.view(np.float16)
    words = tile_words(case)
    out = tsjit.empty((words,), tsjit.Uint32).fill_bytes(0xAA)
    tensor_map = tsjit.TensorMap(tsjit.to_device(host, case.dtype), case.box, swizzle=case.swizzle,
                                 oob_fill=case.oob_fill)
    tma_image[(1,), (THREADS,)](tensor_map, out, *case.coords, TILE_WORDS=words, OFFSET_WORDS=case.offset // 4)
    gpu = out.numpy().view(np.uint8)
    memory = ArrayMemory()
    address = memory.add(host, "host")
    layout = validate_tensormap(case.shape, (case.shape[1] * case.dtype.itemsize, case.dtype.itemsize), case.dtype,
                                address, case.box, swizzle=case.swizzle, oob_fill=case.oob_fill)
    want = np.full(words * 4, 0xFF, np.uint8)
    load_box(layout, case.coords[::-1], memory, case.offset).write_into(want)
    _dump(f"tma-{case.name}", host=host, gpu=gpu, want=want)
    mismatched = np.nonzero(gpu != want)[0]
    assert mismatched.size == 0, f"{mismatched.size} bytes differ, first at {mismatched[:8]}"


@pytest.mark.parametrize("case", WGMMA_CASES, ids=lambda c: c.name)
def test_wgmma_reads_the_operands_the_interpreter_decodes(case, device_backend):
    rng = np.random.default_rng()
    raw = random_operand_bytes(case, rng)
    a_desc, b_desc = case.descriptors()
    out = tsjit.empty((THREADS * case.n // 2,), tsjit.Float32).fill_bytes(0xFF)
    wgmma_probe[(1,), (THREADS,)](tsjit.to_device(raw), out, np.uint64(a_desc), np.uint64(b_desc), N=case.n,
                                  A_TYPE=case.a_type, B_TYPE=case.b_type, TRANS_A=case.trans_a,
                                  TRANS_B=case.trans_b)
    gpu = out.numpy().reshape(THREADS, case.n // 2).astype(np.float64)
    smem = raw.view(np.uint8)
    zero = np.zeros((THREADS, case.n // 2), np.float32)
    want = mma(64, case.n, MMA_K[case.a_type], case.a_type, case.b_type, "f32", a_desc, None, b_desc, smem, zero,
               False, 1, 1, case.trans_a, case.trans_b).astype(np.float64)
    scale = np.abs(want).max()
    _dump(f"wgmma-{case.name}", raw=raw, gpu=gpu, want=want)
    assert np.isfinite(gpu).all()
    # fp8 wgmma sums its products with fewer mantissa bits than fp32 (7e-5 of the largest output measured
    # on the H200 at K=32); the interpreter sums exactly in fp32, so fp8 cases get a 2e-4 bound
    fp8 = {"e4m3", "e5m2"} & {case.a_type, case.b_type}
    assert np.abs(gpu - want).max() <= (2e-4 if fp8 else 1e-5) * scale, (np.abs(gpu - want).max(), scale)


def test_float32_conversions_are_the_interpreters(device_backend):
    rng = np.random.default_rng()
    specials = np.array([np.nan, -np.nan, np.inf, -np.inf, 3.4e38, -3.4e38, 65504.0, 65519.0, 65520.0, 70000.0,
                         1e-8, -1e-8, 6e-8, 2.0 ** -24, 1.0 + 2.0 ** -8, 1.0 + 3 * 2.0 ** -8, 1.0 + 2.0 ** -11,
                         2.5e9, -2.5e9, 1.9, -1.9, 0.0, -0.0], np.float32)
    payload = np.array([0x7FC00001, 0xFF800001, 0x7F800001], np.uint32).view(np.float32)
    x = np.concatenate([specials, payload, rng.standard_normal(4096).astype(np.float32) * 1e3])
    n = x.size
    bf16 = tsjit.empty((n,), tsjit.BFloat16).fill_bytes(0xAA)
    f16 = tsjit.empty((n,), tsjit.Float16).fill_bytes(0xAA)
    i32 = tsjit.empty((n,), tsjit.Int32).fill_bytes(0xAA)
    cvt_probe[((n + 255) // 256,), (256,)](tsjit.to_device(x), bf16, f16, i32, n)
    np.testing.assert_array_equal(bf16.numpy().view(np.uint16), numerics.encode(x, dtypes.BFloat16))
    np.testing.assert_array_equal(f16.numpy().view(np.uint16), numerics.encode(x, dtypes.Float16))
    np.testing.assert_array_equal(i32.numpy(), numerics.float_to_int_array(x, dtypes.Int32))
