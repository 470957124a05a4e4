"""The cache protocol on folders of plain files (no model): verifying only reads, even while another
process removes the folder; a complete folder is read without the lock; every repair (moving a
damaged or stale folder aside, removing what killed builds left) happens under the folder's lock,
after checking again; a folder built from another records that folder's exact build; and a cache
that is a file, cannot be created, or cannot be written where a build is needed is named with the
fix."""

import contextlib
import json
import os

import filelock
import pytest

from sglang_eagle3_embed.doctor import cache
from sglang_eagle3_embed.doctor.cache import CacheError, ensure, origin_problem, verify, write_origin
from sglang_eagle3_embed.doctor.tiny_target import cache_root

DEAD = 2**22 + 12345  # above the default pid_max of 4194304: no such process


def built(folder, content=b"weights"):
    """A complete folder: two files and their manifest."""
    tmp = cache.temporary(folder)
    (tmp / "config.json").write_text(json.dumps({"name": folder.name}))
    (tmp / "model.safetensors").write_bytes(content)
    cache.publish(tmp, folder)
    return folder


def writer(content=b"rebuilt"):
    calls = []

    def build(tmp):
        calls.append(tmp)
        (tmp / "model.safetensors").write_bytes(content)

    build.calls = calls
    return build


@pytest.fixture
def lock_log(monkeypatch):
    """Records whether the folder's lock is held at each step that changes the cache."""
    log, held = [], []

    @contextlib.contextmanager
    def recording_lock(folder):
        held.append(folder)
        try:
            yield
        finally:
            held.pop()

    def logged(name, real):
        def step(*args, **kwargs):
            log.append((name, bool(held)))
            return real(*args, **kwargs)

        return step

    monkeypatch.setattr(cache, "_lock", recording_lock)
    for name in ("_discard", "clean_stale", "temporary", "publish"):
        monkeypatch.setattr(cache, name, logged(name, getattr(cache, name)))
    return log


def test_a_folder_removed_while_it_is_verified_is_reported_not_raised(tmp_path, monkeypatch):
    folder = built(tmp_path / "target")
    real = cache.file_digest

    def removed_meanwhile(file):  # another process moves the folder aside mid-check
        if folder.exists():
            folder.rename(tmp_path / "aside")
        return real(file)

    monkeypatch.setattr(cache, "file_digest", removed_meanwhile)
    assert "cannot be read" in verify(folder)


def test_a_complete_folder_is_used_without_the_lock(tmp_path, monkeypatch):
    folder = built(tmp_path / "target")

    def no_lock(*args, **kwargs):
        raise PermissionError("read-only cache: the lock file cannot be created")

    monkeypatch.setattr(filelock, "FileLock", no_lock)
    build = writer()
    assert ensure(folder, build) == folder and build.calls == []


@pytest.mark.parametrize("damage", ["a lost file", "a lost manifest", "a stale record"])
def test_a_damaged_folder_is_moved_aside_and_rebuilt_only_under_its_lock(tmp_path, lock_log, damage):
    source, folder = built(tmp_path / "target"), tmp_path / "draft"
    tmp = cache.temporary(folder)
    write_origin(tmp, "trained_on.json", source)
    (tmp / "model.safetensors").write_bytes(b"draft")
    cache.publish(tmp, folder)
    if damage == "a lost file":
        (folder / "model.safetensors").unlink()
    elif damage == "a lost manifest":
        (folder / cache.MANIFEST).unlink()
    else:
        (source / cache.MANIFEST).write_text((source / cache.MANIFEST).read_text() + " ")  # rebuilt
    lock_log.clear()

    def build(tmp):
        write_origin(tmp, "trained_on.json", source)
        (tmp / "model.safetensors").write_bytes(b"draft again")

    ensure(folder, build, check=lambda: origin_problem(folder, "trained_on.json", source))
    assert [name for name, _ in lock_log] == ["clean_stale", "_discard", "temporary", "publish"]
    assert all(held for _, held in lock_log), lock_log
    assert verify(folder) is None and origin_problem(folder, "trained_on.json", source) is None
    assert (folder / "model.safetensors").read_bytes() == b"draft again"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["draft", "target"]  # nothing left aside


@pytest.mark.parametrize("stray", ["a file", "a dangling link"])
def test_something_else_under_the_folders_name_is_replaced_without_leftovers(tmp_path, stray):
    folder = tmp_path / "target"
    if stray == "a file":
        folder.write_text("not a folder")
    else:
        folder.symlink_to(tmp_path / "nowhere")
    ensure(folder, writer())
    assert verify(folder) is None and sorted(p.name for p in tmp_path.iterdir()) == ["target", "target.lock"]


