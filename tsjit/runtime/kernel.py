"""``@tsjit.kernel``: specialization, caching, compilation and launch.

Launch path (``kernel[grid, block](*args)``):

1. :func:`~tsjit.runtime.specialize.specialize_one` per argument -> spec tuple (no hashing).
2. In-memory dict lookup ``(spec tuple, target)`` -> loaded function.  A hit launches at once.
3. Miss: the on-disk key = SHA-256 of (tsjit source digest, the kernel's identity -- module, name,
   file, source digest --, the specs with constexpr values by digest, target, compile options,
   assembler version, code-affecting env vars).  :class:`~tsjit.runtime.cache.KernelCache` hit
   whose recorded dependencies (every global, closure cell and attribute chain the compile
   resolved, with digests: :mod:`tsjit.frontend.dependencies`) all still match -> load the cubin;
   otherwise compile (frontend -> LLVM -> PTX -> cubin) and store.  A corrupt entry is a miss.

:func:`compile` does steps 1-3 without a GPU and returns a :class:`CompiledKernel` with
``.llir``, ``.ptx``, ``.cubin``, ``.metadata`` and ``.folded_source`` (the kernel as compiled, as
Python: :mod:`tsjit.frontend.folded`).
"""
from __future__ import annotations

import ctypes
import hashlib
import inspect
import threading
import time
from dataclasses import dataclass, field

from tsjit import env
from tsjit.abi import LaunchRequirements
from tsjit.backend import assemble as assembler
from tsjit.backend import prewarm
from tsjit.backend.targets import DEFAULT_TARGET, environment_target, get_target, target_for_capability
from tsjit.errors import (CompilationError, CompileArgumentError, LaunchError, TsjitError, UsageTypeError, did_you_mean,
                          hide_from_pytest)
from tsjit.frontend import artifacts
from tsjit.frontend.dependencies import unchanged as dependencies_unchanged
from tsjit.runtime import driver, hang_report, launch_config, streams
from tsjit.runtime.dumps import dump_compiled
from tsjit.runtime.cache import CacheEntry, KernelCache
from tsjit.runtime.metadata import KernelMetadata
from tsjit.lang.constexpr import is_constexpr_annotation
from tsjit.runtime.launch import BoundLaunch, LaunchPlan, argument_signature, constexpr_kind, hot_caller, plan_layout
from tsjit.runtime.launcher import Launcher, launcher_class  # noqa: F401 - Launcher: kernel[grid, block]'s type
from tsjit.runtime.specialize import (assembler_key, disk_spec_key, kernel_identity, memory_spec_key, specialize_one,
                                      tsjit_version_digest)

__tracebackhide__ = hide_from_pytest  # pytest shows a TsjitError without tsjit's frames


def compile_to_llvm(fn, arg_specs: dict, target, **options):
    """The frontend, Python source -> LLVM IR (:func:`tsjit.frontend.kernel_entry.compile_to_llvm`),
    imported on the first compile: ``@tsjit.kernel`` and a disk-cache hit never load the code generator,
    the device language or llvmlite."""
    from tsjit.frontend import kernel_entry  # lazily: a disk hit needs no code generator
    return kernel_entry.compile_to_llvm(fn, arg_specs, target, **options)


