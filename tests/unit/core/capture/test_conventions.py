"""core.conventions: which trainer numbers ids how, and the advice for ids that do not say. Pure."""

from sglang_eagle3_embed.core.capture.conventions import default_of, missing_advice, undeclared_advice

L = 61  # Kimi-K2.5's and DeepSeek-V3's text layers


def test_a_trainers_default_is_known_where_that_trainer_writes_it():
    assert default_of([1, 29, 57], "eagle_config", L).name == "SpecForge and TorchSpec"
    assert default_of([2, 30, 58], "top level", L).name == "speculators and vLLM"
    assert default_of([2, 30, 58], "eagle_config", L) is None  # speculators' list where SpecForge writes
    assert default_of([1, 29, 57], "eagle_config", 47) is None  # another depth
    assert default_of(None, "SGLang default", L) is None


def test_undeclared_advice_names_both_numberings_what_to_declare_and_probe():
    text = undeclared_advice([2, 30, 58], L, "the reader", [2, 30, 58])
    assert "the reader reads them as [output of layer 1, output of layer 29, output of layer 57]" in text
    assert (
        "(SpecForge, TorchSpec) they name [output of layer 2, output of layer 30, output of layer 58]" in text
    )
    assert "(vLLM, speculators) [output of layer 1, output of layer 29, output of layer 57]" in text
    assert '"layer_output"' in text and '"hidden_states"' in text and "sglang-eagle3-embed probe" in text


def test_missing_advice_suggests_ids_that_keep_a_working_launch_working():
    text = missing_advice(L, [2, 30, 58])
    assert "[1, 29, 57]" in text and "-1" not in text and "sglang-eagle3-embed probe" in text
