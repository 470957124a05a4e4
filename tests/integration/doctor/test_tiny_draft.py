"""The trainable EAGLE-3 draft twin equals SGLang 0.5.23's LlamaForCausalLMEagle3 forward on CPU,
loads through SGLang's own weight loader, and learns from the tiny target."""

import copy
import json
from types import SimpleNamespace

import pytest
import torch

from sglang_eagle3_embed.doctor.eagle3_draft import Eagle3Draft
from sglang_eagle3_embed.doctor.tiny_draft import agreement, draft_config_dict


def sglang_draft_hidden(draft_cfg, checkpoint, embedding, ids, aux):
    """SGLang's draft body on one sequence (torch_native attention over an MHA KV pool)."""
    from sglang.srt.layers.attention.torch_native_backend import TorchNativeAttnBackend
    from sglang.srt.mem_cache.memory_pool import MHATokenToKVPool, ReqToTokenPool
    from sglang.srt.model_executor.forward_batch_info import CaptureHiddenMode, ForwardBatch, ForwardMode
    from sglang.srt.model_executor.forward_context import ForwardContext, set_forward_context
    from sglang.srt.models.llama_eagle3 import LlamaForCausalLMEagle3
    from transformers import LlamaConfig

    config = LlamaConfig(**draft_cfg)
    model = LlamaForCausalLMEagle3(copy.deepcopy(config), quant_config=None).eval()
    model.load_weights(list(checkpoint.items()))
    with torch.no_grad():
        model.model.embed_tokens.weight.copy_(embedding)
    heads, hidden, n = config.num_attention_heads, config.hidden_size, len(ids)
    req = ReqToTokenPool(size=4, max_context_len=64, device="cpu", enable_memory_saver=False)
    kv = MHATokenToKVPool(
        size=256, page_size=1, dtype=torch.float32, head_num=heads, head_dim=hidden // heads,
        layer_num=1, device="cpu", enable_memory_saver=False,
    )  # fmt: skip
    backend = TorchNativeAttnBackend(
        SimpleNamespace(device="cpu", req_to_token_pool=req, token_to_kv_pool=kv)
    )
    set_forward_context(ForwardContext(attn_backend=backend))
    req.req_to_token[1, :n] = torch.arange(1, n + 1, dtype=torch.int32)
    fb = ForwardBatch(
        forward_mode=ForwardMode.EXTEND, batch_size=1, input_ids=ids, req_pool_indices=torch.tensor([1]),
        seq_lens=torch.tensor([n]), out_cache_loc=torch.arange(1, n + 1), seq_lens_sum=n,
        seq_lens_cpu=torch.tensor([n]), positions=torch.arange(n), extend_num_tokens=n,
        extend_seq_lens=torch.tensor([n]), extend_prefix_lens=torch.tensor([0]),
        extend_start_loc=torch.tensor([0]), extend_prefix_lens_cpu=[0], extend_seq_lens_cpu=[n],
        capture_hidden_mode=CaptureHiddenMode.FULL, spec_info=SimpleNamespace(hidden_states=aux),
    )  # fmt: skip
    backend.init_forward_metadata(fb)
    with torch.no_grad():
        hidden_states, _ = model.model(ids, torch.arange(n), fb)
    return hidden_states, model.lm_head.weight


@pytest.mark.releases
def test_twin_equals_sglang_draft_forward(sglang_cpu):
    cfg = draft_config_dict(hidden=64, vocab=128, heads=4, ids=[-1, 1, 2], target_hidden=64)
    torch.manual_seed(0)
    twin = Eagle3Draft(cfg)
    with torch.no_grad():
        for name, p in twin.named_parameters():
            p.normal_(1.0, 0.05) if "norm" in name else p.normal_(0.0, 0.1)
    embedding = torch.randn(128, 64) * 0.1
    ids, aux = torch.randint(128, (9,)), torch.randn(9, 3 * 64)
    sglang_hidden, sglang_head = sglang_draft_hidden(cfg, twin.checkpoint(), embedding, ids, aux)
    with torch.no_grad():
        twin_hidden = twin.hidden(embedding[ids][None], aux[None])[0]
    assert torch.allclose(sglang_hidden, twin_hidden, atol=1e-5), (sglang_hidden - twin_hidden).abs().max()
    assert torch.equal(sglang_head, twin.lm_head.weight)


def test_twin_is_causal():
    twin = Eagle3Draft(
        draft_config_dict(hidden=64, vocab=128, heads=4, ids=[-1, 1, 2], target_hidden=64)
    ).eval()
    embeds, aux = torch.randn(1, 6, 64), torch.randn(1, 6, 192)
    changed = aux.clone()
    changed[0, -1] += 1.0
    with torch.no_grad():
        a, b = twin.hidden(embeds, aux), twin.hidden(embeds, changed)
    assert torch.equal(a[0, :-1], b[0, :-1]) and not torch.equal(a[0, -1], b[0, -1])