@dataclass
class CompiledKernel:
    """One compiled specialization of a kernel.

    Attributes:
        name: kernel symbol in the cubin.
        llir, ptx: text of each stage (``None`` when loaded from a cache entry that did not keep it).
        cubin: the device binary for ``metadata.target``.
        metadata: a :class:`~tsjit.runtime.metadata.KernelMetadata` (``registers``, spills,
            ``smem_bytes``, ``static_smem_bytes``, ``target``, ``tool``, ``key``, ``compile_ms``,
            ``dependencies``, ``from_cache``, ``launch_requirements``, ``artifacts``...), read as attributes or,
            like a dict, by name (``metadata["registers"]``).
        folded_source: the kernel as compiled, as Python text (:mod:`tsjit.frontend.folded`).

    ``metadata["from_cache"]`` says how *this object* was made: ``False`` compiled in this
    process, ``True`` loaded from the disk cache.  An in-memory hit (the same kernel and
    specialization again in one process) returns the very same object, so it keeps the value
    of the lookup that made it; ``compiled is kernel.compile(...)`` tells an in-memory hit.
    """

    name: str
    cubin: bytes
    metadata: KernelMetadata
    llir: str | None = None
    ptx: str | None = None
    _function: object = field(default=None, repr=False)
    _folded: object = field(default=None, repr=False)

    @property
    def folded_source(self) -> str:
        """The kernel as it was compiled (const_expr arms chosen, range_constexpr loops unrolled, work
        labels folded, device functions inlined with their call sites marked), printed with ``astor``.

        Printed from the tree the frontend recorded while compiling; for a kernel loaded from the disk
        cache the frontend runs again on first access (LLVM IR only, no PTX or cubin), then the text is
        kept."""
        if callable(self._folded):
            self._folded = self._folded()
        return self._folded

    def __repr__(self) -> str:
        meta = self.metadata
        smem = (meta["smem_bytes"] or 0) + (meta["static_smem_bytes"] or 0)
        source = "disk cache" if meta["from_cache"] else "compiled"
        return (f"<CompiledKernel {self.name} target={meta['target']} registers={meta['registers']} "
                f"smem_bytes={smem} cubin={len(self.cubin)} B ({source})>")

    def __getitem__(self, config):
        """Refused: launch through the kernel (it finds this specialization again in the cache).

        Raises:
            LaunchError: always, naming ``kernel[grid, block](...)``.
        """
        raise LaunchError(f"a CompiledKernel ({self.name}) is not launched itself: launch the @tsjit.kernel "
                          f"function instead, {self.name}[grid, block](...) (it reuses this compiled "
                          f"specialization from the cache)")

    @property
    def launch_requirements(self) -> LaunchRequirements:
        """The launch contract the launcher checks (``metadata.launch_requirements``)."""
        return self.metadata.launch_requirements

    def function(self):
        """The loaded driver function (loads the cubin on first use; needs a GPU)."""
        if self._function is None:
            module = driver.load_module(self.cubin)
            if self.metadata.debug_waits:  # a TSJIT_DEBUG=1 build: give it a hang-record buffer
                hang_report.attach(self.name, self.metadata.debug_waits, module)
            self._function = driver.get_function(module, self.name)
        return self._function


_OPTION_NAMES = ("max_threads", "min_blocks", "max_registers", "unroll_limit")

#: Set by the package face (``tsjit/__init__.py``): a zero-argument callable returning the CPU interpreter's
#: entry points (``tsjit.interpret.launch``).  The interpreter sits above the runtime, so the runtime never
#: imports it; ``TSJIT_INTERPRET=1``, ``kernel.interpret[grid, block]`` and ``compile(interpret=True)`` call it.
interpreter_loader = None


def _interpreter():
    if interpreter_loader is None:
        raise LaunchError("the CPU interpreter is reached through the package: `import tsjit` and use "
                          "tsjit.kernel (TSJIT_INTERPRET=1 or kernel.interpret[grid, block])")
    return interpreter_loader()


