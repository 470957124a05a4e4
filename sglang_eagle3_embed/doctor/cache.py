"""The cache of built folders (tiny targets and drafts): trusted only where it can be verified.

A folder is built under a temporary name, its files flushed, a manifest (every file's size and
SHA-256) written last, and only then renamed into place, so a folder with a matching manifest is
complete. On load the manifest is checked: a damaged folder (an interrupted build, a truncated file,
a lost ``config.json``) is removed and rebuilt where the cache can be written, or named for deletion
where it cannot. Temporary folders of builds that were killed are removed.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from pathlib import Path

from sglang_eagle3_embed.core.errors import InputError

__all__ = ["MANIFEST", "CacheError", "clean_stale", "publish", "temporary", "usable", "verify", "writable"]

MANIFEST = "manifest.json"
_TMP = re.compile(r"\.(tmp|broken)(\d+)$")


class CacheError(InputError):
    """A damaged folder in a cache this process cannot write: the message names it."""


def _digest(file: Path) -> str:
    h = hashlib.sha256()
    with open(file, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def verify(folder: Path) -> str | None:
    """None when ``folder`` is complete (its manifest matches every file), else what is wrong."""
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
        if not file.is_file():
            return f"{file} is missing"
        if file.stat().st_size != entry.get("size"):
            return f"{file} has {file.stat().st_size} bytes, the manifest says {entry.get('size')}"
        if _digest(file) != entry.get("sha256"):
            return f"{file} does not match its SHA-256 in the manifest"
    return None


def writable(folder: Path) -> bool:
    """Whether this process may replace ``folder`` (and write beside it)."""
    return os.access(folder.parent, os.W_OK | os.X_OK)


def usable(folder: Path) -> bool:
    """True when ``folder`` is complete; False when it must be built (absent, or damaged and now
    removed). Raises :class:`CacheError` naming it when it is damaged and cannot be removed."""
    if not folder.exists():
        return False
    problem = verify(folder)
    if problem is None:
        return True
    if not writable(folder):
        raise CacheError(
            f"the cached folder {folder} is damaged ({problem}) and this cache cannot be written: "
            f"delete {folder}, or point SGLANG_EAGLE3_EMBED_CACHE (--cache) at a writable folder."
        )
    aside = folder.with_name(f"{folder.name}.broken{os.getpid()}")
    folder.rename(aside)
    shutil.rmtree(aside, ignore_errors=True)
    return False


def temporary(folder: Path) -> Path:
    """A fresh temporary folder beside ``folder``, named for this process."""
    tmp = folder.with_name(f"{folder.name}.tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    return tmp


def publish(tmp: Path, folder: Path) -> None:
    """Flush ``tmp``'s files, write its manifest last, and move it into place. A concurrent builder
    that published a complete folder first wins."""
    files = sorted(p for p in tmp.iterdir() if p.is_file() and p.name != MANIFEST)
    for file in files:
        _fsync(file)
    manifest = {p.name: {"size": p.stat().st_size, "sha256": _digest(p)} for p in files}
    (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2))
    _fsync(tmp / MANIFEST)
    _fsync(tmp)
    try:
        tmp.rename(folder)
    except OSError:
        if verify(folder) is not None:
            raise
        shutil.rmtree(tmp, ignore_errors=True)
        return
    _fsync(folder.parent)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def clean_stale(cache: Path) -> None:
    """Remove the temporary folders of builds whose process is gone (killed mid-build)."""
    for path in cache.iterdir() if cache.is_dir() else ():
        match = _TMP.search(path.name)
        if match and path.is_dir() and not _alive(int(match.group(2))):
            shutil.rmtree(path, ignore_errors=True)
