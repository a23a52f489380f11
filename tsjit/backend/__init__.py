"""The tsjit back end: NVVM intrinsic table per target, LLVM IR → PTX, PTX → cubin.

Modules (import them directly; this package re-exports nothing so that importing
:mod:`tsjit.backend` stays cheap and does not load LLVM or nvJitLink):

* :mod:`tsjit.backend.targets` — :class:`Target` (sm_90a, sm_100a, sm_90) and lookup.
* :mod:`tsjit.backend.intrinsics` — the one table of intrinsics, target gating
  (:func:`check_supported`) and declarations (:func:`declare`).
* :mod:`tsjit.backend.nvptx` — :func:`llvm_to_ptx` / :func:`optimize_llvm` (llvmlite).
* :mod:`tsjit.backend.assemble` — :func:`assemble` PTX → cubin with nvPTXCompiler, ptxas or nvJitLink
  (the choice); :mod:`tsjit.backend.ptx_compiler` (nvPTXCompiler in process), :mod:`tsjit.backend.cubin_info`
  (statistics and ELF sections), :mod:`tsjit.backend.native_build` (host libraries linked once with cc) and
  :mod:`tsjit.backend.wheels` (installed NVIDIA wheels) serve it.
"""
