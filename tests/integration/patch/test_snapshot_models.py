"""The launch snapshot (``patch/launch_snapshot.snapshot``, which ``check`` and the launch hook
share) reads the models SGLang loads: a hub id from the local Hugging Face cache exactly where
huggingface_hub finds it, and each config as SGLang builds it, ``--json-model-override-args``
applied to the target's and to the draft's."""

import json

import pytest

from sglang_eagle3_embed.core.readers import hub
from sglang_eagle3_embed.core.readers.overrides import apply_overrides
from sglang_eagle3_embed.doctor.hub_cache import publish

RELEASES = pytest.mark.releases  # the tests that run SGLang's own code


@pytest.fixture
def offline_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return tmp_path / "hub"


@pytest.mark.parametrize(
    "repo, revision",
    [
        ("tiny/target", None),
        ("tiny/target", "v2"),
        ("tiny/target", "COMMIT"),
        ("tiny/target", "v9"),
        ("tiny/target", "0" * 40),
        ("tiny/absent", None),
    ],
)
def test_a_hub_id_resolves_where_huggingface_hub_finds_it(offline_cache, tiny_pair, repo, revision):
    from huggingface_hub import snapshot_download

    main = publish(tiny_pair.target, "tiny/target")
    publish(tiny_pair.draft, "tiny/target", "v2")
    revision = main.name if revision == "COMMIT" else revision
    try:  # the cache named: huggingface_hub reads the variables once, at import
        expected = snapshot_download(repo, revision=revision, local_files_only=True, cache_dir=offline_cache)
    except Exception:
        with pytest.raises(hub.HubError):
            hub.resolve(repo, revision)
        return
    assert str(hub.resolve(repo, revision)) == expected


@pytest.mark.parametrize(
    "variables",
    [{}, {"XDG_CACHE_HOME": "xdg"}, {"HF_HOME": "home", "XDG_CACHE_HOME": "xdg"},
     {"HUGGINGFACE_HUB_CACHE": "legacy", "HF_HOME": "home"}, {"HF_HUB_CACHE": "hub", "HUGGINGFACE_HUB_CACHE": "legacy"}],
)  # fmt: skip
def test_the_cache_folder_is_huggingface_hubs(tmp_path, monkeypatch, variables):
    import os
    import subprocess
    import sys

    names = ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME")
    env = {k: v for k, v in os.environ.items() if k not in names}
    env.update({k: str(tmp_path / v) for k, v in variables.items()}, HOME=str(tmp_path / "user"))
    code = "import huggingface_hub.constants as c; print(c.HF_HUB_CACHE)"
    theirs = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    for name in names:
        monkeypatch.delenv(name, raising=False)
    for name, value in {**variables, "HOME": "user"}.items():
        monkeypatch.setenv(name, str(tmp_path / value))
    assert str(hub.cache_dir()) == theirs.stdout.strip()