def test_draft_learns_the_target(tiny_pair):
    from transformers import AutoModelForCausalLM

    from sglang_eagle3_embed.doctor.eagle3_draft import load_draft

    target = AutoModelForCausalLM.from_pretrained(tiny_pair.target).eval()
    draft, _ = load_draft(tiny_pair.draft)
    tokens = tiny_pair.language.sample(128, 16, torch.Generator().manual_seed(77))
    trained = agreement(draft, target, tokens, [0, 3, 5])
    defaults = agreement(draft, target, tokens, [2, 3, 4])  # SGLang's default layers for 7 layers
    # the pair is trained on the CPU, whose float rounding (vector unit, torch build) moves the
    # trained draft's agreement by a few points: the test asks for what holds on any of them
    assert trained >= 0.7 and trained >= defaults + 0.2, (trained, defaults)


@pytest.mark.releases
def test_mla_twin_equals_sglangs_mla_draft_forward(sglang_cpu, tiny_pair):
    """The twin of ``Eagle3DeepseekV2ForCausalLM`` (Kimi-K2.5's MLA drafts) equals SGLang's own class
    on the CPU: its checkpoint loads through SGLang's loader (``layers.0``/``midlayer`` names, the
    fused MLA down-projection) and the normed hidden states of a prefill agree."""
    from transformers import AutoConfig, DeepseekV3Config

    from sglang_eagle3_embed.doctor.sglang_cpu import CpuRuntime
    from sglang_eagle3_embed.doctor.tiny_draft import mla_draft_config_dict

    cfg = mla_draft_config_dict(AutoConfig.from_pretrained(tiny_pair.target), [-1, 2, 4])
    torch.manual_seed(0)
    twin = Eagle3Draft(cfg).eval()
    with torch.no_grad():
        for name, p in twin.named_parameters():
            p.normal_(1.0, 0.05) if "norm" in name else p.normal_(0.0, 0.1)
    from sglang.srt.models.kimi_k25_eagle3 import Eagle3DeepseekV2ForCausalLM

    config = DeepseekV3Config(**{k: v for k, v in cfg.items() if k != "eagle_config"})
    config.eagle_config = cfg["eagle_config"]
    model = sglang_cpu.build(Eagle3DeepseekV2ForCausalLM, config)
    model.load_weights(list(twin.checkpoint().items()))
    embedding = torch.randn(cfg["vocab_size"], cfg["hidden_size"]) * 0.1
    with torch.no_grad():
        model.model.embed_tokens.weight.copy_(embedding)
    ids, aux = torch.randint(cfg["vocab_size"], (9,)), torch.randn(9, 3 * cfg["hidden_size"])
    batch = CpuRuntime(config).extend([1], [ids.tolist()])
    batch.spec_info = SimpleNamespace(hidden_states=aux)
    with torch.no_grad():
        sglang_hidden, _ = model.model(batch.input_ids, batch.positions, batch)
        twin_hidden = twin.hidden(embedding[ids][None], aux[None])[0]
    assert torch.allclose(sglang_hidden, twin_hidden, atol=1e-5), (sglang_hidden - twin_hidden).abs().max()
    assert torch.equal(model.lm_head.weight, twin.lm_head.weight)


@pytest.mark.parametrize("architecture", ["llama", "mla"])
def test_load_draft_initialises_nothing_the_weights_replace(tiny_pair, tmp_path, monkeypatch, architecture):
    """``load_draft`` builds the draft's layers on the meta device (no random numbers for what
    the weights replace) and still loads what was written: every parameter and buffer equal to
    the written twin's, and the same outputs."""
    from safetensors.torch import save_file
    from transformers import AutoConfig

    from sglang_eagle3_embed.doctor.eagle3_draft import load_draft
    from sglang_eagle3_embed.doctor.tiny_draft import mla_draft_config_dict

    if architecture == "mla":
        cfg = mla_draft_config_dict(AutoConfig.from_pretrained(tiny_pair.target), [-1, 2, 4])
    else:
        cfg = draft_config_dict(hidden=64, vocab=128, heads=4, ids=[-1, 2, 4], target_hidden=64)
    torch.manual_seed(0)
    twin = Eagle3Draft(cfg).eval()
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    save_file(twin.checkpoint(), str(tmp_path / "model.safetensors"))
    initialised = []
    kaiming = torch.nn.init.kaiming_uniform_

    def recording(tensor, *args, **kwargs):
        initialised.append(tensor.device.type)
        return kaiming(tensor, *args, **kwargs)

    monkeypatch.setattr(torch.nn.init, "kaiming_uniform_", recording)
    loaded, _ = load_draft(tmp_path)
    assert initialised and set(initialised) == {"meta"}, initialised
    ours, theirs = dict(loaded.named_parameters()), dict(twin.named_parameters())
    ours.update(loaded.named_buffers())
    theirs.update(twin.named_buffers())
    assert ours.keys() == theirs.keys()
    for name, tensor in theirs.items():
        assert ours[name].dtype == tensor.dtype and torch.equal(ours[name], tensor), name
    embeds, aux = torch.randn(1, 5, cfg["hidden_size"]), torch.randn(1, 5, 3 * cfg["target_hidden_size"])
    with torch.no_grad():
        assert torch.equal(loaded(embeds, aux), twin(embeds, aux))
