"""The tiny Kimi-K2.5 pair (``pair --arch kimi-k25``): a checkpoint folder that SGLang's own Kimi-K2.5
code reads as the real one (config, weight names, processor), whose text model is the tiny trained
DeepSeek-V3 target, and on which the commands work as on the DeepSeek folder."""

import json

import pytest
import torch

from sglang_eagle3_embed.doctor.kimi import KIMI_ARCH
from sglang_eagle3_embed.doctor.weights import read_safetensors
from tests.support import cli


@pytest.mark.releases
def test_the_config_is_sglangs_kimi_k25_config_around_the_target(tiny_kimi_pair, tiny_pair):
    from sglang.srt.configs.kimi_k25 import KimiK25Config
    from sglang.srt.utils.hf_transformers.config import get_config

    config = get_config(str(tiny_kimi_pair.target), trust_remote_code=False)
    assert isinstance(config, KimiK25Config) and config.architectures == [KIMI_ARCH]
    text = json.loads((tiny_pair.target / "config.json").read_text())
    assert config.text_config.num_hidden_layers == text["num_hidden_layers"]
    assert config.text_config.hidden_size == config.vision_config.text_hidden_size == text["hidden_size"]


@pytest.mark.releases
def test_sglangs_kimi_k25_loads_every_weight_and_captures_what_hf_computes(
    tiny_kimi_pair, tiny_pair, sglang_cpu
):
    """The plugin's Kimi-K2.5 class, built with its vision tower, loads the folder through SGLang's
    own ``load_weights`` (checkpoint names mapped to SGLang's): every vision tensor arrives, the text
    model is the DeepSeek target's, and the plugin's capture of ``[-1, 2, 4]`` through the wrapper's
    forward equals HF's hidden states of the DeepSeek target."""
    from sglang.srt.utils.hf_transformers.config import get_config
    from transformers import AutoModelForCausalLM

    from sglang_eagle3_embed.patch import deepseek_models as models
    from sglang_eagle3_embed.patch.deepseek_capture import Eagle3EmbedDeepseekV2Model

    harness = sglang_cpu
    config = get_config(str(tiny_kimi_pair.target), trust_remote_code=False)
    config.encoder_only = config.language_only = False  # as ModelConfig sets them for a server
    kimi = harness.build(models.KimiK25ForConditionalGeneration, config)
    assert isinstance(kimi.language_model.model, Eagle3EmbedDeepseekV2Model)
    saved = read_safetensors(tiny_kimi_pair.target)
    kimi.load_weights(list(saved.items()))
    params = dict(kimi.named_parameters())
    vision = [k for k in saved if k.startswith(("vision_tower.", "mm_projector."))]
    assert vision and all(k.count(".") >= 2 for k in vision)
    for name in vision:
        sglang_name = (
            name.replace("wqkv.", "attn.qkv_proj.").replace("wo.", "attn.proj.")
            .replace("mm_projector.proj.0", "mm_projector.linear_1")
            .replace("mm_projector.proj.2", "mm_projector.linear_2")
        )  # fmt: skip
        assert torch.equal(params[sglang_name].detach(), saved[name]), name
    assert torch.equal(
        kimi.language_model.model.embed_tokens.weight.detach(),
        saved["language_model.model.embed_tokens.weight"],
    )

    with harness.published_eagle3_launch(str(tiny_kimi_pair.draft)):
        kimi.set_eagle3_layers_to_capture([-1, 2, 4])
    assert kimi.language_model.model.layers_to_capture == [0, 3, 5]
    hf = AutoModelForCausalLM.from_pretrained(tiny_pair.target, torch_dtype=torch.float32).eval()
    prompts = [[5, 9, 17, 3], [7, 8]]
    runtime = harness.CpuRuntime(config.text_config)
    batch = runtime.extend([1, 2], prompts)
    with torch.no_grad():
        out = kimi(batch.input_ids, batch.positions, batch)
    refs = [harness.hf_hidden_states(hf, p) for p in prompts]
    want = torch.cat([torch.cat([r[0], r[3], r[5]], dim=-1) for r in refs])
    assert torch.allclose(out.hidden_states, want, atol=1e-4)


