"""The Kimi-K2.5-shaped pair's first pieces (``benchmarks/kimi_pair.py``) on the CPU: a narrow model
embedded into the real structure computes what it computes (every hidden state, the logits), the
residual-stream norms' epsilon is what makes it exact, and the trained layers are placed so that
the seed's draft reads trained tensors where stock SGLang reads others."""

import copy
from dataclasses import asdict

import pytest
import torch

from benchmarks.kimi_pair import SEED_CONFIG_IDS, SEED_IDS, KimiPairSpec, narrow_model, place_trained, widen
from benchmarks.real_pair import capture_map
from sglang_eagle3_embed.core.capture.draft_config import resolve_capture_plan
from sglang_eagle3_embed.core.capture.ids import IDS_FIELD
from sglang_eagle3_embed.core.capture.stock_sglang import stock_reading
from sglang_eagle3_embed.doctor.kimi import REAL_TEXT

SPEC = KimiPairSpec.quick()


def trained_like(model):
    """Norm weights and routing biases away from their initial values, as training leaves them."""
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1 + 0.3 * torch.randn(p.shape, generator=generator))
        for name, b in model.named_buffers():
            if name.endswith("e_score_correction_bias"):
                b.copy_(0.1 * torch.randn(b.shape, generator=generator))
    return model.eval()


def run(model, tokens):
    with torch.no_grad():
        out = model(tokens, output_hidden_states=True)
    return out.logits, out.hidden_states


@pytest.fixture(scope="module")
def models():
    narrow = trained_like(narrow_model(SPEC, num_layers=3))
    return narrow, widen(narrow, SPEC)


def test_the_wide_model_has_the_real_structure(models):
    _, wide = models
    c = wide.config
    assert (c.hidden_size, c.num_attention_heads, c.q_lora_rank, c.kv_lora_rank) == (64, 8, 24, 16)
    assert (c.n_routed_experts, c.num_experts_per_tok, c.first_k_dense_replace) == (4, 4, 1)
    assert c.rms_norm_eps == REAL_TEXT["rms_norm_eps"]
    real = KimiPairSpec().wide_config()
    assert (real.hidden_size, real.num_hidden_layers, real.vocab_size) == (7168, 61, 163840)
    assert (real.n_routed_experts, real.num_experts_per_tok, real.intermediate_size) == (8, 8, 18432)
    assert KimiPairSpec().narrow_config(4).hidden_size == 448


def test_widening_computes_what_the_narrow_model_computes(models):
    narrow, wide = models
    tokens = torch.randint(0, SPEC.text["vocab_size"], (3, 16), generator=torch.Generator().manual_seed(2))
    (n_logits, n_states), (w_logits, w_states) = run(narrow, tokens), run(wide, tokens)
    h = narrow.config.hidden_size
    assert torch.allclose(w_logits, n_logits, rtol=0, atol=1e-5 * n_logits.abs().max().item())
    for n_state, w_state in zip(n_states, w_states, strict=True):
        assert torch.allclose(w_state[..., :h], n_state, rtol=0, atol=1e-5)
        assert not w_state[..., h:].any(), "the dimensions beyond the narrow width stay zero"


def test_the_norms_epsilon_is_what_makes_it_exact(models):
    """The same narrow weights trained with the config's epsilon: the wide model differs."""
    narrow, _ = models
    plain = trained_like(narrow_model(SPEC, num_layers=3))
    plain.load_state_dict(narrow.state_dict())
    for module in plain.modules():
        if hasattr(module, "variance_epsilon"):
            module.variance_epsilon = plain.config.rms_norm_eps
    tokens = torch.randint(0, SPEC.text["vocab_size"], (2, 8), generator=torch.Generator().manual_seed(3))
    gap = (run(widen(plain, SPEC), tokens)[0] - run(plain, tokens)[0]).abs().max().item()
    assert gap > 1e-4


def test_the_trained_layers_give_the_seeds_draft_its_tensors_and_stock_sglang_others():
    layers = REAL_TEXT["num_hidden_layers"]
    trained = place_trained(layers)
    assert trained[0] == 0 and {2, 30} <= set(trained)
    plan = resolve_capture_plan({"eagle_config": {IDS_FIELD: list(SEED_IDS)}}, layers).indices
    stock = stock_reading({"eagle_config": {IDS_FIELD: list(SEED_CONFIG_IDS)}}, layers).indices
    assert list(stock) == [2, 30, 58]
    held = capture_map(trained, layers)  # which trained layer's output each capture index holds
    assert [held[i] for i in plan] == [0, trained.index(2) + 1, trained.index(30) + 1]
    assert all(held[s] != held[p] for s, p in zip(stock, plan, strict=True))


