"""A Kimi-K2.5 checkpoint folder around a tiny trained DeepSeek-V3 target.

Kimi-K2.5 (``KimiK25ForConditionalGeneration``) is a vision tower and a projector around a
DeepSeek-V3 text model. :func:`write_kimi_target` writes what SGLang loads for it, as the real
checkpoint lays it out:

- ``config.json``: ``model_type`` ``kimi_k25``, the target's config as ``text_config``, a small
  ``vision_config`` (SGLang's ``KimiK25Config``, ``srt/configs/kimi_k25.py``);
- ``model.safetensors``: the trained text weights under ``language_model.``, and a random vision
  tower and projector (seeded) under the checkpoint's own names (``wqkv``, ``wo``,
  ``mm_projector.proj.0/2``), which SGLang's ``load_weights`` maps to its modules
  (``srt/models/kimi_k25.py:890-904``);
- the processor SGLang loads for every multimodal model, even with ``--skip-tokenizer-init``
  (``srt/managers/tokenizer_manager.py:612-628``): ``processor_config.json`` whose ``auto_map``
  names ``processing_tiny_kimi_k25.py`` (written beside it: a copy of the package data file
  ``doctor/data/kimi_processing.py.txt``), the pair's word-level tokenizer, and the
  media settings SGLang's Kimi processor reads (``srt/multimodal/processors/kimi_k25.py:538-556``).
  Like the real checkpoint's processor it is remote code: launch with ``--trust-remote-code``.

Text-only requests are served; the processor refuses images.
"""

from __future__ import annotations

import copy
import json
import shutil
from importlib import resources
from pathlib import Path

from sglang_eagle3_embed.doctor import cache
from sglang_eagle3_embed.doctor.tokenizer import TOKENIZER_FILES

__all__ = [
    "CHAT_TEMPLATE", "KIMI_ARCH", "REAL_TEXT", "REAL_VISION", "TINY_VISION", "build_kimi_pair", "kimi_config",
    "write_kimi_target", "write_serving_files",
]  # fmt: skip

KIMI_ARCH = "KimiK25ForConditionalGeneration"
PROCESSOR_MODULE = "processing_tiny_kimi_k25"
PROCESSOR_SOURCE = "data/kimi_processing.py.txt"
"""The processor's source, package data of ``sglang_eagle3_embed.doctor``."""


def vision_config(
    patch: int, pos_emb: int, pos_emb_time: int, heads: int, blocks: int, width: int, mlp: int
) -> dict:
    """A MoonViT vision config. SGLang builds the tower from ``hidden_size`` and friends and the
    projector from ``vt_hidden_size`` (``srt/models/kimi_k25.py:533-547,600``): both are written."""
    dims = {
        "num_attention_heads": heads,
        "num_hidden_layers": blocks,
        "hidden_size": width,
        "intermediate_size": mlp,
    }
    return {
        "patch_size": patch, "init_pos_emb_height": pos_emb, "init_pos_emb_width": pos_emb,
        "init_pos_emb_time": pos_emb_time, **dims, **{f"vt_{k}": v for k, v in dims.items()},
        "merge_kernel_size": [2, 2], "mm_hidden_size": width,
    }  # fmt: skip


