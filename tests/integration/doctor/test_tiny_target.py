"""The tiny trained target: its greedy continuation is learned, diverse and input-dependent;
it is cached by spec, reproducible from its seed, and SGLang's DeepSeek forward runs it."""

import pytest
import torch

from sglang_eagle3_embed.doctor import tiny_target
from sglang_eagle3_embed.doctor.tiny_target import Language, TargetSpec, build_target


@pytest.fixture(scope="module")
def built(tiny_pair):
    from transformers import AutoModelForCausalLM

    cache = tiny_pair.target.parent  # the shared pair's target is TargetSpec()
    folder = build_target(TargetSpec(), cache)
    return cache, folder, AutoModelForCausalLM.from_pretrained(folder).eval()


def test_greedy_continuation_is_learned_and_diverse(built):
    _, _, model = built
    language = Language(TargetSpec())
    tokens = language.sample(256, 16, torch.Generator().manual_seed(123))
    with torch.no_grad():
        predicted = model(tokens).logits[:, 1:-1].argmax(-1)
    agreement = (predicted == language.best_next(tokens[:, :1], tokens[:, 1:-1])).float().mean()
    assert agreement >= 0.75, agreement  # p_best = 0.85 bounds what can be learned
    assert len(set(predicted[:, -1].tolist())) >= 48  # many distinct next tokens over 256 prompts


def test_next_token_depends_on_the_older_token(built):
    """The topic (first token) matters: the target beats the best predictor that sees only the newest
    token by a wide margin."""
    _, _, model = built
    spec = TargetSpec()
    language = Language(spec)
    train = language.sample(2048, 16, torch.Generator().manual_seed(9))
    counts = torch.zeros(spec.vocab, spec.vocab)
    counts.index_put_((train[:, 1:-1].flatten(), train[:, 2:].flatten()), torch.tensor(1.0), accumulate=True)
    order1 = counts.argmax(-1)  # most frequent next token given only the newest token
    tokens = language.sample(256, 16, torch.Generator().manual_seed(123))
    with torch.no_grad():
        predicted = model(tokens).logits[:, 1:-1].argmax(-1)
    best = language.best_next(tokens[:, :1], tokens[:, 1:-1])
    model_agreement = (predicted == best).float().mean()
    order1_agreement = (order1[tokens[:, 1:-1]] == best).float().mean()
    assert model_agreement >= order1_agreement + 0.25, (model_agreement, order1_agreement)


def test_cached_by_spec(built, monkeypatch):
    cache, folder, _ = built
    monkeypatch.setattr(tiny_target, "train_target", lambda spec: pytest.fail("retrained a cached target"))
    assert build_target(TargetSpec(), cache) == folder
    assert (folder / "model.safetensors").exists()


def test_reproducible_from_its_seed():
    spec = TargetSpec(steps=3)
    a, b = tiny_target.train_target(spec).state_dict(), tiny_target.train_target(spec).state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    c = tiny_target.train_target(TargetSpec(steps=3, seed=1)).state_dict()
    assert not all(torch.equal(a[k], c[k]) for k in a)


@pytest.mark.releases
def test_sglang_runs_the_saved_target(built, sglang_cpu):
    from transformers import AutoConfig

    from sglang_eagle3_embed.patch import deepseek_models as models

    _, folder, hf = built
    config = AutoConfig.from_pretrained(folder)
    model = sglang_cpu.sglang_model(models.DeepseekV3ForCausalLM, config, hf)
    runtime = sglang_cpu.CpuRuntime(config)
    prompt = [3, 17, 42, 99, 7]
    fb = runtime.extend([1], [prompt])
    with torch.no_grad():
        logits = model(fb.input_ids, fb.positions, fb).next_token_logits[0]
        reference = hf(torch.tensor([prompt])).logits[0, -1]
    assert torch.allclose(logits, reference, atol=1e-4)
