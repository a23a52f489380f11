"""Host-side launch cost per call (µs) of several cuda-python launch paths on the H200."""
import ctypes, struct, sys, time
import numpy as np
from cuda.bindings import driver as cu
import cuda.bindings
from tsjit.runtime import driver, arrays
from tsjit.lang import dtypes

PTX = b"""
.version 8.0
.target sm_90
.address_size 64
.visible .entry k2(.param .u64 a, .param .u32 n) { ret; }
.visible .entry k8(.param .u64 a, .param .u64 b, .param .u64 c, .param .u64 d, .param .u32 e, .param .u32 f, .param .u32 g, .param .u32 h) { ret; }
"""
print("cuda-bindings", cuda.bindings.__version__, "python", sys.version.split()[0])
props = driver.device_properties(); print(props)
mod = driver.load_module(PTX)
k2 = mod.get_function("k2"); k8 = mod.get_function("k8")
buf = arrays.empty((1024,), dtypes.Float32)
keep = [ctypes.c_uint64(buf.data_ptr), ctypes.c_uint32(1024)]
arr = (ctypes.c_void_p * 2)(*[ctypes.addressof(k) for k in keep]); addr = ctypes.addressof(arr)
s0 = cu.CUstream(0)

def bench(name, fn, batch=400, rounds=25):
    fn(); driver.synchronize()
    best = []
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(batch):
            fn()
        best.append((time.perf_counter() - t) / batch * 1e6)
        driver.synchronize()
    best.sort()
    print(f"{name:58s} median {best[len(best)//2]:6.2f} us  min {best[0]:6.2f} us")

h = k2.handle
bench("raw cuLaunchKernel (int params addr, CUstream)", lambda: cu.cuLaunchKernel(h, 1, 1, 1, 32, 1, 1, 0, s0, addr, 0))
bench("raw cuLaunchKernel (hStream=int 0)", lambda: cu.cuLaunchKernel(h, 1, 1, 1, 32, 1, 1, 0, 0, addr, 0))
bench("raw cuLaunchKernel (params=ctypes array buffer)", lambda: cu.cuLaunchKernel(h, 1, 1, 1, 32, 1, 1, 0, s0, arr, 0))
vals = ((buf.data_ptr, 1024), (ctypes.c_void_p, ctypes.c_uint32))
bench("raw cuLaunchKernel (params=(values,types) tuple)", lambda: cu.cuLaunchKernel(h, 1, 1, 1, 32, 1, 1, 0, s0, vals, 0))
cfg = cu.CUlaunchConfig(); cfg.gridDimX = cfg.gridDimY = cfg.gridDimZ = 1; cfg.blockDimX = 32; cfg.blockDimY = cfg.blockDimZ = 1
cfg.sharedMemBytes = 0; cfg.hStream = s0; cfg.numAttrs = 0
bench("raw cuLaunchKernelEx (cached config, no attrs)", lambda: cu.cuLaunchKernelEx(cfg, h, addr, 0))
def ex_set_stream():
    cfg.hStream = s0
    cu.cuLaunchKernelEx(cfg, h, addr, 0)
bench("raw cuLaunchKernelEx (cached config, set hStream)", ex_set_stream)
bench("driver.launch plain (int addr)", lambda: driver.launch(k2, 1, 32, addr))
bench("driver.launch plain (grid/block tuples)", lambda: driver.launch(k2, (1, 1, 1), (32, 1, 1), addr))
bench("driver.launch cluster=(1,1,1) -> Ex path", lambda: driver.launch(k2, 2, 32, addr, cluster=(1, 1, 1)))
bench("driver.launch cluster=(2,1,1)", lambda: driver.launch(k2, 2, 32, addr, cluster=(2, 1, 1)))
bench("driver.launch pdl=True", lambda: driver.launch(k2, 1, 32, addr, pdl=True))
st = driver.Stream.create()
bench("driver.launch stream=Stream", lambda: driver.launch(k2, 1, 32, addr, stream=st))
# packing + launch, 8 args
fmt = struct.Struct("<QQQQIIII"); pbuf = ctypes.create_string_buffer(fmt.size); base = ctypes.addressof(pbuf)
offsets = [0, 8, 16, 24, 32, 36, 40, 44]
parr = (ctypes.c_void_p * 8)(*[base + o for o in offsets]); paddr = ctypes.addressof(parr)
p = buf.data_ptr
def packed8():
    fmt.pack_into(pbuf, 0, p, p, p, p, 1, 2, 3, 4)
    driver.launch(k8, 1, 32, paddr)
bench("struct.pack_into 8 args + driver.launch", packed8)
def ctypes8():
    kp = [ctypes.c_uint64(p), ctypes.c_uint64(p), ctypes.c_uint64(p), ctypes.c_uint64(p), ctypes.c_uint32(1), ctypes.c_uint32(2), ctypes.c_uint32(3), ctypes.c_uint32(4)]
    a = (ctypes.c_void_p * 8)(*[ctypes.addressof(x) for x in kp])
    driver.launch(k8, 1, 32, ctypes.addressof(a))
bench("ctypes objects 8 args + driver.launch", ctypes8)
v8 = ((p, p, p, p, 1, 2, 3, 4), (ctypes.c_void_p,) * 4 + (ctypes.c_uint32,) * 4)
bench("(values,types) 8 args raw cuLaunchKernel", lambda: cu.cuLaunchKernel(k8.handle, 1, 1, 1, 32, 1, 1, 0, s0, v8, 0))
try:
    import torch
    x = torch.empty(1, device="cuda"); torch.cuda.synchronize()
    bench("reference: torch x.add_(1) (one ATen kernel launch)", lambda: x.add_(1))
except Exception as e:
    print("torch reference skipped", e)
try:
    import triton, triton.language as tl
    @triton.jit
    def tk(a, n):
        pass
    x = torch.empty(1024, device="cuda")
    tk[(1,)](x, 1024); torch.cuda.synchronize()
    bench("reference: triton empty kernel launch (1 ptr + 1 int)", lambda: tk[(1,)](x, 1024))
except Exception as e:
    print("triton reference skipped", repr(e)[:200])
