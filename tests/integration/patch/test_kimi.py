"""Kimi-K2.5: the plugin's wrapper class installs the capture on its DeepSeek text model."""

import copy

import pytest
import torch

from sglang_eagle3_embed.core.capture.ids import IDS_FIELD
from sglang_eagle3_embed.patch import deepseek_capture as capture
from sglang_eagle3_embed.patch import deepseek_models as models

pytestmark = pytest.mark.releases


def tiny_kimi(harness, spec):
    from sglang.srt.configs.kimi_k25 import KimiK25Config

    text = harness.hf_config(spec)
    vision = dict(
        patch_size=2, init_pos_emb_height=4, init_pos_emb_width=4, init_pos_emb_time=1,
        vt_hidden_size=16, vt_num_attention_heads=2, vt_num_hidden_layers=1, vt_intermediate_size=32,
        mm_hidden_size=16, text_hidden_size=spec.hidden,
    )  # fmt: skip
    config = KimiK25Config(
        text_config=copy.deepcopy(text), vision_config=vision, encoder_only=False, language_only=True
    )
    return text, config


def test_text_only_kimi_k25_delegates_to_the_plugin_capture(tmp_path, sglang_cpu):
    harness = sglang_cpu
    text, config = tiny_kimi(harness, harness.TinySpec(num_layers=4))
    hf = harness.hf_model(text)
    kimi = harness.build(models.KimiK25ForConditionalGeneration, config)
    assert isinstance(kimi.language_model.model, capture.Eagle3EmbedDeepseekV2Model)
    kimi.language_model.load_weights(list(hf.state_dict().items()))

    draft = harness.write_draft(tmp_path, {"eagle_config": {IDS_FIELD: [2, -1, 0]}})
    with harness.published_eagle3_launch(draft):
        kimi.set_eagle3_layers_to_capture([2, -1, 0])
    assert kimi.language_model.model.layers_to_capture == [0, 1, 3]

    rt = harness.CpuRuntime(text)
    fb = rt.extend([1, 2], [[1, 2, 3, 4], [7, 8]])
    with torch.no_grad():
        out = kimi(fb.input_ids, fb.positions, fb)  # through Kimi's multimodal embed routine
    refs = [harness.hf_hidden_states(hf, p) for p in ([1, 2, 3, 4], [7, 8])]
    want = torch.cat([torch.cat([r[3], r[0], r[1]], dim=-1) for r in refs])
    assert torch.allclose(out.hidden_states, want, atol=1e-4)


def test_stock_kimi_k25_misses_the_embedding(sglang_cpu):
    from sglang.srt.models.kimi_k25 import KimiK25ForConditionalGeneration

    harness = sglang_cpu
    text, config = tiny_kimi(harness, harness.TinySpec(num_layers=4))
    hf = harness.hf_model(text)
    kimi = harness.build(KimiK25ForConditionalGeneration, config)
    kimi.language_model.load_weights(list(hf.state_dict().items()))
    kimi.set_eagle3_layers_to_capture([-1, 1, 2])
    rt = harness.CpuRuntime(text)
    fb = rt.extend([1], [[1, 2, 3, 4]])
    try:
        with torch.no_grad():
            kimi(fb.input_ids, fb.positions, fb)
    except RuntimeError as err:
        assert "captured 2 of 3 aux hidden states" in str(err)
    else:
        raise AssertionError("stock Kimi-K2.5 served [-1, 1, 2] without the embedding error")
