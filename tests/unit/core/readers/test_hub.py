"""core.hub: a model named by hub id is found in the local Hugging Face cache where SGLang finds it,
or refused with the repo, the revision and the fix. Pure: caches of config files in temporary
folders (``tests/integration/patch/test_snapshot_models.py`` compares with huggingface_hub)."""

import json
from pathlib import Path

import pytest

from sglang_eagle3_embed.core.readers import hub
from sglang_eagle3_embed.core.readers.hub import HubError, cache_dir, locate, resolve

COMMIT = "a" * 40
OTHER = "b" * 40


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME", "HF_HUB_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)


def cached(cache: Path, repo: str, refs: dict[str, str]) -> Path:
    """A repo in ``cache`` as huggingface_hub lays it out: refs naming snapshot folders."""
    root = cache / ("models--" + repo.replace("/", "--"))
    for ref, commit in refs.items():
        (root / "refs" / ref).parent.mkdir(parents=True, exist_ok=True)
        (root / "refs" / ref).write_text(commit)
        (root / "snapshots" / commit).mkdir(parents=True, exist_ok=True)
        (root / "snapshots" / commit / "config.json").write_text(json.dumps({"ref": ref}))
    return root


def test_the_cache_folder_follows_huggingface_hubs_variables(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir() == tmp_path / "home" / ".cache" / "huggingface" / "hub"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "huggingface" / "hub"
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    assert cache_dir() == tmp_path / "hf" / "hub"
    monkeypatch.setenv("HUGGINGFACE_HUB_CACHE", str(tmp_path / "legacy"))
    assert cache_dir() == tmp_path / "legacy"
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    assert cache_dir() == tmp_path / "hub"
    assert cache_dir(str(tmp_path / "download")) == tmp_path / "download"  # --download-dir wins


NO_USER = "~no-such-user-e3e"


def test_a_cache_under_a_user_of_no_such_name_is_refused_as_huggingface_hub_stops(monkeypatch):
    from huggingface_hub import snapshot_download

    with pytest.raises(RuntimeError, match="home directory"):  # what SGLang would meet
        snapshot_download("org/model", cache_dir=f"{NO_USER}/hf", local_files_only=True)
    with pytest.raises(
        HubError, match=f"--download-dir {NO_USER}/hf: {NO_USER} names no home directory.*full path"
    ):
        cache_dir(f"{NO_USER}/hf")
    monkeypatch.setenv("HF_HUB_CACHE", f"{NO_USER}/hub")
    with pytest.raises(
        HubError, match=f"HF_HOME or XDG_CACHE_HOME\\) {NO_USER}/hub: {NO_USER} names no home directory"
    ):
        resolve("org/model")


def test_a_cached_repo_resolves_by_branch_and_by_commit(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    root = cached(tmp_path, "org/model", {"main": COMMIT, "v2": OTHER})
    assert resolve("org/model") == root / "snapshots" / COMMIT
    assert resolve("org/model", "v2") == root / "snapshots" / OTHER
    assert resolve("org/model", OTHER) == root / "snapshots" / OTHER
    assert locate("org/model", "v2") == root / "snapshots" / OTHER
    plain = cached(tmp_path, "gpt2", {"main": COMMIT})  # a repo id without an organisation
    assert resolve("gpt2") == plain / "snapshots" / COMMIT


def test_a_local_path_is_taken_as_it_is(tmp_path):
    assert locate(str(tmp_path)) == tmp_path
    assert locate("./relative/folder") == Path("./relative/folder")


def test_a_repo_that_is_not_cached_names_repo_revision_cache_and_fix(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(HubError) as err:
        resolve("moonshotai/Kimi-K2.5", what="--model-path")
    text = str(err.value)
    assert "--model-path moonshotai/Kimi-K2.5 (revision main)" in text
    assert str(tmp_path) in text and "hf download moonshotai/Kimi-K2.5" in text
    assert "SGLang would fail to start too (HF_HUB_OFFLINE is set)" in text


def test_online_the_message_says_sglang_would_download(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    with pytest.raises(HubError, match="SGLang would try to download org/model when it starts"):
        resolve("org/model")


def test_a_revision_the_cache_lacks_lists_what_it_holds(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    cached(tmp_path, "org/model", {"main": COMMIT})
    for revision in ("v9", OTHER):
        with pytest.raises(HubError) as err:
            resolve("org/model", revision, what="--speculative-draft-model-path")
        text = str(err.value)
        assert f"not at revision {revision}" in text and "branches main" in text and COMMIT[:12] in text
        assert f"hf download org/model --revision {revision}" in text


def test_a_ref_to_a_missing_snapshot_is_not_cached(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    root = cached(tmp_path, "org/model", {"main": COMMIT})
    (root / "refs" / "main").write_text(OTHER)
    with pytest.raises(HubError, match="not at revision main"):
        resolve("org/model")


@pytest.mark.parametrize("bad", ["org/a/b", "a--b/c", "org/..x", "", "org/"])
def test_what_is_no_repo_id_is_said_so(tmp_path, bad):
    with pytest.raises(HubError, match="not a hub repo id"):
        resolve(bad, download_dir=str(tmp_path))


def test_offline_reads_huggingface_hubs_variables(monkeypatch):
    assert not hub.offline()
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    assert hub.offline()
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    assert not hub.offline()  # HF_HUB_OFFLINE is read first, as huggingface_hub reads it