TINY_VISION = vision_config(patch=2, pos_emb=4, pos_emb_time=1, heads=2, blocks=1, width=16, mlp=32)
"""A small vision tower with the real one's structure (MoonViT3d, one block, patch merger)."""
REAL_VISION = vision_config(patch=14, pos_emb=64, pos_emb_time=4, heads=16, blocks=27, width=1152, mlp=4304)
"""Kimi-K2.5's vision tower (MoonViT, 27 blocks of width 1152)."""
MEDIA_PROC_CFG = dict(
    patch_size=2, merge_kernel_size=[2, 2], in_patch_limit=64, patch_limit_on_one_side=8,
    image_mean=[0.5, 0.5, 0.5], image_std=[0.5, 0.5, 0.5],
)  # fmt: skip
REAL_TEXT = dict(
    architectures=["DeepseekV3ForCausalLM"], model_type="deepseek_v3", vocab_size=163840,
    hidden_size=7168, intermediate_size=18432, moe_intermediate_size=2048, num_hidden_layers=61,
    num_attention_heads=64, num_key_value_heads=64, n_routed_experts=384, n_shared_experts=1,
    num_experts_per_tok=8, first_k_dense_replace=1, moe_layer_freq=1, n_group=1, topk_group=1,
    kv_lora_rank=512, q_lora_rank=1536, qk_rope_head_dim=64, qk_nope_head_dim=128, v_head_dim=128,
    routed_scaling_factor=2.827, scoring_func="sigmoid", topk_method="noaux_tc", norm_topk_prob=True,
    hidden_act="silu", rms_norm_eps=1e-5, rope_theta=50000.0, max_position_embeddings=262144,
    rope_scaling={"type": "yarn", "factor": 64.0, "original_max_position_embeddings": 4096,
                  "beta_fast": 32.0, "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0},
    tie_word_embeddings=False, torch_dtype="bfloat16",
)  # fmt: skip
"""Kimi-K2.5's text model (a DeepSeek-V3: 61 layers, hidden 7168, MLA, 384 routed experts, top-8)."""
# the checkpoint's vision names, from SGLang's (the inverse of srt/models/kimi_k25.py:895-900)
CHECKPOINT_NAMES = (
    ("attn.qkv_proj.", "wqkv."),
    ("attn.proj.", "wo."),
    ("mm_projector.linear_1", "mm_projector.proj.0"),
    ("mm_projector.linear_2", "mm_projector.proj.2"),
)


def kimi_folder_name(text_folder: Path) -> str:
    return f"kimi-k25-{Path(text_folder).name}"


def kimi_config(text_config: dict, vision: dict | None = None) -> dict:
    """The wrapper's ``config.json`` around a DeepSeek-V3 ``text_config`` (copied: the config owns
    its nested dicts, so nothing that parses it changes the caller's)."""
    text_config = copy.deepcopy(text_config)
    vision = {**(vision or TINY_VISION), "text_hidden_size": text_config["hidden_size"]}
    vocab = text_config["vocab_size"]
    return {
        "architectures": [KIMI_ARCH],
        "model_type": "kimi_k25",
        "text_config": {**text_config, "architectures": ["DeepseekV3ForCausalLM"]},
        "vision_config": vision,
        # the placeholder of an image's features; no text prompt of the language contains it
        # unless it is the last id: image requests are refused anyway
        "media_placeholder_token_id": vocab - 1,
        "pad_token_id": 0,
        "torch_dtype": text_config.get("torch_dtype", "float32"),
    }


def vision_weights(config: dict, seed: int = 0) -> dict:
    """A random vision tower and projector for ``config``, under the checkpoint's names. Built
    from SGLang's own modules, so that every shape is the one SGLang loads."""
    import torch
    from sglang.srt.configs.kimi_k25 import KimiK25Config
    from sglang.srt.models.kimi_k25 import K2VLMultiModalProjector, MoonViT3dPretrainedModel

    from sglang_eagle3_embed.doctor import sglang_cpu

    sglang_cpu.init()
    # parsed from a copy: transformers standardizes ``rope_scaling`` in place, and ``config`` is
    # written to the folder as it is
    fields = {k: v for k, v in config.items() if k not in ("architectures", "model_type")}
    parsed = KimiK25Config(**copy.deepcopy(fields))
    torch.manual_seed(seed)
    modules = {
        "vision_tower": MoonViT3dPretrainedModel(parsed.vision_config, prefix="vision_tower"),
        "mm_projector": K2VLMultiModalProjector(parsed.vision_config),
    }
    weights = {}
    for prefix, module in modules.items():
        for name, tensor in module.state_dict().items():
            full = f"{prefix}.{name}"
            for sglang_name, checkpoint_name in CHECKPOINT_NAMES:
                full = full.replace(sglang_name, checkpoint_name)
            value = torch.randn(tensor.shape, dtype=torch.float32) * 0.02
            weights[full] = torch.ones_like(value) if name.endswith("norm.weight") else value
    return weights


CHAT_TEMPLATE = (
    "{% for m in messages %}{% if not loop.first %} {% endif %}"
    "{% if m['content'] is string %}{{ m['content'] }}{% else %}"
    "{% for part in m['content'] if part['type'] == 'text' %}{% if not loop.first %} {% endif %}"
    "{{ part['text'] }}{% endfor %}"
    "{% endif %}{% endfor %}"
)
"""The text of the messages and of their text parts, joined by spaces (the language has no role or turn tokens), so
chat clients reach the text model as users' clients reach the real checkpoint's template. Images
are left out of the prompt: the text model serves text only. SGLang's start-up warm-up of a VLM
sends a chat completion with an image whenever the tokenizer is loaded
(``srt/entrypoints/http_server.py:2401``); with no placeholder in the prompt SGLang's Kimi-K2.5
processor refuses it ("Kimi image placeholders must map one-to-one to image data",
``srt/multimodal/processors/kimi_k25.py:580``) and the server exits. Serve these folders with
``--skip-tokenizer-init`` or ``--skip-server-warmup``."""


def write_serving_files(folder: Path) -> None:
    """What a server needs beside the weights, config and tokenizer (written first) of a Kimi
    folder: the processor (remote code) and the chat template in ``tokenizer_config.json``."""
    # package data, not a module: it runs in the server's process as the checkpoint's remote code
    source = resources.files("sglang_eagle3_embed.doctor").joinpath(PROCESSOR_SOURCE).read_text()
    (folder / f"{PROCESSOR_MODULE}.py").write_text(source)
    processor = {
        "processor_class": "TinyKimiK25Processor",
        "auto_map": {"AutoProcessor": f"{PROCESSOR_MODULE}.TinyKimiK25Processor"},
        "media_proc_cfg": MEDIA_PROC_CFG,
    }
    (folder / "processor_config.json").write_text(json.dumps(processor, indent=2))
    tokenizer_config = folder / "tokenizer_config.json"
    config = {**json.loads(tokenizer_config.read_text()), "chat_template": CHAT_TEMPLATE}
    tokenizer_config.write_text(json.dumps(config, indent=2))


BUILT_FROM = "built_from.json"
"""In a Kimi folder: the text folder whose weights it wraps and the SHA-256 of that folder's
manifest (:func:`sglang_eagle3_embed.doctor.cache.write_origin`)."""


def write_kimi_target(text_folder: Path, out_folder: Path, seed: int = 0) -> Path:
    """Write (once; checked against its manifest, and against the build of ``text_folder`` it
    records, under its lock: :func:`sglang_eagle3_embed.doctor.cache.ensure`) a Kimi-K2.5 folder
    around ``text_folder``, a DeepSeek-V3 target folder with a tokenizer (the tiny pairs' targets)."""
    out_folder, text_folder = Path(out_folder), Path(text_folder)

    def build(tmp: Path) -> None:
        from safetensors.torch import save_file

        from sglang_eagle3_embed.doctor.weights import read_safetensors

        cache.write_origin(tmp, BUILT_FROM, text_folder)  # before the weights are read
        config = kimi_config(json.loads((text_folder / "config.json").read_text()))
        weights = {f"language_model.{k}": v for k, v in read_safetensors(text_folder).items()}
        weights.update(vision_weights(config, seed))
        save_file({k: v.contiguous() for k, v in weights.items()}, str(tmp / "model.safetensors"))
        (tmp / "config.json").write_text(json.dumps(config, indent=2))
        for name in (*TOKENIZER_FILES, "tiny_target_spec.json"):
            if (text_folder / name).exists():
                shutil.copy(text_folder / name, tmp / name)
        write_serving_files(tmp)

    return cache.ensure(
        out_folder, build, check=lambda: cache.origin_problem(out_folder, BUILT_FROM, text_folder)
    )


def build_kimi_pair(spec=None, cache_dir: Path | None = None, device: str = "cpu"):
    """The tiny pair of ``spec`` (:func:`~sglang_eagle3_embed.doctor.pair.build_pair`) with its
    target wrapped as Kimi-K2.5: the same trained text model, the same draft."""
    from sglang_eagle3_embed.doctor.pair import Pair, PairSpec, build_pair

    built = build_pair(spec or PairSpec(), cache_dir, device)
    folder = built.target.parent / kimi_folder_name(built.target)
    return Pair(write_kimi_target(built.target, folder, seed=built.spec.seed), built.draft, built.spec)
