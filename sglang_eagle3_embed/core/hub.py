"""A model named by hub id, found in the local Hugging Face cache as SGLang finds it. Pure module.

SGLang takes ``--model-path`` (and ``--speculative-draft-model-path``) as a local model folder when
a folder is there (``os.path.isdir``, ``srt/model_loader/loader.py:496``), else as a hub repo id
whose snapshot ``huggingface_hub.snapshot_download`` returns, from the cache only under
``HF_HUB_OFFLINE=1`` (``srt/model_loader/weight_utils.py:326-337``; transformers reads the config
from the same cache). :func:`resolve` finds the same snapshot folder without importing either and
without a download: the cache folder (``--download-dir``, else ``HF_HUB_CACHE``, else the legacy
``HUGGINGFACE_HUB_CACHE``, else ``$HF_HOME/hub``, else ``$XDG_CACHE_HOME/huggingface/hub``, else
``~/.cache/huggingface/hub``), then ``models--{org}--{name}/refs/{revision}`` (a 40-digit commit
hash names a snapshot directly), then ``snapshots/{commit}``. A repo or revision that is not
cached is a :class:`HubError` naming the repo, the revision, the cache and the fix.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from sglang_eagle3_embed.core.errors import InputError
from sglang_eagle3_embed.core.model_folder import looks_local

__all__ = [
    "DEFAULT_REVISION", "HubError", "cache_dir", "check_repo", "locate", "offline", "repo_folder", "resolve",
]  # fmt: skip

DEFAULT_REVISION = "main"
COMMIT = re.compile(r"^[0-9a-f]{40}$")
REPO_ID = re.compile(r"^(\b[\w\-.]{1,96}\b/)?\b[\w\-.]{1,96}\b$")
"""huggingface_hub's ``REPO_ID_REGEX`` (``utils/_validators.py``), with ``--`` and ``..`` refused
as it refuses them."""


class HubError(InputError):
    """A hub id that the local cache cannot serve: the repo, the revision, why, and the fix."""


def cache_dir(download_dir: str | None = None) -> Path:
    """The hub cache SGLang reads: ``--download-dir`` when given, else huggingface_hub's default
    (``huggingface_hub/constants.py``: ``HF_HUB_CACHE``, ``HUGGINGFACE_HUB_CACHE``, ``HF_HOME``,
    ``XDG_CACHE_HOME``)."""
    if download_dir:
        return Path(download_dir).expanduser()
    home = os.environ.get("HF_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "huggingface"
    )
    hub = os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE")
    return Path(os.path.expandvars(os.path.expanduser(hub or os.path.join(home, "hub"))))


def locate(path: str, revision: str | None = None, download_dir: str | None = None, what: str = "") -> Path:
    """The local folder of a model the user names: ``path`` itself when it names a local file or
    folder (:func:`~sglang_eagle3_embed.core.model_folder.looks_local`), else the cached snapshot of
    the hub repo ``path`` at ``revision`` (:func:`resolve`)."""
    if looks_local(path):
        try:
            return Path(path).expanduser()
        except RuntimeError:  # ~user that does not exist: the path as written, named when it is read
            return Path(path)
    return resolve(path, revision, download_dir, what)


def check_repo(repo: str, what: str = "", prefix: str = "") -> None:
    """A :class:`HubError` unless ``repo`` has the form of a hub repo id (``org/name`` or ``name``:
    letters, digits, ``-``, ``_``, ``.``; no ``--`` or ``..``), as huggingface_hub requires."""
    if REPO_ID.match(repo) and "--" not in repo and ".." not in repo:
        return
    named = f"{what} {repo}" if what else repo
    raise HubError(
        f"{named}: {prefix}not a hub repo id (org/name: letters, digits, -, _ and ., no -- or ..); fix: "
        f"pass the model's local folder, or its hub id"
    )


def repo_folder(repo: str, download_dir: str | None = None) -> Path:
    """Where the cache keeps ``repo``: ``models--{org}--{name}``."""
    return cache_dir(download_dir) / "--".join(("models", *repo.split("/")))


def offline() -> bool:
    """``HF_HUB_OFFLINE`` (or ``TRANSFORMERS_OFFLINE``) set true, as huggingface_hub reads it."""
    value = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE") or ""
    return value.upper() in {"1", "ON", "YES", "TRUE"}


def _download(repo: str, revision: str, download_dir: str | None) -> str:
    rev = "" if revision == DEFAULT_REVISION else f" --revision {revision}"
    cache = f" --cache-dir {download_dir}" if download_dir else ""
    return f"hf download {repo}{rev}{cache}"


def _launch(repo: str) -> str:
    """What the launch does with a repo that is not cached."""
    if offline():
        return "SGLang would fail to start too (HF_HUB_OFFLINE is set)"
    return f"SGLang would try to download {repo} when it starts (HF_HUB_OFFLINE is not set)"


def resolve(repo: str, revision: str | None = None, download_dir: str | None = None, what: str = "") -> Path:
    """The cached snapshot folder of hub repo ``repo`` at ``revision`` (default ``main``): the folder
    ``snapshot_download(repo, revision=revision, local_files_only=True)`` returns. Never downloads."""
    revision = revision or DEFAULT_REVISION
    named = f"{what} {repo}" if what else repo
    check_repo(repo, what, "no such file or folder, and ")
    at = f"{named} (revision {revision})"
    cache = cache_dir(download_dir)
    folder = repo_folder(repo, download_dir)
    fix = (
        f"download it on a machine with network access ({_download(repo, revision, download_dir)}) "
        f"into this cache, or point HF_HOME (or HF_HUB_CACHE, or --download-dir) at the cache that holds "
        f"it, or pass the model's local folder"
    )
    if not os.path.isdir(folder):
        raise HubError(f"{at}: not in the local Hugging Face cache {cache}; {_launch(repo)}. Fix: {fix}.")
    commit = revision if COMMIT.match(revision) else _ref(folder, revision)
    if commit is None or not os.path.isdir(folder / "snapshots" / commit):
        raise HubError(
            f"{at}: the cache {cache} holds {repo}, but not at revision {revision} ({_cached(folder)}); "
            f"{_launch(repo)}. Fix: pass a cached revision (--revision, "
            f"--speculative-draft-model-revision), or {fix}."
        )
    return folder / "snapshots" / commit


def _ref(folder: Path, revision: str) -> str | None:
    try:
        return (folder / "refs" / revision).read_text().strip() or None
    except (OSError, ValueError):
        return None


def _cached(folder: Path) -> str:
    """The revisions a repo's cache folder holds, for a message."""
    refs = sorted(
        str(p.relative_to(folder / "refs")) for p in (folder / "refs").rglob("*") if p.is_file()
    ) if (folder / "refs").is_dir() else []  # fmt: skip
    snapshots = sorted(p.name[:12] for p in (folder / "snapshots").iterdir()) if (
        folder / "snapshots"
    ).is_dir() else []  # fmt: skip
    if not refs and not snapshots:
        return "it holds no snapshot"
    parts = [f"branches {', '.join(refs)}"] if refs else []
    if snapshots:
        parts.append(f"snapshots {', '.join(snapshots)}")
    return "it holds " + "; ".join(parts)
