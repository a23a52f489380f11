"""Issue 16 (helper i16b): which pipe do the fp8 softmax's conversions use?  Throughput of ex2.approx.ftz.f32,
cvt.rn.satfinite.e4m3x2.f32, both together, ex2.approx.f16x2 and cvt.rn.f16x2.f32 in a triton kernel with inline
PTX (8 independent operations per thread per iteration, 16 warps per SM); if ex2 + cvt takes the sum of the two
alone, they share the MUFU/XU issue (16 results per clock per SM).

    python benchmarks/gpu_batches/i16b_xu_probe.py
"""
import torch
import triton
import triton.language as tl


@triton.jit
def probe(X, Y, ITERS: tl.constexpr, MODE: tl.constexpr):
    offs = tl.program_id(0) * 512 + tl.arange(0, 512)
    x = tl.load(X + offs)
    a0, a1, a2, a3 = x, x + 1.0, x + 2.0, x + 3.0
    h0, h1, h2, h3 = x.to(tl.int32, bitcast=True), (x + 1.0).to(tl.int32, bitcast=True), \
        (x + 2.0).to(tl.int32, bitcast=True), (x + 3.0).to(tl.int32, bitcast=True)
    acc = tl.zeros([512], dtype=tl.int32)
    for _ in range(ITERS):
        if MODE == 0 or MODE == 2:
            a0 = tl.inline_asm_elementwise("ex2.approx.ftz.f32 $0, $1;", "=f,f", [a0], dtype=tl.float32, is_pure=True, pack=1)
            a1 = tl.inline_asm_elementwise("ex2.approx.ftz.f32 $0, $1;", "=f,f", [a1], dtype=tl.float32, is_pure=True, pack=1)
            a2 = tl.inline_asm_elementwise("ex2.approx.ftz.f32 $0, $1;", "=f,f", [a2], dtype=tl.float32, is_pure=True, pack=1)
            a3 = tl.inline_asm_elementwise("ex2.approx.ftz.f32 $0, $1;", "=f,f", [a3], dtype=tl.float32, is_pure=True, pack=1)
        if MODE == 1 or MODE == 2:
            cvt = "{.reg .b16 h; cvt.rn.satfinite.e4m3x2.f32 h, $1, $2; cvt.u32.u16 $0, h;}"
            acc ^= tl.inline_asm_elementwise(cvt, "=r,f,f", [a0, a1], dtype=tl.int32, is_pure=False, pack=1)
            acc ^= tl.inline_asm_elementwise(cvt, "=r,f,f", [a2, a3], dtype=tl.int32, is_pure=False, pack=1)
            acc ^= tl.inline_asm_elementwise(cvt, "=r,f,f", [a1, a2], dtype=tl.int32, is_pure=False, pack=1)
            acc ^= tl.inline_asm_elementwise(cvt, "=r,f,f", [a3, a0], dtype=tl.int32, is_pure=False, pack=1)
            if MODE == 1:
                a0, a1, a2, a3 = a0 + 1.0, a1 + 1.0, a2 + 1.0, a3 + 1.0
        if MODE == 3:
            h0 = tl.inline_asm_elementwise("ex2.approx.f16x2 $0, $1;", "=r,r", [h0], dtype=tl.int32, is_pure=True, pack=1)
            h1 = tl.inline_asm_elementwise("ex2.approx.f16x2 $0, $1;", "=r,r", [h1], dtype=tl.int32, is_pure=True, pack=1)
            h2 = tl.inline_asm_elementwise("ex2.approx.f16x2 $0, $1;", "=r,r", [h2], dtype=tl.int32, is_pure=True, pack=1)
            h3 = tl.inline_asm_elementwise("ex2.approx.f16x2 $0, $1;", "=r,r", [h3], dtype=tl.int32, is_pure=True, pack=1)
        if MODE == 4:
            f16 = "cvt.rn.f16x2.f32 $0, $1, $2;"
            acc ^= tl.inline_asm_elementwise(f16, "=r,f,f", [a0, a1], dtype=tl.int32, is_pure=False, pack=1)
            acc ^= tl.inline_asm_elementwise(f16, "=r,f,f", [a2, a3], dtype=tl.int32, is_pure=False, pack=1)
            acc ^= tl.inline_asm_elementwise(f16, "=r,f,f", [a1, a2], dtype=tl.int32, is_pure=False, pack=1)
            acc ^= tl.inline_asm_elementwise(f16, "=r,f,f", [a3, a0], dtype=tl.int32, is_pure=False, pack=1)
            a0, a1, a2, a3 = a0 + 1.0, a1 + 1.0, a2 + 1.0, a3 + 1.0
    out = acc + (a0 + a1 + a2 + a3).to(tl.int32, bitcast=True) + (h0 ^ h1 ^ h2 ^ h3)
    tl.store(Y + offs, out)


def main():
    blocks = 132 * 4 * 8
    x = torch.rand(blocks * 512, device="cuda") - 4.0
    y = torch.empty(blocks * 512, dtype=torch.int32, device="cuda")
    names = {0: "4 ex2.f32", 1: "4 cvt e4m3x2.f32 (+4 FADD)", 2: "4 ex2.f32 + 4 cvt e4m3x2", 3: "4 ex2.f16x2",
             4: "4 cvt f16x2.f32 (+4 FADD)"}
    iters = 512
    for mode, name in names.items():
        try:
            fn = lambda: probe[(blocks,)](x, y, ITERS=iters, MODE=mode, num_warps=4)
            fn(); torch.cuda.synchronize()
            times = []
            for _ in range(5):
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record(); fn(); b.record(); b.synchronize()
                times.append(a.elapsed_time(b))
            ms = sorted(times)[2]
            # per thread per iteration: 4 calls of 4 elements (512 elements over 128 threads) of each named kind
            warp_ops = blocks * 4 * iters * 16    # warp-instructions of each named kind
            print(f"xu probe: {name}: {ms:.3f} ms, {warp_ops * 32 / (ms * 1e-3) / 132 / 1e9:.1f} G lane-ops/s/SM "
                  f"(per kind)", flush=True)
        except Exception as error:
            print(f"xu probe: {name}: FAILED {type(error).__name__}: {str(error)[:200]}", flush=True)


if __name__ == "__main__":
    main()
