"""core.deployment.text_config: the one place that finds a target's text config (Kimi-K2.5 nests
its DeepSeek config in ``text_config``), used by the startup rules and by ``probe``."""

from sglang_eagle3_embed.core.deployment import Deployment, text_config


def test_a_nested_text_config_is_the_text_config():
    kimi = {"architectures": ["KimiK25ForConditionalGeneration"], "text_config": {"num_hidden_layers": 61}}
    assert text_config(kimi) == {"num_hidden_layers": 61}


def test_any_other_target_is_its_own_text_config():
    deepseek = {"num_hidden_layers": 61}
    assert text_config(deepseek) is deepseek
    broken = {"num_hidden_layers": 4, "text_config": "not an object"}
    assert text_config(broken) is broken


def test_the_deployment_reads_its_target_through_it():
    assert Deployment.target_text.fget(type("D", (), {"target": {"text_config": {"a": 1}}})()) == {"a": 1}
    assert Deployment.target_text.fget(type("D", (), {"target": None})()) == {}
