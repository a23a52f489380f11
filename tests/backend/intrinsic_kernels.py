"""Build one tiny kernel per intrinsic and compile them for a target, crash-safely.

Used by ``test_intrinsics.py``.  LLVM aborts the process on an intrinsic it cannot
select, so compilation happens in a child process:

* ``compile_batch(target, cases)`` runs one child that compiles every case's module
  and prints ``BEGIN i`` / ``OK i`` lines; when the child dies, the case it was on is
  recorded as failed and a new child resumes after it.
* Every successfully emitted PTX is joined per target so the caller can run ptxas once.

Run as a script (``python intrinsic_kernels.py TARGET CASES_JSON``) it is the child.
A *case* is ``(llvm_name, {immediate_index: value})``: one kernel calling the
intrinsic with dummy operands loaded from a global buffer and the given immediates.
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
from tsjit.backend.targets import get_target  # noqa: E402

Case = tuple[str, dict[int, int]]


def cases_for(target_name: str, *, all_immediate_values: bool = True) -> list[Case]:
    """One case per intrinsic supported on the target (immediates at their first allowed
    value), plus, when asked, one case per other allowed immediate value (up to three
    per immediate for long ranges: the first, middle and last)."""
    target = get_target(target_name)
    cases: list[Case] = []
    for entry in intrinsics.supported_on(target):
        base = {imm.index: _sample(imm.allowed_on(target))[0] for imm in entry.immediates}
        cases.append((entry.name, base))
        if not all_immediate_values:
            continue
        for imm in entry.immediates:
            for value in _sample(imm.allowed_on(target))[1:]:
                cases.append((entry.name, {**base, imm.index: value}))
    return cases


def _sample(values):
    if values is None:
        return [0]
    values = list(values)
    if len(values) <= 8:
        return values
    return [values[0], values[len(values) // 2], values[-1]]


def build_module(cases: list[Case], first_index: int = 0) -> str:
    """LLVM IR text with kernel ``k<i>`` for each case (i counted from first_index)."""
    module = ir.Module(name="intrinsic_probe")
    module.triple = "nvptx64-nvidia-cuda"
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
                continue
            slot = builder.gep(out, [ir.Constant(ir.IntType(64), 256 * (index + 1))],
                               source_etype=ir.IntType(8))
            args.append(builder.load(slot, typ=ty))
        result = builder.call(intrinsics.declare(module, name), args)
        if not isinstance(entry.return_type, ir.VoidType):
            builder.store(result, out)
        builder.ret_void()
    return str(module)


def _child(target_name: str, cases_path: str) -> None:
    """Compile each case in its own module; print BEGIN/OK markers and write PTX files."""
    import llvmlite.binding as llvm
    from tsjit.backend.nvptx import llvm_to_ptx

    target = get_target(target_name)
    cases = json.loads(Path(cases_path).read_text())
    start = int(os.environ.get("PROBE_START", "0"))
    out_dir = Path(cases_path).with_suffix(".d")
    out_dir.mkdir(exist_ok=True)
    del llvm
    for index in range(start, len(cases)):
        name, imm = cases[index]
        print(f"BEGIN {index}", flush=True)
        ir_text = build_module([(name, {int(k): v for k, v in imm.items()})], index)
        ptx = llvm_to_ptx(ir_text, target, opt_level=0)
        (out_dir / f"{index}.ptx").write_text(ptx)
        print(f"OK {index}", flush=True)


def compile_batch(target_name: str, cases: list[Case], work_dir: Path,
                  timeout: float = 300.0) -> tuple[dict[int, str], dict[int, str]]:
    """Compile every case for the target in child processes.

    Returns ``(ptx_by_index, failure_by_index)``; a failure's text is the tail of the
    child's stderr (the LLVM message).
    """
    cases_path = work_dir / f"cases_{target_name}.json"
    cases_path.write_text(json.dumps(cases))
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    failures: dict[int, str] = {}
    start = 0
    while start < len(cases):
        env["PROBE_START"] = str(start)
        proc = subprocess.run([sys.executable, __file__, target_name, str(cases_path)],
                              capture_output=True, text=True, env=env, timeout=timeout,
                              cwd=REPO_ROOT)
        begun = [int(line.split()[1]) for line in proc.stdout.splitlines()
                 if line.startswith("BEGIN ")]
        if proc.returncode == 0:
            break
        if not begun:
            raise RuntimeError(f"intrinsic probe child failed to start:\n{proc.stderr}")
        failures[begun[-1]] = (proc.stderr.strip().splitlines() or ["<no output>"])[-1]
        start = begun[-1] + 1
    out_dir = cases_path.with_suffix(".d")
    ptx = {int(p.stem): p.read_text() for p in out_dir.glob("*.ptx")} if out_dir.exists() else {}
    return ptx, failures


if __name__ == "__main__":
    _child(sys.argv[1], sys.argv[2])
