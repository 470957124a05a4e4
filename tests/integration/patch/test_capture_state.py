"""The plugin's capture keeps nothing from one forward pass to the next: after many prefill and
decode passes of varying batch sizes through SGLang's DeepSeek model with the plugin's capture, the
process holds as many tensors as after the first passes. A buffer kept per pass or per request
would show here long before it showed in a server's memory; the second test plants one and sees it.
"""

import gc
import random

import pytest
import torch

from sglang_eagle3_embed.core.capture.ids import IDS_FIELD
from sglang_eagle3_embed.patch import deepseek_capture as capture
from sglang_eagle3_embed.patch import deepseek_models as models

IDS = [2, -1, 0]  # out of ascending order: the capture reorders its blocks on every pass


def live_tensors() -> int:
    gc.collect()
    return sum(1 for obj in gc.get_objects() if issubclass(type(obj), torch.Tensor))


@pytest.fixture(scope="module")
def model(sglang_cpu, tmp_path_factory):
    harness = sglang_cpu
    config = harness.hf_config(harness.TinySpec(num_layers=4))
    model = harness.sglang_model(models.DeepseekV3ForCausalLM, config, harness.hf_model(config))
    draft = harness.write_draft(tmp_path_factory.mktemp("draft"), {"eagle_config": {IDS_FIELD: IDS}})
    with harness.published_eagle3_launch(draft):
        model.set_eagle3_layers_to_capture(IDS)
    assert model.model.eagle3_embed_block_order is not None
    return harness, config, model


def passes(harness, config, model, rounds: int, seed: int) -> None:
    """``rounds`` times: a fresh runtime, a prefill of 1-4 requests, then 3 decode steps."""
    rng = random.Random(seed)
    for _ in range(rounds):
        batch_size = rng.randint(1, 4)
        rows = list(range(1, batch_size + 1))
        prompts = [[rng.randrange(128) for _ in range(rng.randint(2, 9))] for _ in rows]
        runtime = harness.CpuRuntime(config)
        with torch.no_grad():
            out = model(*_args(runtime.extend(rows, prompts)))
            assert out.hidden_states.shape[-1] == 3 * config.hidden_size
            for _ in range(3):
                out = model(*_args(runtime.decode(rows, [rng.randrange(128) for _ in rows])))
        del runtime, out


def _args(batch):
    return batch.input_ids, batch.positions, batch


@pytest.mark.releases
def test_no_tensor_outlives_its_pass(model):
    harness, config, plugin = model
    passes(harness, config, plugin, rounds=3, seed=0)  # lazily built caches settle
    before = live_tensors()
    passes(harness, config, plugin, rounds=40, seed=1)
    after = live_tensors()
    assert after <= before, f"{after - before} more tensors alive after 40 more rounds of passes"


@pytest.mark.releases
def test_a_planted_per_pass_buffer_is_caught(model, monkeypatch):
    harness, config, plugin = model
    kept = []
    arrange = capture.arrange_captures
    monkeypatch.setattr(capture, "arrange_captures", lambda aux, body: kept.append(aux) or arrange(aux, body))
    passes(harness, config, plugin, rounds=3, seed=0)
    before = live_tensors()
    passes(harness, config, plugin, rounds=40, seed=1)
    assert live_tensors() >= before + 40 * 4  # a prefill and 3 decodes a round, each kept