class Kernel:
    """A ``@tsjit.kernel`` function.

    Launch with ``kernel[grid, block](*args)`` or :meth:`launch`.  ``grid``/``block`` are ints or
    tuples of up to 3 ints; ``grid`` may be a callable receiving the bound arguments as a dict
    (constexprs included) and returning the grid.
    """

    __tsjit_kernel__ = True

    def __init__(self, fn, **options):
        unknown = set(options) - set(_OPTION_NAMES)
        if unknown:
            raise TsjitError(f"unknown @tsjit.kernel option(s) {sorted(unknown)}; known: {list(_OPTION_NAMES)}")
        self.fn = fn
        self.options = {k: options.get(k) for k in _OPTION_NAMES}
        self.__name__ = fn.__name__
        self.__qualname__ = fn.__qualname__
        self.__doc__ = fn.__doc__
        self.signature = inspect.signature(fn)
        self.params = list(self.signature.parameters.values())
        for p in self.params:
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                raise TsjitError(f"kernel {fn.__qualname__}: *args/**kwargs parameters are not supported")
        self.annotations = [_resolve_annotation(p.annotation, fn) for p in self.params]
        self.kinds = [constexpr_kind(a, is_constexpr_annotation(a)) for a in self.annotations]
        self.hot_call = hot_caller(self.kinds)  # the warm launch of Launcher.__call__, generated for these kinds
        self._plans: dict = {}
        self._launchers: dict = {}
        self._launcher_class = None
        self._loaded: dict = {}
        self._identity: str | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"<tsjit.kernel {self.__qualname__}>"

    def __call__(self, *args, **kwargs):
        raise LaunchError(f"launch kernel {self.__qualname__} with {self.__name__}[grid, block](...) or "
                          f"{self.__name__}.launch(..., grid=..., block=...)")

    @property
    def interpret(self) -> "_InterpretLaunch":
        """``kernel.interpret[grid, block](*args)``: run this launch on the CPU interpreter
        (:mod:`tsjit.interpret`), whatever ``TSJIT_INTERPRET`` says; arguments as for a GPU launch, and
        numpy arrays / torch CPU tensors too (the kernel reads and writes them in place)."""
        return _InterpretLaunch(self)

    def _interpret(self, args, kwargs, grid, block, smem_bytes=0, cluster=None, check_launch=True, pdl=False):
        values = self._bind(args, kwargs)
        specs, _ = self._specialize(values, for_compile=True)
        if callable(grid):
            grid = grid({p.name: v for p, v in zip(self.params, values)})
        return _interpreter().run(self, values, specs, grid=grid, block=block, smem_bytes=smem_bytes,
                                  cluster=cluster, check_launch=check_launch, pdl=pdl)

    def __getitem__(self, config):
        if not isinstance(config, tuple) or len(config) < 2:
            raise LaunchError(f"{self.__name__}[grid, block]: give both the grid and the block, e.g. "
                              f"{self.__name__}[(blocks,), (256,)]")
        try:
            launcher = self._launchers.get(config)
        except TypeError:  # unhashable grid (a list)
            launcher = None
        if launcher is not None:
            return launcher
        if self._launcher_class is None:   # one frame per warm launch: the generated __call__
            self._launcher_class = launcher_class(self.kinds)
        launcher = self._launcher_class(self, config[0], config[1], config[2] if len(config) > 2 else 0)
        try:
            if len(self._launchers) < 1024:
                self._launchers[config] = launcher
        except TypeError:  # unhashable grid (a list or callable): no memo
            pass
        return launcher

    # -- binding ------------------------------------------------------------------------------
    def _bind(self, args, kwargs, options: tuple = ()) -> list:
        if kwargs or len(args) != len(self.params):
            try:
                bound = self.signature.bind(*args, **kwargs)
            except TypeError as exc:
                raise LaunchError(f"kernel {self.__qualname__}: {self._binding_problem(exc, kwargs, options)}") from None
            bound.apply_defaults()
            return [bound.arguments[p.name] for p in self.params]
        return list(args)

    def _binding_problem(self, exc: TypeError, kwargs, options: tuple) -> str:
        """What is wrong with the arguments: an unknown keyword first (with the closest parameter or
        ``options`` name: ``SCALEE`` -> ``SCALE``), since it is usually why a parameter is "missing"."""
        names = [p.name for p in self.params]
        unknown = [key for key in kwargs if key not in names]
        if not unknown:
            return str(exc)
        key = unknown[0]
        return (f"got an unexpected keyword argument {key!r}.{did_you_mean(key, names + list(options))} "
                f"The kernel's parameters: {', '.join(names) or 'none'}")

    def _specialize(self, values, for_compile=False):
        specs, packed = [], []
        for p, annotation, value in zip(self.params, self.annotations, values):
            spec, vals = specialize_one(p.name, value, annotation, for_compile=for_compile, kernel_name=self.__name__)
            specs.append(spec)
            packed.extend(vals)
        return specs, packed

    # -- compile ------------------------------------------------------------------------------
    def _disk_key(self, specs, target, tool_key: str) -> str:
        if self._identity is None:
            self._identity = kernel_identity(self.fn)
        h = hashlib.sha256()
        for part in (tsjit_version_digest(), self._identity, disk_spec_key([p.name for p in self.params], specs),
                     target.name, repr(sorted(self.options.items())), tool_key,
                     repr(env.code_affecting_values())):
            h.update(part.encode())
            h.update(b"\0")
        return h.hexdigest()

    def _get_compiled(self, specs, target_name: str) -> CompiledKernel:
        memo_key = (memory_spec_key(specs), target_name, env.code_state())
        compiled = self._loaded.get(memo_key)
        if compiled is not None:
            return compiled
        with self._lock:
            compiled = self._loaded.get(memo_key)
            if compiled is None:
                try:
                    compiled = self._compile_or_load(specs, get_target(target_name))
                except TsjitError as exc:
                    # Report at the user's call site: drop the compiler's own frames.
                    raise exc.with_traceback(None) from None
                if len(self._loaded) > 4096:  # constexpr objects are keyed by identity: bound the memo
                    self._loaded.clear()
                self._loaded[memo_key] = compiled
        return compiled

    def _compile_or_load(self, specs, target) -> CompiledKernel:
        front = None
        tool_key = assembler_key(search=False)
        if tool_key is None:
            # Neither this process nor the cache directory knows the assembler: its search (cuda.pathfinder,
            # `ptxas --version`, or nvJitLink's load: 50-250 ms, mostly waiting on subprocesses) runs on a
            # thread while the frontend runs, and the cache is looked up once the search is done.
            assembler.prewarm()
            front = self._frontend(specs, target)
            tool_key = assembler_key()
        key = self._disk_key(specs, target, tool_key)
        cache = None if env.disable_cache() else KernelCache()
        if cache is not None and not env.always_compile():
            entry = cache.get(key)
            meta = KernelMetadata.from_json(entry.metadata) if entry is not None else None
            if meta is not None and dependencies_unchanged(meta.dependencies, self.fn):
                arg_specs = {p.name: s for p, s in zip(self.params, specs)}
                compiled = CompiledKernel(meta.kernel_name, entry.cubin, meta, entry.llir, entry.ptx,
                                          _folded=lambda: compile_to_llvm(self.fn, arg_specs, target,
                                                                          **self.options).folded_source)
                artifacts.replay(meta.artifacts)  # render() files and TSJIT_DUMP_DIR: on a hit too
                dump_compiled(compiled)
                return compiled
        if front is None:
            # LLVM's library load and target machine overlap the frontend (not while the assembler search
            # above runs: three threads contending for the GIL measured slower than two on the H200 host)
            prewarm.llvm(target.name)
            front = self._frontend(specs, target)
        compiled = self._compile(specs, target, key, front)
        if cache is not None:
            cache.put(key, CacheEntry(compiled.cubin, compiled.metadata.to_json(), compiled.ptx, compiled.llir))
        return compiled

    def _frontend(self, specs, target) -> tuple:
        """(lowered kernel, artifacts it wrote, milliseconds): the Python frontend, up to LLVM IR."""
        t0 = time.perf_counter()
        arg_specs = {p.name: s for p, s in zip(self.params, specs)}
        with artifacts.recording() as written:
            lowered = compile_to_llvm(self.fn, arg_specs, target, **self.options)
        return lowered, written, (time.perf_counter() - t0) * 1e3

    def _compile(self, specs, target, key, front) -> CompiledKernel:
        lowered, written, frontend_ms = front
        t1 = time.perf_counter()
        assembler.prewarm()  # nvJitLink's discovery and dlopen (they hold the GIL) overlap LLVM (it does not)
        from tsjit.backend import nvptx  # lazily: LLVM's native library loads only when a kernel is compiled
        ptx = nvptx.llvm_to_ptx(lowered.llir, target)
        t2 = time.perf_counter()
        asm = assembler.assemble(ptx, target, kernel_name=lowered.name)
        t3 = time.perf_counter()
        metadata = KernelMetadata(
            kernel_name=lowered.name, target=target.name, key=key,
            registers=asm.registers, spill_stores_bytes=asm.spill_stores_bytes,
            spill_loads_bytes=asm.spill_loads_bytes, stack_frame_bytes=asm.stack_frame_bytes,
            static_smem_bytes=asm.static_smem_bytes, smem_bytes=lowered.smem_bytes,
            tool=asm.tool, tool_version=asm.tool_version, assembler_notes=list(asm.performance_notes),
            dependencies=lowered.dependencies,
            launch_requirements=lowered.launch_requirements,
            debug_waits=lowered.debug_waits,
            compile_ms={"frontend": frontend_ms, "llvm": (t2 - t1) * 1e3, "assemble": (t3 - t2) * 1e3},
            artifacts=written)
        compiled = CompiledKernel(lowered.name, asm.cubin, metadata, lowered.llir, ptx,
                                  _folded=lambda: lowered.folded_source)
        dump_compiled(compiled)
        return compiled

    # -- launch -------------------------------------------------------------------------------
    def launch(self, *args, grid, block, smem_bytes: int = 0, stream=None, cluster=None, pdl: bool = False,
               check_launch: bool = True, **kwargs) -> None:
        """Launch on the current (or given) stream.

        ``smem_bytes`` below what the kernel lays out is raised to it; ``cluster=None`` takes the
        program's cluster layout.  The configuration is checked against the kernel's launch contract
        (:class:`~tsjit.abi.LaunchRequirements`: threads per CTA, cluster, shared memory) before the
        driver is called, once per distinct ``(grid, block, smem, cluster, pdl)``; the verdict is
        cached with the prepared driver configuration.  ``check_launch=False`` skips the contract
        check (the driver's own limits still apply): only for demonstrating what a mismatched
        launch does, e.g. a TSJIT_DEBUG=1 hang report.

        Raises:
            LaunchError: a bad argument (named, expected vs given), a configuration that does not
                match the kernel's launch contract (names the kernel, what was given and what the
                program needs), or the driver refused.
            CompilationError: the kernel does not compile for these arguments.
        """
        if env.interpret():
            return self._interpret(args, kwargs, grid, block, smem_bytes, cluster, check_launch, pdl)
        values = args if (not kwargs and len(args) == len(self.params)) else self._bind(args, kwargs)
        sig, dyn = argument_signature(values, self.kinds)
        plan = self._plans.get(sig) if sig is not None else None
        if plan is None or plan.env_state != env.code_state():   # TSJIT_DEBUG etc. changed: another build
            plan = self._make_plan(values, sig)
            if plan is None:  # no fast path for these arguments (e.g. TMA descriptors)
                return self._launch_slow(values, grid, block, smem_bytes, stream, cluster, pdl, check_launch)
        if callable(grid):
            grid = grid({p.name: v for p, v in zip(self.params, values)})
        smem = smem_bytes if smem_bytes > plan.smem else plan.smem
        config = (grid, block, smem, cluster, pdl, check_launch)
        try:
            prepared = plan.prepared[config]
        except (KeyError, TypeError):  # a new configuration (or an unhashable one: checked every time)
            prepared = _prepare(plan, config)
        stream_value = streams.stream_value(stream)
        with plan.lock:
            plan.pack(dyn)
            launch_config.launch_prepared(plan.function, prepared, plan.params, stream_value)

    def bind(self, *args, grid, block, smem_bytes: int = 0, cluster=None, pdl: bool = False) -> BoundLaunch:
        """Pack a launch once (arguments, grid, block) and return it as a :class:`BoundLaunch`:
        ``bound(stream_handle)`` then costs one driver call.  For libraries that launch the same
        arguments many times (``tsjit.ops.matmul`` caches one per data-pointer tuple).  Under
        ``TSJIT_INTERPRET=1`` it is a callable ``bound(stream=0)`` that runs the launch on the CPU interpreter.

        Raises:
            LaunchError / CompilationError: as :meth:`launch`; also for arguments the fast path
                cannot pack (e.g. an unhashable compile-time value).
        """
        values = list(args) if len(args) == len(self.params) else self._bind(args, {})
        if env.interpret():   # each call runs the bound launch on the CPU interpreter (the stream is moot)
            return lambda stream=0: self._interpret(values, {}, grid, block, smem_bytes, cluster, True, pdl)
        sig, dyn = argument_signature(values, self.kinds)
        plan = self._plans.get(sig) if sig is not None else None
        if plan is None or plan.env_state != env.code_state():   # TSJIT_DEBUG etc. changed: another build
            plan = self._make_plan(values, sig)
            if plan is None:
                raise LaunchError(f"kernel {self.__qualname__}: these arguments cannot be bound in advance; "
                                  f"launch it with {self.__name__}[grid, block](...)")
        smem = smem_bytes if smem_bytes > plan.smem else plan.smem
        config = (grid, block, smem, cluster, pdl, True)
        try:
            prepared = plan.prepared[config]
        except (KeyError, TypeError):
            prepared = _prepare(plan, config)
        return BoundLaunch(plan, prepared, dyn, values)

    def _make_plan(self, values, sig):
        specs, packed = self._specialize(values)
        layout = plan_layout(specs, packed)
        if layout is None or sig is None:
            return None
        compiled = self._get_compiled(specs, _launch_target())
        plan = LaunchPlan(compiled, specs, layout)
        if len(self._plans) > 4096:
            self._plans.clear()
        self._plans[sig] = plan
        return plan

    def _launch_slow(self, values, grid, block, smem_bytes, stream, cluster, pdl, check_launch=True) -> None:
        specs, packed = self._specialize(values)
        compiled = self._get_compiled(specs, _launch_target())
        if callable(grid):
            grid = grid({p.name: v for p, v in zip(self.params, values)})
        smem = max(int(smem_bytes), compiled.metadata.smem_bytes)
        cluster = _check_configuration(compiled, grid, block, smem, cluster, check_launch)
        params = (ctypes.c_void_p * len(packed))(*[ctypes.addressof(v) for v in packed]) if packed else None
        launch_config.launch(compiled.function(), grid, block, params, smem_bytes=smem, stream=stream, cluster=cluster,
                      pdl=pdl)

    def compile(self, *args, target: str | None = None, interpret: bool = False, **kwargs) -> CompiledKernel:
        """Compile for ``args`` (device arrays, numpy arrays or ``tsjit.spec`` stand-ins) without launching.

        ``interpret=True`` lowers for the CPU interpreter instead (frontend and TS lowering only, no PTX):
        the result runs with ``result[grid, block](*args)`` on the CPU (:mod:`tsjit.interpret`).

        Raises:
            CompileArgumentError: an argument is missing, unexpected or does not fit its parameter
                (names it; also a LaunchError).
            CompilationError: the kernel does not compile for these arguments.
        """
        try:
            values = self._bind(args, kwargs, options=("target", "interpret"))
            specs, _ = self._specialize(values, for_compile=True)
        except CompileArgumentError:
            raise
        except LaunchError as exc:
            raise CompileArgumentError(str(exc)).with_traceback(None) from None
        if interpret:
            return _interpreter().lower(self, specs, target or environment_target() or DEFAULT_TARGET)
        return self._get_compiled(specs, target or environment_target() or DEFAULT_TARGET)


