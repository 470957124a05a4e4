"""core.deployment.text_config: the one place that finds a target's text config (Kimi-K2.5 nests
its DeepSeek config in ``text_config``), used by the startup rules and by ``probe``."""

from sglang_eagle3_embed.core.readers.deployment import Deployment, text_config


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


def test_a_positive_int_is_a_json_integer_above_zero():
    from sglang_eagle3_embed.core.errors import positive_int

    assert [positive_int(v) for v in (1, 10**20, 0, -1, True, 1.0, "1", None)] == [
        True, True, False, False, False, False, False, False,
    ]  # fmt: skip


def test_malformed_target_architectures_are_told_apart():
    def archs(value):
        return Deployment(raw={}, target={"architectures": value}).target_archs_malformed

    assert not archs(["DeepseekV3ForCausalLM"]) and not archs(["LlamaForCausalLM"])
    assert archs("DeepseekV3ForCausalLM") and archs(None) and archs([]) and archs([5])


def test_no_capture_says_why_the_target_was_not_read():
    d = Deployment(raw={}, draft={}, target_error="/t/config.json: is not UTF-8 text")
    assert d.no_capture == "the target's config.json was not read (/t/config.json: is not UTF-8 text)"
