"""``sglang-eagle3-embed ids`` and the command line's own contract, in process (pure core only)."""

import json

import pytest

from sglang_eagle3_embed.cli import main
from sglang_eagle3_embed.core.capture.ids import IDS_FIELD


def run(capsys, *args) -> tuple[int, str, str]:
    try:
        code = main(list(args))
    except SystemExit as exit_:
        code = exit_.code
    out = capsys.readouterr()
    return code, out.out, out.err


def write(tmp_path, name, config):
    path = tmp_path / name
    path.mkdir()
    (path / "config.json").write_text(json.dumps(config))
    return str(path)


def test_ids_explains_plugin_and_stock(tmp_path, capsys):
    draft = write(tmp_path, "draft", {"eagle_config": {IDS_FIELD: [-1, 2, 30]}})
    target = write(tmp_path, "target", {"num_hidden_layers": 61})
    code, out, err = run(capsys, "ids", draft, "--target", target)
    assert code == 0, err
    assert "captures [embedding output, output of layer 2, output of layer 30]" in out
    assert "fails at startup: RuntimeError: captured 2 of 3 aux hidden states" in out


def test_ids_json_and_kimi_text_config(tmp_path, capsys):
    draft = write(tmp_path, "draft", {IDS_FIELD: [30, -1, 2]})
    target = write(tmp_path, "kimi", {"text_config": {"num_hidden_layers": 61}})
    code, out, err = run(capsys, "ids", draft, "--target", target, "--json")
    assert code == 0, err
    result = json.loads(out)
    assert result["capture_indices"] == [31, 0, 3]
    assert result["source"] == "top level"
    assert result["stock_sglang"].startswith("serves [output of layer 1, output of layer 29")


def test_ids_bad_config_exits_1_with_the_fix(tmp_path, capsys):
    draft = write(tmp_path, "draft", {"eagle_config": {IDS_FIELD: [-1, 2, 2]}})
    code, out, _ = run(capsys, "ids", draft, "--num-layers", "61")
    assert code == 1
    assert "repeats [2]" in out


@pytest.mark.parametrize("args", [["ids"], ["ids", "x"], ["ids", "x", "--num-layers", "two"], ["nope"]])
def test_bad_invocation_exits_2(capsys, args):
    assert run(capsys, *args)[0] == 2


def test_unreadable_config_exits_2(tmp_path, capsys):
    code, _, err = run(capsys, "ids", str(tmp_path / "missing"), "--num-layers", "61")
    assert code == 2
    assert "no such file or folder" in err


def test_no_arguments_prints_help_and_does_nothing_else(capsys):
    code, out, _ = run(capsys)
    assert code == 0
    assert out.startswith("usage: sglang-eagle3-embed")
    assert all(command in out for command in ("ids", "check", "probe", "demo", "pair"))


@pytest.mark.parametrize(
    "ids", [["-1", 2, 4], [-1.0, 2.0, 4.0], [float("nan"), 2, 4], [[-1], 2, 4]], ids=repr
)
def test_ids_that_are_not_integers_are_what_stock_sglang_keeps_and_fails_on(tmp_path, capsys, ids):
    draft = write(tmp_path, "draft", {"eagle_config": {IDS_FIELD: ids}})
    code, out, _err = run(capsys, "ids", draft, "--num-layers", "7", "--json")
    result = json.loads(out)
    assert code == 1 and not result["ok"] and result["rule"] == "draft-ids-invalid"
    assert result["stock_sglang"] == "fails at startup: RuntimeError: captured 2 of 3 aux hidden states"
    assert result["stock_capture_indices"] is None


@pytest.mark.parametrize("arch", ["LlamaForCausalLM", "Qwen2ForCausalLM", "Glm4MoeForCausalLM"])
def test_ids_on_a_valid_stock_pair_of_another_family_exit_0_and_say_what_stock_serves(tmp_path, capsys, arch):
    """ids was given no --model-impl: it tells what stock SGLang serves and that the plugin is not
    for this target, and asks nothing of a flag it was not given."""
    draft = write(tmp_path, "draft", {"eagle_config": {IDS_FIELD: [-1, 2, 4]}})
    target = write(tmp_path, "target", {"architectures": [arch], "num_hidden_layers": 7})
    code, out, _err = run(capsys, "ids", draft, "--target", target)
    assert code == 0, out
    assert f"--model-impl sglang_eagle3_embed: not for {arch}" in out and "drop" not in out
    assert "stock SGLang          : serves [embedding output, output of layer 2, output of layer 4]" in out
    assert "captures [" not in out  # no plugin capture claimed for a target it does not serve


def test_ids_on_a_stock_pair_that_fails_exit_1(tmp_path, capsys):
    draft = write(tmp_path, "draft", {"eagle_config": {IDS_FIELD: [-1, 2, 4]}})
    target = write(tmp_path, "target", {"architectures": ["Glm4MoeLiteForCausalLM"], "num_hidden_layers": 7})
    code, out, _err = run(capsys, "ids", draft, "--target", target, "--json")
    result = json.loads(out)
    assert code == 1 and not result["ok"] and "captured 2 of 3" in result["stock_sglang"]


def test_ids_on_a_target_whose_reading_is_not_modelled_say_so(tmp_path, capsys):
    draft = write(tmp_path, "draft", {"eagle_config": {IDS_FIELD: [-1, 2, 4]}})
    target = write(tmp_path, "target", {"architectures": ["GptOssForCausalLM"], "num_hidden_layers": 7})
    code, out, _err = run(capsys, "ids", draft, "--target", target, "--json")
    result = json.loads(out)
    assert code == 0 and result["plugin"].startswith("not for GptOssForCausalLM")
    assert result["stock_sglang"].startswith("not modelled: GptOssForCausalLM")


def test_a_huge_ids_list_is_not_echoed_in_full(tmp_path, capsys):
    draft = write(tmp_path, "draft", {"eagle_config": {IDS_FIELD: ["x"] * 200_000}})
    code, out, _err = run(capsys, "ids", draft, "--num-layers", "7")
    assert code == 1 and "(200000 entries)" in out
    assert len(out) < 2000


@pytest.mark.parametrize(
    "archs, ids, says",
    [
        (False, [-1, 2, 4], "architectures = False"),
        (["Glm4MoeForCausalLM"], [], "eagle_aux_hidden_state_layer_ids"),
        (["GptOssForCausalLM"], [2, 2, 4], "eagle_aux_hidden_state_layer_ids"),
    ],
)
def test_ids_on_another_family_still_refuses_a_malformed_config(tmp_path, capsys, archs, ids, says):
    draft = write(tmp_path, "draft", {"eagle_config": {IDS_FIELD: ids}})
    target = write(tmp_path, "target", {"architectures": archs, "num_hidden_layers": 7})
    code, out, _err = run(capsys, "ids", draft, "--target", target, "--json")
    result = json.loads(out)
    assert code == 1 and not result["ok"] and says in result["error"], result


def test_ids_on_another_family_words_its_warnings_for_that_model(tmp_path, capsys):
    draft = write(tmp_path, "draft", {"eagle_config": {IDS_FIELD: [2, 4, 5]}})
    target = write(tmp_path, "target", {"architectures": ["Glm4MoeForCausalLM"], "num_hidden_layers": 7})
    code, out, _err = run(capsys, "ids", draft, "--target", target)
    assert code == 0 and "warning: " in out and "Glm4MoeForCausalLM (add-one)" in out, out
