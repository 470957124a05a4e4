"""A model named by hub id, found in the local Hugging Face cache as SGLang finds it. Pure module.

SGLang takes ``--model-path`` (and ``--speculative-draft-model-path``) as a local model folder when
a folder is there (``os.path.isdir``, ``srt/model_loader/loader.py:496``), else as a hub repo id
whose snapshot ``huggingface_hub.snapshot_download`` returns, from the cache only under
``HF_HUB_OFFLINE=1`` (``srt/model_loader/weight_utils.py:326-337``; transformers reads the config
from the same cache). :func:`resolve` asks huggingface_hub itself, never downloading
(``snapshot_download(local_files_only=True)``; repo ids checked by its ``validate_repo_id``; what a
repo's cache holds read by ``scan_cache_dir``). A repo or revision that is not cached is a
:class:`HubError` naming the repo, the revision, the cache and the fix.
"""

from __future__ import annotations

import os
from pathlib import Path

from sglang_eagle3_embed.core.errors import InputError
from sglang_eagle3_embed.core.readers.model_folder import looks_local, user_path

__all__ = [
    "DEFAULT_REVISION", "HubError", "cache_dir", "check_repo", "locate", "offline", "repo_folder", "resolve",
]  # fmt: skip

DEFAULT_REVISION = "main"


class HubError(InputError):
    """A hub id that the local cache cannot serve: the repo, the revision, why, and the fix."""


def cache_dir(download_dir: str | None = None) -> Path:
    """The hub cache SGLang reads: ``--download-dir`` when given, else huggingface_hub's default
    (``huggingface_hub/constants.py``: ``HF_HUB_CACHE``, ``HUGGINGFACE_HUB_CACHE``, ``HF_HOME``,
    ``XDG_CACHE_HOME``). Read here, not from the library: it reads them once, when first imported
    (``constants.py:160-194``), and a check must see the environment the server will start with.
    A ``~user`` of no user is a :class:`HubError`, where huggingface_hub stops on a ``RuntimeError``."""
    if download_dir:
        source, raw = "--download-dir", download_dir
    else:
        home = os.environ.get("HF_HOME") or os.path.join(
            os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "huggingface"
        )
        hub = os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE")
        source = "the Hugging Face cache (HF_HUB_CACHE, HUGGINGFACE_HUB_CACHE, HF_HOME or XDG_CACHE_HOME)"
        raw = os.path.expandvars(os.path.expanduser(hub or os.path.join(home, "hub")))
    try:
        return Path(raw).expanduser()  # as huggingface_hub expands it (snapshot_download)
    except RuntimeError:  # a ~user of no such user (or ~ without a home)
        raise HubError(
            f"{source} {raw}: {raw.split('/')[0]} names no home directory on this machine; huggingface_hub "
            f"stops on it (RuntimeError: Could not determine home directory) when SGLang looks a "
            f"model up. Fix: name the cache by its full path."
        ) from None


def locate(path: str, revision: str | None = None, download_dir: str | None = None, what: str = "") -> Path:
    """The local folder of a model the user names: ``path`` itself when it names a local file or
    folder (:func:`~sglang_eagle3_embed.core.readers.model_folder.looks_local`), else the cached snapshot of
    the hub repo ``path`` at ``revision`` (:func:`resolve`)."""
    if looks_local(path):
        return user_path(path)
    return resolve(path, revision, download_dir, what)


def check_repo(repo: str, what: str = "", prefix: str = "") -> None:
    """A :class:`HubError` unless ``repo`` has the form of a hub repo id (``org/name`` or ``name``:
    letters, digits, ``-``, ``_``, ``.``; no ``--`` or ``..``): huggingface_hub's own
    ``validate_repo_id``."""
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import validate_repo_id

    try:
        validate_repo_id(repo)
        return
    except HFValidationError:
        pass
    named = f"{what} {repo}" if what else repo
    raise HubError(
        f"{named}: {prefix}not a hub repo id (org/name: letters, digits, -, _ and ., no -- or ..); fix: "
        f"pass the model's local folder, or its hub id"
    )


def repo_folder(repo: str, download_dir: str | None = None) -> Path:
    """Where the cache keeps ``repo``: ``models--{org}--{name}``."""
    return cache_dir(download_dir) / "--".join(("models", *repo.split("/")))


def offline() -> bool:
    """``HF_HUB_OFFLINE`` (or ``TRANSFORMERS_OFFLINE``) set true, as huggingface_hub reads it (read
    here for the reason :func:`cache_dir` gives)."""
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
    """The cached snapshot folder of hub repo ``repo`` at ``revision`` (default ``main``): what
    ``snapshot_download(repo, revision=revision, local_files_only=True)`` returns. Never downloads."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    revision = revision or DEFAULT_REVISION
    named = f"{what} {repo}" if what else repo
    check_repo(repo, what, "no such file or folder, and ")
    at = f"{named} (revision {revision})"
    cache = cache_dir(download_dir)
    try:
        return Path(snapshot_download(repo, revision=revision, cache_dir=str(cache), local_files_only=True))
    except (LocalEntryNotFoundError, FileNotFoundError):
        pass
    fix = (
        f"download it on a machine with network access ({_download(repo, revision, download_dir)}) "
        f"into this cache, or point HF_HOME (or HF_HUB_CACHE, or --download-dir) at the cache that holds "
        f"it, or pass the model's local folder"
    )
    if not os.path.isdir(repo_folder(repo, download_dir)):
        raise HubError(f"{at}: not in the local Hugging Face cache {cache}; {_launch(repo)}. Fix: {fix}.")
    raise HubError(
        f"{at}: the cache {cache} holds {repo}, but not at revision {revision} ({_cached(repo, cache)}); "
        f"{_launch(repo)}. Fix: pass a cached revision (--revision, "
        f"--speculative-draft-model-revision), or {fix}."
    )


def _cached(repo: str, cache: Path) -> str:
    """The revisions the cache holds of ``repo`` (huggingface_hub's ``scan_cache_dir``), for a
    message."""
    from huggingface_hub import scan_cache_dir

    try:
        found = [r for r in scan_cache_dir(cache).repos if r.repo_id == repo and r.repo_type == "model"]
    except Exception:  # a cache the scanner cannot read: the message says no more than that
        found = []
    refs = sorted(ref for r in found for ref in r.refs)
    snapshots = sorted(rev.commit_hash[:12] for r in found for rev in r.revisions)
    if not refs and not snapshots:
        return "it holds no snapshot"
    parts = [f"branches {', '.join(refs)}"] if refs else []
    if snapshots:
        parts.append(f"snapshots {', '.join(snapshots)}")
    return "it holds " + "; ".join(parts)
