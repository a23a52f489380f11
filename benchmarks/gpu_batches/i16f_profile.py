"""Issue 16, helper i16f: one fp8 forward launch for Nsight Compute (where the softmax's time goes), or a quick
interleaved timing of fp8 variants against the bf16 forward.

    PYTHONPATH=. python benchmarks/gpu_batches/i16f_profile.py launch [name:key=value,...]
    PYTHONPATH=. python benchmarks/gpu_batches/i16f_profile.py time "B,H,S,causal;..." [name:key=value,...]...
    PYTHONPATH=. python benchmarks/gpu_batches/i16f_profile.py final "B,H,S,causal;..."
"""
import sys

import torch

import tsjit.ops
from tsjit.ops.attention_fp8 import attention_fp8, transpose_v_fp8

sys.path.insert(0, "benchmarks")
from attention import parse_variant  # noqa: E402
from timing import interleaved_time_ms  # noqa: E402


def inputs(batch, seqlen, heads, head_dim):
    shape = (batch, seqlen, heads, head_dim)
    q8, k8, v8 = ((torch.randn(shape, device="cuda") * 2).to(torch.float8_e4m3fn) for _ in range(3))
    return q8, k8, v8


def main():
    mode = sys.argv[1]
    if mode == "final":
        for text in sys.argv[2].split(";"):
            batch, heads, seqlen, causal = (int(x) for x in text.split(","))
            final(batch, heads, seqlen, bool(causal))
        return
    if mode == "launch":
        options = parse_variant(sys.argv[2])[1] if len(sys.argv) > 2 else {}
        q8, k8, v8 = inputs(4, 4096, 16, 128)
        vt8 = transpose_v_fp8(v8)
        out = torch.empty(q8.shape, dtype=torch.bfloat16, device="cuda")
        for _ in range(3):
            tsjit.ops.attention(q8, k8, vt8, v_transposed=True, causal=False, q_scale=0.1, k_scale=0.1, v_scale=0.2,
                                out=out, **options)
        torch.cuda.synchronize()
        print("launched", options)
        return
    shapes = [tuple(int(x) for x in t.split(",")) for t in sys.argv[2].split(";")]
    variants = [(t[0], parse_variant(t[2:])) if t[1:2] == "/" else ("a", parse_variant(t)) for t in sys.argv[3:]]
    for batch, heads, seqlen, causal in shapes:       # "c/name:..." causal shapes only, "n/name:..." the others
        time_shape(batch, heads, seqlen, bool(causal),
                   [v for kind, v in variants if kind == "a" or kind == ("c" if causal else "n")])


def final(batch, heads, seqlen, causal):
    """The landing comparison, interleaved in one process: bf16 forward; ``base`` = main's fp8 kernel (the same PTX:
    ``moved_descriptors=False`` with main's default tiles, fp32 row sums); ``desc`` = base with the V^T descriptors
    moved on their low word; ``new`` = this branch's default without LSE (row sums through the PV wgmma, its tiles),
    V pre-transposed; ``fp8`` = the default with V transposed in the call.  Every column checked against bf16."""
    tiles = dict(block_n=128, stages=2) if causal else dict(block_n=224, stages=2)
    time_shape(batch, heads, seqlen, causal,
               [("base", dict(tiles, moved_descriptors=False, mma_row_sums=False)),
                ("desc", dict(tiles, mma_row_sums=False))], default_name="new", in_call=True)


def time_shape(batch, heads, seqlen, causal, variants, default_name="fp8-vt", in_call=False):
    """bf16 forward, the fp8 default (V pre-transposed) and each variant (options of ``attention_fp8`` itself,
    which takes the experimental kernel options), interleaved; every fp8 column checked against the bf16 output
    (poisoned first) and the float64 check of the GPU tests elsewhere."""
    q8, k8, v8 = inputs(batch, seqlen, heads, 128)
    vt8 = transpose_v_fp8(v8)
    q, k, v = ((t.float() * 0.1).bfloat16() for t in (q8, k8, v8))
    out, out8 = torch.empty_like(q), torch.empty_like(q)
    fns = {"bf16": lambda: tsjit.ops.attention(q, k, v, causal=causal, out=out)}
    fns[default_name] = lambda: tsjit.ops.attention(q8, k8, vt8, v_transposed=True, causal=causal, q_scale=0.1,
                                                    k_scale=0.1, v_scale=0.1, out=out8)
    if in_call:
        fns["fp8"] = lambda: tsjit.ops.attention(q8, k8, v8, causal=causal, q_scale=0.1, k_scale=0.1, v_scale=0.1,
                                                 out=out8)
    base = dict(causal=causal, scale=None, left=None, right=0 if causal else None, q_scale=0.1, k_scale=0.1,
                v_scale=0.1, v_transposed=True, return_lse=False, out=out8, lse_out=None, sms=None, pingpong=None,
                q_stages=None, tile_table=None, torch=torch)
    for name, options in variants:
        call = dict(base, block_n=None, stages=None)
        call.update(options)
        fns[name] = (lambda c=call: attention_fp8(q8, k8, vt8, **c))
    ref = None
    for name, fn in list(fns.items()):           # every fp8 column against the bf16 forward (poisoned first)
        target = out if name == "bf16" else out8
        target.fill_(float("nan"))
        try:
            fn()
        except Exception as err:  # noqa: BLE001 -- report and drop the column
            print(f"{name}: {type(err).__name__}: {err}"[:300], flush=True)
            del fns[name]
            continue
        if ref is None:
            ref = out.float().clone()
        else:
            diff = (out8.float() - ref).abs().max().item()
            print(f"{name}: max |fp8 - bf16| = {diff:.2e}", flush=True)
            if not diff <= 0.05:
                del fns[name]
    times = interleaved_time_ms(fns, reps=7, prime=True)
    flops = 4 * batch * heads * seqlen * seqlen * 128 * (0.5 if causal else 1.0)
    tf = {n: flops / (ms * 1e-3) / 1e12 for n, ms in times.items()}
    print(f"| {batch}, {heads}, {seqlen}, 128 | {causal} | " +
          " | ".join(f"{n} {tf[n]:.0f} ({tf[n] / tf['bf16']:.3f})" for n in tf) + " |", flush=True)


if __name__ == "__main__":
    main()
