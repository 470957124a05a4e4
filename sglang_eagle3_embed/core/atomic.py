"""Writing a file the user named: checked before the work, then written whole or not at all
(pure: the standard library only).

:func:`check_writable` runs before the work whose result goes to the file, so that a report is not
lost at its end; it creates and removes a file in the folder, since permission bits do not tell
(root writes anywhere, a read-only mount refuses everyone). :func:`write_atomic` writes a temporary
file in the same folder, flushes and fsyncs it, and renames it over the target: a full disk or an
interrupt leaves the previous file as it was. Every failure is an :class:`InputError` naming the
path and what to do.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from pathlib import Path

from sglang_eagle3_embed.core.errors import InputError

__all__ = ["check_writable", "fsync", "write_atomic"]


def _named(path: Path, what: str) -> str:
    return f"{what} {path}" if what else str(path)


def _temp_name(path: Path) -> Path:
    return path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")


def _create(tmp: Path) -> int:
    # O_EXCL: never an existing file; 0o666 under the umask, as a plain open would create it
    return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)


def check_writable(path, what: str = "") -> Path:
    """``path`` as a :class:`Path` once it is known that a file can be written there: not a
    folder, its folder exists, and a file can be created in that folder. ``what`` is how the user
    passed it (``--output``), named in errors."""
    try:
        out = Path(path).expanduser()
    except RuntimeError:  # ~user that does not exist
        out = Path(path)
    name = _named(out, what)
    try:
        if out.is_dir():
            raise InputError(f"{name} is a folder; name a file in it")
        folder = out.parent
        if not folder.exists():
            raise InputError(f"{name}: the folder {folder} does not exist; create it first")
        if not folder.is_dir():
            raise InputError(f"{name}: {folder} is a file, not a folder; name a file in a folder")
        tmp = _temp_name(out)
        os.close(_create(tmp))
        os.unlink(tmp)
    except InputError:
        raise
    except OSError as exc:
        raise InputError(
            f"{name} cannot be written ({exc.strerror or exc}); name a file in a folder you can write"
        ) from None
    except ValueError:  # a NUL byte
        raise InputError(f"{name} is not a valid path; name a file in a folder you can write") from None
    return out


def write_atomic(path, text: str, what: str = "") -> None:
    """Write ``text`` (UTF-8) to ``path`` whole or not at all: a temporary file in the same folder
    (with the permissions of the file it replaces), flushed and fsynced, then renamed over ``path``
    (a symlink there is replaced, not followed). On a failure the temporary file is removed,
    ``path`` keeps its previous content (or stays absent), and the error names ``path``."""
    path = Path(path)
    name = _named(path, what)
    tmp = _temp_name(path)
    try:
        fd = _create(tmp)
    except OSError as exc:
        raise InputError(
            f"{name} cannot be written ({exc.strerror or exc}); name a file in a folder you can write"
        ) from None
    try:
        try:
            with contextlib.suppress(FileNotFoundError):  # a file replaced keeps its permissions
                os.fchmod(fd, stat.S_IMODE(os.stat(path).st_mode))
            data = text.encode("utf-8")
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise InputError(
                f"{name} cannot be written ({exc.strerror or exc}); any previous file is unchanged; free "
                f"space or name another file, then run again"
            ) from None
        raise
    with contextlib.suppress(OSError):  # the rename itself on disk (POSIX; best effort)
        fsync(path.parent)


def fsync(path: Path) -> None:
    """Flush ``path`` (a file or a folder) to disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
