"""Every output path of every command is checked before any work, and nothing of the user's is touched.

The two worst findings of the first hostile-input battery are regression tests here:
``ccurv explore --out DIR`` deleted the user's files in ``DIR``, and ``--out FILE`` turned a
file into a folder.
"""

from __future__ import annotations

import os
import stat

import pytest

from coupled_curvature.base.errors import InvalidInputError
from coupled_curvature.base.output import MARKER, check_file, check_folder, write_file, write_folder, write_json

from tests.reliability._harness import cli_error, tree_hash

# each command's fastest form; every case below fails at path validation, before any work
FOLDER_COMMANDS = {
    "report": ["report", "--only", "T1", "--format", "md"],
    "explore": ["explore", "--arch", "linear:4x2", "--dataset", "wine", "--epochs", "0", "--samples", "10", "--quick"],
    "experiment invariance": ["experiment", "invariance", "--quick"],
    "experiment width": ["experiment", "width", "--quick"],
}
FILE_COMMANDS = {
    "check": ["check", "--symbolic", "--only", "T12"],
    "explore": FOLDER_COMMANDS["explore"],
}


def _user_folder(tmp_path):
    d = tmp_path / "mine"
    d.mkdir()
    (d / "thesis.txt").write_text("three years of work")
    return d


def _user_file(tmp_path):
    f = tmp_path / "thesis.txt"
    f.write_text("three years of work")
    return f


def _other_output(tmp_path):
    d = tmp_path / "other"
    write_folder(str(d), "some other command", lambda t: None)
    return d


FOLDER_CASES = {
    "non-empty user folder": (lambda p: _user_folder(p), "not a ccurv report"),
    "existing file": (lambda p: _user_file(p), "is a file, not a folder"),
    "below a file": (lambda p: _user_file(p) / "sub", "is a file, not a folder"),
    "missing parent": (lambda p: p / "no" / "such" / "dir", "does not exist; create it first"),
    "unwritable parent": (lambda p: "/proc/ccurv-reliability", "cannot write"),
    "another command's output": (lambda p: _other_output(p), "refusing to replace it"),
    "empty name": (lambda p: "", "needs a folder name"),
}