def deep_model(narrow, trained_at, num_layers, plant=None):
    """The widened ``narrow`` model's layers at ``trained_at`` of ``num_layers``, the rest
    :func:`inserted_layer`s; ``plant`` (a layer index) gets one non-zero output projection entry."""
    from transformers import DeepseekV3ForCausalLM

    from benchmarks.kimi_pair import inserted_layer

    wide = widen(narrow, SPEC)
    config = wide.config
    config.num_hidden_layers = num_layers
    state = {}
    shallow = wide.state_dict()
    for name, tensor in shallow.items():
        if name.startswith("model.layers."):
            k, rest = name.removeprefix("model.layers.").split(".", 1)
            state[f"model.layers.{trained_at[int(k)]}.{rest}"] = tensor
        else:
            state[name] = tensor
    for i in range(num_layers):
        if i not in trained_at:
            state.update({k: v.float() for k, v in inserted_layer(i, config, dtype=torch.float32).items()})
    if plant is not None:
        state[f"model.layers.{plant}.self_attn.o_proj.weight"][0, 0] = 0.5
    deep = DeepseekV3ForCausalLM(config).float()
    deep.load_state_dict(state)
    return wide, deep.eval()


@pytest.mark.parametrize("plant", [None, 4])
def test_inserted_layers_add_nothing_and_a_planted_projection_shows(models, plant):
    narrow, _ = models
    trained_at, layers = (0, 2, 5), 8
    wide, deep = deep_model(narrow, trained_at, layers, plant)
    tokens = torch.randint(0, SPEC.text["vocab_size"], (2, 12), generator=torch.Generator().manual_seed(4))
    (w_logits, w_states), (d_logits, d_states) = run(wide, tokens), run(deep, tokens)
    held = capture_map(trained_at, layers)  # raw states the wide model has (its last one is normed)
    gaps = {i: (d_states[i] - w_states[held[i]]).abs().max().item() for i in range(layers) if held[i] < 3}
    gaps["logits"] = (d_logits - w_logits).abs().max().item()
    if plant is None:
        assert max(gaps.values()) == 0.0, gaps
    else:
        assert gaps[plant + 1] > 0 and gaps["logits"] > 0, gaps


def test_inserted_layers_are_the_same_bytes_on_every_build():
    from benchmarks.kimi_pair import inserted_layer

    config = SPEC.wide_config()
    first, again = inserted_layer(5, config, seed=7), inserted_layer(5, config, seed=7)
    assert first.keys() == again.keys() and all(torch.equal(first[k], again[k]) for k in first)
    other = inserted_layer(6, config, seed=7)
    assert not torch.equal(
        first["model.layers.5.self_attn.q_a_proj.weight"], other["model.layers.6.self_attn.q_a_proj.weight"]
    )


def test_routed_experts_are_written_as_kimi_k25_ships_them():
    from benchmarks.kimi_pair import checkpoint_tensors, inserted_layer
    from sglang_eagle3_embed.doctor.quantized import ROUTED_EXPERT, dequantized_weights

    config = SPEC.wide_config()
    layer = inserted_layer(1, config, dtype=torch.float32)
    written = checkpoint_tensors(layer)
    assert all(k.startswith("language_model.model.layers.1.") for k in written)
    experts = {k for k in written if ".mlp.experts." in k}
    assert len(experts) == config.n_routed_experts * 3 * 3  # gate, up, down: packed, scale, shape
    assert written["language_model.model.layers.1.mlp.experts.0.gate_proj.weight_packed"].dtype == torch.int32
    assert written["language_model.model.layers.1.mlp.gate.e_score_correction_bias"].dtype == torch.float32
    back = dequantized_weights(written)  # the reader the probe's hf backend uses for Kimi-K2.5's INT4
    gate_up = layer["model.layers.1.mlp.experts.gate_up_proj"]
    half = gate_up.shape[1] // 2
    for e in range(config.n_routed_experts):
        base = f"language_model.model.layers.1.mlp.experts.{e}"
        assert ROUTED_EXPERT.search(f"{base}.gate_proj.weight")
        for proj, weight in (("gate_proj", gate_up[e, :half]), ("up_proj", gate_up[e, half:])):
            error = (back[f"{base}.{proj}.weight"] - weight).abs().max().item()
            assert error <= weight.abs().max().item() / 7.5, (proj, error)
        assert not back[f"{base}.down_proj.weight"].any(), "an inserted layer's experts write nothing"


@pytest.mark.parametrize("make", [KimiPairSpec.quick, KimiPairSpec], ids=["quick", "real"])
def test_the_models_configs_leave_the_spec_as_it_was(make):
    # the spec is recorded in every built folder and compared with the next build's: a spec changed
    # by building the configs rebuilt the 110-second narrow model on every reuse
    spec, real_text = make(), copy.deepcopy(REAL_TEXT)
    spec.narrow_config(5)
    spec.wide_config()
    assert asdict(spec) == asdict(make())
    assert real_text == REAL_TEXT
