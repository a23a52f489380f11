"""tsjit.env: one typed registry of every TSJIT_* environment variable."""
import os

import platformdirs
import pytest

from tsjit import env
from tsjit.errors import TsjitError


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch):
    for name in env.VARIABLES:
        monkeypatch.delenv(name, raising=False)


def test_defaults_when_unset():
    assert env.cache_dir() == platformdirs.user_cache_dir("tsjit")
    assert env.dump_dir() is None
    assert env.assembler() == "auto"
    assert env.target() is None
    assert env.always_compile() is False
    assert env.disable_cache() is False


def test_values_are_read_at_call_time(monkeypatch, tmp_path):
    monkeypatch.setenv("TSJIT_CACHE_DIR", str(tmp_path / "first"))
    assert env.cache_dir() == str(tmp_path / "first")
    monkeypatch.setenv("TSJIT_CACHE_DIR", str(tmp_path / "second"))
    assert env.cache_dir() == str(tmp_path / "second")


def test_paths_are_made_absolute_and_expanded(monkeypatch):
    monkeypatch.setenv("TSJIT_DUMP_DIR", "~/dumps")
    assert env.dump_dir() == os.path.join(os.path.expanduser("~"), "dumps")
    monkeypatch.setenv("TSJIT_CACHE_DIR", "relative/cache")
    assert os.path.isabs(env.cache_dir())


@pytest.mark.parametrize("text, expected", [("1", True), ("true", True), ("YES", True), ("on", True),
                                            ("0", False), ("False", False), ("no", False), ("off", False)])
def test_boolean_spellings(monkeypatch, text, expected):
    monkeypatch.setenv("TSJIT_ALWAYS_COMPILE", text)
    monkeypatch.setenv("TSJIT_DISABLE_CACHE", text)
    assert env.always_compile() is expected
    assert env.disable_cache() is expected


def test_bad_boolean_names_the_variable(monkeypatch):
    monkeypatch.setenv("TSJIT_DISABLE_CACHE", "maybe")
    with pytest.raises(TsjitError, match="TSJIT_DISABLE_CACHE") as info:
        env.disable_cache()
    assert "maybe" in str(info.value)


@pytest.mark.parametrize("text", ["auto", "nvjitlink", "ptxas", "PTXAS"])
def test_assembler_choices(monkeypatch, text):
    monkeypatch.setenv("TSJIT_ASSEMBLER", text)
    assert env.assembler() == text.lower()


def test_bad_assembler_names_variable_and_allowed_values(monkeypatch):
    monkeypatch.setenv("TSJIT_ASSEMBLER", "foo")
    with pytest.raises(TsjitError) as info:
        env.assembler()
    message = str(info.value)
    assert "TSJIT_ASSEMBLER" in message and "'foo'" in message
    assert all(choice in message for choice in ("auto", "nvjitlink", "ptxas"))


@pytest.mark.parametrize("text", ["sm_90a", "sm_100a", "SM_90", "sm_100f"])
def test_target_override(monkeypatch, text):
    monkeypatch.setenv("TSJIT_TARGET", text)
    assert env.target() == text.lower()


def test_bad_target_names_the_variable(monkeypatch):
    monkeypatch.setenv("TSJIT_TARGET", "hopper")
    with pytest.raises(TsjitError, match="TSJIT_TARGET"):
        env.target()


def test_empty_value_counts_as_unset(monkeypatch):
    monkeypatch.setenv("TSJIT_ASSEMBLER", "  ")
    monkeypatch.setenv("TSJIT_DUMP_DIR", "")
    assert env.assembler() == "auto"
    assert env.dump_dir() is None


def test_describe_lists_every_variable_with_its_doc():
    rows = env.describe()
    assert [name for name, _, _ in rows] == list(env.VARIABLES)
    assert all(doc for _, _, doc in rows)
    assert set(env.VARIABLES) == {"TSJIT_CACHE_DIR", "TSJIT_DUMP_DIR", "TSJIT_ASSEMBLER", "TSJIT_TARGET",
                                  "TSJIT_ALWAYS_COMPILE", "TSJIT_DISABLE_CACHE", "TSJIT_DEBUG",
                                  "TSJIT_DEBUG_TIMEOUT_MS", "TSJIT_UNROLL_LIMIT", "TSJIT_AUTOTUNE",
                                  "TSJIT_INTERPRET", "TSJIT_INTERPRET_CHECK"}


def test_describe_shows_an_invalid_value_instead_of_raising(monkeypatch):
    monkeypatch.setenv("TSJIT_ASSEMBLER", "foo")
    values = {name: value for name, value, _ in env.describe()}
    assert str(values["TSJIT_ASSEMBLER"]).startswith("<invalid:")


def test_code_affecting_values_name_only_code_relevant_variables(monkeypatch):
    monkeypatch.setenv("TSJIT_TARGET", "sm_100a")
    monkeypatch.setenv("TSJIT_CACHE_DIR", "/somewhere")
    monkeypatch.setenv("TSJIT_DEBUG", "1")
    assert env.code_affecting_values() == (("TSJIT_ASSEMBLER", None), ("TSJIT_DEBUG", "1"),
                                           ("TSJIT_DEBUG_TIMEOUT_MS", None), ("TSJIT_TARGET", "sm_100a"))


def test_debug_timeout_is_a_positive_integer(monkeypatch):
    assert env.debug() is False and env.debug_timeout_ms() == 2000
    monkeypatch.setenv("TSJIT_DEBUG_TIMEOUT_MS", "250")
    assert env.debug_timeout_ms() == 250
    for bad in ("0", "-5", "2s", "1.5"):
        monkeypatch.setenv("TSJIT_DEBUG_TIMEOUT_MS", bad)
        with pytest.raises(TsjitError, match="TSJIT_DEBUG_TIMEOUT_MS"):
            env.debug_timeout_ms()


def test_get_by_name_and_unknown_name(monkeypatch):
    monkeypatch.setenv("TSJIT_ASSEMBLER", "ptxas")
    assert env.get("TSJIT_ASSEMBLER") == "ptxas"
    with pytest.raises(TsjitError, match="TSJIT_NOPE"):
        env.get("TSJIT_NOPE")


@pytest.mark.parametrize("text, expected", [("none", set()), ("race", {"race"}), ("uninit", {"race", "uninit"}),
                                            ("race,uninit", {"race", "uninit"}), (" Race , uninit ", {"race", "uninit"})])
def test_interpret_checks_take_a_comma_separated_list(monkeypatch, text, expected):
    monkeypatch.setenv("TSJIT_INTERPRET_CHECK", text)
    assert env.interpret_checks() == expected


def test_a_bad_interpret_check_in_a_list_names_it(monkeypatch):
    monkeypatch.setenv("TSJIT_INTERPRET_CHECK", "race,bogus")
    with pytest.raises(TsjitError, match="TSJIT_INTERPRET_CHECK='bogus'.*'race', 'uninit'"):
        env.interpret_checks()
