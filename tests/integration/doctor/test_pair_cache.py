"""The pair cache trusts only what it can verify: a manifest (file sizes and hashes) written last,
checked on every load; a damaged folder is rebuilt, or named for deletion where the cache cannot be
written; a complete pair in a read-only cache is used without a lock; what killed builds left
behind is cleaned. A spec trained for a few steps keeps each build to seconds."""

import contextlib
import errno
import io
import json
import os
import shutil
from pathlib import Path

import filelock
import pytest

from sglang_eagle3_embed.doctor import cache as cache_module
from sglang_eagle3_embed.doctor import tiny_target
from sglang_eagle3_embed.doctor.cache import MANIFEST, CacheError, manifest_digest, verify
from sglang_eagle3_embed.doctor.pair import TRAINED_ON, PairSpec, build_pair
from sglang_eagle3_embed.doctor.tiny_target import TargetSpec, build_target

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


# ------------------------------------------------------------------ a draft follows its target's build


def other_bytes(monkeypatch):
    """Targets trained from now on come out with other bytes, as another torch build or CPU gives."""
    import torch

    real = tiny_target.train_target

    def train_elsewhere(spec, device="cpu"):
        model = real(spec, device)
        with torch.no_grad():
            next(model.parameters()).add_(1e-3)
        return model

    monkeypatch.setattr(tiny_target, "train_target", train_elsewhere)


def count_draft_trainings(monkeypatch):
    from sglang_eagle3_embed.doctor import tiny_draft

    calls, real = [], tiny_draft.train_draft
    monkeypatch.setattr(tiny_draft, "train_draft", lambda *a, **k: calls.append(1) or real(*a, **k))
    return calls


def assert_draft_records_its_target(pair):
    record = json.loads((pair.draft / TRAINED_ON).read_text())
    assert record == {"folder": pair.target.name, "manifest_sha256": manifest_digest(pair.target)}
    assert (TRAINED_ON in json.loads((pair.draft / MANIFEST).read_text())) and verify(pair.draft) is None


def test_a_draft_follows_its_target_when_the_target_is_rebuilt_with_other_bytes(cache, monkeypatch):
    pair = build_pair(SPEC, cache)
    assert_draft_records_its_target(pair)
    before = manifest_digest(pair.target)
    (pair.target / "config.json").unlink()
    other_bytes(monkeypatch)
    trainings = count_draft_trainings(monkeypatch)
    again = build_pair(SPEC, cache)
    assert manifest_digest(again.target) != before  # the target was rebuilt, with other bytes
    assert trainings == [1]  # so the draft was trained again, on it
    assert_draft_records_its_target(again)
    assert build_pair(SPEC, cache) == again and trainings == [1]  # and then kept


def test_a_draft_that_records_no_target_is_rebuilt(cache, monkeypatch):
    """A draft built by an older version: complete, but nothing says which target it was trained on."""
    pair = build_pair(SPEC, cache)
    (pair.draft / TRAINED_ON).unlink()
    manifest = json.loads((pair.draft / MANIFEST).read_text())
    del manifest[TRAINED_ON]
    (pair.draft / MANIFEST).write_text(json.dumps(manifest))
    trainings = count_draft_trainings(monkeypatch)
    assert build_pair(SPEC, cache) == pair and trainings == [1]
    assert_draft_records_its_target(pair)


def test_a_stale_draft_in_a_read_only_cache_is_refused_naming_both_folders(cache, monkeypatch):
    pair = build_pair(SPEC, cache)
    shutil.rmtree(pair.target)
    other_bytes(monkeypatch)
    build_target(SPEC.target, cache)  # the target alone, rebuilt: the draft is now stale
    monkeypatch.setattr(cache_module, "writable", lambda folder: False)
    with pytest.raises(CacheError) as refused:
        build_pair(SPEC, cache)
    message = str(refused.value)
    assert f"the cached folder {pair.draft} cannot be used" in message
    assert f"trained on another build of {pair.target}" in message
    assert f"delete {pair.draft}" in message and "point --cache (or SGLANG_EAGLE3_EMBED_CACHE)" in message


def test_a_kimi_wrapper_follows_its_target_when_the_target_is_rebuilt(cache, monkeypatch):
    from sglang_eagle3_embed.doctor import kimi

    monkeypatch.setattr(kimi, "vision_weights", lambda config, seed=0: {})  # no SGLang: the cache only
    wrapped = kimi.build_kimi_pair(SPEC, cache)
    (cache / SPEC.target.key / "config.json").unlink()
    other_bytes(monkeypatch)
    again = kimi.build_kimi_pair(SPEC, cache)
    record = json.loads((again.target / kimi.BUILT_FROM).read_text())
    assert again.target == wrapped.target and verify(again.target) is None
    assert record == {"folder": SPEC.target.key, "manifest_sha256": manifest_digest(cache / SPEC.target.key)}


# ------------------------------------------------------------------ concurrent builders


ROUNDS, BUILDERS = 8, 4
DAMAGES = ["target lost config", "draft lost manifest", "truncated draft weights", "target lost manifest"]
_start = None


class _Untrained:
    """What training returns, in files that depend only on the spec: the test is about the cache."""

    def __init__(self, spec):
        self.spec = spec

    def save_pretrained(self, folder, **_):
        (Path(folder) / "config.json").write_text(json.dumps({"num_layers": self.spec.num_layers}))
        (Path(folder) / "model.safetensors").write_bytes(self.spec.key.encode() * 4096)


def _write_untrained_draft(spec, target_dir, device, tmp):
    (tmp / "config.json").write_text(json.dumps({"ids": list(spec.ids)}))
    (tmp / "model.safetensors").write_bytes(spec.key.encode() * 4096)


