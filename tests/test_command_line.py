"""``python -m tsjit`` / the ``tsjit`` script (tsjit/__main__.py): plain-text help, ``cache`` alone is
``cache info`` (newcomer report #23)."""
from tsjit.__main__ import main


def test_help_is_plain_text(capsys):
    try:
        main(["--help"])
    except SystemExit as stop:
        assert stop.code == 0
    out = capsys.readouterr().out
    assert "usage:" in out and "cache clear" in out and "``" not in out


def test_cache_without_an_action_is_info(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("TSJIT_CACHE_DIR", str(tmp_path))
    assert main(["cache"]) == 0
    out = capsys.readouterr().out
    assert f"directory: {tmp_path}" in out and "entries: 0" in out