def test_a_folder_completed_while_waiting_for_the_lock_is_kept(tmp_path, monkeypatch):
    folder = tmp_path / "target"
    folder.mkdir()  # an interrupted build: no manifest

    @contextlib.contextmanager
    def another_builder_first(_):
        os.rename(folder, tmp_path / "aside")  # it repaired and published while this one waited
        built(folder, b"theirs")
        yield

    monkeypatch.setattr(cache, "_lock", another_builder_first)
    build = writer()
    assert ensure(folder, build) == folder and build.calls == []
    assert (folder / "model.safetensors").read_bytes() == b"theirs"


def test_only_the_folders_own_dead_temporaries_are_removed(tmp_path):
    folder = tmp_path / "target-a"
    stale = [tmp_path / f"target-a.tmp{DEAD}", tmp_path / f"target-a.broken{DEAD}"]
    kept = [tmp_path / f"target-a.tmp{os.getppid()}", tmp_path / f"target-b.tmp{DEAD}"]  # alive; not its own
    for path in stale + kept:
        path.mkdir()
    ensure(folder, writer())
    assert not any(path.exists() for path in stale) and all(path.exists() for path in kept)
    assert verify(folder) is None


def test_the_record_names_the_exact_build_of_its_source(tmp_path):
    source, folder = built(tmp_path / "target"), tmp_path / "draft"
    folder.mkdir()
    assert "is missing" in origin_problem(folder, "trained_on.json", source)
    write_origin(folder, "trained_on.json", source)
    assert json.loads((folder / "trained_on.json").read_text())["folder"] == "target"
    assert origin_problem(folder, "trained_on.json", source) is None
    os.rename(source, tmp_path / "old")
    built(source, b"other bytes")  # the same name, rebuilt
    problem = origin_problem(folder, "trained_on.json", source, made="trained on")
    assert problem.startswith(f"it was trained on another build of {source}")


def test_a_cache_that_is_a_file_is_named_with_its_flag(tmp_path, monkeypatch):
    file = tmp_path / "cache"
    file.write_text("")
    with pytest.raises(CacheError, match=f"--cache {file} is a file, not a folder: point --cache"):
        cache_root(file)
    monkeypatch.setenv("SGLANG_EAGLE3_EMBED_CACHE", str(file))
    with pytest.raises(CacheError, match=f"SGLANG_EAGLE3_EMBED_CACHE={file} is a file"):
        cache_root()
    assert cache_root(tmp_path / "new") == tmp_path / "new"  # absent: created when a build needs it


@pytest.mark.parametrize(
    "kind", ["file", "fifo", "loop", "dangling link", "under a file", "folder", "absent"]
)
def test_what_can_never_be_a_folder_is_named_without_creating_anything(tmp_path, kind):
    path = tmp_path / "cache"
    if kind == "file":
        path.write_text("")
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "loop":
        path.symlink_to(path)
    elif kind == "dangling link":
        path.symlink_to(tmp_path / "nowhere")
    elif kind == "under a file":
        (tmp_path / "file").write_text("")
        path = tmp_path / "file" / "cache"
    elif kind == "folder":
        path.mkdir()
    before = sorted(tmp_path.iterdir())
    expected = {
        "file": "is a file, not a folder",
        "fifo": "is a FIFO, not a folder",
        "loop": "is a symbolic link that loops back on itself, not a folder",
        "dangling link": f"is a symbolic link to {tmp_path / 'nowhere'}, which does not exist",
        "under a file": f"cannot be a folder: {tmp_path / 'file'} is a file",
    }
    problem = cache.not_a_folder(path)
    assert (problem or "").startswith(expected.get(kind, "")) and (problem is None) == (kind not in expected)
    assert sorted(tmp_path.iterdir()) == before


def test_a_cache_that_cannot_be_created_is_named(tmp_path):
    (tmp_path / "file").write_text("")
    root = tmp_path / "file" / "cache"
    with pytest.raises(CacheError, match=f"{root} cannot be created \\({tmp_path / 'file'} is a file\\)"):
        ensure(root / "target", writer())


@pytest.mark.parametrize("state", ["absent", "damaged"])
def test_a_read_only_cache_names_the_folder_to_build_and_the_fix(tmp_path, monkeypatch, state):
    folder = tmp_path / "target"
    if state == "damaged":
        built(folder)
        (folder / "model.safetensors").write_bytes(b"")
    monkeypatch.setattr(cache, "writable", lambda folder: False)
    build = writer()
    with pytest.raises(CacheError) as raised:
        ensure(folder, build)
    message = str(raised.value)
    assert f"the cache {tmp_path} cannot be written" in message and "--cache" in message
    if state == "damaged":
        assert f"delete {folder}" in message and "has 0 bytes" in message
    else:
        assert f"{folder} must be built" in message
    assert build.calls == [] and folder.exists() == (state == "damaged")  # nothing changed
