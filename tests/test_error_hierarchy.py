"""One error hierarchy: every user mistake is a tsjit error; bare built-in raises are internal only.

``test_no_bare_builtin_raises`` reads ``tsjit/`` with ``ast`` and lists every ``raise`` of a
built-in exception class.  Only the entries of ``ALLOWED`` may remain: the attribute protocol
of ``__getattr__`` hooks, and broken internal invariants, whose message says "internal error,
please report".
"""
from __future__ import annotations

import ast
import builtins
import pathlib

import pytest

from tsjit.errors import (TsjitError, UsageError, UsageKeyError, UsageStateError, UsageTypeError,
                          UsageValueError, VerificationError)

ROOT = pathlib.Path(__file__).resolve().parents[1]
_BUILTIN_EXCEPTIONS = {name for name, obj in vars(builtins).items()
                       if isinstance(obj, type) and issubclass(obj, BaseException)}

#: (file, function qualname, exception) -> why a bare built-in raise is right there.
ALLOWED = {
    ("tsjit/__init__.py", "__getattr__", "AttributeError"): "module attribute protocol (PEP 562)",
    ("tsjit/lang/__init__.py", "__getattr__", "AttributeError"): "module attribute protocol (PEP 562)",
    ("tsjit/lang/math.py", "__getattr__", "AttributeError"): "module attribute protocol (PEP 562), listing what exists",
    ("tsjit/ts/task_manager.py", "__getattr__", "AttributeError"): "module attribute protocol (PEP 562): CHECKS built on first use",
    ("tsjit/ts/proxy.py", "ResourceProxy.__getattr__", "AttributeError"): "attribute protocol (dunder lookups)",
    ("tsjit/ts/group.py", "PipelineGroup.__getattr__", "AttributeError"): "attribute protocol (members by name)",
    ("tsjit/ts/group.py", "GroupMember.__getattr__", "AttributeError"): "attribute protocol (dunder lookups)",
    ("tsjit/lang/builtins.py", "Dim3.__getattr__", "AttributeError"): "attribute protocol (dunder lookups)",
    ("tsjit/lang/memory.py", "Tensor.__getattr__", "AttributeError"): "attribute protocol (TensorMap-only names)",
    ("tsjit/lang/tma.py", "TensorMapHandle.__getattr__", "AttributeError"): "attribute protocol (its hint for `shape`)",
    ("tsjit/ts/cute_compat.py", "_Namespace.__getattr__", "AttributeError"): "attribute protocol (names CuTe DSL has and tsjit does not)",
    ("tsjit/backend/intrinsics.py", "_add", "RuntimeError"): "internal: the intrinsic table is malformed",
    ("tsjit/interpret/machine.py", "Machine.run", "KeyboardInterrupt"): "Ctrl-C stays a KeyboardInterrupt (re-raised saying where the launch was)",
    ("tsjit/frontend/specs.py", "build_argument", "RuntimeError"): "internal: a spec kind without a builder",
    ("tsjit/ts/protocol.py", "actions", "RuntimeError"): "internal: the protocol table asked for a non-operation",
}
_PROTOCOL = "AttributeError"
_SIGNAL = "KeyboardInterrupt"   # Ctrl-C re-raised with a report: it must stay what the user pressed


def _bare_raises():
    """Yield ``(file, qualname, exception name, message source)`` for each bare built-in raise."""
    for path in sorted((ROOT / "tsjit").rglob("*.py")):
        relative = str(path.relative_to(ROOT))
        if relative.startswith("tsjit/examples/"):
            continue  # user code
        source = path.read_text()
        stack: list[str] = []

        class Visitor(ast.NodeVisitor):
            def visit_FunctionDef(self, node):
                stack.append(node.name)
                self.generic_visit(node)
                stack.pop()

            visit_AsyncFunctionDef = visit_ClassDef = visit_FunctionDef

            def visit_Raise(self, node):
                exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
                if isinstance(exc, ast.Name) and exc.id in _BUILTIN_EXCEPTIONS:
                    message = ast.get_source_segment(source, node.exc) or ""
                    found.append((relative, ".".join(stack), exc.id, message))

        found: list = []
        Visitor().visit(ast.parse(source))
        yield from found


