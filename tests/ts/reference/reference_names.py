"""Names the reference's code examples use that belong to CuTe DSL, not to the Task Scheduling API.

The examples in ``000_d7fd8f57b8a2aeeb.txt`` stack ``@cute.jit`` under ``@consumer_work`` and test
labels with ``cutlass.const_expr``.  tsjit compiles every work body itself (no per-method JIT
decorator is needed), and its ``const_expr`` is :func:`tsjit.const_expr`; the public stand-ins of
:mod:`tsjit.ts.cute_compat` let the examples be pasted unchanged.  Everything else in the examples
is tsjit's own API.
"""
from tsjit.ts.cute_compat import cute, cutlass  # noqa: F401 (re-exported for the reference tests)

#: the CTA layout of a single-CTA kernel in the reference's (V, M, N, K) form.
SINGLE_CTA = (1, 1, 1, 1)


def conformance_rows(section, *items, reason=None):
    """One ``@pytest.mark.conformance(section, item, reason=...)`` per item, as a single decorator."""
    import pytest

    def apply(test):
        for item in items:
            test = pytest.mark.conformance(section, item, reason=reason)(test)
        return test
    return apply
