"""The host runtime: everything between a compiled cubin and a running kernel.

- :mod:`tsjit.runtime.driver`: checked wrapper over ``cuda.bindings.driver`` (context,
  device properties, modules, functions and their attributes).
- :mod:`tsjit.runtime.streams`: :class:`Stream`, ``use_stream`` and the raw handle of every stream form.
- :mod:`tsjit.runtime.launch_config`: launch configurations checked against the device, the
  driver's ``CUlaunchConfig`` per stream, and the ``cuLaunchKernelEx`` call.
- :mod:`tsjit.runtime.launch`: the warm launch path (argument signatures, parameter blocks,
  the generated per-kernel launcher) and ``Kernel.bind``'s :class:`BoundLaunch`.
- :mod:`tsjit.runtime.native_launch`: a small C extension, built once into the cache directory with the
  system compiler, that makes a packed launch's ``cuLaunchKernelEx`` call from C (ctypes where it cannot be built).
- :mod:`tsjit.runtime.events`: CUDA events.
- :mod:`tsjit.runtime.arrays`: :class:`DeviceArray`, host/device copies, bfloat16
  conversion, and the adapter that describes any array-like argument (DeviceArray,
  ``__cuda_array_interface__``, DLPack, torch tensors, numpy specs).
- :mod:`tsjit.runtime.cache`: the on-disk kernel cache (one checksummed file per entry).
- :mod:`tsjit.runtime.tensormap`: validated TMA descriptors (``cuTensorMapEncodeTiled``).

Importing any of these needs no GPU: the driver is loaded on first use, and a machine
without one gets a :class:`~tsjit.errors.LaunchError` only when it actually asks for it.
"""