def test_no_bare_builtin_raises():
    raises = list(_bare_raises())
    unexpected = [f"{f}: {q}: raise {e}" for f, q, e, _ in raises if (f, q, e) not in ALLOWED]
    assert not unexpected, ("user mistakes must raise a tsjit error (tsjit.errors: VerificationError / "
                            "ScheduleError with a rule id, a UsageError subclass for host API misuse); "
                            "internal invariants say 'internal error, please report' and are listed in "
                            "ALLOWED:\n" + "\n".join(unexpected))
    for file, qualname, exc, message in raises:
        if exc not in (_PROTOCOL, _SIGNAL):
            assert "internal error, please report" in message, (file, qualname)


def test_the_scanner_sees_raises():
    names = {(f, q) for f, q, _, _ in _bare_raises()}
    assert ("tsjit/ts/protocol.py", "actions") in names


@pytest.mark.parametrize("usage, builtin", [(UsageTypeError, TypeError), (UsageValueError, ValueError),
                                            (UsageKeyError, KeyError), (UsageStateError, RuntimeError)])
def test_usage_errors_are_tsjit_errors_and_their_builtin(usage, builtin):
    with pytest.raises(builtin) as err:
        raise usage("SmemAllocator.add(): pass an SmemAllocation")
    assert isinstance(err.value, UsageError) and isinstance(err.value, TsjitError)
    assert str(err.value) == "SmemAllocator.add(): pass an SmemAllocation"  # no KeyError quoting


def test_allocator_misuse_is_a_usage_error_naming_the_call():
    from tsjit.ts import SmemAllocation, SmemAllocator
    allocator = SmemAllocator()
    with pytest.raises(UsageTypeError, match="SmemAllocation"):
        allocator.add("tile")
    tile = allocator.add(SmemAllocation("tile", 1024))
    with pytest.raises(UsageValueError, match="'tile' was already added"):
        allocator.add(tile)
    with pytest.raises(UsageStateError, match="compute_layout"):
        allocator.alias_pairs()
    allocator.compute_layout()
    with pytest.raises(UsageStateError, match="after compute_layout"):
        allocator.add(SmemAllocation("late", 64))
    with pytest.raises(UsageValueError, match="power of two"):
        SmemAllocation("odd", 64, alignment=3)


def test_task_manager_misuse_is_a_usage_error():
    from tsjit.ts import TaskManager
    with pytest.raises(UsageTypeError, match="tasks must be a list of Task, got object"):
        TaskManager(object(), {})


def test_task_without_get_domain_override_is_t2():
    from tsjit.ts import Task
    task = Task.__new__(Task)
    task.name = "t"
    with pytest.raises(VerificationError) as err:
        task.get_domain((0, 0))
    assert err.value.check == "T2"


def test_task_manager_options_are_typed_with_one_set_of_defaults():
    import dataclasses
    import inspect

    from tsjit.errors import UsageTypeError, UsageValueError
    from tsjit.ts import TaskManager, TaskManagerOptions
    defaults = TaskManagerOptions()
    signature = inspect.signature(TaskManager)
    for field in dataclasses.fields(TaskManagerOptions):
        assert signature.parameters[field.name].default == getattr(defaults, field.name)
    with pytest.raises(dataclasses.FrozenInstanceError):
        defaults.max_states = 1
    with pytest.raises(UsageTypeError, match="did you mean skip_validation"):
        TaskManager([], {}, skip_validaton=True)
    with pytest.raises(UsageValueError, match="max_states must be an int >= 1, got 0"):
        TaskManager([], {}, max_states=0)
    with pytest.warns(UserWarning, match="G0"):  # no tasks: demoted by skip_validation
        manager = TaskManager([], {}, options=TaskManagerOptions(verbose=False, skip_validation=True),
                              max_states=7)
    assert manager.options.max_states == 7 and not manager.verbose and manager.skip_validation
