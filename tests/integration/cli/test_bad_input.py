"""Bad input never gets a traceback or a confident wrong answer: ``probe``, ``check``, ``pair`` and
``canary`` on the inputs users get wrong (missing or damaged folders, swapped or mismatched models,
impossible flags), then every command driven with generated bad inputs (Hypothesis) under the
exit-code contract: 0 ok, 1 findings, 2 bad invocation or unreadable input, no traceback, JSON
with --json."""

import json
import shutil

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sglang_eagle3_embed.core.capture.ids import IDS_FIELD
from sglang_eagle3_embed.core.readers.deployment import text_config
from tests.support.cli_contract import assert_contract, run
from tests.support.damage import edit_config
from tests.support.strategies import JSON, messy_draft_config

QUICK = ["--num-prompts", "4", "--new-tokens", "4", "--num-steps", "2", "--no-progress"]


def copy_folder(src, dst, edit=None):
    """A copy of the model folder ``src``; ``edit`` changes its config in place."""
    shutil.copytree(src, dst, symlinks=False)
    if edit is not None:
        edit_config(dst, edit)
    return dst


# ------------------------------------------------------------------ probe: what it may conclude


def test_probe_names_no_wiring_when_the_config_describes_tensors_the_target_lacks(tiny_pair, tmp_path):
    """The draft was trained on [-1, 2, 4]; its config edited to [-1, 2, 9]: the plugin refuses, and
    no wiring the probe can score is the one the config describes."""
    draft = copy_folder(
        tiny_pair.draft,
        tmp_path / "draft",
        lambda config: config["eagle_config"].update({IDS_FIELD: [-1, 2, 9]}),
    )
    code, out, err = run("probe", "--target", tiny_pair.target, "--draft", draft, "--json", *QUICK)
    assert_contract(code, out, err, as_json=True)
    report = json.loads(out)
    assert code == 1  # the plugin refuses the config: a finding
    assert report["status"] == "undetermined" and report["trained_for"] is None
    assert not any(line.startswith("The draft was trained for") for line in report["verdict"])


# ------------------------------------------------------------------ probe: bad inputs, exit 2


def other_width_draft(folder):
    """An EAGLE-3 draft whose fc reads 3 x 32 features: built for a target of hidden 32."""
    from safetensors.torch import save_file

    from sglang_eagle3_embed.doctor.eagle3_draft import Eagle3Draft
    from sglang_eagle3_embed.doctor.tiny_draft import draft_config_dict

    config = draft_config_dict(hidden=64, vocab=128, heads=4, ids=[-1, 2, 4], target_hidden=32)
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    save_file(Eagle3Draft(config).checkpoint(), str(folder / "model.safetensors"))
    return folder


