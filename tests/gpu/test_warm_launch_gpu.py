"""GPU: the warm launch path (``kernel[grid, block](...)`` after the first call of a signature) is
the same launch as the first one: fresh pointers and scalars arrive, streams are honoured
(``stream=`` handles, torch streams, :func:`tsjit.use_stream`), clusters still launch, and a
``BoundLaunch`` replays.  Outputs are poisoned before every launch.

Also under the CPU interpreter (``gpu_or_interpret``): the same launch sequences, where every launch
(warm, on a stream, bound) runs on the interpreter (streams are stand-ins there) and must give the same
numbers; the torch-stream test needs torch with CUDA and stays on the GPU.
"""
import numpy as np
import pytest

import tsjit
from tsjit import env
from tsjit.runtime import driver, streams

pytestmark = pytest.mark.gpu_or_interpret


@tsjit.kernel
def scale_add(x, y, out, alpha: tsjit.Float32, n: tsjit.Int32):
    i = tsjit.block_idx().x * tsjit.block_dim().x + tsjit.thread_idx().x
    if i < n:
        out[i] = alpha * x[i] + y[i]


def _arrays(rng, n):
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    return x, y, tsjit.to_device(x), tsjit.to_device(y)


def _poisoned(n):
    return tsjit.to_device(np.full(n, np.nan, np.float32))


def test_warm_launches_see_fresh_pointers_and_scalars():
    rng = np.random.default_rng()
    n = 1000
    launch = scale_add[((n + 127) // 128,), (128,)]
    for _ in range(4):   # first call builds the plan, the next ones take the hot path
        x, y, dx, dy = _arrays(rng, n)
        alpha = float(np.float32(rng.standard_normal()))
        out = _poisoned(n)
        launch(dx, dy, out, alpha, n)
        np.testing.assert_allclose(out.numpy(), np.float32(alpha) * x + y, rtol=1e-6, atol=1e-6)


def test_warm_launch_honours_use_stream_and_stream_handles():
    rng = np.random.default_rng()
    n = 4096
    launch = scale_add[(n // 256,), (256,)]
    stream = streams.Stream.create()
    x, y, dx, dy = _arrays(rng, n)
    out = _poisoned(n)
    launch(dx, dy, out, 1.0, n)            # cold
    for how in ("use_stream", "handle", "object"):
        out = _poisoned(n)
        alpha = float(np.float32(rng.standard_normal()))
        if how == "use_stream":
            with tsjit.use_stream(stream):
                launch(dx, dy, out, alpha, n)
        elif how == "handle":
            launch(dx, dy, out, alpha, n, stream=stream.value)
        else:
            launch(dx, dy, out, alpha, n, stream=stream)
        stream.synchronize()
        np.testing.assert_allclose(out.numpy(), np.float32(alpha) * x + y, rtol=1e-6, atol=1e-6)


def test_warm_launch_with_torch_tensors_on_torch_stream():
    if env.interpret():
        pytest.skip("torch CUDA tensors and streams need a GPU")
    torch = pytest.importorskip("torch")
    n = 3000
    s = torch.cuda.Stream()
    launch = scale_add[((n + 255) // 256,), (256,)]
    for _ in range(3):
        x = torch.randn(n, device="cuda")
        y = torch.randn(n, device="cuda")
        out = torch.full((n,), float("nan"), device="cuda")
        with torch.cuda.stream(s):
            launch(x, y, out, 2.0, n, stream=s.cuda_stream)
        s.synchronize()
        ref = 2.0 * x.double() + y.double()
        assert torch.allclose(out.double(), ref, rtol=1e-6, atol=1e-6)


def test_bound_launch_replays_with_its_arguments():
    rng = np.random.default_rng()
    n = 512
    x, y, dx, dy = _arrays(rng, n)
    out = _poisoned(n)
    bound = scale_add.bind(dx, dy, out, 3.0, n, grid=(n // 128,), block=(128,))
    for _ in range(2):
        out.fill_bytes(0xFF)
        bound(0)
        np.testing.assert_allclose(out.numpy(), np.float32(3.0) * x + y, rtol=1e-6, atol=1e-6)


@tsjit.kernel
def reverse32(x, out):
    s = tsjit.shared_array(tsjit.Float32, (32,))
    t = tsjit.thread_idx().x
    s[t] = x[t]
    tsjit.syncthreads()
    out[t] = s[31 - t]


def test_static_shared_memory_is_the_drivers_and_the_rest_of_the_opt_in_limit_launches():
    """The cubin's reserved kilobyte is not static memory: metadata, the driver and the launch check agree."""
    if env.interpret():
        pytest.skip("reads the loaded cubin's attributes from the CUDA driver (GPU only)")
    rng = np.random.default_rng()
    x = rng.standard_normal(32).astype(np.float32)
    dx = tsjit.to_device(x)
    compiled = reverse32.compile(dx, dx)
    function = compiled.function()
    assert compiled.metadata.static_smem_bytes == driver.function_attributes(function).static_smem_bytes == 0
    limit = driver.device_properties().max_dynamic_smem_optin - compiled.metadata.static_smem_bytes
    for smem in (0, limit):
        out = _poisoned(32)
        reverse32[(1,), (32,), smem](dx, out)
        np.testing.assert_array_equal(out.numpy(), x[::-1])
    with pytest.raises(tsjit.LaunchError, match=f"{limit + 1} bytes of dynamic shared memory"):
        reverse32[(1,), (32,), limit + 1](dx, _poisoned(32))
