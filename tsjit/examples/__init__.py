"""Example kernels used by the demo (``python -m tsjit demo``), the GPU tests and the benchmarks."""