def broken(tiny_pair, tmp_path, what):
    """(target, draft, extra flags) for one bad input."""
    target, draft = tiny_pair.target, tiny_pair.draft
    if what == "missing target":
        return tmp_path / "nowhere", draft, []
    if what == "missing draft":
        return target, tmp_path / "nowhere", []
    if what == "draft without config":
        d = copy_folder(draft, tmp_path / "d")
        (d / "config.json").unlink()
        return target, d, []
    if what == "empty draft weights":
        d = copy_folder(draft, tmp_path / "d")
        (d / "model.safetensors").write_bytes(b"")
        return target, d, []
    if what == "truncated target weights":
        t = copy_folder(target, tmp_path / "t")
        data = (t / "model.safetensors").read_bytes()
        (t / "model.safetensors").write_bytes(data[: len(data) // 2])
        return t, draft, []
    if what in (
        "target config that disagrees with its weights",
        "Kimi config that disagrees with its weights",
    ):
        if what.startswith("Kimi"):
            from sglang_eagle3_embed.doctor.kimi import build_kimi_pair

            target = build_kimi_pair(tiny_pair.spec, tiny_pair.target.parent).target

        def widen(config):
            text_config(config)["moe_intermediate_size"] *= 2  # the experts' weights no longer fit

        return copy_folder(target, tmp_path / "t", widen), draft, []
    if what == "swapped target and draft":
        return draft, target, []
    if what == "draft for another target width":
        return target, other_width_draft(tmp_path / "d"), []
    if what == "draft for another vocabulary":
        return target, copy_folder(draft, tmp_path / "d", lambda config: config.update(vocab_size=256)), []
    if what in ("draft with an id more than its fc reads", "draft with an id fewer than its fc reads"):

        def ids(config):
            config["eagle_config"][IDS_FIELD] = [-1, 2, 4, 5] if "more" in what else [-1, 4]

        return target, copy_folder(draft, tmp_path / "d", ids), []
    if what == "target with 0 layers":
        return (
            copy_folder(target, tmp_path / "t", lambda config: config.update(num_hidden_layers=0)),
            draft,
            [],
        )
    if what == "empty prompts file":
        (tmp_path / "prompts.txt").write_text("\n\n")
        return target, draft, ["--prompts", tmp_path / "prompts.txt"]
    if what == "output into a missing folder":
        return target, draft, ["--output", tmp_path / "no" / "report.json"]
    flag, value = what.split("=")
    return target, draft, [flag, value]


BAD_PROBES = {
    "missing target": "nowhere",
    "missing draft": "nowhere",
    "draft without config": "config.json",
    "empty draft weights": "model.safetensors",
    "truncated target weights": "model.safetensors",
    "swapped target and draft": "swap",
    "target config that disagrees with its weights": "differs from what its config.json describes",
    "Kimi config that disagrees with its weights": "differs from what its config.json describes",
    "draft for another target width": "the draft's target_hidden_size is 32 but the target's hidden_size is 64",
    "draft for another vocabulary": "the draft's vocab_size is 256 but the target's is 128",
    "draft with an id more than its fc reads": "reads 192 features but the target would capture 4 x 64",
    "draft with an id fewer than its fc reads": "reads 192 features but the target would capture 2 x 64",
    "target with 0 layers": "num_hidden_layers (text_config.num_hidden_layers for Kimi-K2.5) is 0",
    "empty prompts file": "prompts.txt",
    "output into a missing folder": "report.json",
    "--num-prompts=0": "--num-prompts",
    "--num-steps=0": "--num-steps",
    "--new-tokens=0": "--new-tokens",
    "--prompt-len=1": "--prompt-len",
}


@pytest.mark.releases
@pytest.mark.parametrize("what", list(BAD_PROBES))
def test_probe_refuses_bad_input_with_exit_2_and_what_to_do(tiny_pair, tmp_path, what):
    target, draft, extra = broken(tiny_pair, tmp_path, what)
    code, out, err = run("probe", "--target", target, "--draft", draft, *QUICK, *extra)
    assert_contract(code, out, err)
    assert code == 2, (what, out[-1000:], err[-2000:])
    assert BAD_PROBES[what] in err, (what, err[-2000:])
    assert not (tmp_path / "no").exists()


# ------------------------------------------------------------------ check


def check_folders(tmp_path, scenario):
    from harness.rule_examples import materialize

    return materialize(scenario, tmp_path)


@pytest.mark.releases
@pytest.mark.parametrize(
    ("damage", "expected"),
    [
        ("empty", "model.safetensors"),
        ("truncated", "model.safetensors"),
        ("bad index", "model.safetensors.index.json"),
        ("missing shard", "model-00002-of-00002.safetensors"),
    ],
)
def test_check_reports_a_damaged_draft_checkpoint_as_a_finding(tmp_path, damage, expected):
    from harness.rule_examples import Scenario

    argv = check_folders(tmp_path, Scenario(fc_in_features=192))
    weights = tmp_path / "draft" / "model.safetensors"
    if damage == "empty":
        weights.write_bytes(b"")
    elif damage == "truncated":
        weights.write_bytes(weights.read_bytes()[:-100])
    elif damage == "bad index":
        (tmp_path / "draft" / "model.safetensors.index.json").write_text("{not json")
    else:
        index = {"weight_map": {"fc.weight": "model-00002-of-00002.safetensors"}}
        (tmp_path / "draft" / "model.safetensors.index.json").write_text(json.dumps(index))
    code, out, err = run("check", "--json", *argv)
    assert_contract(code, out, err, as_json=True)
    report = json.loads(out)
    assert code == 1 and report["rules"]["draft-weights-unreadable"] == "error"
    assert expected in json.dumps(report["findings"])


@pytest.mark.releases
def test_check_without_a_target_layer_count_reports_it_and_checks_nothing_it_cannot(tmp_path):
    from harness.rule_examples import DELETE, Scenario

    scenario = Scenario(
        target={"num_hidden_layers": DELETE}, draft={"eagle_config": {IDS_FIELD: [-1, 2, 99]}}
    )
    code, out, err = run("check", "--json", *check_folders(tmp_path, scenario))
    assert_contract(code, out, err, as_json=True)
    rules = json.loads(out)["rules"]
    assert code == 1 and rules["target-config"] == "error"
    assert rules["draft-ids-range"] == "not checked"


@pytest.mark.releases
def test_check_with_an_unknown_flag_prints_json_and_no_usage(tmp_path):
    from harness.rule_examples import Scenario

    argv = check_folders(tmp_path, Scenario())
    code, out, err = run("check", "--json", *argv, "--no-such-flag")
    assert code == 2
    report = json.loads(out)
    assert "--no-such-flag" in report["error"] and len(err.splitlines()) < 5


@pytest.mark.releases
def test_check_names_a_missing_local_draft_folder(tmp_path):
    """A model path that names nothing is bad input (exit 2), not a finding about the deployment."""
    from harness.rule_examples import Scenario

    argv = check_folders(tmp_path, Scenario())
    argv[argv.index(str(tmp_path / "draft"))] = str(tmp_path / "gone" / "draft")
    code, out, err = run("check", "--json", *argv)
    assert_contract(code, out, err, as_json=True)
    message = json.loads(out)["error"]
    assert code == 2 and "--speculative-draft-model-path" in message and "gone/draft" in message
    assert "no such file or folder" in message and "Repo id" not in message


# ------------------------------------------------------------------ generated bad inputs

SETTINGS = settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@SETTINGS
@given(draft=st.one_of(messy_draft_config(), JSON), target=JSON, json_flag=st.booleans())
def test_ids_keeps_the_contract_on_any_json(tmp_path_factory, draft, target, json_flag):
    root = tmp_path_factory.mktemp("ids")
    (root / "d").mkdir()
    (root / "t").mkdir()
    (root / "d" / "config.json").write_text(json.dumps(draft))
    (root / "t" / "config.json").write_text(json.dumps(target))
    args = ["ids", root / "d", "--target", root / "t", *(["--json"] if json_flag else [])]
    assert_contract(*run(*args), as_json=json_flag)


FLAGS = st.lists(
    st.sampled_from(
        [
            "--speculative-num-steps", "--speculative-eagle-topk", "--speculative-num-draft-tokens",
            "--tp-size", "--pp-size", "--page-size", "--model-impl", "--no-such-flag", "0", "-1", "16",
            "two", "EAGLE3", "sglang_eagle3_embed", "--enable-two-batch-overlap",
            "--json-model-override-args", "{", "--speculative-algorithm", "EAGLE",
        ]
    ),
    max_size=6,
)  # fmt: skip


def expectations_like():
    """Expectations files of the real format and version with every field present, each holding a
    plausible value or any JSON: the shape right, the values anything (the reader must name what is
    wrong, never trip over it)."""
    from sglang_eagle3_embed.core.canary.expectations import FORMAT, VERSION

    def either(plausible):
        return plausible | JSON

    wiring = st.fixed_dictionaries(
        {
            "names": either(st.lists(st.text(max_size=6), min_size=1, max_size=2)),
            "kinds": either(st.lists(st.sampled_from(["plugin", "defaults", "x"]), max_size=2)),
            "capture_indices": either(st.lists(st.integers(-2, 9), max_size=3)),
            "accept_length": either(st.floats(allow_nan=False, allow_infinity=False)),
            "se": either(st.floats(0, 2)),
        }
    )
    return st.fixed_dictionaries(
        {
            "format": st.just(FORMAT), "version": st.just(VERSION),
            "prompts": either(st.lists(st.lists(st.integers(-2, 200), max_size=4), max_size=3)),
            "sampling": either(st.fixed_dictionaries({"max_new_tokens": either(st.integers(-1, 40))})),
            "speculative": either(st.fixed_dictionaries({"speculative_num_steps": either(st.integers(-1, 5))})),
            "trained": either(st.text(max_size=6)), "wirings": either(st.lists(wiring, max_size=3)),
        }
    )  # fmt: skip


@SETTINGS
@given(expect=st.one_of(expectations_like(), JSON), json_flag=st.booleans())
def test_canary_keeps_the_contract_on_any_expectations_file(tmp_path_factory, expect, json_flag):
    """Whatever the file holds, ``canary`` exits 2 naming it (or, for a file it reads, the server it
    cannot reach), within its time limit, never with a traceback."""
    import socket

    root = tmp_path_factory.mktemp("canary")
    (root / "expect.json").write_text(json.dumps(expect))
    with socket.socket() as free:  # a port nothing listens on
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    args = ["canary", "--url", url, "--expect", root / "expect.json", "--timeout", "2"]
    code, out, err = run(*args, *(["--json"] if json_flag else []))
    assert_contract(code, out, err, as_json=json_flag)
    assert code == 2


@pytest.mark.releases
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(extra=FLAGS, draft=messy_draft_config(), json_flag=st.booleans())
def test_check_keeps_the_contract_on_any_flags_and_draft(tmp_path_factory, extra, draft, json_flag):
    from harness.rule_examples import Scenario, materialize

    root = tmp_path_factory.mktemp("check")
    argv = materialize(Scenario(draft={"__raw__": json.dumps(draft)}), root)
    args = ["check", *(["--json"] if json_flag else []), *argv, *extra]
    assert_contract(*run(*args), as_json=json_flag)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    cut=st.floats(0, 1, exclude_max=True),
    which=st.sampled_from(["target", "draft"]),
    prompts=st.one_of(
        st.none(), st.lists(st.text(max_size=12) | st.just("[1, 2]") | st.just("[]"), max_size=3)
    ),
    json_flag=st.booleans(),
)
def test_probe_keeps_the_contract_on_truncated_weights_and_odd_prompts(
    tiny_pair, tmp_path_factory, cut, which, prompts, json_flag
):
    root = tmp_path_factory.mktemp("probe")
    target = copy_folder(tiny_pair.target, root / "target")
    draft = copy_folder(tiny_pair.draft, root / "draft")
    weights = (target if which == "target" else draft) / "model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes(data[: int(cut * len(data))])
    extra = []
    if prompts is not None:
        (root / "prompts.txt").write_text("\n".join(prompts))
        extra = ["--prompts", root / "prompts.txt"]
    args = ["probe", "--target", target, "--draft", draft, *QUICK, *extra, *(["--json"] if json_flag else [])]
    code, out, err = run(*args)
    assert_contract(code, out, err, as_json=json_flag)
    assert code == 2  # every weight file here is damaged


@settings(max_examples=30, deadline=None)
@given(
    layers=st.integers(-2, 40), hidden=st.integers(-4, 130), heads=st.integers(-1, 9),
    vocab=st.integers(-2, 300), ids=st.lists(st.integers(-3, 45), max_size=4),
    convention=st.sampled_from(["layer_output", "hidden_states"]), json_flag=st.booleans(),
)  # fmt: skip
def test_pair_keeps_the_contract_and_builds_only_valid_specs(
    layers, hidden, heads, vocab, ids, convention, json_flag
):
    from unittest import mock

    from sglang_eagle3_embed.doctor import pair

    args = ["pair", "--layers", layers, "--hidden", hidden, "--heads", heads, "--vocab", vocab]
    args += [
        "--convention",
        convention,
        *(["--ids", *ids] if ids else []),
        *(["--json"] if json_flag else []),
    ]
    built = []
    with mock.patch.object(
        pair, "build_pair", lambda spec, *a: built.append(spec) or pair.Pair("t", "d", spec)
    ):
        code, out, err = run(*args)
    assert_contract(code, out, err, as_json=json_flag or code == 0)  # a built pair is always JSON
    assert (code == 0) == bool(built), (code, err)
