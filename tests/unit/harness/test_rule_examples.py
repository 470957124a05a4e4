"""The rule examples (``harness.rule_examples``): one firing and one close
non-firing launch per rule (a pair of command lines for a PD pair's rules), and the folders a
scenario describes. Run through SGLang's real
argument resolution in ``tests/integration/patch/test_speculative_validation.py``."""

import json

from harness.rule_examples import (
    BASE_DRAFT,
    DELETE,
    EXAMPLES,
    Scenario,
    launch,
    materialize,
    materialize_peer,
    pd,
)
from sglang_eagle3_embed.core.capture.ids import IDS_FIELD
from sglang_eagle3_embed.core.rules.table import Stage, every_rule


def test_every_rule_has_a_firing_example_and_a_different_one_that_does_not_fire():
    assert set(EXAMPLES) == set(every_rule())
    assert all(fires != passes for fires, passes in EXAMPLES.values())


def test_a_pair_rule_has_pairs_of_command_lines_and_a_launch_rule_one():
    for rule_id, r in every_rule().items():
        pair = r.stage is Stage.PAIR
        assert all((s.peer is not None) == pair for s in EXAMPLES[rule_id]), rule_id


def test_a_launch_leaves_out_what_is_not_given():
    assert launch(steps=(None, 1, None), draft=False, impl=None) == (
        "--model-path", "TARGET", "--speculative-algorithm", "EAGLE3", "--speculative-eagle-topk", "1",
    )  # fmt: skip
    assert launch("--tp-size", "2")[-2:] == ("--tp-size", "2") and "DRAFT" in launch()


def test_a_scenario_writes_its_folders_and_its_command_names_them(tmp_path):
    scenario = Scenario(draft={"eagle_config": DELETE, "vocab_size": 256}, target={"num_hidden_layers": 4})
    command = materialize(scenario, tmp_path)
    assert command[command.index("--model-path") + 1] == str(tmp_path / "target")
    assert command[command.index("--speculative-draft-model-path") + 1] == str(tmp_path / "draft")
    draft = json.loads((tmp_path / "draft" / "config.json").read_text())
    assert "eagle_config" not in draft and draft["vocab_size"] == 256
    assert json.loads((tmp_path / "target" / "config.json").read_text())["num_hidden_layers"] == 4
    assert BASE_DRAFT["eagle_config"] == {IDS_FIELD: [-1, 2, 4]}  # the base is not changed


def test_raw_config_text_and_damaged_weights_are_written_as_given_and_removed_after(tmp_path):
    materialize(Scenario(draft={"__raw__": "{not json"}, weights=b"\x08\x00"), tmp_path)
    assert (tmp_path / "draft" / "config.json").read_text() == "{not json"
    assert (tmp_path / "draft" / "model.safetensors").read_bytes() == b"\x08\x00"
    materialize(Scenario(), tmp_path)  # the same folder again: no stale weights
    assert not (tmp_path / "draft" / "model.safetensors").exists()


def test_a_peer_names_its_own_folders_changed_from_the_scenario(tmp_path):
    scenario = Scenario(
        pd("prefill"),
        draft={"vocab_size": 256},
        peer=pd("decode", "--model-path", "PEER_TARGET", "--speculative-draft-model-path", "PEER_DRAFT"),
        peer_target={"max_position_embeddings": 512},
    )
    materialize(scenario, tmp_path)
    peer = materialize_peer(scenario, tmp_path)
    assert peer[-3:] == [
        str(tmp_path / "peer-target"),
        "--speculative-draft-model-path",
        str(tmp_path / "peer-draft"),
    ]
    target = json.loads((tmp_path / "peer-target" / "config.json").read_text())
    assert target["max_position_embeddings"] == 512 and target["num_hidden_layers"] == 8
    assert json.loads((tmp_path / "peer-draft" / "config.json").read_text())["vocab_size"] == 256
    assert (tmp_path / "peer-target" / "model.safetensors").exists()
