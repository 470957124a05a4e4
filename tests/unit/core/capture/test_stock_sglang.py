"""``core.stock_sglang``: stock SGLang 0.5.23's reading of a draft config, per target architecture
(checked against SGLang's own code in ``tests/integration/patch/test_stock_sglang.py``)."""

import pytest

from sglang_eagle3_embed.core.capture.ids import IDS_FIELD
from sglang_eagle3_embed.core.capture.stock_sglang import stock_reading, target_ids
from sglang_eagle3_embed.core.errors import shown


def nested(ids, **fields):
    return {"eagle_config": {IDS_FIELD: ids, **fields}}


@pytest.mark.parametrize(
    ("config", "arch", "outcome"),
    [
        (nested([-1, 2, 4]), None, "fails at startup: RuntimeError: captured 2 of 3 aux hidden states"),
        (nested(["-1", 2, 4]), None, "fails at startup: RuntimeError: captured 2 of 3 aux hidden states"),
        (nested([1.0, 2.0, 4.0]), None, "serves [output of layer 1, output of layer 2, output of layer 4]"),
        (nested([1, "a", 3]), None, "fails at startup: TypeError in set_eagle3_layers_to_capture"),
        (
            nested([-1, 2, 4]),
            "LlamaForCausalLM",
            "serves [embedding output, output of layer 2, output of layer 4]",
        ),
        (nested([-1, 2, 6]), "LlamaForCausalLM", "fails at startup: the target captures 2 tensors"),
        (nested([-1, 2, 4]), "GptOssForCausalLM", "not modelled: GptOssForCausalLM"),
        (
            nested([-1, 2, 4]),
            "DeepseekV4ForCausalLM",
            "fails at startup: DeepseekV4ForCausalLM has no set_eagle3_layers_to_capture",
        ),
        ({IDS_FIELD: [-1, 2, 4]}, None, "serves [output of layer 1, output of layer 2, output of layer 3]"),
        (nested([-1, 2, 4], use_aux_hidden_state=False), None, "captures nothing"),
        (nested([]), None, "fails at startup: no listed index matches a layer"),
        ({"eagle_config": [1, 2]}, None, "fails at startup: the draft model cannot size its fc"),
    ],
)
def test_stock_reading(config, arch, outcome):
    assert stock_reading(config, 7, arch).outcome.startswith(outcome)


def test_a_single_capture_where_the_draft_reads_three_is_not_served():
    found = stock_reading(nested([5, 40, 50]), 7, "LlamaForCausalLM")
    assert not found.serves and "skips its fc" in found.outcome


def test_the_target_reads_only_the_nested_ids_and_falls_back_on_any_error():
    assert target_ids({IDS_FIELD: [1, 2]}) == (True, None)
    assert target_ids({"eagle_config": "x"}) == (True, None)
    assert target_ids(nested([3], use_aux_hidden_state=0)) == (False, [3])


def test_a_long_list_reads_in_time():
    found = stock_reading(nested(list(range(-5, 2_000_000))), 61)
    assert found.outcome == "fails at startup: RuntimeError: captured 61 of 2000005 aux hidden states"


def test_shown_cuts_long_values():
    assert shown([1, 2, 3]) == "[1, 2, 3]"
    assert shown(list(range(10_000))).endswith("... (10000 entries)]")
    assert len(shown("y" * 10_000)) < 140


def test_the_plugin_refusal_on_deepseek_v4_says_it_has_no_eagle3_capture():
    """DeepSeek-V4 has only a DSpark setter: the refusal must not send the user to its EAGLE-3 one."""
    from sglang_eagle3_embed.core.capture.stock_sglang import reading_of
    from sglang_eagle3_embed.core.errors import UnsupportedModeError

    message = str(
        UnsupportedModeError.not_deepseek("DeepseekV4ForCausalLM", reading_of("DeepseekV4ForCausalLM"))
    )
    assert "has no EAGLE-3 capture in SGLang" in message and "reads the ids its own way" not in message
