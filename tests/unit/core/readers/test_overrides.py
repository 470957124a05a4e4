"""core.overrides: --json-model-override-args applied to a config as SGLang's get_config applies it
(compared with SGLang's own in ``tests/integration/patch/test_snapshot_models.py``). Pure."""

import pytest

from sglang_eagle3_embed.core.readers.overrides import (
    apply_overrides,
    overridden,
    override_error,
    parse_overrides,
)

KIMI = {
    "architectures": ["KimiK25ForConditionalGeneration"],
    "text_config": {"num_hidden_layers": 61, "hidden_size": 7168},
    "vision_config": {"hidden_size": 1152},
}
DRAFT = {
    "hidden_size": 64,
    "num_hidden_layers": 1,
    "eagle_config": {"eagle_aux_hidden_state_layer_ids": [-1, 2, 4], "use_aux_hidden_state": True},
    "rope_scaling": {"rope_type": "yarn", "factor": 4.0},
}


def test_keys_are_set_at_the_top_level():
    assert apply_overrides(DRAFT, {"num_hidden_layers": 2})["num_hidden_layers"] == 2
    assert apply_overrides(KIMI, {"num_hidden_layers": 2})["text_config"]["num_hidden_layers"] == 61


def test_a_sub_config_is_updated_not_replaced():
    text = apply_overrides(KIMI, {"text_config": {"num_hidden_layers": 8}})["text_config"]
    assert text == {"num_hidden_layers": 8, "hidden_size": 7168}


def test_rope_scaling_is_merged_and_any_other_object_replaced():
    merged = apply_overrides(
        DRAFT, {"rope_scaling": {"factor": 8.0}, "eagle_config": {"use_aux_hidden_state": False}}
    )
    assert merged["rope_scaling"] == {"rope_type": "yarn", "factor": 8.0}
    assert merged["eagle_config"] == {"use_aux_hidden_state": False}  # the ids are gone, as in SGLang


def test_the_file_on_disk_is_left_as_it_is():
    apply_overrides(KIMI, {"text_config": {"num_hidden_layers": 8}})
    assert KIMI["text_config"]["num_hidden_layers"] == 61


def test_parsing_takes_objects_only():
    assert parse_overrides('{"a": 1}') == {"a": 1}
    for text in ("", "{}", "[1]", "{", None, 3):
        assert parse_overrides(text) == {}


def test_overridden_looks_at_the_top_and_in_a_sub_config():
    overrides = {"num_hidden_layers": 2, "text_config": {"hidden_size": 8}}
    assert overridden(overrides, "num_hidden_layers")
    assert overridden(overrides, "hidden_size", "text_config")
    assert not overridden(overrides, "hidden_size")


@pytest.mark.parametrize(
    ("value", "why"),
    [("{", "is not JSON (Expecting property name"), ("[1]", "is a JSON list, not an object"),
     ("7", "is a JSON int, not an object"), ("[" * 100_000, "is not JSON")],
)  # fmt: skip
def test_a_value_that_is_not_a_json_object_is_worded_once(value, why):
    # the one wording `check` (LaunchArgumentsError) and `ids` (InputError) both raise
    error = override_error(value)
    assert error.startswith(f"--json-model-override-args {value[:200]!r} {why}")
    assert error.endswith(
        """Fix: pass a JSON object of config fields, e.g. '{"max_position_embeddings": 4096}'"""
    )
    assert parse_overrides(value) == {}


@pytest.mark.parametrize("value", ["", "  ", "{}", '{"num_hidden_layers": 2}', None, {"a": 1}])
def test_empty_values_and_objects_are_no_error(value):
    assert override_error(value) is None
