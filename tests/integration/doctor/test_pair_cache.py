"""The pair cache trusts only what it can verify: a manifest (file sizes and hashes) written last,
checked on every load; a damaged folder is rebuilt, or named for deletion where the cache cannot be
written; a complete pair in a read-only cache is used without a lock; what killed builds left
behind is cleaned. A spec trained for a few steps keeps each build to seconds."""

import json
import os
from pathlib import Path

import filelock
import pytest

from sglang_eagle3_embed.doctor import cache as cache_module
from sglang_eagle3_embed.doctor.cache import MANIFEST, CacheError
from sglang_eagle3_embed.doctor.pair import PairSpec, build_pair
from sglang_eagle3_embed.doctor.tiny_target import TargetSpec

SPEC = PairSpec(
    target=TargetSpec(num_layers=3, steps=2, batch=4), ids=(-1, 0, 1), draft_steps=2, draft_batch=4
)


@pytest.fixture
def cache(tmp_path):
    return tmp_path / "cache"


def test_both_folders_carry_a_manifest_of_every_file(cache):
    pair = build_pair(SPEC, cache)
    for folder in (pair.target, pair.draft):
        manifest = json.loads((folder / MANIFEST).read_text())
        files = {p.name for p in folder.iterdir() if p.name != MANIFEST}
        assert set(manifest) == files and all({"size", "sha256"} <= set(v) for v in manifest.values())


@pytest.mark.parametrize("damage", ["truncated draft weights", "empty target weights", "target lost config"])
def test_a_damaged_folder_is_rebuilt(cache, damage):
    pair = build_pair(SPEC, cache)
    if damage == "truncated draft weights":
        weights = pair.draft / "model.safetensors"
        weights.write_bytes(weights.read_bytes()[:-64])
    elif damage == "empty target weights":
        (pair.target / "model.safetensors").write_bytes(b"")
    else:
        (pair.target / "config.json").unlink()
    again = build_pair(SPEC, cache)
    assert again == pair
    for folder in (again.target, again.draft):
        assert json.loads((folder / MANIFEST).read_text())  # complete again
    from sglang_eagle3_embed.doctor.eagle3_draft import load_draft

    load_draft(again.draft)


def test_a_damaged_folder_in_a_read_only_cache_is_named_for_deletion(cache, monkeypatch):
    pair = build_pair(SPEC, cache)
    (pair.draft / "model.safetensors").write_bytes(b"")
    monkeypatch.setattr(cache_module, "writable", lambda folder: False)
    with pytest.raises(CacheError, match=f"delete {pair.draft}"):
        build_pair(SPEC, cache)


def test_a_complete_pair_is_used_without_taking_the_lock(cache, monkeypatch):
    pair = build_pair(SPEC, cache)

    def no_lock(*args, **kwargs):
        raise PermissionError("read-only cache: the lock file cannot be created")

    monkeypatch.setattr(filelock, "FileLock", no_lock)
    assert build_pair(SPEC, cache) == pair


def test_what_killed_builds_left_behind_is_cleaned(cache):
    cache.mkdir(parents=True)
    dead = 2**22 + 12345  # above the default pid_max of 4194304: no such process
    assert not os.path.exists(f"/proc/{dead}")
    stale = [cache / f"{SPEC.key}.tmp{dead}", cache / f"{SPEC.target.key}.tmp{dead}"]
    for folder in stale:
        folder.mkdir()
        (folder / "partial.bin").write_bytes(b"x")
    build_pair(SPEC, cache)
    assert not any(folder.exists() for folder in stale)


def test_the_pair_command_finds_the_cached_pair(tiny_pair, capsys):
    from sglang_eagle3_embed import cli as cli_module

    cache = str(tiny_pair.target.parent)
    assert cli_module.main(["pair", "--cache", cache]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out == {"ok": True, "target": str(tiny_pair.target), "draft": str(tiny_pair.draft)}
    assert cli_module.main(["pair", "--cache", cache, "--arch", "kimi-k25"]) == 0
    kimi = json.loads(capsys.readouterr().out)
    assert kimi["draft"] == str(tiny_pair.draft) and kimi["target"] != str(tiny_pair.target)
    assert json.loads((Path(kimi["target"]) / "config.json").read_text())["model_type"] == "kimi_k25"
