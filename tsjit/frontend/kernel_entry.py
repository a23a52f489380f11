"""Kernel entry: a Python function + argument specializations -> LLVM IR text.

:func:`compile_to_llvm` creates the module and the ``ptx_kernel`` function, binds the
parameters to device objects (:mod:`.specs`), visits the body with a
:class:`~.codegen.CodeGenerator` and finalizes the module (launch bounds, loop-unroll
metadata).  It needs no GPU.
"""
from __future__ import annotations

import ast
import hashlib
import re
import unicodedata
from dataclasses import dataclass, field

from llvmlite import ir

from tsjit.abi import LaunchRequirements
from tsjit.backend import emit
from tsjit.backend.targets import Target
from tsjit.errors import CompilationError
from tsjit.frontend import specs as S
from tsjit.frontend.codegen import CodeGenerator
from tsjit.frontend.folded import FoldRecorder, render
from tsjit.backend import half_fences
from tsjit.frontend.frame import Frame, active_generator
from tsjit.frontend.source import parse_function


@dataclass
class LoweredKernel:
    """The result of lowering one kernel.

    Attributes:
        name: the kernel's symbol.
        llir: LLVM IR text.
        smem_bytes: dynamic shared memory the kernel itself laid out (bytes).
        dependencies: every global, closure cell and attribute chain the compile resolved
            (:func:`~tsjit.frontend.dependencies.record_key` -> digest of the value found).
        param_layout: per argument name, the number of LLVM parameters it expands to.
        launch_requirements: the kernel's launch contract (threads, cluster, shared memory).
        debug_waits: per bounded wait of a TSJIT_DEBUG=1 build, what it waits for (task, operation,
            resource, barrier); a hang record's ``site`` indexes it (tsjit.lang.bounded_wait).
        folded: the folded ``ast`` of the kernel (:mod:`.folded`), recorded while compiling;
            :attr:`folded_source` prints it.
    """

    name: str
    llir: str
    smem_bytes: int
    dependencies: dict = field(default_factory=dict)
    param_layout: list = field(default_factory=list)
    launch_requirements: LaunchRequirements = field(default_factory=LaunchRequirements)
    debug_waits: list = field(default_factory=list)
    folded: ast.FunctionDef | None = field(default=None, repr=False)
    folded_header: str = ""

    @property
    def folded_source(self) -> str | None:
        """The kernel as compiled, as Python text printed with ``astor`` (:mod:`.folded`); printed on
        each access (it is not needed on any launch path)."""
        return None if self.folded is None else render(self.folded, self.folded_header)


def kernel_symbol(fn) -> str:
    """The PTX symbol of kernel ``fn``: its name when that is an ASCII identifier, else a legal PTX
    identifier (PTX ISA "Identifiers": ``[a-zA-Z][a-zA-Z0-9_$]*`` or ``[_$%][a-zA-Z0-9_$]+``) made of
    the name's ASCII transliteration and a digest of the full name, so distinct names stay distinct
    (``k_é`` -> ``k_e_u1f0c2a9b``)."""
    name = fn.__name__
    if name.isascii() and name.isidentifier():
        return name
    ascii_name = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()
    ascii_name = re.sub(r"[^A-Za-z0-9_]", "_", ascii_name) or "k"
    if ascii_name[0].isdigit():
        ascii_name = "_" + ascii_name
    return f"{ascii_name}_u{hashlib.sha256(name.encode()).hexdigest()[:8]}"


