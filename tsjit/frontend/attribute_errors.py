"""The hint of a missing attribute in kernel code: ``tsjit.thread_idx.x`` (a function not called) and
``stage_info.stage`` / ``tmap.shape`` on a plain compiler object (its attributes listed, the closest first)."""
from __future__ import annotations

import ast
import inspect

from tsjit.errors import did_you_mean
from tsjit.lang.values import Value

__all__ = ["attribute_hint"]


def attribute_hint(obj, attr: str) -> str | None:
    """What to write instead of ``obj.attr`` when ``obj`` has no such attribute, or None.

    A function: call it first (``thread_idx().x``).  A plain object of the compiler's (a tensor map
    argument, a TS ``StageInfo``): its data attributes, the closest to ``attr`` first.  None for device
    values, modules, classes and objects with more than 24 attributes (the list would not help)."""
    if inspect.isroutine(obj):
        name = getattr(obj, "__name__", "it")
        return f"`{name}` is a function: call it first, {name}().{attr}"
    if isinstance(obj, (Value, type, type(ast))) or callable(obj) or not hasattr(obj, "__dict__"):
        return None
    names = sorted(n for n in vars(obj) if not n.startswith("_"))
    if not names or len(names) > 24:
        return None
    close = did_you_mean(attr, names).strip()
    return (close[:1].lower() + close[1:] + " " if close else "") + "its attributes: " + ", ".join(names)
