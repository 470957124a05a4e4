"""``core.stock_sglang`` against SGLang 0.5.23's own code: for any draft config value, the ids its
target reads (``_resolve_eagle_aux_hidden_state``), the capture indices its setters compute
(``DeepseekV2ForCausalLM``, ``Glm4MoeLiteForCausalLM``, ``LlamaForCausalLM``, ``Qwen2ForCausalLM``)
and the layers its loop then captures (``i in layers_to_capture``) are what ``stock_reading`` says."""

import math
from types import SimpleNamespace
from unittest import mock

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from sglang_eagle3_embed.core.capture.ids import IDS_FIELD
from sglang_eagle3_embed.core.capture.stock_sglang import stock_reading, target_ids

pytestmark = pytest.mark.releases

SCALARS = st.one_of(
    st.integers(-3, 12),
    st.floats(allow_nan=True, allow_infinity=True, width=32),
    st.sampled_from([1.0, 2.0, -1.0, "1", "-1", "2", True, False, None]),
    st.text(max_size=3),
)
IDS = st.one_of(
    st.lists(st.one_of(SCALARS, st.lists(SCALARS, max_size=2)), max_size=4),
    SCALARS,
    st.dictionaries(st.sampled_from(["0", "a"]), st.integers(0, 3), max_size=2),
)
EAGLE_CONFIG = st.one_of(
    st.fixed_dictionaries(
        {IDS_FIELD: IDS},
        optional={"use_aux_hidden_state": st.sampled_from([True, False, None, 0, 1, "false", ""])},
    ),
    st.fixed_dictionaries({}, optional={"use_aux_hidden_state": st.booleans()}),
    st.none(),
    st.lists(st.integers(0, 5), max_size=3),
    st.text(max_size=4),
    st.integers(),
)


def _resolve(draft: dict):
    """SGLang's target-side reading of the draft config, its model-config loader stood in."""
    from sglang.srt.model_executor.model_runner_components import spec_aux_hidden_state as aux
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm
    from transformers import PretrainedConfig

    hf = PretrainedConfig(architectures=["LlamaForCausalLMEagle3"])
    for key, value in draft.items():
        setattr(hf, key, value)
    draft_model_config = SimpleNamespace(
        hf_config=hf, num_nextn_predict_layers=None, num_hidden_layers=1, num_attention_layers=1,
        is_hybrid_swa=False, is_deepseek_v4_arch=False,
    )  # fmt: skip
    spec = SimpleNamespace(
        speculative_draft_model_path="/draft", speculative_draft_model_revision=None,
        speculative_algorithm="EAGLE3",
    )  # fmt: skip
    config = aux.SpecAuxHiddenStateConfig()
    with (
        mock.patch.object(aux, "get_spec", return_value=spec),
        mock.patch.object(aux.ModelConfig, "from_server_args", return_value=draft_model_config),
    ):
        aux._resolve_eagle_aux_hidden_state(
            config=config, server_args=SimpleNamespace(), model_config=SimpleNamespace(),
            spec_algorithm=SpeculativeAlgorithm.EAGLE3, is_draft_worker=False,
        )  # fmt: skip
    return config


def _setter(cls, ids, num_layers):
    """``layers_to_capture`` from ``cls``'s own setter, on a stand-in model; or the exception."""
    fake = cls.__new__(cls)
    torch.nn.Module.__init__(fake)
    fake.pp_group = SimpleNamespace(is_last_rank=True)
    fake.config = SimpleNamespace(num_hidden_layers=num_layers)
    fake.model = SimpleNamespace(layers_to_capture=[])
    try:
        cls.set_eagle3_layers_to_capture(fake, ids)
    except Exception as exc:  # the server would stop here
        return exc
    return fake.model.layers_to_capture


def _same(a, b) -> bool:
    """Equal, NaN equal to NaN (the reader hands the config's own objects over)."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


@pytest.fixture(scope="module")
def classes(sglang_cpu):
    from sglang.srt.models.deepseek_v2 import DeepseekV2ForCausalLM
    from sglang.srt.models.glm4_moe_lite import Glm4MoeLiteForCausalLM
    from sglang.srt.models.llama import LlamaForCausalLM
    from sglang.srt.models.qwen2 import Qwen2ForCausalLM

    return {
        "DeepseekV3ForCausalLM": DeepseekV2ForCausalLM,
        "Glm4MoeLiteForCausalLM": Glm4MoeLiteForCausalLM,
        "LlamaForCausalLM": LlamaForCausalLM,
        "Qwen2ForCausalLM": Qwen2ForCausalLM,
    }


def test_the_target_reads_the_ids_as_sglang_does(sglang_cpu):
    @settings(max_examples=300, deadline=None, database=None, derandomize=True)
    @given(EAGLE_CONFIG, st.booleans())
    def check(eagle_config, top_level):
        draft = {"eagle_config": eagle_config}
        if top_level:
            draft[IDS_FIELD] = [-1, 2, 4]  # never read by the target in 0.5.23
        real = _resolve(draft)
        use_aux, ids = target_ids(draft)
        assert bool(real.eagle_use_aux_hidden_state) == use_aux
        assert _same(real.eagle_aux_hidden_state_layer_ids, ids)

    check()


def test_the_served_layers_are_what_sglang_captures(classes):
    @settings(max_examples=400, deadline=None, database=None, derandomize=True)
    @given(IDS, st.integers(3, 12), st.sampled_from(sorted(classes)))
    def check(ids, num_layers, arch):
        draft = {"eagle_config": {IDS_FIELD: ids}, "num_aux_hidden_states": None}
        width = len(ids) if isinstance(ids, list) and ids else 3
        found = stock_reading({"eagle_config": {IDS_FIELD: ids}}, num_layers, arch, width=width)
        layers = _setter(classes[arch], ids, num_layers)
        if isinstance(layers, Exception):
            assert found.outcome.startswith(f"fails at startup: {type(layers).__name__}"), found
            return
        captured = [i for i in range(num_layers) if i in layers]  # the layer loop's test
        if arch == "LlamaForCausalLM" or arch == "Qwen2ForCausalLM":
            serves = bool(captured) and len(captured) == width
        else:  # the packer refuses a shortfall; the fc then reads what was packed
            serves = bool(captured) and len(captured) == len(layers) == width
        assert found.serves == serves, (draft, layers, captured, found)
        if serves:
            assert list(found.indices) == captured

    check()