def compile_to_llvm(fn, arg_specs: dict, target: Target, *, max_threads: int | None = None,
                    min_blocks: int | None = None, max_registers: int | None = None,
                    unroll_limit: int | None = None) -> LoweredKernel:
    """Lower kernel ``fn`` specialized by ``arg_specs`` (parameter name -> spec) for ``target``.

    ``unroll_limit`` bounds every compile-time loop (:mod:`.guards`; default ``TSJIT_UNROLL_LIMIT``
    or 4096).

    Raises:
        CompilationError: the kernel source is not valid device code (with location).
    """
    parsed = parse_function(fn)
    name = kernel_symbol(fn)
    km = emit.KernelModule(name, target)
    param_types, layout = [], []
    for pname, spec in arg_specs.items():
        types = S.parameter_types(spec)
        layout.append((pname, len(types)))
        param_types.extend(types)
    fnty = ir.FunctionType(emit.VOID, param_types)
    function = ir.Function(km.module, fnty, name=name)
    function.calling_convention = "ptx_kernel"
    km.function = function
    entry = function.append_basic_block("entry")
    km.builder = ir.IRBuilder(entry)
    scope, pos = {}, 0
    with emit.activate(km):
        for (pname, count), spec in zip(layout, arg_specs.values()):
            params = function.args[pos:pos + count]
            pos += count
            if isinstance(spec, S.TensorMapSpec):
                params[0].attributes.add("byval")
                params[0].attributes.align = 128
                km.grid_constant_params.append(pos)
            scope[pname] = S.build_argument(spec, list(params), pname)
        folder = FoldRecorder()
        for pname, spec in arg_specs.items():
            if isinstance(spec, S.ConstSpec):
                folder.comment(f"{pname} = {spec.value!r}  (compile-time argument)")
        gen = CodeGenerator(km, unroll_limit=unroll_limit, folder=folder)
        frame = Frame(parsed, scope, is_kernel=True)
        gen.frames.append(frame)
        with active_generator(gen):
            gen.visit_body(parsed.node.body)
        if not gen.dead:
            km.builder.ret_void()
        for check in km.completion_checks:
            check()
        _check_shared_memory(km, parsed)
        _finalize(km, max_threads, min_blocks, max_registers)
    return LoweredKernel(name=name, llir=_patch_text(km), smem_bytes=km.smem_bytes,
                         dependencies=dict(gen.recorder.records), param_layout=layout,
                         launch_requirements=km.launch_requirements.merged(
                             min_smem_bytes=km.smem_bytes, max_threads=max_threads,
                             max_smem_bytes=target.smem_bytes_per_cta),
                         debug_waits=list(getattr(km, "debug_waits", ())),
                         folded=folder.function(parsed.node.name, list(arg_specs)),
                         folded_header=f"kernel {parsed.node.name} as compiled by tsjit for {target.name} "
                                       f"(folded)\nsource: {parsed.filename}:{parsed.node.lineno}")


def _check_shared_memory(km, parsed) -> None:
    limit = km.target.smem_bytes_per_cta
    if km.smem_bytes > limit:
        crossing = getattr(km, "smem_overflow", None)
        raise CompilationError(
            f"kernel {parsed.node.name!r} places {km.smem_bytes} bytes in shared memory, but one CTA on "
            f"{km.target.name} has at most {limit}" + (f" ({crossing})" if crossing else "") +
            "; use smaller tiles or fewer stages", parsed.location())


def _finalize(km, max_threads, min_blocks, max_registers) -> None:
    half_fences.fence_mixed_half_truncations(km.module)
    for value, key in ((max_threads, "maxntidx"), (min_blocks, "minctasm"), (max_registers, "maxnreg")):
        if value is not None:
            if not isinstance(value, int) or value <= 0:
                raise CompilationError(f"launch bound {key} must be a positive int, got {value!r}")
            km.annotate(key, value)
    for index in km.grid_constant_params:
        km.module.add_named_metadata("nvvm.annotations", [
            km.function, ir.MetaDataString(km.module, "grid_constant"),
            km.module.add_metadata([ir.Constant(emit.I32, index)])])
    km.unroll_nodes = []
    for branch, count in km.loop_unroll_hints:
        inner = km.module.add_metadata([ir.MetaDataString(km.module, "llvm.loop.unroll.count"),
                                        ir.Constant(emit.I32, count)])
        node = km.module.add_metadata([ir.MetaDataString(km.module, "tsjit.loop.self"), inner])
        branch.set_metadata("llvm.loop", node)
        km.unroll_nodes.append(node)


def _patch_text(km) -> str:
    text = str(km.module)
    # llvmlite cannot write a self-referential distinct node; LLVM loop IDs must be one.
    for node in getattr(km, "unroll_nodes", []):
        ref = node.get_reference()
        text = re.sub(rf'^{re.escape(ref)} = !{{\s*!"tsjit.loop.self", (![0-9]+)\s*}}',
                      rf'{ref} = distinct !{{{ref}, \1}}', text, flags=re.M)
    return text
