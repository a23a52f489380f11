"""The interpreter's entry points: lowering a kernel for it and launching it on the CPU.

The runtime calls :func:`run` for ``TSJIT_INTERPRET=1`` launches and ``kernel.interpret[grid, block]``,
and :func:`lower` for ``tsjit.compile(..., interpret=True)``.  A launch:

1. lowers the kernel for its argument specs (once per specialization, cached on the kernel object):
   :func:`tsjit.interpret.program.lower_for_interpreter`, then translates the IR to closures;
2. checks the launch configuration against the program's launch contract, as a GPU launch does
   (``check_launch=False`` skips it, e.g. to see the deadlock a wrong block size causes);
3. registers every array argument in the launch's :class:`~tsjit.interpret.memory.GlobalMemory`
   (interpreter-mode device arrays, numpy arrays and torch CPU tensors are used in place, so the
   kernel's writes land in them) and builds the parameter values; an array whose spec promises a
   16-byte aligned base (``TensorSpec.aligned16``: every host array, which stands for a device
   allocation) but whose address is not is a :class:`~tsjit.errors.LaunchError`;
4. runs the clusters one after another (:class:`~tsjit.interpret.machine.Machine`) and prints what
   ``device_print`` printed;
5. records the global bytes the launch changed: the primary grid of a following ``pdl=True`` launch,
   whose accesses to them before ``griddepcontrol.wait`` are errors (:mod:`tsjit.interpret.pdl`).
"""
from __future__ import annotations

import ctypes
import hashlib
from dataclasses import dataclass

import numpy as np

from tsjit import abi, env
from tsjit.abi import dims3
from tsjit.errors import LaunchError
from tsjit.interpret import pdl as pdl_checks
from tsjit.interpret import scalars as S
from tsjit.interpret import wgmma_ops
from tsjit.interpret.handlers import call_handler
from tsjit.interpret.machine import Machine
from tsjit.interpret.memory import GlobalMemory
from tsjit.interpret.program import InterpretProgram, lower_for_interpreter
from tsjit.interpret.translate import Translator
from tsjit.backend.targets import DEFAULT_TARGET, environment_target, get_target
from tsjit.runtime.arrays import describe_array_argument, host_allocation
from tsjit.runtime.dumps import write_dump
from tsjit.runtime.specialize import memory_spec_key
from tsjit.runtime.tensormap import DESCRIPTOR_BYTES, interpreter_layout

__all__ = ["run", "lower", "InterpretedKernel"]


@dataclass
class InterpretedKernel:
    """A kernel lowered and translated for the interpreter (``tsjit.compile(..., interpret=True)``).

    Attributes:
        kernel: the ``@tsjit.kernel`` object.
        program: the :class:`~tsjit.interpret.program.InterpretProgram` (``.lowered.llir`` is the IR).
        translator: the translated closures (template registers, entry block, parameter slots).
        constants: module constants (``device_print`` strings) as numpy buffers, by slot.
    """

    kernel: object
    program: InterpretProgram
    translator: Translator
    constants: list

    @property
    def llir(self) -> str:
        return self.program.lowered.llir

    @property
    def name(self) -> str:
        return self.program.lowered.name

    def __getitem__(self, config):
        return self.kernel.interpret[config]

    def new_frame(self, th) -> list:
        frame = list(self.translator.template)
        frame[0] = th
        for slot, value in th.machine.params:
            frame[slot] = value
        return frame

    @property
    def entry(self):
        return self.translator.entry


