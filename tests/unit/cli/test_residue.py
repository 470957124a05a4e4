"""The contract where the input is the machine's: an ``--output`` that cannot be written is refused
before any work and a full disk at the end keeps the previous file (exit 2, the path named); Ctrl-C
ends any command with one line and exit 130. In process, no model, no training."""

import errno
import json
import os

import pytest

from sglang_eagle3_embed import cli
from sglang_eagle3_embed.cli import probe as probe_command
from sglang_eagle3_embed.doctor import probe as doctor_probe

OLD = '{"old": "report"}'


def run(capsys, *args) -> tuple[int, str, str]:
    code = cli.main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def probe_args(tmp_path, output) -> list[str]:
    """Folders that do not exist: had the probe started, its error would name --target."""
    return ["probe", "--target", str(tmp_path / "no-target"), "--draft", str(tmp_path / "no-draft"),
            "--output", str(output)]  # fmt: skip


def test_an_output_under_a_file_is_refused_before_the_probe(tmp_path, capsys):
    (tmp_path / "file").write_text("")
    output = tmp_path / "file" / "r.json"
    code, out, err = run(capsys, *probe_args(tmp_path, output))
    assert code == 2 and f"--output {output}" in err and "is a file, not a folder" in err
    assert "--target" not in err and "Traceback" not in out + err


def test_an_output_folder_where_no_file_can_be_created_is_refused_before_the_probe(
    tmp_path, capsys, monkeypatch
):
    """A read-only mount (or permissions, for a user other than root): the check creates a file."""
    real = os.open

    def read_only(path, flags, *args, **kwargs):
        if flags & os.O_CREAT and str(path).startswith(str(tmp_path)):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
        return real(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", read_only)
    output = tmp_path / "r.json"
    code, out, err = run(capsys, *probe_args(tmp_path, output))
    assert code == 2 and f"--output {output} cannot be written (Read-only file system)" in err
    assert "--target" not in err and "Traceback" not in out + err


class Report:
    plugin_ok = True

    def as_dict(self):
        return {"wirings": ["x" * 100] * 100}

    def table(self):
        return "table"


def test_a_full_disk_at_the_end_keeps_the_previous_report(tmp_path, capsys, monkeypatch):
    output = tmp_path / "r.json"
    output.write_text(OLD)
    monkeypatch.setattr(doctor_probe, "probe_folders", lambda request: Report())
    real, written = os.write, [0]

    def full_disk(fd, data):
        if written[0] >= 4096:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        written[0] += (n := real(fd, bytes(data[: 4096 - written[0]])))
        return n

    monkeypatch.setattr(os, "write", full_disk)
    code, out, err = run(capsys, *probe_args(tmp_path, output))
    assert code == 2 and f"--output {output} cannot be written (No space left on device)" in err
    assert output.read_text() == OLD and sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]
    assert "Traceback" not in out + err


def interrupt(args):
    raise KeyboardInterrupt


@pytest.mark.parametrize("command", ["probe", "pair"])
def test_ctrl_c_is_one_line_and_exit_130(tmp_path, capsys, monkeypatch, command):
    monkeypatch.setattr(probe_command, "run", interrupt)
    monkeypatch.setattr(cli.pair, "run", interrupt)
    args = probe_args(tmp_path, tmp_path / "r.json") if command == "probe" else ["pair"]
    # the parser binds run when it is built, from the module's attribute
    code, out, err = run(capsys, *args)
    assert code == 130 and out == ""
    assert err.splitlines() == [f"sglang-eagle3-embed: {command}: interrupted"]


def test_ctrl_c_with_json_is_a_json_error(capsys, monkeypatch):
    monkeypatch.setattr(cli.pair, "run", interrupt)
    code, out, err = run(capsys, "pair", "--json")
    assert code == 130 and err == ""
    assert json.loads(out) == {"ok": False, "error": "pair interrupted", "exit_code": 130}


def test_ctrl_c_with_debug_shows_the_traceback(capsys, monkeypatch):
    monkeypatch.setattr(cli.pair, "run", interrupt)
    code, _, err = run(capsys, "pair", "--debug")
    assert code == 130 and "Traceback" in err and err.rstrip().endswith("pair: interrupted")