@pytest.mark.releases
def test_sglang_loads_the_processor_with_trust_remote_code_only(tiny_kimi_pair, sglang_cpu):
    from sglang.srt.utils.hf_transformers.processor import get_processor

    folder = str(tiny_kimi_pair.target)
    with pytest.raises(Exception, match=r"trust_remote_code|remote code"):
        get_processor(folder, trust_remote_code=False, model_name=folder)
    processor = get_processor(folder, trust_remote_code=True, model_name=folder)
    assert type(processor).__name__ == "TinyKimiK25Processor"
    with pytest.raises(ValueError, match="text only"):
        processor(text="w1 w2", images=["an image"])


@pytest.mark.releases
def test_sglangs_kimi_k25_processor_takes_it(tiny_kimi_pair, sglang_cpu):
    """SGLang's Kimi-K2.5 multimodal processor, the one a server builds at startup, reads its
    tokens and media settings from the folder's processor."""
    from sglang.srt.multimodal.processors.kimi_k25 import KimiK2_5VLImageProcessor
    from sglang.srt.runtime_context import get_context
    from sglang.srt.utils.hf_transformers.config import get_config
    from sglang.srt.utils.hf_transformers.processor import get_processor

    folder = str(tiny_kimi_pair.target)
    config = get_config(folder, trust_remote_code=False)
    processor = get_processor(folder, trust_remote_code=True, model_name=folder)
    override = get_context().override_server_args(mm_process_config={})  # a server's default
    override.install()
    try:
        mm = KimiK2_5VLImageProcessor(config, None, processor, "default")
    finally:
        override.restore()
    assert mm.mm_tokens.image_token == "<|media_pad|>"
    assert mm.mm_tokens.image_token_id == config.media_placeholder_token_id


@pytest.mark.releases
def test_ids_and_check_read_the_kimi_folder(tiny_kimi_pair):
    target, draft = str(tiny_kimi_pair.target), str(tiny_kimi_pair.draft)
    ids = cli("ids", draft, "--target", target, "--json")
    assert ids.returncode == 0, ids.stderr
    assert json.loads(ids.stdout)["capture_indices"] == [0, 3, 5]
    launch = [
        "--model-path", target, "--model-impl", "sglang_eagle3_embed", "--trust-remote-code",
        "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", draft,
        "--speculative-num-steps", "3", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4",
    ]  # fmt: skip
    check = cli("check", *launch, "--json")
    assert check.returncode == 0, check.stdout + check.stderr
    bad = cli("check", *launch[:-6], "--speculative-num-steps", "1", "--speculative-eagle-topk", "1",
              "--speculative-num-draft-tokens", "16", "--json")  # fmt: skip
    assert bad.returncode == 1 and "draft-tokens-rewritten" in bad.stdout


@pytest.mark.releases
def test_probe_scores_the_kimi_folder_as_the_deepseek_folder(tiny_kimi_pair, tiny_pair, tmp_path):
    """The same text model, the same draft: the same scores for every wiring."""
    reports = []
    for target in (tiny_kimi_pair.target, tiny_pair.target):
        out = tmp_path / f"{target.name}.json"
        run = cli(
            "probe", "--target", str(target), "--draft", str(tiny_pair.draft), "--num-prompts", "16",
            "--num-steps", "4", "--no-progress", "--json", "--output", str(out),
        )  # fmt: skip
        assert run.returncode in (0, 1), run.stderr
        reports.append(json.loads(out.read_text()))
    scores = [{str(w["capture_indices"]): w.get("accept_length") for w in rep["wirings"]} for rep in reports]
    assert scores[0] == scores[1] and len(scores[0]) > 3
