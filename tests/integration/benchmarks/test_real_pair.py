"""The realistic pair's CPU parts (``benchmarks/real_pair.py``): the ``--quick`` build end to end, the
zero-output layers' exact equivalence (and planted non-zero projections that break it), SGLang's
own forward of the deep target, and ids that stock SGLang's default reading does not read."""

import dataclasses
import json
import os
import subprocess
import sys

import pytest
import torch

from benchmarks import real_pair as rp
from sglang_eagle3_embed.core.capture.draft_config import resolve_capture_plan
from sglang_eagle3_embed.core.capture.ids import IDS_FIELD, stock_capture_indices
from sglang_eagle3_embed.core.capture.stock_sglang import stock_reading
from sglang_eagle3_embed.doctor import cache
from sglang_eagle3_embed.doctor.pair import TRAINED_ON
from sglang_eagle3_embed.doctor.tiny_draft import draft_config_dict
from sglang_eagle3_embed.doctor.tiny_target import Language
from tests.support import ROOT

QUICK = rp.RealPairSpec.quick()
FULL = rp.RealPairSpec()


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    """``python -m benchmarks.real_pair OUT --quick``: OUT and what it printed."""
    out = tmp_path_factory.mktemp("real_pair")
    run = subprocess.run(
        [sys.executable, "-m", "benchmarks.real_pair", str(out), "--quick"],
        capture_output=True, text=True, cwd=ROOT, check=False,
        env={**os.environ, "TORCHDYNAMO_DISABLE": "1"},
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    return out, run.stdout


@pytest.fixture(scope="module")
def shallow():
    """A shallow target of its own (a few steps: the equivalence needs no well-trained one)."""
    return rp.train_shallow(dataclasses.replace(QUICK, steps=5))


@pytest.fixture(scope="module")
def tokens():
    return Language(QUICK.target_spec()).sample(4, 24, torch.Generator().manual_seed(7))


def test_quick_builds_the_three_folders(quick, tokens):
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from sglang_eagle3_embed.doctor.eagle3_draft import load_draft

    out, stdout = quick
    shallow = AutoModelForCausalLM.from_pretrained(out / "shallow")
    deep = AutoModelForCausalLM.from_pretrained(out / "target")
    assert rp.compare(shallow, deep, QUICK.trained_at, tokens)["exact"]  # as saved, fp32
    assert shallow.config.num_hidden_layers == QUICK.trained_layers
    assert deep.config.num_hidden_layers == QUICK.num_layers
    assert deep.config.first_k_dense_replace == QUICK.first_k_dense  # the inserted layers are MoE
    for config in (shallow.config, deep.config):
        assert (config.vocab_size, config.num_experts_per_tok, config.n_shared_experts) == (128, 2, 1)
        assert (config.moe_intermediate_size, config.intermediate_size) == (32, 128)
    assert AutoTokenizer.from_pretrained(out / "target")("w5 w127").input_ids == [5, 127]

    ids = rp.pick_ids(QUICK.trained_at, QUICK.num_layers)
    draft_config = json.loads((out / "draft" / "config.json").read_text())
    assert draft_config["eagle_config"][IDS_FIELD] == list(ids) == [-1, 0, 5]
    # SGLang derives the draft's context length from it and refuses one shorter than the target's
    assert draft_config["max_position_embeddings"] == deep.config.max_position_embeddings
    assert AutoConfig.from_pretrained(out / "draft").architectures == ["LlamaForCausalLMEagle3"]
    draft, _ = load_draft(out / "draft")
    assert draft.fc.in_features == 3 * QUICK.hidden

    for name in ("shallow", "target", "draft"):
        assert cache.verify(out / name) is None
    assert cache.origin_problem(out / "draft", TRAINED_ON, out / "target") is None
    assert cache.origin_problem(out / "target", rp.DEEPENED_FROM, out / "shallow") is None
    assert stdout.count("(exactly equal)") == 2, stdout
    for step in ("shallow target:", "deep target:", "draft on [-1, 0, 5]"):
        assert any(line.startswith(step) and " s -> " in line for line in stdout.splitlines()), stdout
    assert "another tensor at every position" in stdout and "captured 2 of 3" in stdout
    timings = json.loads((out / rp.RECORD).read_text())["timings"]
    assert {"shallow: train", "target: deepen", "target: check", "draft: train"} <= timings.keys()


def test_deepened_logits_equal_the_shallow_ones_exactly(shallow, tokens):
    deep = rp.deepen(shallow, QUICK.num_layers, QUICK.inserted)
    result = rp.compare(shallow, deep, QUICK.trained_at, tokens)
    assert result["exact"], result
    layer = deep.model.layers[QUICK.inserted[0]]
    assert hasattr(layer.mlp, "experts") and layer.mlp.gate.weight.abs().sum() > 0  # random, routed
    assert layer.self_attn.q_proj.weight.abs().sum() > 0 and not layer.self_attn.o_proj.weight.any()


def test_a_layer_inserted_before_the_dense_one_is_dense(shallow, tokens):
    n = QUICK.trained_layers
    deep = rp.deepen(shallow, n + 2, [0, n + 1])
    assert deep.config.first_k_dense_replace == 2
    assert not hasattr(deep.model.layers[0].mlp, "experts") and hasattr(
        deep.model.layers[n + 1].mlp, "experts"
    )
    assert rp.compare(shallow, deep, (1, 2, 3), tokens)["exact"]


PLANTED = {
    "attention o_proj": lambda name: name.startswith("self_attn."),
    "routed experts": lambda name: ".experts." in f".{name}" and "shared" not in name,
    "shared experts": lambda name: "shared_experts" in name,
}


@pytest.mark.parametrize("planted", PLANTED)
def test_a_non_zero_output_projection_breaks_the_equivalence(shallow, tokens, planted):
    deep = rp.deepen(shallow, QUICK.num_layers, QUICK.inserted)
    layer = deep.model.layers[QUICK.inserted[0]]
    names = [
        n for n, _ in layer.named_parameters() if n.endswith(rp.OUTPUT_PROJECTIONS) and PLANTED[planted](n)
    ]
    assert len(names) == 1, names
    with torch.no_grad():
        layer.get_parameter(names[0]).normal_(0.0, 0.02)
    result = rp.compare(shallow, deep, QUICK.trained_at, tokens)
    assert result["logits"] > 0 and result["hidden"] > 0 and not result["exact"]


@pytest.mark.releases
def test_sglang_runs_the_deep_target_and_captures_the_drafts_tensors(quick, sglang_cpu, tokens):
    """SGLang's own DeepSeek forward on the deep folder: the plugin's captures of ``[-1, a, b]``
    are the HF target's tensors there, and stock SGLang's defaults capture other ones."""
    from sglang.srt.models import deepseek_v2 as stock
    from transformers import AutoModelForCausalLM

    from sglang_eagle3_embed.doctor.sglang_cpu import load_model, prefill_captures
    from sglang_eagle3_embed.patch import deepseek_capture as capture
    from sglang_eagle3_embed.patch import deepseek_models as models

    out = quick[0]
    config = json.loads((out / "draft" / "config.json").read_text())
    ids = config["eagle_config"][IDS_FIELD]
    with torch.no_grad():
        states = AutoModelForCausalLM.from_pretrained(out / "target")(tokens, output_hidden_states=True)
    states = states.hidden_states

    plugin, hf_config = load_model(models.DeepseekV3ForCausalLM, out / "target")
    capture.configure(plugin, ids, draft_config=config)
    got = prefill_captures(plugin, hf_config, tokens)
    want = torch.cat([states[i + 1] for i in ids], dim=-1)
    assert torch.allclose(got, want, atol=1e-4), (got - want).abs().max()

    default, _ = load_model(stock.DeepseekV3ForCausalLM, out / "target")
    default.set_eagle3_layers_to_capture(None)
    got = prefill_captures(default, hf_config, tokens).view(*tokens.shape, 3, -1)
    for k, i in enumerate(stock_capture_indices(None, QUICK.num_layers)):
        assert torch.allclose(got[:, :, k], states[i], atol=1e-4)
        assert (states[i] - states[ids[k] + 1]).abs().max() > 1e-3  # another tensor at every position


@pytest.mark.parametrize("spec", [QUICK, FULL], ids=["quick", "full"])
def test_the_ids_differ_from_stock_sglangs_default_reading(spec):
    L, trained_at = spec.num_layers, spec.trained_at
    ids = rp.pick_ids(trained_at, L)
    assert ids[0] == -1 and ids[1] < ids[2] <= L - 2 and set(ids[1:]) <= set(trained_at)
    config = draft_config_dict(spec.hidden, spec.vocab, spec.heads, list(ids), spec.hidden)
    plugin = resolve_capture_plan(config, L).indices
    assert list(plugin) == [i + 1 for i in ids]
    stock = rp.stock_default(L, ids)
    assert stock.serves and list(stock.indices) == stock_capture_indices(None, L)
    ours = [rp.name_tensor(i, trained_at) for i in plugin]
    theirs = [rp.name_tensor(i, trained_at) for i in stock.indices]
    assert all(a != b for a, b in zip(ours, theirs)), (ours, theirs)
    assert "captured 2 of 3" in stock_reading(config, L).outcome  # the ids nested, as written
    if spec is FULL:
        assert (ids, stock.indices, trained_at) == ((-1, 0, 9), (2, 13, 24), (0, 9, 18))
        assert ours == ["embedding output", "output of trained layer 0", "output of trained layer 1"]


def test_layouts_and_layer_maps_that_cannot_work_are_refused():
    with pytest.raises(ValueError, match="differ from stock SGLang"):
        rp.pick_ids((0, 4, 7), 8)  # outputs 0 and 4 are what the defaults read at positions 1 and 2
    with pytest.raises(ValueError, match="do not make"):
        rp.layer_map(3, 8, [1, 2])
    with pytest.raises(ValueError, match="distinct"):
        rp.layer_map(3, 5, [1, 1])
    assert rp.layer_map(3, 6, [1, 3, 5]) == {0: 0, 1: 2, 2: 4}
    assert rp.capture_map((0, 2, 5), 8) == {0: 0, 1: 1, 2: 1, 3: 2, 4: 2, 5: 2, 6: 3, 7: 3, 8: 3}