@pytest.mark.parametrize("case", FOLDER_CASES)
@pytest.mark.parametrize("command", FOLDER_COMMANDS)
def test_bad_output_folder_refused_before_work(command, case, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # a model cache would appear here
    monkeypatch.setenv("MPLCONFIGDIR", str(tmp_path.parent / f"{tmp_path.name}-mpl"))  # matplotlib's own cache
    make, fragment = FOLDER_CASES[case]
    target = make(tmp_path)
    before = tree_hash(tmp_path)
    line = cli_error(capsys, [*FOLDER_COMMANDS[command], "--out", str(target)])
    assert "--out" in line and fragment in line
    assert any(w in line for w in ("choose", "create", "needs")), line  # the message says what to do
    assert tree_hash(tmp_path) == before  # the user's files, and nothing new (no temp folder, no cache)


FILE_CASES = {
    "a folder": (lambda p: _user_folder(p), "is a folder; name a file"),
    "below a file": (lambda p: _user_file(p) / "x.json", "is a file, not a folder"),
    "missing parent": (lambda p: p / "no" / "x.json", "does not exist; create it first"),
    "unwritable parent": (lambda p: "/proc/ccurv-reliability.json", "cannot write"),
    "empty name": (lambda p: "", "needs a file name"),
}


@pytest.mark.parametrize("case", FILE_CASES)
@pytest.mark.parametrize("command", FILE_COMMANDS)
def test_bad_json_file_refused_before_work(command, case, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    make, fragment = FILE_CASES[case]
    target = make(tmp_path)
    before = tree_hash(tmp_path)
    line = cli_error(capsys, [*FILE_COMMANDS[command], "--json", str(target)])
    assert "--json" in line and fragment in line
    assert tree_hash(tmp_path) == before


def test_explore_keeps_the_users_files_regression(tmp_path, capsys):
    """Finding 1: ``explore --out DIR`` exited 0 and ``DIR/thesis.txt`` was gone."""
    d = _user_folder(tmp_path)
    line = cli_error(capsys, [*FOLDER_COMMANDS["explore"], "--out", str(d)])
    assert "refusing to replace it" in line
    assert (d / "thesis.txt").read_text() == "three years of work" and os.listdir(d) == ["thesis.txt"]


def test_explore_never_turns_a_file_into_a_folder_regression(tmp_path, capsys):
    f = _user_file(tmp_path)
    cli_error(capsys, [*FOLDER_COMMANDS["explore"], "--out", str(f)])
    assert f.is_file() and f.read_text() == "three years of work"


# ------------------------------------------------------------------ the writer itself


def _fill(text):
    def fill(tmp):
        with open(os.path.join(tmp, "result.txt"), "w") as fh:
            fh.write(text)
    return fill


@pytest.mark.parametrize("command", [*FOLDER_COMMANDS, "diagnose"])
def test_previous_output_of_the_same_command_is_replaced(command, tmp_path):
    out = str(tmp_path / "out")
    write_folder(out, command, _fill("first"))
    write_folder(out, command, _fill("second"))
    assert (tmp_path / "out" / "result.txt").read_text() == "second"
    assert (tmp_path / "out" / MARKER).read_text() == f"written by ccurv {command}\n"
    assert os.listdir(tmp_path) == ["out"]  # no old or temporary folder left behind


@pytest.mark.parametrize("command", FOLDER_COMMANDS)
def test_output_of_another_command_is_refused(command, tmp_path):
    out = str(tmp_path / "out")
    write_folder(out, "check", _fill("mine"))
    before = tree_hash(tmp_path)
    with pytest.raises(InvalidInputError, match="holds an output of ccurv check"):
        check_folder(out, command)
    assert tree_hash(tmp_path) == before


def test_reports_written_before_the_marker_changed_are_still_replaced(tmp_path):
    out = tmp_path / "old-report"
    out.mkdir()
    (out / ".ccurv-report").write_text("written by ccurv report\n")
    (out / "report.md").write_text("old")
    write_folder(str(out), "report", _fill("new"))
    assert sorted(os.listdir(out)) == [MARKER, "result.txt"]
    with pytest.raises(InvalidInputError):  # but a legacy marker is no licence for explore
        (out / MARKER).unlink()
        (out / ".ccurv-report").write_text("written by ccurv report\n")
        check_folder(str(out), "explore")


@pytest.mark.parametrize("exc", [RuntimeError("boom"), KeyboardInterrupt(), OSError(28, "No space left on device")])
@pytest.mark.parametrize("existing", [False, True])
def test_failure_or_interrupt_leaves_the_previous_output(exc, existing, tmp_path):
    out = str(tmp_path / "out")
    if existing:
        write_folder(out, "explore", _fill("previous"))
    before = tree_hash(tmp_path)

    def fill(tmp):
        _fill("half")(tmp)
        raise exc

    with pytest.raises(InvalidInputError if isinstance(exc, OSError) else type(exc)):
        write_folder(out, "explore", fill)
    assert tree_hash(tmp_path) == before  # previous output intact, no hidden temp folder
    assert os.listdir(tmp_path) == (["out"] if existing else [])


@pytest.mark.parametrize("umask", [0o022, 0o027, 0o002])
def test_ordinary_permissions(umask, tmp_path):
    old = os.umask(umask)
    try:
        out = write_folder(str(tmp_path / "out"), "report", _fill("x"))
        js = write_json(str(tmp_path / "x.json"), {"a": 1})
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o777 & ~umask
    assert stat.S_IMODE(os.stat(js).st_mode) == 0o666 & ~umask
    assert stat.S_IMODE(os.stat(os.path.join(out, "result.txt")).st_mode) == 0o666 & ~umask


def test_file_writer_replaces_a_file_and_leaves_no_temporary_on_failure(tmp_path):
    p = tmp_path / "x.json"
    write_json(str(p), {"a": 1})
    write_json(str(p), {"a": 2})
    assert p.read_text() == '{\n  "a": 2\n}\n'
    with pytest.raises(TypeError):  # not JSON-serialisable: fails before anything is written
        write_json(str(p), {"a": object()})
    assert p.read_text() == '{\n  "a": 2\n}\n' and os.listdir(tmp_path) == ["x.json"]


def test_file_writer_refuses_a_folder(tmp_path):
    with pytest.raises(InvalidInputError, match="is a folder"):
        write_file(str(tmp_path), "x")
    with pytest.raises(InvalidInputError, match="is a folder"):
        check_file(str(tmp_path))


def test_cache_refuses_a_file_and_writes_ordinary_files(tmp_path):
    import torch

    from coupled_curvature.numeric.models.cache import ModelCache

    f = _user_file(tmp_path)
    with pytest.raises(InvalidInputError, match="--cache"):
        ModelCache(str(f))
    assert f.read_text() == "three years of work"
    c = ModelCache(str(tmp_path / "cache"))
    c.store("k", {"w": torch.ones(2)}, {"m": 1})
    assert c.load("k")["meta"] == {"m": 1}
    assert os.listdir(tmp_path / "cache") == ["k.pt"]
