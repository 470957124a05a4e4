"""core.atomic: a file the user named is checked before the work and written whole or not at all;
a failure names the path and leaves the previous file as it was."""

import errno
import os

import pytest

from sglang_eagle3_embed.core.atomic import check_writable, write_atomic
from sglang_eagle3_embed.core.errors import InputError

OLD = '{"old": "report"}'
NEW = "x" * 20_000


def full_disk_after(monkeypatch, allowed: int):
    """``os.write`` writes ``allowed`` bytes, then fails as a full disk does."""
    real, written = os.write, [0]

    def write(fd, data):
        room = allowed - written[0]
        if room <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        n = real(fd, bytes(data[:room]))
        written[0] += n
        return n

    monkeypatch.setattr(os, "write", write)


def test_a_file_is_written_and_replaced_without_leftovers(tmp_path):
    out = tmp_path / "r.json"
    write_atomic(out, OLD)
    write_atomic(out, NEW, "--output")
    assert out.read_text() == NEW
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]
    out.chmod(0o600)
    write_atomic(out, OLD)
    assert out.read_text() == OLD and out.stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize("existed", [True, False])
def test_a_full_disk_keeps_the_previous_file_and_names_the_path(tmp_path, monkeypatch, existed):
    out = tmp_path / "r.json"
    if existed:
        out.write_text(OLD)
    full_disk_after(monkeypatch, 4096)
    with pytest.raises(InputError) as err:
        write_atomic(out, NEW, "--output")
    message = str(err.value)
    assert f"--output {out}" in message and "No space left on device" in message
    assert (out.read_text() == OLD) if existed else not out.exists()
    assert [p.name for p in tmp_path.iterdir()] == (["r.json"] if existed else [])


def test_an_interrupt_while_writing_keeps_the_previous_file(tmp_path, monkeypatch):
    out = tmp_path / "r.json"
    out.write_text(OLD)

    def interrupted(fd):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "fsync", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_atomic(out, NEW)
    assert out.read_text() == OLD and [p.name for p in tmp_path.iterdir()] == ["r.json"]


def test_writable_is_checked_by_creating_a_file_not_by_permission_bits(tmp_path, monkeypatch):
    """Root passes every ``os.access`` check and a read-only mount fails it for no one: the check
    creates a file in the folder, and a refusal names the path."""
    out = tmp_path / "r.json"
    assert check_writable(str(out), "--output") == out
    assert [p.name for p in tmp_path.iterdir()] == []
    real = os.open

    def read_only(path, flags, *args, **kwargs):
        if flags & os.O_CREAT:
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
        return real(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", read_only)
    with pytest.raises(InputError, match=f"--output {out} cannot be written \\(Read-only file system\\)"):
        check_writable(str(out), "--output")


def test_writable_names_a_folder_a_missing_folder_and_a_file_in_the_way(tmp_path):
    with pytest.raises(InputError, match=f"^--output {tmp_path} is a folder"):
        check_writable(str(tmp_path), "--output")
    with pytest.raises(InputError, match="does not exist; create it first"):
        check_writable(str(tmp_path / "no" / "r.json"), "--output")
    (tmp_path / "file").write_text("")
    with pytest.raises(InputError, match=f"{tmp_path / 'file'} is a file, not a folder"):
        check_writable(str(tmp_path / "file" / "r.json"), "--output")
