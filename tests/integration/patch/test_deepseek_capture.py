"""The plugin's capture on the real SGLang 0.5.23 DeepSeek forward, against HF transformers.

For random tiny DeepseekV2/V3 configs, random id lists containing -1 (any order, nested or top
level) and random prefill / decode / extend batches, the aux hidden states the plugin hands the
draft equal HF ``output_hidden_states`` at the mapped indices, in the configured order (fp32).
The same inputs through stock SGLang do what ``stock_sglang.stock_reading`` predicts: a startup
error, or other tensors or another order, unless its reading happens to coincide.
"""

import pytest
import torch
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from sglang_eagle3_embed.core.capture.ids import IDS_FIELD
from sglang_eagle3_embed.core.capture.stock_sglang import stock_reading
from sglang_eagle3_embed.patch import deepseek_capture as capture
from sglang_eagle3_embed.patch import deepseek_models as models
from tests.support.strategies import draft_config, embed_ids

pytestmark = pytest.mark.releases

ATOL = 1e-4


@st.composite
def tiny_specs(draw, harness):
    kind = draw(st.sampled_from(["v2", "v3"]))
    layers = draw(st.integers(2, 8))
    experts = draw(st.sampled_from([2, 4]))
    heads = draw(st.sampled_from([2, 4]))
    return harness.TinySpec(
        kind=kind,
        num_layers=layers,
        hidden=draw(st.sampled_from([32, 64])),
        heads=heads,
        kv_lora_rank=draw(st.sampled_from([8, 16])),
        qk_rope=draw(st.sampled_from([4, 8])),
        qk_nope=draw(st.sampled_from([8, 16])),
        v_head=draw(st.sampled_from([8, 16])),
        experts=experts,
        experts_per_tok=draw(st.integers(1, 2)),
        first_k_dense=draw(st.integers(0, layers)),
        q_lora_rank=draw(st.sampled_from([None, 16])),
        yarn=draw(st.booleans()),
        n_group=2 if kind == "v3" and experts == 4 and draw(st.booleans()) else 1,
    )


@st.composite
def batches(draw, vocab=128):
    n = draw(st.integers(1, 3))
    token = st.integers(0, vocab - 1)
    prompts = [draw(st.lists(token, min_size=1, max_size=7)) for _ in range(n)]
    decoded = [draw(token) for _ in range(n)]
    extends = [draw(st.lists(token, min_size=1, max_size=3)) for _ in range(n)]
    return prompts, decoded, extends


def expected_aux(hf_states, ids):
    return torch.cat([hf_states[i + 1] for i in ids], dim=-1)


def same(a, b):
    return a.shape == b.shape and torch.allclose(a, b, atol=ATOL)


def stock_ids(config):
    """What SGLang 0.5.23's target reads: the nested list only (spec_aux_hidden_state.py:185-196)."""
    return (config.get("eagle_config") or {}).get(IDS_FIELD)


@pytest.fixture(scope="module")
def harness(sglang_cpu):
    return sglang_cpu


def test_property_plugin_matches_hf_and_stock_does_not(harness):
    from sglang.srt.models import deepseek_v2 as stock

    @settings(
        max_examples=int(__import__("os").environ.get("EAGLE3_EMBED_FORWARD_EXAMPLES", 200)),
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(data=st.data())
    def check(data):
        spec = data.draw(tiny_specs(harness), label="spec")
        ids = data.draw(embed_ids(spec.num_layers), label="ids")
        config = data.draw(
            draft_config(ids, data.draw(st.sampled_from([None, "layer_output"]))), label="draft"
        )
        prompts, decoded, extends = data.draw(batches(), label="batch")
        hf_cfg = harness.hf_config(spec)
        hf = harness.hf_model(hf_cfg, seed=data.draw(st.integers(0, 2**16), label="seed"))
        rows = list(range(1, len(prompts) + 1))
        plugin_cls = models.DeepseekV2ForCausalLM if spec.kind == "v2" else models.DeepseekV3ForCausalLM
        stock_cls = stock.DeepseekV2ForCausalLM if spec.kind == "v2" else stock.DeepseekV3ForCausalLM
        refs = [harness.hf_hidden_states(hf, [*p, d, *e]) for p, d, e in zip(prompts, decoded, extends)]
        wanted = [expected_aux(r, ids) for r in refs]

        model = harness.sglang_model(plugin_cls, hf_cfg, hf)
        capture.configure(model, stock_ids(config), draft_config=config)
        got = harness.run_batches(model, hf_cfg, prompts, decoded, extends, rows)
        for g, w in zip(got, wanted):
            assert g.shape == w.shape
            assert torch.allclose(g, w, atol=ATOL), (g - w).abs().max()

        # The full causal LM hands the same packed captures to the logits processor (FULL mode).
        rt = harness.CpuRuntime(hf_cfg)
        fb = rt.extend(rows, prompts)
        with torch.no_grad():
            out = model(fb.input_ids, fb.positions, fb)
        full = torch.cat([w[: len(p)] for w, p in zip(wanted, prompts)])
        assert torch.allclose(out.hidden_states, full, atol=ATOL)

        # Stock SGLang reads the same config its own way (nested ids only, first-id heuristic,
        # ascending packing): it does exactly what stock_sglang.stock_reading predicts, which is
        # a startup error or other tensors whenever the reading differs from the trained ids.
        reading = stock_reading(config, spec.num_layers)
        stock_indices = None if reading.indices is None else list(reading.indices)
        outcome = reading.outcome
        baseline = harness.sglang_model(stock_cls, hf_cfg, hf)
        baseline.set_eagle3_layers_to_capture(stock_ids(config))
        if "aux hidden states" in outcome or "no listed index matches" in outcome:
            with pytest.raises(RuntimeError, match="aux hidden states"):
                harness.run_batches(baseline, hf_cfg, prompts, decoded, extends, rows)
            event("stock SGLang: startup error in the capture")
            return
        if stock_indices is None:  # captured whole, but not what the draft's fc reads
            event("stock SGLang: startup error in the draft")
            return
        stock_got = harness.run_batches(baseline, hf_cfg, prompts, decoded, extends, rows)
        for s, r in zip(stock_got, refs):
            assert torch.allclose(s, torch.cat([r[i] for i in stock_indices], dim=-1), atol=ATOL)
        if stock_indices == [i + 1 for i in ids]:
            event("stock SGLang: same tensors by coincidence (e.g. defaults on a 3-layer target)")
        else:
            event("stock SGLang: other tensors or order")
            assert not all(same(s, w) for s, w in zip(stock_got, wanted))

    check()