def _without_training(setattr_):
    from sglang_eagle3_embed.doctor import pair as pair_module

    setattr_(tiny_target, "train_target", lambda spec, device="cpu": _Untrained(spec))
    setattr_(pair_module, "_train_draft", _write_untrained_draft)


def _builder_init(start):
    """A builder process: no training, and every file read slowly, so that the builders' checks of
    the cache overlap as those of a real, larger pair do."""
    import time

    global _start
    _start = start
    _without_training(setattr)
    real = cache_module.file_digest
    cache_module.file_digest = lambda file: time.sleep(0.01) or real(file)


def _build_with_the_others(root):
    """Build the pair once every builder is ready, then read it: the folders, or the error."""
    _start.wait(timeout=120)
    try:
        pair = build_pair(SPEC, Path(root))
        for folder in (pair.target, pair.draft):
            json.loads((folder / "config.json").read_text())
        return str(pair.target), str(pair.draft)
    except Exception as exc:  # what the builder would have died of
        return f"{type(exc).__name__}: {exc}"


def damage(pair, how):
    if how == "target lost config":
        (pair.target / "config.json").unlink()
    elif how == "target lost manifest":
        (pair.target / MANIFEST).unlink()
    elif how == "draft lost manifest":
        (pair.draft / MANIFEST).unlink()
    else:
        weights = pair.draft / "model.safetensors"
        weights.write_bytes(weights.read_bytes()[:-64])


def test_concurrent_builders_on_a_damaged_cache_all_get_the_same_verified_pair(cache, monkeypatch):
    """Builders in separate processes start at once on a damaged cache, round after round: each
    gets the pair, none trips over another's repair, and the cache ends complete and consistent."""
    import multiprocessing

    _without_training(monkeypatch.setattr)
    pair = build_pair(SPEC, cache)
    # separate processes forked from a server that imported torch once (and used no threads)
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([__name__])
    start = context.Barrier(BUILDERS)
    failures = []
    with context.Pool(BUILDERS, initializer=_builder_init, initargs=(start,)) as pool:
        for round_ in range(ROUNDS):
            how = DAMAGES[round_ % len(DAMAGES)]
            damage(pair, how)
            results = pool.map(_build_with_the_others, [str(cache)] * BUILDERS)
            failures += [f"{how}: {r}" for r in results if r != (str(pair.target), str(pair.draft))]
    assert failures == [], "\n".join(failures)
    assert [verify(folder) for folder in (pair.target, pair.draft)] == [None, None]
    assert_draft_records_its_target(pair)
    leftovers = {p.name for p in cache.iterdir()} - {pair.target.name, pair.draft.name}
    assert {name for name in leftovers if not name.endswith(".lock")} == set()


# ------------------------------------------------------------------ the commands name a cache they cannot use


def cli_run(*args):
    from sglang_eagle3_embed import cli as cli_module

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli_module.main([str(a) for a in args])
    return code, out.getvalue() + err.getvalue()


CLI_PAIR = ["--layers", "3", "--ids", "-1", "0", "1"]
CLI_SPEC = PairSpec(target=TargetSpec(num_layers=3), ids=(-1, 0, 1))


@pytest.mark.parametrize("command", ["pair", "demo"])
@pytest.mark.parametrize(
    "case", ["a file", "under a file", "cannot be created", "read-only, absent", "read-only, damaged"]
)
def test_a_cache_that_cannot_be_used_exits_2_with_the_path_and_the_fix(tmp_path, monkeypatch, command, case):
    import torch

    from sglang_eagle3_embed.doctor import demo as demo_module
    from sglang_eagle3_embed.doctor import pair as pair_module

    root = tmp_path / "cache"
    spec = CLI_SPEC if command == "pair" else PairSpec()
    monkeypatch.setattr(pair_module, "shipped_pair", lambda spec: None)  # the demo needs the cache
    monkeypatch.setattr(demo_module, "_quiet_libraries", lambda: None)  # leaves this process's logging
    monkeypatch.setattr(torch, "set_num_threads", lambda n: None)  # and its threads as they are
    monkeypatch.setattr(tiny_target, "train_target", lambda *a: pytest.fail("trained in a bad cache"))
    if case == "a file":
        root.write_text("")
        expected = [f"--cache {root} is a file, not a folder: point --cache"]
    elif case == "under a file":
        (tmp_path / "file").write_text("")
        root = tmp_path / "file" / "cache"
        expected = [f"--cache {root} cannot be a folder: {tmp_path / 'file'} is a file: point --cache"]
    elif case == "cannot be created":
        real = Path.mkdir

        def refused(path, *args, **kwargs):
            if path == root:
                raise PermissionError(errno.EACCES, "Permission denied", str(path))
            return real(path, *args, **kwargs)

        monkeypatch.setattr(Path, "mkdir", refused)  # as a parent this user cannot write does
        expected = [f"the cache folder {root} cannot be created (Permission denied: {root})", "--cache"]
    else:
        monkeypatch.setattr(cache_module, "writable", lambda folder: False)
        target = root / spec.target.key
        if case == "read-only, absent":
            expected = [f"{target} must be built, and the cache {root} cannot be written", "--cache"]
        else:
            target.mkdir(parents=True)  # an interrupted build
            expected = [f"the cached folder {target} cannot be used", f"delete {target}", "--cache"]
    args = [command, *(CLI_PAIR if command == "pair" else []), "--cache", root]
    code, output = cli_run(*args)
    assert code == 2 and "Traceback" not in output, output
    for text in expected:
        assert text in output, output