def _check_configuration(compiled: CompiledKernel, grid, block, smem, cluster, check_launch: bool):
    """The cluster to launch with (the program's when ``cluster`` is None), after checking the
    configuration against the kernel's launch contract (before any driver call, unless
    ``check_launch`` is False).  Raises ``LaunchError`` as :meth:`LaunchRequirements.check`."""
    requirements = compiled.launch_requirements
    if cluster is None and requirements.cluster is not None and requirements.cluster != (1, 1, 1):
        cluster = requirements.cluster
    if check_launch:
        device_limit = None
        if driver.gpu_available():
            device_limit = (driver.device_properties().max_dynamic_smem_optin
                            - int(compiled.metadata.static_smem_bytes or 0))
        requirements.check(compiled.name, grid, block, cluster, smem, device_limit)
    return cluster


def _prepare(plan: LaunchPlan, config: tuple):
    """Check one new launch configuration ``(grid, block, smem, cluster, pdl, check_launch)`` of
    ``plan`` and prepare it for the driver; cached in ``plan.prepared`` under ``config``."""
    grid, block, smem, cluster, pdl, check_launch = config
    cluster = _check_configuration(plan.compiled, grid, block, smem, cluster, check_launch)
    if plan.function is None:
        plan.function = plan.compiled.function()
    prepared = launch_config.prepare_launch(plan.function, grid, block, smem, cluster, pdl)
    try:
        if len(plan.prepared) >= 256:
            plan.prepared.clear()
        plan.prepared[config] = prepared
    except TypeError:  # an unhashable configuration (a list) is checked on every launch
        pass
    return prepared