def lower(kernel, specs, target_name: str, pdl: bool = False) -> InterpretedKernel:
    """Lower and translate ``kernel`` for ``specs`` (cached per specialization on the kernel).

    ``pdl``: for a dependent launch (``pdl=True``): translated without the fast global load/store
    paths, so every access reaches the checks of :mod:`tsjit.interpret.pdl`.

    Raises:
        CompilationError / VerificationError: as compiling for the GPU would.
    """
    cache = kernel.__dict__.setdefault("_interpret_programs", {})
    # TSJIT_DEBUG=1 builds differ; with TSJIT_INTERPRET_CHECK set, loads / stores are translated without
    # the fast paths (tr.checks below), so a program translated without checks must not serve a checked run
    key = (memory_spec_key(specs), target_name, pdl, env.code_affecting_values(), bool(env.interpret_checks()))
    found = cache.get(key)
    if found is not None:
        return found
    arg_specs = {p.name: s for p, s in zip(kernel.params, specs)}
    program = lower_for_interpreter(kernel.fn, arg_specs, get_target(target_name), kernel.options)
    tr = Translator(program, call_handler)
    tr.checks = bool(env.interpret_checks()) or pdl
    tr.wrap_instruction = wgmma_ops.reader_checks(tr)
    tr.entry = tr.translate()
    constants = _module_constants(program, tr)
    compiled = InterpretedKernel(kernel, program, tr, constants)
    cache[key] = compiled
    lowered = program.lowered     # TSJIT_DUMP_DIR: the IR the interpreter runs (no PTX or cubin exist)
    digest = hashlib.sha256(lowered.llir.encode()).hexdigest()[:12]
    write_dump(f"{lowered.name}-interpret-{digest}", {".ll": lowered.llir}, folded_from=lowered)
    return compiled


def _module_constants(program, tr) -> list:
    """Buffers for the module's initialized globals (strings); their slots hold the addresses."""
    out = []
    for name, slot in tr.globals.items():
        if name == "tsjit_smem":
            continue
        gv = program.module.globals.get(name)
        init = getattr(gv, "initializer", None)
        data = np.zeros(max(S.type_size(gv.value_type), 8), np.uint8) if init is None else \
            np.frombuffer(bytes(bytearray(init.constant)), np.uint8).copy() if isinstance(init.constant, (bytes, bytearray)) \
            else np.zeros(max(S.type_size(gv.value_type), 8), np.uint8)
        out.append((slot, data, f"kernel constant {name}"))
    return out


def run(kernel, values, specs, *, grid, block, smem_bytes=0, cluster=None, check_launch=True, pdl=False) -> None:
    """Run one launch of ``kernel`` on the CPU (see the module docstring).

    ``pdl=True`` (a programmatic dependent launch): the previous interpreted launch is its primary
    grid; touching what that grid wrote before ``griddepcontrol.wait`` is an error (:mod:`.pdl`).

    Raises:
        LaunchError: a bad launch configuration or an argument the interpreter cannot read.
        InterpretError: the kernel deadlocked, accessed memory out of bounds, raced, ...
        CompilationError: the kernel does not compile for these arguments.
    """
    compiled = lower(kernel, specs, environment_target() or DEFAULT_TARGET, bool(pdl))
    lowered = compiled.program.lowered
    g, b = dims3(grid, "grid"), dims3(block, "block")
    requirements = lowered.launch_requirements
    if cluster is None and requirements.cluster not in (None, (1, 1, 1)):
        cluster = requirements.cluster
    c = dims3(cluster, "cluster") if cluster is not None else (1, 1, 1)
    smem = max(int(smem_bytes), lowered.smem_bytes)
    if check_launch:
        requirements.check(lowered.name, g, b, cluster, smem, None)
    if any(gi % ci for gi, ci in zip(g, c)):
        raise LaunchError(f"kernel {lowered.name!r}: grid {g} is not a whole number of clusters {c}")
    if b[0] * b[1] * b[2] > 1024 or min(b) < 1:
        raise LaunchError(f"kernel {lowered.name!r}: block {b} has {b[0] * b[1] * b[2] if min(b) > 0 else 'no'} "
                          f"threads; a CTA has 1 to 1024 (every block extent >= 1)")
    if min(g) < 1:
        raise LaunchError(f"kernel {lowered.name!r}: grid {g} has no CTA; every grid extent must be >= 1")
    gmem = GlobalMemory()
    params = _parameters(compiled, kernel, values, specs, gmem)
    for slot, data, name in compiled.constants:
        alloc = gmem.add(data, name)
        params.append((slot, alloc.base))
    checks = env.interpret_checks()
    if pdl:
        pdl_checks.guard_dependent(gmem, pdl_checks.last_primary())
        checks = checks | {"pdl"}
    before = pdl_checks.snapshot(gmem)
    machine = Machine(compiled.program, gmem, g, b, c, smem, params, compiled, checks)
    errstate = np.seterr(all="ignore")
    try:
        machine.run()
    finally:
        pdl_checks.record_primary(lowered.name, before)   # also after an error: it is still the last grid
        np.seterr(**errstate)
        for line in machine.output:
            print(line, end="" if line.endswith("\n") else "\n")


