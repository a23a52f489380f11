"""The host runtime: everything between a compiled cubin and a running kernel.

- :mod:`tsjit.runtime.driver`: checked wrapper over ``cuda.bindings.driver`` (context,
  modules, functions, launch, streams, events, raw memory).
- :mod:`tsjit.runtime.arrays`: :class:`DeviceArray`, host/device copies, bfloat16
  conversion, and the adapter that describes any array-like argument (DeviceArray,
  ``__cuda_array_interface__``, DLPack, torch tensors, numpy specs).
- :mod:`tsjit.runtime.cache`: the on-disk kernel cache (one checksummed file per entry).
- :mod:`tsjit.runtime.tensormap`: validated TMA descriptors (``cuTensorMapEncodeTiled``).

Importing any of these needs no GPU: the driver is loaded on first use, and a machine
without one gets a :class:`~tsjit.errors.LaunchError` only when it actually asks for it.
"""
