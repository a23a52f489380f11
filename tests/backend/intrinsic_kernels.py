"""One tiny kernel per intrinsic, compiled for a target in a child process.

Used by ``test_intrinsics.py``.  LLVM aborts the process on an intrinsic it cannot
select, so compilation happens in children:

* ``compile_batch(target, cases)`` first runs ONE child that compiles a module holding
  every case's kernel (``k0``, ``k1``, ...) and writes its PTX;
* only if that child dies does it fall back to a child that compiles the cases one by
  one, printing ``BEGIN i`` before each; when it dies, case ``i`` is recorded as failed
  and a new child resumes after it.

A *case* is ``(llvm_name, {immediate_index: value})``: a kernel calling the intrinsic
with its other operands loaded from a global buffer and its result stored back.
Run as a script (``python intrinsic_kernels.py MODE TARGET CASES_JSON OUT``) it is the
child.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from llvmlite import ir

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from tsjit.backend import intrinsics  # noqa: E402
from tsjit.backend.nvptx import DATA_LAYOUT, TRIPLE  # noqa: E402
from tsjit.backend.targets import get_target  # noqa: E402

Case = tuple[str, dict[int, int]]


def sample_values(values) -> list[int]:
    """The immediate values a test tries: all of a short list, else first/middle/last."""
    if values is None:
        return [0]
    values = list(values)
    return values if len(values) <= 8 else [values[0], values[len(values) // 2], values[-1]]


def cases_for(target_name: str, names=None) -> list[Case]:
    """Cases for every intrinsic the table claims for the target (or just ``names``):
    one with each immediate at its first allowed value, plus one per other sampled
    allowed value of each immediate (target-specific extra values included)."""
    target = get_target(target_name)
    cases: list[Case] = []
    for entry in intrinsics.supported_on(target):
        if names is not None and entry.name not in names:
            continue
        base = {imm.index: sample_values(imm.allowed_on(target))[0] for imm in entry.immediates}
        cases.append((entry.name, base))
        for imm in entry.immediates:
            cases += [(entry.name, {**base, imm.index: value})
                      for value in sample_values(imm.allowed_on(target))[1:]]
    return cases


def build_module(cases: list[Case], first_index: int = 0) -> str:
    """LLVM IR text with kernel ``k<first_index + i>`` for case ``i``."""
    module = ir.Module(name="intrinsic_probe")
    module.triple, module.data_layout = TRIPLE, DATA_LAYOUT
    out_type = ir.PointerType(addrspace=1)
    for offset, (name, imm_values) in enumerate(cases):
        entry = intrinsics.lookup(name)
        fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [out_type]),
                         name=f"k{first_index + offset}")
        fn.calling_convention = "ptx_kernel"
        builder = ir.IRBuilder(fn.append_basic_block("entry"))
        out = fn.args[0]
        args = []
        for index, ty in enumerate(entry.param_types):
            if index in imm_values:
                args.append(ir.Constant(ty, imm_values[index]))
            else:
                slot = builder.gep(out, [ir.Constant(ir.IntType(64), 1024 * (index + 1))],
                                   source_etype=ir.IntType(8))
                args.append(builder.load(slot, typ=ty))
        result = builder.call(intrinsics.declare(module, name), args)
        if not isinstance(entry.return_type, ir.VoidType):
            builder.store(result, out)
        builder.ret_void()
    return str(module)


def _child(mode: str, target_name: str, cases_path: str, out_path: str) -> None:
    from tsjit.backend.nvptx import llvm_to_ptx

    cases = [(name, {int(k): v for k, v in imm.items()})
             for name, imm in json.loads(Path(cases_path).read_text())]
    if mode == "batch":
        Path(out_path).write_text(llvm_to_ptx(build_module(cases), target_name))
        return
    for index in range(int(os.environ.get("PROBE_START", "0")), len(cases)):
        print(f"BEGIN {index}", flush=True)
        llvm_to_ptx(build_module([cases[index]], index), target_name)


def _run_child(mode: str, target_name: str, cases_path: Path, out_path: Path,
               start: int = 0) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), PROBE_START=str(start))
    return subprocess.run([sys.executable, __file__, mode, target_name, str(cases_path),
                           str(out_path)], capture_output=True, text=True, env=env,
                          timeout=600, cwd=REPO_ROOT)


def compile_batch(target_name: str, cases: list[Case],
                  work_dir: Path) -> tuple[str | None, dict[int, str]]:
    """Compile all cases for the target; returns ``(ptx or None, {case index: error})``.

    The PTX (of the batch module) is returned only when the batch compiled; otherwise
    the failures name each case LLVM could not compile, with the last line of its
    error output.
    """
    cases_path = work_dir / f"cases_{target_name}.json"
    out_path = work_dir / f"batch_{target_name}.ptx"
    cases_path.write_text(json.dumps(cases))
    if _run_child("batch", target_name, cases_path, out_path).returncode == 0:
        return out_path.read_text(), {}
    failures: dict[int, str] = {}
    start = 0
    while start < len(cases):
        proc = _run_child("each", target_name, cases_path, out_path, start)
        if proc.returncode == 0:
            break
        begun = [int(line.split()[1]) for line in proc.stdout.splitlines()
                 if line.startswith("BEGIN ")]
        if not begun:
            raise RuntimeError(f"intrinsic probe child failed to start:\n{proc.stderr}")
        failures[begun[-1]] = (proc.stderr.strip().splitlines() or ["<no output>"])[-1]
        start = begun[-1] + 1
    return None, failures


if __name__ == "__main__":
    _child(*sys.argv[1:5])