OVERRIDES = [
    {"num_hidden_layers": 3},
    {"max_position_embeddings": 512, "initializer_range": 0.01},
    {"eagle_config": {"use_aux_hidden_state": True}},
    {"rope_scaling": {"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 128}},
    {"text_config": {"num_hidden_layers": 3}},
]


@RELEASES
@pytest.mark.parametrize("overrides", OVERRIDES, ids=lambda o: ",".join(o))
@pytest.mark.parametrize("model", ["target", "draft", "kimi"])
def test_overrides_apply_as_sglang_applies_them(tiny_pair, tiny_kimi_pair, model, overrides):
    """SGLang's ``get_config`` with the override, compared field by field with
    :func:`~sglang_eagle3_embed.core.readers.overrides.apply_overrides` on the file's JSON."""
    from sglang.srt.utils.hf_transformers.config import get_config

    folder = {"target": tiny_pair.target, "draft": tiny_pair.draft, "kimi": tiny_kimi_pair.target}[model]
    raw = json.loads((folder / "config.json").read_text())
    ours = apply_overrides(raw, overrides)
    theirs = get_config(str(folder), trust_remote_code=False, model_override_args=dict(overrides))
    for key in overrides:
        value = getattr(theirs, key)
        value = value.to_dict() if hasattr(value, "to_dict") else value
        if isinstance(value, dict):  # the override's fields, and the file's that SGLang keeps
            kept = {k for k in raw.get(key) or {} if k in value} | set(overrides[key])
            assert {k: value.get(k) for k in kept} == {k: ours[key].get(k) for k in kept}, (key, value)
        else:
            assert value == ours[key], key


@RELEASES
def test_both_model_configs_of_a_launch_get_the_override(tiny_pair):
    """SGLang's ``ModelConfig`` for the target and for the draft (``is_draft_model``) of one launch."""
    from sglang.srt.configs.model_config import ModelConfig

    override = json.dumps({"num_hidden_layers": 5})
    target = ModelConfig(str(tiny_pair.target), model_override_args=override)
    draft = ModelConfig(str(tiny_pair.draft), model_override_args=override, is_draft_model=True)
    assert target.hf_config.num_hidden_layers == draft.hf_config.num_hidden_layers == 5


@RELEASES
def test_the_snapshot_reads_a_hub_launch_as_the_local_one(offline_cache, tiny_pair, monkeypatch):
    from sglang_eagle3_embed.doctor.check import parse_launch
    from sglang_eagle3_embed.patch.launch_snapshot import snapshot

    publish(tiny_pair.target, "tiny/target")
    publish(tiny_pair.draft, "tiny/draft", "v1")

    def read(target, draft, *extra):
        args = parse_launch([
            "--model-path", str(target), "--speculative-algorithm", "EAGLE3",
            "--speculative-draft-model-path", str(draft), "--device", "cpu", *extra,
        ])  # fmt: skip
        return snapshot(args, resolved=False, plugin_active=True)

    local = read(tiny_pair.target, tiny_pair.draft)
    remote = read("tiny/target", "tiny/draft", "--speculative-draft-model-revision", "v1")
    assert remote.target == local.target and remote.draft == local.draft
    assert remote.draft_fc_in_features == local.draft_fc_in_features == 3 * local.target_text["hidden_size"]
    assert remote.draft_layers == local.draft_layers == {0}
    assert remote.target_layers == local.target_layers and len(local.target_layers) == 7
    elsewhere = offline_cache.parent / "elsewhere"
    publish(tiny_pair.target, "tiny/moved", cache=elsewhere)
    monkeypatch.delenv("HF_HUB_CACHE")
    moved = read("tiny/moved", tiny_pair.draft, "--download-dir", str(elsewhere))
    assert moved.target == local.target and moved.target_layers == local.target_layers
    overridden = read(
        tiny_pair.target, tiny_pair.draft, "--json-model-override-args", '{"num_hidden_layers": 4}'
    )
    assert overridden.target_text["num_hidden_layers"] == overridden.draft["num_hidden_layers"] == 4


@RELEASES
def test_a_decrypted_config_file_is_read_in_place_of_config_json(tiny_pair, tmp_path):
    """``--decrypted-draft-config-file`` names the file SGLang's draft ModelConfig reads instead of
    config.json (srt/configs/model_config.py:950-954); the snapshot reads the same file."""
    import shutil

    from sglang.srt.configs.model_config import ModelConfig

    from sglang_eagle3_embed.doctor.check import parse_launch
    from sglang_eagle3_embed.patch.launch_snapshot import snapshot

    draft = tmp_path / "draft"
    shutil.copytree(tiny_pair.draft, draft)
    other = {**json.loads((draft / "config.json").read_text()), "num_hidden_layers": 2}
    (draft / "decrypted.json").write_text(json.dumps(other))
    sglang = ModelConfig(str(draft), is_draft_model=True, override_config_file="decrypted.json")
    args = parse_launch([
        "--model-path", str(tiny_pair.target), "--speculative-algorithm", "EAGLE3",
        "--speculative-draft-model-path", str(draft), "--decrypted-draft-config-file", "decrypted.json",
        "--device", "cpu",
    ])  # fmt: skip
    read = snapshot(args, resolved=False, plugin_active=True)
    assert sglang.hf_config.num_hidden_layers == read.draft["num_hidden_layers"] == 2
