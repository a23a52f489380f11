"""Host side of ``TSJIT_DEBUG=1`` hang reports (issue 9 §3; device side: tsjit.lang.bounded_wait).

When a debug-build kernel is loaded, :func:`attach` allocates a small page-locked, device-
mapped host buffer (``cuMemHostAlloc(DEVICEMAP)``, :data:`tsjit.abi.HANG_MAX_RECORDS` slots of
:data:`tsjit.abi.HANG_RECORD_BYTES`) and writes its device address into the module's
``tsjit_hang_record`` global.  A wait that outlives its budget writes a record there and
traps.  A trap makes the CUDA context unusable (every later call returns the same sticky
error), which is why the record lives in host memory: the host reads it with plain loads.

The runtime's driver wrapper asks :func:`pending_report` whenever a driver call fails; if a
record is there, the :class:`~tsjit.errors.LaunchError` carries the report, in the form of the
TaskManager checker's deadlock report (tsjit.ts.verify.exhaustive_report)::

    kernel 'tma_copy_ts' hung (TSJIT_DEBUG=1): 1 wait(s) outlived the 2000 ms budget and trapped.
      blocked: task 'load' (warp 0) warp 0 of CTA (0, 0, 0) at 'smem' ProducerAcquire at schedule
        step #1 (ts_tma_copy.py:91) (stage 0, iteration 4, loop offset 4): waits for smem.empty[0] to
        complete the phase of parity 0; waited 2000 ms on SM 3
      Each blocked wait needs a commit/release (or TMA bytes) that no task will still deliver: ...

Buffers live as long as the process (a few KiB per loaded debug module).
"""
from __future__ import annotations

import ctypes
import threading

from tsjit import abi
from tsjit.runtime import driver

_lock = threading.Lock()
_buffers: list = []   # (host address, kernel name, sites)
BUFFER_BYTES = abi.HANG_MAX_RECORDS * abi.HANG_RECORD_BYTES
_WORDS = len(abi.HANG_FIELDS)

_ADVICE = ("  Each blocked wait needs a commit/release (or TMA bytes) that no task will still deliver: check that "
           "every wait has a matching commit, every acquire a matching release, TMA byte counts that match the "
           "copies, equal trip counts, arrival counts that match the tasks' warps, and a block of the program's "
           "warps (the launch contract check refuses others unless check_launch=False).")


def attach(kernel_name: str, sites: list, module) -> None:
    """Give the loaded debug-build ``module`` of ``kernel_name`` a hang-record buffer.

    Args:
        kernel_name: the kernel, for the report.
        sites: the kernel's ``metadata["debug_waits"]`` (what each bounded wait waits for).
        module: the loaded :class:`~tsjit.runtime.driver.Module`.

    Raises:
        LaunchError: the driver refused the allocation or the module has no hang-record global.
    """
    cu = driver.bindings()
    flags = cu.CU_MEMHOSTALLOC_DEVICEMAP | cu.CU_MEMHOSTALLOC_PORTABLE
    host = int(driver.check(cu.cuMemHostAlloc(BUFFER_BYTES, flags), "cuMemHostAlloc (hang record)"))
    ctypes.memset(host, 0, BUFFER_BYTES)
    device = int(driver.check(cu.cuMemHostGetDevicePointer(host, 0), "cuMemHostGetDevicePointer (hang record)"))
    address, _ = driver.check(cu.cuModuleGetGlobal(module.handle, abi.HANG_RECORD_SYMBOL.encode()),
                              f"cuModuleGetGlobal({abi.HANG_RECORD_SYMBOL}) of kernel {kernel_name!r}")
    value = ctypes.c_uint64(device)
    driver.check(cu.cuMemcpyHtoD(address, ctypes.addressof(value), 8), "cuMemcpyHtoD (hang record address)")
    watch(host, kernel_name, sites)


def watch(host: int, kernel_name: str, sites: list) -> None:
    """Report the records that appear in the buffer at host address ``host`` (``BUFFER_BYTES``
    long, zeroed) as hangs of ``kernel_name`` whose wait sites are ``sites``."""
    with _lock:
        _buffers.append((host, kernel_name, list(sites)))


def unwatch(host: int) -> None:
    """Stop reporting the buffer at ``host`` (its memory stays the caller's)."""
    with _lock:
        _buffers[:] = [entry for entry in _buffers if entry[0] != host]


def read_records(host: int) -> list[dict]:
    """The complete records in the buffer at host address ``host``, in claim order (field name -> int)."""
    words = (ctypes.c_int64 * (abi.HANG_MAX_RECORDS * _WORDS)).from_address(host)
    records = []
    for slot in range(abi.HANG_MAX_RECORDS):
        row = words[slot * _WORDS:(slot + 1) * _WORDS]
        if row[0] == abi.HANG_MAGIC:
            records.append(dict(zip(abi.HANG_FIELDS, row)))
    return records


def format_report(kernel_name: str, sites: list, records: list[dict]) -> str:
    """The hang report for ``records`` of ``kernel_name`` (see the module docstring).

    Records that differ only in their CTA are merged into one line naming the CTAs.
    """
    groups: dict = {}
    for record in records:
        key = tuple(record[f] for f in ("site", "warp", "stage", "iteration", "loop_offset", "phase"))
        groups.setdefault(key, []).append(record)
    budget_ms = records[0]["budget_ns"] / 1e6 if records else 0
    count = str(len(records))
    if len(records) >= abi.HANG_MAX_RECORDS:
        count = f"at least {len(records)} (the first recorded)"
    lines = [f"kernel {kernel_name!r} hung (TSJIT_DEBUG=1): {count} wait(s) outlived the "
             f"{budget_ms:g} ms budget and trapped; none could proceed."]
    for key, group in groups.items():
        first = group[0]
        site = sites[first["site"]] if 0 <= first["site"] < len(sites) else {}
        ctas = [f"({r['cta_x']}, {r['cta_y']}, {r['cta_z']})" for r in group]
        cta_text = f"CTA {ctas[0]}" if len(ctas) == 1 else (
            f"CTAs {', '.join(ctas[:4])}" + (f" and {len(ctas) - 4} more" if len(ctas) > 4 else ""))
        where = [f"stage {first['stage']}"] if first["stage"] >= 0 else []
        if first["iteration"] >= 0:
            where.append(f"iteration {first['iteration']}")
        if first["loop_offset"] >= 0:
            where.append(f"loop offset {first['loop_offset']}")
        context = f" ({', '.join(where)})" if where else ""
        who = f"{site['task']} warp {first['warp']}" if site.get("task") else f"warp {first['warp']}"
        barrier = site.get("barrier") or "the mbarrier"
        if first["stage"] >= 0:
            barrier = f"{barrier}[{first['stage']}]"
        lines.append(f"  blocked: {who} of {cta_text} at {site.get('operation', 'an mbarrier wait')}{context}: "
                     f"waits for {barrier} to complete the phase of parity {first['phase']}; waited "
                     f"{first['waited_ns'] / 1e6:.0f} ms on SM {first['sm']}")
    lines.append(_ADVICE)
    return "\n".join(lines)


def pending_report() -> str | None:
    """The report of every attached buffer that holds records, or ``None`` (never raises)."""
    with _lock:
        buffers = list(_buffers)
    texts = []
    for host, kernel_name, sites in buffers:
        try:
            records = read_records(host)
        except Exception:  # noqa: BLE001 - a report must never hide the driver's error
            continue
        if records:
            texts.append(format_report(kernel_name, sites, records))
    return "\n".join(texts) if texts else None


driver.add_error_note(pending_report)
