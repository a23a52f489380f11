"""Measured configuration choice for ``tsjit.ops.matmul`` (``TSJIT_AUTOTUNE=1``).

With the variable set, the first call of a *shape bucket* times the cost model's best
:data:`SHORTLIST` configurations (:mod:`tsjit.ops.configs`) on the call's own operands (CUDA
events, :data:`WARMUP` + :data:`REPS` launches each) and keeps the fastest; ties go to the
model's order, so the choice is deterministic given the timings.  The winner is stored in
``TSJIT_CACHE_DIR/tsjit-autotune-gemm.json`` under the bucket's key and every later call (and
process) of the bucket uses it without measuring; ``tsjit.ops.matmul.explain`` says so.

A bucket is (P, Q, K rounded up to powers of two, batched or not, the input and output element
sizes, X / Y majors, the TMA-storable output, whether the epilogue loads, the device name and
SM count).  A stored winner that is not a legal candidate of a problem in its bucket (e.g. too
many K splits for a shorter K) is ignored for that problem.

Calls that read their output (``beta != 0``) or whose residual is the output are never
measured (the trial launches write the output): they use the cost model.
"""
from __future__ import annotations

import json
import os
import threading

from tsjit import env
from tsjit.ops import configs
from tsjit.runtime.events import Event

SHORTLIST = 4
WARMUP = 2
REPS = 10
FILE_NAME = "tsjit-autotune-gemm.json"
_STORE: dict = {}                 # bucket key -> {"choice": [BM, BN, S], "us": {...}}, loaded lazily
_LOADED: list = []                # [the path loaded from], empty until the first lookup
_LOCK = threading.Lock()


def _pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def bucket_key(problem: configs.Problem, device: str) -> str:
    """The key of ``problem``'s shape bucket on ``device`` (module docstring)."""
    p = problem
    return (f"P{_pow2(p.P)}-Q{_pow2(p.Q)}-K{_pow2(p.K)}-b{int(p.batch > 1)}-in{p.in_bytes}-out{p.out_bytes}-"
            f"{p.x_major}{p.y_major}-tma{int(p.tma_output)}-loads{int(p.epilogue_loads > 0)}-{device}")


def _path() -> str:
    return os.path.join(env.cache_dir(), FILE_NAME)


def _load() -> None:
    path = _path()
    if _LOADED and _LOADED[0] == path:
        return
    _STORE.clear()
    _LOADED[:] = [path]
    if env.disable_cache():
        return
    try:
        with open(path) as handle:
            data = json.load(handle)
        if isinstance(data, dict):
            _STORE.update(data)
    except (OSError, ValueError):
        pass                            # no store yet, or an unreadable one: measure again


def lookup(problem: configs.Problem, device: str):
    """The stored winner (a candidate tuple, :func:`tsjit.ops.configs.candidates`) of ``problem``'s
    bucket, or None (also when it is not a legal candidate for this problem)."""
    with _LOCK:
        _load()
        entry = _STORE.get(bucket_key(problem, device))
    if not isinstance(entry, dict):
        return None
    choice = tuple(entry.get("choice", ()))
    return choice if choice in set(configs.candidates(problem)) else None


def store(problem: configs.Problem, device: str, choice, times_us: dict) -> None:
    """Record ``choice`` as the winner of ``problem``'s bucket (with the measured microseconds)
    and rewrite the store file atomically (skipped when ``TSJIT_DISABLE_CACHE`` is set or the
    directory is not writable)."""
    with _LOCK:
        _load()
        _STORE[bucket_key(problem, device)] = {
            "choice": list(choice), "us": {"x".join(map(str, c)): round(t, 2) for c, t in times_us.items()}}
        if env.disable_cache():
            return
        path = _path()
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            temporary = f"{path}.{os.getpid()}.tmp"
            with open(temporary, "w") as handle:
                json.dump(_STORE, handle, indent=1, sort_keys=True)
            os.replace(temporary, path)
        except OSError:
            pass


def shortlist(ranked) -> list:
    """The first :data:`SHORTLIST` distinct choices (``(BM, BN, S)`` or ``(BM, BN, 1, schedule)``) of the
    cost model's ranking."""
    out = []
    for _, *entry in ranked:
        choice = tuple(entry)
        if choice not in out:
            out.append(choice)
        if len(out) == SHORTLIST:
            break
    return out


def measure(launches: dict, stream: int) -> dict:
    """Microseconds per launch of each packed launch in ``launches`` (choice -> ``launch(stream)``),
    in order, on ``stream``."""
    times = {}
    for choice, launch in launches.items():
        for _ in range(WARMUP):
            launch(stream)
        start, end = Event(), Event()
        start.record(stream)
        for _ in range(REPS):
            launch(stream)
        end.record(stream)
        end.synchronize()
        times[choice] = start.elapsed_ms(end) * 1e3 / REPS
    return times


def pick(times: dict):
    """The fastest choice; ties go to the earliest (the model's order)."""
    return min(times, key=lambda choice: (times[choice], list(times).index(choice)))


def _choice(plan):
    return configs.choice_of(plan.config)


def stored_winner(plan, make, device: str):
    """``plan`` (a ``tsjit.ops.matmul`` plan) re-made by ``make(choice)`` with its bucket's
    stored winner (``plan.tuning`` says so; ``plan`` itself when the winner is its own choice), or
    None when none is stored."""
    choice = lookup(plan.problem, device)
    if choice is None:
        return None
    tuned = plan if choice == _choice(plan) else make(choice)
    tuned.tuning = (f"{configs.describe_choice(choice)}: the stored winner of this shape bucket "
                    f"({bucket_key(plan.problem, device)})")
    return tuned


def measured_winner(plan, make, arguments, stream: int, device: str):
    """Time the cost model's shortlist of ``plan`` on the call's operands (``arguments`` of the
    plans' ``bind``) and return the fastest plan, stored for its bucket."""
    current = _choice(plan)
    plans = {c: plan if c == current else make(c) for c in shortlist(plan.ranked)}
    times = measure({c: p.bind(*arguments) for c, p in plans.items()}, stream)
    best = pick(times)
    store(plan.problem, device, best, times)
    winner = plans[best]
    winner.tuning = f"{configs.describe_choice(best)}: measured fastest of " + ", ".join(
        f"{configs.describe_choice(c)} {t:.1f} us" for c, t in times.items())
    return winner
