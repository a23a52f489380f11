#!/usr/bin/env bash
# Everything that needs the GPU, in one go (used for BENCHMARKS.md):
#   GPU tests, the demo, the core / pipeline / GEMM / attention benchmarks and the SASS checks.
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
echo "== GPU tests"; python3 -m pytest tests/gpu -q 2>&1 | tail -3
echo "== demo"; python3 -m tsjit demo 2>&1 | tail -20
echo "== core"; python3 benchmarks/core.py 2>&1 | tail -14
echo "== pipelines"; python3 benchmarks/pipelines.py 2>&1 | tail -6
echo "== gemm"; python3 benchmarks/gemm.py 2>&1 | tail -62
echo "== sass"; python3 benchmarks/sass_check.py 2>&1 | tail -12
echo "== attention"; python3 benchmarks/attention.py --precompile 8 2>&1 | tail -26
echo "== attention sass"; python3 benchmarks/attention_sass.py 2>&1 | tail -24
