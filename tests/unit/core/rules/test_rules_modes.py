"""core.rules_modes: a target whose architectures cannot be read is named as such (not as a model
outside the DeepSeek family), and SGLang refusing the launch is reported with what can be known: the
target's unreadable config.json, or where a bare ``assert`` stands. Pure: Deployments from
dictionaries."""

import pytest

from sglang_eagle3_embed import MODEL_IMPL
from sglang_eagle3_embed.core.readers.deployment import Deployment
from sglang_eagle3_embed.core.rules.table import Stage, evaluate, refused

TARGET = {
    "architectures": ["DeepseekV3ForCausalLM"],
    "num_hidden_layers": 8,
    "hidden_size": 64,
    "vocab_size": 128,
}
RAW = {"speculative_algorithm": "EAGLE3", "speculative_draft_model_path": "DRAFT", "model_impl": MODEL_IMPL}


def messages(d: Deployment, rule_id: str, stage=Stage.POST) -> list[str]:
    return [f.message for f in evaluate(d, stage) if f.rule == rule_id]


@pytest.mark.parametrize("archs", ["DeepseekV3ForCausalLM", None, [], [5], {"a": 1}])
def test_malformed_architectures_are_named_with_the_fix(archs):
    target = {**TARGET, "architectures": archs}
    (message,) = messages(Deployment(raw=RAW, target=target), "target-not-deepseek")
    assert "architectures" in message and "use the target's original config.json" in message
    assert "drop --model-impl" not in message


def test_a_target_outside_the_family_keeps_its_message():
    target = {**TARGET, "architectures": ["LlamaForCausalLM"]}
    (message,) = messages(Deployment(raw=RAW, target=target), "target-not-deepseek")
    assert "resolves to LlamaForCausalLM" in message and "drop --model-impl" in message


def _raised(error: BaseException) -> BaseException:
    try:
        raise error
    except BaseException as caught:
        return caught


def test_sglang_refusing_an_unreadable_target_config_names_the_file():
    why = "/models/target: is a file, not a model folder"
    d = refused(Deployment(raw=RAW, target_error=why), _raised(OSError("Repo id must be in the form")))
    (message,) = messages(d, "sglang-resolution", Stage.RESOLUTION)
    assert why in message and "Repo id" not in message and "Fix: pass the target's model folder" in message


def test_a_bare_assert_is_reported_with_where_it_stands():
    (message,) = messages(
        refused(Deployment(raw=RAW), _raised(AssertionError())), "sglang-resolution", Stage.RESOLUTION
    )
    assert message.startswith("AssertionError with no message at ") and "test_rules_modes.py:" in message


def test_a_refusal_with_a_message_is_reported_verbatim():
    d = refused(
        Deployment(raw=RAW), _raised(ValueError("TRTLLM MLA backend is only supported on Blackwell GPUs"))
    )
    assert messages(d, "sglang-resolution", Stage.RESOLUTION) == [
        "ValueError: TRTLLM MLA backend is only supported on Blackwell GPUs"
    ]


@pytest.mark.parametrize(
    "arch, says",
    [
        ("LlamaForCausalLM", "adds 1 to every id, so -1 already means the embedding output there"),
        ("Glm4MoeLiteForCausalLM", "first-id heuristic, without the plugin: write capture indices"),
        ("GptOssForCausalLM", "reads the ids its own way"),
    ],
)
def test_the_target_outside_the_family_is_told_how_its_own_model_reads_ids(arch, says):
    (message,) = messages(
        Deployment(raw=RAW, target={**TARGET, "architectures": [arch]}), "target-not-deepseek"
    )
    assert says in message and "drop --model-impl" in message
