"""Targets: names, LLVM cpu / PTX feature, capability mapping, errors."""
import dataclasses

import pytest

from tsjit.backend.targets import (DEFAULT_TARGET, KNOWN_TARGETS, Target, get_target,
                                   target_for_capability)
from tsjit.errors import CompilationError


def test_default_target_is_sm_90a():
    assert DEFAULT_TARGET == "sm_90a"
    assert get_target(DEFAULT_TARGET).capability == (9, 0)


@pytest.mark.parametrize("name, cpu, feature, ptx, capability, arch_specific", [
    ("sm_90a", "sm_90a", "+ptx86", (8, 6), (9, 0), True),
    ("sm_100a", "sm_100a", "+ptx86", (8, 6), (10, 0), True),
    ("sm_90", "sm_90", "+ptx80", (8, 0), (9, 0), False),
])
def test_known_target_fields(name, cpu, feature, ptx, capability, arch_specific):
    target = get_target(name)
    assert (target.name, target.cpu, target.ptx_feature, target.ptx_version,
            target.capability, target.arch_specific) == (name, cpu, feature, ptx, capability,
                                                         arch_specific)
    assert str(target) == name


def test_target_is_frozen_and_passes_through_get_target():
    target = get_target("sm_90a")
    with pytest.raises(dataclasses.FrozenInstanceError):
        target.name = "sm_80"
    assert get_target(target) is target
    assert isinstance(target, Target)


@pytest.mark.parametrize("bad", ["sm_80", "SM_90A", "", "sm_100"])
def test_unknown_target_names_the_known_ones(bad):
    with pytest.raises(CompilationError) as info:
        get_target(bad)
    message = str(info.value)
    assert repr(bad) in message
    for name in KNOWN_TARGETS:
        assert name in message


def test_target_for_capability():
    assert target_for_capability(9, 0) == "sm_90a"
    assert target_for_capability(10, 0) == "sm_100a"


def test_target_for_unsupported_capability_raises():
    with pytest.raises(CompilationError, match=r"8\.0"):
        target_for_capability(8, 0)
