"""Every command takes models by hub id, as ``sglang.launch_server`` does, from a temporary offline
Hugging Face cache: the same answers as on the local folders; a repo or revision that is not cached
is bad input (exit 2) naming the repo, the revision and the fix; a snapshot without weights leaves
the rules that read weights "not checked", never ``ok``."""

import json

import pytest

from sglang_eagle3_embed.doctor.hub_cache import publish
from tests.support import cli, in_process

RELEASES = pytest.mark.releases  # check runs SGLang's own parsing and resolution

SPEC = (
    "--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
    "--speculative-num-draft-tokens", "4", "--model-impl", "sglang_eagle3_embed",
)  # fmt: skip


@pytest.fixture
def hub_cache(monkeypatch, tmp_path, tiny_pair):
    """``tiny/target`` (main), ``tiny/draft`` (main and v1) and ``tiny/configs-only`` (the target
    without its weights) in an offline cache named by HF_HOME, as a user's machine would have it."""
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv("HUGGINGFACE_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    publish(tiny_pair.target, "tiny/target")
    publish(tiny_pair.draft, "tiny/draft")
    publish(tiny_pair.draft, "tiny/draft", "v1")
    publish(tiny_pair.target, "tiny/configs-only", weights=False)
    return tmp_path / "hf" / "hub"


def check(*args):
    return cli("check", "--json", *SPEC, *args)


def run(*args) -> tuple[int, str, str]:
    """``ids`` and ``probe`` in this process (``check`` in its own: SGLang's parser is process-global)."""
    return in_process(*args) if args[0] != "check" else _completed(cli(*args))


def _completed(done) -> tuple[int, str, str]:
    return done.returncode, done.stdout, done.stderr


@RELEASES
def test_ids_and_check_answer_on_hub_ids_as_on_the_folders(hub_cache, tiny_pair):
    local = run("ids", tiny_pair.draft, "--target", tiny_pair.target, "--json")
    remote = run(
        "ids", "tiny/draft", "--target", "tiny/target", "--speculative-draft-model-revision", "v1", "--json"
    )
    assert remote[0] == local[0] == 0 and json.loads(remote[1]) == json.loads(local[1])
    done = check("--model-path", "tiny/target", "--speculative-draft-model-path", "tiny/draft")
    report = json.loads(done.stdout)
    assert done.returncode == 0 and report["findings"] == [], report
    for rule_id in ("target-layer-count", "draft-fc-width", "draft-layer-count"):
        assert report["rules"][rule_id] == "ok", rule_id  # the weights of the snapshots were read


def test_probe_runs_on_hub_ids(hub_cache, tiny_pair):
    local, remote = (
        run("probe", "--target", target, "--draft", draft, "--num-prompts", 8, "--json", "--no-progress")
        for target, draft in ((tiny_pair.target, tiny_pair.draft), ("tiny/target", "tiny/draft"))
    )
    assert remote[0] == local[0] == 0, remote[2][-2000:]
    assert json.loads(remote[1])["wirings"] == json.loads(local[1])["wirings"]


@pytest.mark.parametrize(
    "command",
    [
        ("ids", "tiny/draft", "--target", "tiny/absent"),
        ("probe", "--target", "tiny/absent", "--draft", "tiny/draft"),
        pytest.param(
            ("check", *SPEC, "--model-path", "tiny/absent", "--speculative-draft-model-path", "tiny/draft"),
            marks=RELEASES,
        ),
    ],
    ids=["ids", "probe", "check"],
)
def test_a_repo_that_is_not_cached_is_bad_input_naming_repo_revision_and_fix(hub_cache, command):
    code, out, err = run(*command)
    assert code == 2, out + err
    for words in ("tiny/absent (revision main)", "not in the local Hugging Face cache", str(hub_cache),
                  "hf download tiny/absent", "HF_HUB_OFFLINE is set"):  # fmt: skip
        assert words in err, (words, err)


@pytest.mark.parametrize(
    "command",
    [
        ("ids", "tiny/draft", "--speculative-draft-model-revision", "v7", "--num-layers", "7"),
        ("probe", "--target", "tiny/target", "--draft", "tiny/draft", "--speculative-draft-model-revision", "v7"),
        pytest.param(
            ("check", *SPEC, "--model-path", "tiny/target", "--speculative-draft-model-path", "tiny/draft",
             "--speculative-draft-model-revision", "v7"),
            marks=RELEASES,
        ),
    ],
    ids=["ids", "probe", "check"],
)  # fmt: skip
def test_a_revision_that_is_not_cached_is_bad_input_listing_the_cached_ones(hub_cache, command):
    code, out, err = run(*command)
    assert code == 2, out + err
    assert "tiny/draft (revision v7)" in err and "branches main, v1" in err, err


@RELEASES
def test_a_snapshot_without_weights_leaves_the_weight_rules_not_checked(hub_cache, tiny_pair):
    done = check("--model-path", "tiny/configs-only", "--speculative-draft-model-path", "tiny/draft")
    report = json.loads(done.stdout)
    assert done.returncode == 0 and report["rules"]["target-layer-count"] == "not checked", report
    (finding,) = [f for f in report["findings"] if f["rule"] == "target-layer-count"]
    assert (
        "models--tiny--configs-only/snapshots/" in finding["message"]
        and "no *.safetensors" in finding["message"]
    )
    code, _, err = run("probe", "--target", "tiny/configs-only", "--draft", "tiny/draft", "--no-progress")
    assert code == 2 and "has no *.safetensors weights" in err, err


@RELEASES
def test_pair_puts_a_quantized_pair_into_the_cache_under_hub_ids(hub_cache, tiny_pair):
    code, out, err = run(
        "pair", "--cache", tiny_pair.target.parent, "--quantization", "fp8", "--hub-repo", "tiny/fp8"
    )
    assert code == 0, err[-2000:]
    made = json.loads(out)
    assert made["target_repo"] == "tiny/fp8" and made["draft_repo"] == "tiny/fp8-eagle3"
    done = check("--model-path", "tiny/fp8", "--speculative-draft-model-path", "tiny/fp8-eagle3")
    assert done.returncode == 0 and json.loads(done.stdout)["rules"]["target-layer-count"] == "ok", (
        done.stdout
    )