def _span_view(address: int, nbytes: int, owner) -> np.ndarray:
    if nbytes == 0:
        return np.zeros(0, np.uint8)
    return np.ctypeslib.as_array((ctypes.c_uint8 * nbytes).from_address(address))


def _register_array(gmem, value, name: str):
    """Register the memory of array argument ``value``; returns (data_ptr, shape, strides)."""
    arg = describe_array_argument(value, name)
    if arg is None:
        raise LaunchError(f"argument '{name}' is not an array")
    itemsize = arg.dtype.itemsize if arg.dtype is not None else 1
    span = 0
    if arg.shape and 0 not in arg.shape:
        span = (sum((n - 1) * s for n, s in zip(arg.shape, arg.strides)) + 1) * itemsize
    label = f"argument '{name}' ({arg.dtype.name if arg.dtype else '?'} {tuple(arg.shape)})"
    found = host_allocation(arg.data_ptr) if arg.data_ptr else None
    if found is not None:
        base, buffer = found
        gmem.add(buffer, label, itemsize, owner=value)
    elif arg.device_kind == "host":
        if isinstance(value, np.ndarray) and value.flags.c_contiguous:
            gmem.add(value, label, itemsize, owner=value)
        else:
            gmem.add(_span_view(arg.data_ptr, span, value), label, itemsize, owner=value)
    elif arg.data_ptr:
        raise LaunchError(f"argument '{name}' is in GPU memory, which the CPU interpreter cannot read; pass a numpy "
                          f"array, or create the device arrays with TSJIT_INTERPRET=1 set (they then live in host "
                          f"memory)")
    return arg


def _parameters(compiled, kernel, values, specs, gmem) -> list:
    """(slot, value) of every LLVM parameter, in the kernel's parameter layout."""
    params_slots = compiled.translator.params
    out, position = [], 0
    for p, value, spec in zip(kernel.params, values, specs):
        fields = _field_values(p.name, value, spec, gmem)
        for v in fields:
            out.append((params_slots[position], v))
            position += 1
    return out


def _field_values(name, value, spec, gmem) -> list:
    if isinstance(spec, abi.ConstSpec):
        return []
    if isinstance(spec, abi.TensorSpec):
        arg = _register_array(gmem, value, name)
        if spec.aligned16 and arg.data_ptr & 15:
            raise LaunchError(
                f"argument '{name}': its base address 0x{arg.data_ptr:x} is {arg.data_ptr % 16} mod 16, but the "
                f"kernel is compiled for a 16-byte aligned base (what device allocations give, and what a host "
                f"array stands for; 16-byte cp.async and vector accesses rely on it, and the GPU faults with "
                f"'misaligned address'); pass a 16-byte aligned array, e.g. a copy ({name}.copy() instead of "
                f"a view such as x[1:])")
        mask = (1 << (64 if spec.index64 else 32)) - 1
        fields = [arg.data_ptr]
        fields += [int(n) & mask for n in arg.shape]
        fields += [int(s) & mask for s, unit in zip(arg.strides, spec.unit_strides) if not unit]
        return fields
    if isinstance(spec, abi.TensorMapSpec):
        descriptor = np.frombuffer(bytes(value.descriptor_bytes), np.uint8).copy()
        found = interpreter_layout(descriptor)
        if found is None:
            raise LaunchError(f"argument '{name}': this TensorMap was encoded for the GPU; create it with "
                              f"TSJIT_INTERPRET=1 set so the interpreter can read its layout")
        _layout, array = found
        _register_array(gmem, array, f"{name}'s array")
        alloc = gmem.add(descriptor, f"TensorMap descriptor '{name}'")
        assert len(descriptor) == DESCRIPTOR_BYTES
        return [alloc.base]
    if isinstance(spec, abi.ScalarSpec):
        dtype = spec.dtype
        if dtype.is_float:
            kind = {16: "bfloat" if dtype.name == "BFloat16" else "half", 32: "float", 64: "double"}[dtype.bits]
            return [S.round_float(float(value), kind)]
        if dtype.is_bool:
            return [1 if value else 0]
        return [int(value) & ((1 << dtype.bits) - 1)]
    raise LaunchError(f"argument '{name}': the interpreter cannot pass a {type(spec).__name__}")