def _resolve_annotation(annotation, fn):
    if isinstance(annotation, str):
        try:
            return eval(annotation, fn.__globals__)  # noqa: S307 - the user's own annotation
        except Exception:
            return annotation
    return None if annotation is inspect.Parameter.empty else annotation


_device_target: str | None = None


def _launch_target() -> str:
    global _device_target
    if _device_target is None:
        override = environment_target()
        if override:
            _device_target = override
        else:
            major, minor = driver.device_properties().capability
            _device_target = target_for_capability(major, minor)
    return _device_target




def kernel(fn=None, **options):
    """Decorator making ``fn`` a GPU kernel (``__global__``).

    Options: ``max_threads`` (``.maxntid``), ``min_blocks`` (``.minnctapersm``), ``max_registers``
    (``.maxnreg``): PTX ISA §11.4 performance-tuning directives; ``unroll_limit``: the most iterations
    of one compile-time loop (default ``TSJIT_UNROLL_LIMIT`` or 4096, see :mod:`tsjit.frontend.guards`).
    """
    if fn is None:
        return lambda f: Kernel(f, **options)
    return Kernel(fn, **options)


def compile(kernel_obj: Kernel, *args, target: str | None = None, interpret: bool = False,  # noqa: A001
            **kwargs) -> CompiledKernel:
    """Compile ``kernel_obj`` for ``args`` without a GPU: numpy arrays or ``tsjit.spec(shape, dtype)``
    stand in for device arrays, constexprs are given as values.  Returns the :class:`CompiledKernel`;
    with ``interpret=True`` a kernel lowered for the CPU interpreter (``result[grid, block](*args)`` runs it)."""
    if not isinstance(kernel_obj, Kernel):
        raise UsageTypeError(f"tsjit.compile needs a @tsjit.kernel, got {type(kernel_obj).__name__}; decorate "
                             f"the function with @tsjit.kernel")
    return kernel_obj.compile(*args, target=target, interpret=interpret, **kwargs)


class _InterpretLaunch:
    """``kernel.interpret``: ``[grid, block]`` or ``[grid, block, smem_bytes]`` gives the CPU launcher."""

    def __init__(self, kernel_obj: Kernel):
        self.kernel = kernel_obj

    def __call__(self, *args, **kwargs):
        name = self.kernel.__name__
        raise LaunchError(f"{name}.interpret is indexed with the launch configuration, then called with the "
                          f"arguments: {name}.interpret[grid, block](*args), e.g. {name}.interpret[(1,), (32,)](x)")

    def __getitem__(self, config):
        if not isinstance(config, tuple) or len(config) < 2:
            raise LaunchError(f"{self.kernel.__name__}.interpret[grid, block]: give both the grid and the block")
        grid, block = config[0], config[1]
        smem = config[2] if len(config) > 2 else 0

        def launcher(*args, stream=None, cluster=None, pdl=False, check_launch=True, **kwargs):
            return self.kernel._interpret(args, kwargs, grid, block, smem, cluster, check_launch, pdl)
        return launcher
