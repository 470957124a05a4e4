"""Put a model folder into a local Hugging Face cache under a hub repo id, laid out as
``huggingface_hub`` lays out a download: ``models--{org}--{name}/blobs/{sha256}``, the snapshot's
files as relative symbolic links to their blobs under ``snapshots/{commit}/``, and
``refs/{revision}`` holding the commit hash. Launch lines that name the repo by id then resolve,
offline, to that snapshot (``pair --hub-repo``; the tests' temporary caches).
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

from sglang_eagle3_embed.core.readers.hub import DEFAULT_REVISION, repo_folder
from sglang_eagle3_embed.doctor.cache import file_digest

__all__ = ["publish"]


def publish(
    folder: Path,
    repo: str,
    revision: str = DEFAULT_REVISION,
    cache: str | Path | None = None,
    *,
    weights: bool = True,
) -> Path:
    """Cache the files of ``folder`` as ``repo`` at ``revision`` in ``cache`` (default: the cache
    SGLang reads, :func:`~sglang_eagle3_embed.core.readers.hub.cache_dir`); returns the snapshot folder.
    The commit hash is derived from the files, so the same folder gets the same snapshot.
    ``weights=False`` leaves out the ``*.safetensors`` files (a snapshot whose configs alone were
    downloaded)."""
    folder = Path(folder)
    files = sorted(
        p for p in folder.iterdir() if p.is_file() and (weights or not p.name.endswith(".safetensors"))
    )
    blobs = {p.name: file_digest(p) for p in files}
    commit = hashlib.sha1("".join(f"{n}:{h}\n" for n, h in blobs.items()).encode()).hexdigest()
    root = repo_folder(repo, str(cache) if cache else None)
    snapshot = root / "snapshots" / commit
    (root / "blobs").mkdir(parents=True, exist_ok=True)
    snapshot.mkdir(parents=True, exist_ok=True)
    for file in files:
        blob = root / "blobs" / blobs[file.name]
        if not blob.exists():
            shutil.copyfile(file, blob)
        link = snapshot / file.name
        if not link.is_symlink():
            link.symlink_to(os.path.relpath(blob, snapshot))
    ref = root / "refs" / revision
    ref.parent.mkdir(parents=True, exist_ok=True)
    ref.write_text(commit)
    return snapshot
