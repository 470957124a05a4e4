"""The cache of built folders (tiny targets, drafts, Kimi wrappers): trusted only where it can be
verified.

A folder is built under a temporary name, its files flushed, a manifest (every file's size and
SHA-256) written last, and only then renamed into place, so a folder with a matching manifest is
complete. A folder built from another (a draft trained on a target, a wrapper around it) also
records the SHA-256 of that folder's manifest (:func:`write_origin`): the exact bytes it was built
from, so a source rebuilt with other bytes makes it stale (:func:`origin_problem`).

:func:`ensure` is the one protocol: a complete folder is read without a lock (a read-only cache
works); anything else (build, move a damaged or stale folder aside, remove what killed builds left)
happens under the folder's lock, after checking again once the lock is held, so that no process ever
removes a folder that another one has just completed or is reading. Where the cache cannot be
written, a folder that must be built is named with the fix (:class:`CacheError`).
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path

from sglang_eagle3_embed.core.atomic import fsync
from sglang_eagle3_embed.core.errors import InputError

__all__ = [
    "MANIFEST", "CacheError", "clean_stale", "ensure", "file_digest", "manifest_digest", "not_a_folder",
    "origin_problem", "publish", "temporary", "verify", "writable", "write_origin",
]  # fmt: skip

MANIFEST = "manifest.json"
_TMP = re.compile(r"\.(tmp|broken)(\d+)$")
CHOOSE = "--cache (or SGLANG_EAGLE3_EMBED_CACHE)"
"""How a user picks another cache folder, as the messages name it."""


class CacheError(InputError):
    """A cache folder that cannot be used or built here: the message names it and the fix."""


def file_digest(file: Path) -> str:
    """The SHA-256 of a file's bytes, hex (read a MiB at a time)."""
    h = hashlib.sha256()
    with open(file, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def verify(folder: Path) -> str | None:
    """None when ``folder`` is complete (its manifest matches every file), else what is wrong. Only
    reads: a folder removed while it is read is reported as incomplete, never raised."""
    try:
        manifest = json.loads((folder / MANIFEST).read_text())
    except FileNotFoundError:
        return f"{folder} has no {MANIFEST} (an interrupted build, or one from an older version)"
    except (OSError, ValueError) as exc:
        return f"{folder / MANIFEST} cannot be read: {exc}"
    if not isinstance(manifest, dict) or not manifest:
        return f"{folder / MANIFEST} lists no files"
    for name, entry in manifest.items():
        file = folder / name
        try:
            size = file.stat().st_size if file.is_file() else None
            if size is None:
                return f"{file} is missing"
            if size != entry.get("size"):
                return f"{file} has {size} bytes, the manifest says {entry.get('size')}"
            if file_digest(file) != entry.get("sha256"):
                return f"{file} does not match its SHA-256 in the manifest"
        except OSError as exc:
            return f"{file} cannot be read: {exc}"
    return None


def manifest_digest(folder: Path) -> str:
    """The SHA-256 of ``folder``'s manifest: it names every byte of a complete folder."""
    return file_digest(folder / MANIFEST)


def write_origin(tmp: Path, record: str, source: Path) -> None:
    """Record in ``tmp/record`` the exact folder ``tmp`` is built from: ``source``'s name and the
    SHA-256 of its manifest. Written before :func:`publish`, so the manifest covers it."""
    origin = {"folder": source.name, "manifest_sha256": manifest_digest(source)}
    (tmp / record).write_text(json.dumps(origin, indent=2) + "\n")


def origin_problem(folder: Path, record: str, source: Path, made: str = "made from") -> str | None:
    """None when ``folder/record`` names ``source`` as it is now (``source`` complete), else how
    they differ: ``source`` was rebuilt with other bytes since, or ``folder`` records none."""
    try:
        recorded = json.loads((folder / record).read_text()).get("manifest_sha256")
    except FileNotFoundError:
        return f"{folder / record} is missing, so nothing says which build of {source} it was made from"
    except (OSError, ValueError, AttributeError) as exc:
        return f"{folder / record} cannot be read: {exc}"
    try:
        now = manifest_digest(source)
    except OSError as exc:
        return f"{source / MANIFEST} cannot be read: {exc}"
    if recorded != now:
        return (
            f"it was {made} another build of {source}: {record} names the manifest SHA-256 "
            f"{str(recorded)[:12]}..., {source / MANIFEST} is {now[:12]}..."
        )
    return None


def not_a_folder(path: Path) -> str | None:
    """None when ``path`` is a folder or could be created as one, else why it never can be (said
    after the path): something else is there, a symbolic link leads nowhere, or a file is in the way.
    Only looks: nothing is created."""
    if path.is_dir():
        return None
    if path.is_symlink():
        target = Path(os.readlink(path))
        target = target if target.is_absolute() else path.parent / target
        try:
            path.resolve(strict=True)
        except RuntimeError:  # a loop (Python 3.11; later versions raise OSError)
            return "is a symbolic link that loops back on itself, not a folder"
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                return "is a symbolic link that loops back on itself, not a folder"
            return f"is a symbolic link to {target}, which does not exist (create it first)"
    if os.path.lexists(path):
        if path.is_file():
            return "is a file, not a folder"
        return "is a FIFO, not a folder" if path.is_fifo() else "is not a folder"
    blocker = next((p for p in path.parents if os.path.lexists(p)), None)
    if blocker is not None and not blocker.is_dir():
        return f"cannot be a folder: {blocker} is {'a file' if blocker.is_file() else 'not a folder'}"
    return None


def writable(folder: Path) -> bool:
    """Whether this process may replace ``folder`` (and write beside it)."""
    return os.access(folder.parent, os.W_OK | os.X_OK)


def _problem(folder: Path, check: Callable[[], str | None] | None) -> str | None:
    if not folder.is_dir():
        return "absent"
    return verify(folder) or (check() if check else None)


def _open_for_build(folder: Path, problem: str) -> None:
    """Create the cache folder for a build of ``folder``; :class:`CacheError` where it cannot be
    created or written (naming ``folder``, what is wrong with it, and the fix)."""
    root = folder.parent
    if not root.is_dir():
        try:
            root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            blocker = next((p for p in root.parents if p.exists()), None)
            if blocker is not None and not blocker.is_dir():
                where = f"{blocker} is a file"
            else:
                where = f"{exc.strerror}: {exc.filename}" if exc.strerror and exc.filename else str(exc)
            raise CacheError(
                f"the cache folder {root} cannot be created ({where}): point {CHOOSE} at a folder "
                f"this user can create or write."
            ) from None
    if writable(folder):
        return
    if problem == "absent":
        raise CacheError(
            f"{folder} must be built, and the cache {root} cannot be written: point {CHOOSE} at a "
            f"writable folder (it is built there), or build it once as a user who can write {root}."
        )
    raise CacheError(
        f"the cached folder {folder} cannot be used ({problem}), and the cache {root} cannot be "
        f"written: delete {folder} and run this again as a user who can write {root}, or point "
        f"{CHOOSE} at a writable folder."
    )


def _lock(folder: Path):
    import filelock

    return filelock.FileLock(str(folder.with_name(f"{folder.name}.lock")))


def _discard(folder: Path) -> None:
    """Move ``folder`` (or whatever else holds its name) aside and remove it, its lock held: nobody
    else replaces it meanwhile."""
    aside = folder.with_name(f"{folder.name}.broken{os.getpid()}")
    shutil.rmtree(aside, ignore_errors=True)
    folder.rename(aside)
    if aside.is_dir() and not aside.is_symlink():
        shutil.rmtree(aside, ignore_errors=True)
    else:
        aside.unlink()


def ensure(
    folder: Path,
    build: Callable[[Path], dict[str, str] | None],
    check: Callable[[], str | None] | None = None,
) -> Path:
    """``folder``, complete: used as it is, without a lock, when its manifest vouches for it and
    ``check`` (e.g. :func:`origin_problem`) finds nothing wrong; else built by ``build(tmp)``, which
    writes the files into a fresh temporary folder, and published. ``build`` may return the
    SHA-256 of files it wrote and flushed itself (:func:`publish`'s ``known``). Every write happens
    under ``folder``'s lock, after checking again: a concurrent builder may have completed it
    meanwhile."""
    problem = _problem(folder, check)
    if problem is None:
        return folder
    _open_for_build(folder, problem)
    with _lock(folder):  # concurrent builders of the folder wait for the first
        clean_stale(folder)
        if _problem(folder, check) is None:
            return folder
        if os.path.lexists(folder):
            _discard(folder)
        tmp = temporary(folder)
        try:
            known = build(tmp)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        publish(tmp, folder, known)
    return folder


def temporary(folder: Path) -> Path:
    """A fresh temporary folder beside ``folder``, named for this process."""
    tmp = folder.with_name(f"{folder.name}.tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    return tmp


def publish(tmp: Path, folder: Path, known: dict[str, str] | None = None) -> None:
    """Flush ``tmp``'s files, write its manifest last, and move it into place. A concurrent builder
    that published a complete folder first wins. ``known``: the SHA-256 of files the builder has
    already flushed and hashed as it wrote them (tens of GB need not be read twice); the rest are
    flushed and hashed here."""
    known = known or {}
    files = sorted(p for p in tmp.iterdir() if p.is_file() and p.name != MANIFEST)
    for file in files:
        if file.name not in known:
            fsync(file)
    manifest = {
        p.name: {"size": p.stat().st_size, "sha256": known.get(p.name) or file_digest(p)} for p in files
    }
    (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2))
    fsync(tmp / MANIFEST)
    fsync(tmp)
    try:
        tmp.rename(folder)
    except OSError:
        if verify(folder) is not None:
            raise
        shutil.rmtree(tmp, ignore_errors=True)
        return
    fsync(folder.parent)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def clean_stale(folder: Path) -> None:
    """Remove the temporary folders that builds of ``folder`` whose process is gone (killed
    mid-build) left beside it. Call with ``folder``'s lock held."""
    pattern = re.compile(re.escape(folder.name) + _TMP.pattern)
    for path in folder.parent.iterdir() if folder.parent.is_dir() else ():
        match = pattern.fullmatch(path.name)
        if match and path.is_dir() and not _alive(int(match.group(2))):
            shutil.rmtree(path, ignore_errors=True)
