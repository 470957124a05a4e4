"""The seed's deployment at its real shape, first pieces: a Kimi-K2.5-shaped target whose function is
trained at a compact width and embedded exactly into the real one, and where its trained layers go.

Kimi-K2.5's text model (``doctor.kimi.REAL_TEXT``: hidden 7168, 61 layers, the dense first layer
of 18432, MLA with q rank 1536, kv rank 512 and 64 heads, vocabulary 163840, top-8 routing with a
shared expert) is a DeepSeek-V3. Training it at that width is not needed for what the benchmark
measures: the step cost comes from the shape, the accept length from the function. So:

- **Compact width, then exact embedding** (:func:`widen`). A *narrow* DeepSeek-V3 (hidden ``h =
  hidden / divisor``, ``heads / divisor`` heads; the real MLA ranks and head dims, the real number
  of experts and top-k, narrower MLPs) is trained, then written into the real shape with zeros:
  the residual stream lives in its first ``h`` dimensions, the narrow heads in the first head
  slots, the narrow MLP rows in the first rows. Every projection that writes the residual stream
  writes zeros beyond ``h``, so those dimensions stay zero. An RMSNorm over the wide stream sees the
  narrow stream's mean square times ``h / H``: the narrow model's hidden-size norms are trained with
  ``eps * H / h`` (:func:`narrow_model`) and the wide weights are the narrow ones times
  ``sqrt(h / H)``, which gives the narrow norm's output exactly. The MLA norms (ranks kept) and
  the attention scale (head dims kept) are unchanged, and routing sees the same gate logits.
- **Where the trained layers go** (:func:`place_trained`). The seed's draft was trained on ids
  ``[-1, 2, 30]`` and ships ``[2, 30, 58]``, which stock SGLang 0.5.23 reads as capture indices
  ``[2, 30, 58]`` (outputs of layers 1, 29, 57). The other layers compute at full cost with zero
  output projections (:func:`inserted_layer`), so a capture index holds the output of the
  last trained layer before it. Trained layers are placed so that the draft's three tensors are
  outputs of trained layers, and each tensor stock SGLang reads is another one.
- **The other layers** (:func:`inserted_layer`): random weights of the real shapes, seeded per
  layer, every output projection zero, so they cost a real layer and add nothing.
- **Kimi-K2.5's checkpoint layout** (:func:`checkpoint_tensors`): under ``language_model.``, the
  routed experts one by one in compressed-tensors INT4 (``doctor.quantized``), the rest bf16.

``benchmarks/kimi_build.py`` trains the narrow model and its draft and writes the folders.
"""

from __future__ import annotations

import copy
import math
import re
from dataclasses import dataclass, field

import torch

from benchmarks.configs import REQUESTS, Requests
from benchmarks.real_pair import PairRecipe, capture_map
from sglang_eagle3_embed.core.capture.draft_config import resolve_capture_plan
from sglang_eagle3_embed.core.capture.ids import IDS_FIELD
from sglang_eagle3_embed.core.capture.stock_sglang import stock_reading
from sglang_eagle3_embed.doctor.kimi import REAL_TEXT

__all__ = [
    "HIDDEN_NORMS",
    "OUTPUT_PROJECTIONS",
    "KimiPairSpec",
    "checkpoint_tensors",
    "inserted_layer",
    "narrow_model",
    "pad",
    "place_trained",
    "scale_hidden_norms",
    "template",
    "wide_shapes",
    "widen",
    "widen_tensor",
]

SEED_IDS = (-1, 2, 30)
"""The ids the seed's draft was trained on (HF hidden-state numbering: embedding, layers 3 and 31)."""
SEED_CONFIG_IDS = (2, 30, 58)
"""The ids the seed's draft config ships."""
_LAYER = re.compile(r"^model\.layers\.(\d+)\.")
HIDDEN_NORMS = ("input_layernorm", "post_attention_layernorm", "model.norm")
"""The RMSNorms over the residual stream (the ones whose width changes)."""


@dataclass(frozen=True)
class KimiPairSpec(PairRecipe):
    """The wide target's text config (Kimi-K2.5's, routed experts cut to ``experts``) and the
    narrow model it is trained as."""

    text: dict = field(default_factory=lambda: copy.deepcopy(REAL_TEXT))
    experts: int = 8
    """Routed experts kept (Kimi-K2.5 has 384); with top-8 routing every token still runs 8."""
    divisor: int = 16
    """The narrow model's hidden size and head count are the wide one's over this."""
    narrow_intermediate: int = 1152
    narrow_moe_intermediate: int = 128
    ids: tuple[int, ...] = SEED_IDS
    """The draft's trained ids."""
    config_ids: tuple[int, ...] = SEED_CONFIG_IDS
    """The ids its config ships (what stock SGLang reads)."""
    draft_eps: float = 1e-6
    """The wide draft's RMSNorm epsilon (the narrow one trains with it times ``divisor``)."""
    draft_intermediate: int = 18432
    """The wide draft's MLP width (Kimi-K2.5's dense MLP's)."""
    narrow_draft_intermediate: int = 1152
    prompt_len: int = REQUESTS.prompt_len
    """The prompt tokens of the requests the pair is served (:attr:`requests`)."""
    seq_len: int = REQUESTS.prompt_len + REQUESTS.output_len
    """Trained on whole requests, prompt plus output tokens: a position past the sequences a model
    trained on is one whose function it never learnt."""
    batch: int = 12
    """With :attr:`seq_len`, about the tokens per step of the V2-Lite pair's recipe (32 x 64)."""

    @property
    def requests(self) -> Requests:
        """The serving benchmark's requests this pair is trained for (``configs.REQUESTS`` at the
        real shape): :attr:`prompt_len` tokens, then the rest of :attr:`seq_len`."""
        return Requests(self.prompt_len, self.seq_len - self.prompt_len, REQUESTS.dataset_size, REQUESTS.seed)

    @property
    def num_layers(self) -> int:
        return self.text["num_hidden_layers"]

    def target_spec(self):
        """The tiny target's spec for the narrow model: its language and training recipe (the
        shape fields are the narrow config's business)."""
        from sglang_eagle3_embed.doctor.tiny_target import TargetSpec

        return TargetSpec(**self.language())

    @classmethod
    def quick(cls) -> KimiPairSpec:
        """Tiny dims with the real structure, for the CPU tests."""
        text = {
            **REAL_TEXT, "vocab_size": 96, "hidden_size": 64, "intermediate_size": 96,
            "moe_intermediate_size": 32, "num_hidden_layers": 8, "num_attention_heads": 8,
            "num_key_value_heads": 8, "q_lora_rank": 24, "kv_lora_rank": 16, "qk_rope_head_dim": 8,
            "qk_nope_head_dim": 8, "v_head_dim": 8, "max_position_embeddings": 1024,
            "rope_scaling": {**REAL_TEXT["rope_scaling"], "factor": 4.0, "original_max_position_embeddings": 256},
        }  # fmt: skip
        return cls(
            text=text, experts=4, divisor=4, narrow_intermediate=24, narrow_moe_intermediate=8,
            ids=(-1, 2, 4), config_ids=(2, 4, 6), language_vocab=64, steps=40, batch=8, seq_len=16, prompt_len=8,
            lr=3e-3, draft_steps=20, draft_lr=3e-3, draft_intermediate=96, narrow_draft_intermediate=24,
        )  # fmt: skip

    def wide_config(self):
        from transformers import DeepseekV3Config

        # a deep copy: transformers standardizes ``rope_scaling`` in place, and the spec is recorded
        # in every built folder, where a later build compares it with its own
        text = {
            k: copy.deepcopy(v)
            for k, v in self.text.items()
            if k not in ("architectures", "model_type", "torch_dtype")
        }
        return DeepseekV3Config(
            **{**text, "n_routed_experts": self.experts, "num_experts_per_tok": self.experts}
        )

    def narrow_config(self, num_layers: int):
        wide = self.wide_config()
        if wide.hidden_size % self.divisor or wide.num_attention_heads % self.divisor:
            raise ValueError(
                f"hidden {wide.hidden_size} and {wide.num_attention_heads} heads: not divisible by {self.divisor}"
            )
        narrow = copy.deepcopy(wide)
        narrow.hidden_size = wide.hidden_size // self.divisor
        narrow.num_attention_heads = narrow.num_key_value_heads = wide.num_attention_heads // self.divisor
        narrow.intermediate_size = self.narrow_intermediate
        narrow.moe_intermediate_size = self.narrow_moe_intermediate
        narrow.num_hidden_layers = num_layers
        return narrow


def narrow_model(spec: KimiPairSpec, num_layers: int, seed: int = 0):
    """The narrow DeepSeek-V3 to train, its residual-stream norms at ``eps * H / h`` (what the wide
    norms compute on a stream that is zero beyond ``h``)."""
    from transformers import DeepseekV3ForCausalLM

    config = spec.narrow_config(num_layers)
    torch.manual_seed(seed)
    model = DeepseekV3ForCausalLM(config).float()
    scale_hidden_norms(model, spec.divisor)
    return model


def scale_hidden_norms(model, factor: float) -> None:
    """The residual stream's RMSNorms (:data:`HIDDEN_NORMS`) of a DeepSeek-V3 at their epsilon
    times ``factor``: the narrow model's, for a stream that is zero beyond its width when widened."""
    for name, module in model.named_modules():
        if name.endswith(HIDDEN_NORMS[:2]) or name == HIDDEN_NORMS[2]:
            module.variance_epsilon = module.variance_epsilon * factor


def pad(tensor: torch.Tensor, shape, blocks) -> torch.Tensor:
    """A zero tensor of ``shape`` with ``tensor``'s slices ``blocks`` (pairs of source and
    destination slice tuples) copied in."""
    out = torch.zeros(shape, dtype=tensor.dtype, device=tensor.device)
    for src, dst in blocks:
        out[dst] = tensor[src]
    return out


def wide_shapes(wide_cfg) -> dict[str, tuple[int, ...]]:
    """Every tensor's shape in a model of ``wide_cfg``, for a dense layer (``model.layers.0``) and
    a MoE layer (``model.layers.{first_k_dense_replace}``), from a model on the meta device."""
    from transformers import DeepseekV3ForCausalLM

    probe = copy.deepcopy(wide_cfg)
    probe.num_hidden_layers = wide_cfg.first_k_dense_replace + 1
    with torch.device("meta"):
        return {k: tuple(v.shape) for k, v in DeepseekV3ForCausalLM(probe).state_dict().items()}


def template(name: str, first_k_dense: int) -> str:
    """The name of ``name``'s tensor in :func:`wide_shapes` (layer 0 for a dense layer, the first
    MoE layer for a MoE one)."""
    match = _LAYER.match(name)
    if not match:
        return name
    kind = 0 if int(match.group(1)) < first_k_dense else first_k_dense
    return f"model.layers.{kind}.{name[match.end() :]}"


def widen_tensor(name: str, t: torch.Tensor, narrow_cfg, shape) -> torch.Tensor:
    """The wide ``shape`` of narrow tensor ``name`` (see the module's docstring), in ``t``'s dtype."""
    n, all_ = narrow_cfg, slice(None)
    h = n.hidden_size
    short = name.rsplit(".", 2)[-2] if name.endswith("weight") else name.rsplit(".", 1)[-1]
    if short in ("input_layernorm", "post_attention_layernorm") or name == "model.norm.weight":
        return pad(t * math.sqrt(h / shape[0]), shape, [((slice(0, h),), (slice(0, h),))])
    if short in ("embed_tokens", "lm_head", "q_a_proj", "kv_a_proj_with_mqa", "gate"):
        return pad(t, shape, [((all_, slice(0, h)), (all_, slice(0, h)))])
    if short in ("q_b_proj", "kv_b_proj"):  # head-major rows: the narrow heads are the first ones
        rows = slice(0, t.shape[0])
        return pad(t, shape, [((rows, all_), (rows, all_))])
    if short == "o_proj":
        cols = slice(0, t.shape[1])
        return pad(t, shape, [((slice(0, h), cols), (slice(0, h), cols))])
    if short in ("gate_proj", "up_proj"):
        rows = slice(0, t.shape[0])
        return pad(t, shape, [((rows, all_), (rows, slice(0, h)))])
    if short == "down_proj" and t.dim() == 2:
        cols = slice(0, t.shape[1])
        return pad(t, shape, [((all_, cols), (slice(0, h), cols))])
    if short == "gate_up_proj":  # (experts, [gate; up] rows, hidden)
        i, wide_i = t.shape[1] // 2, shape[1] // 2
        return pad(t, shape, [
            ((all_, slice(0, i), all_), (all_, slice(0, i), slice(0, h))),
            ((all_, slice(i, 2 * i), all_), (all_, slice(wide_i, wide_i + i), slice(0, h))),
        ])  # fmt: skip
    if short == "down_proj":  # (experts, hidden, intermediate)
        cols = slice(0, t.shape[2])
        return pad(t, shape, [((all_, all_, cols), (all_, slice(0, h), cols))])
    if tuple(t.shape) == tuple(shape):  # q_a_layernorm, kv_a_layernorm, e_score_correction_bias
        return t.clone()
    raise ValueError(f"{name}: no rule to widen {tuple(t.shape)} to {tuple(shape)}")


def widen(narrow, spec: KimiPairSpec):
    """The wide model (``spec.wide_config()``, as many layers as ``narrow``) computing exactly what
    the trained ``narrow`` model computes, on CPU in float32; see the module's docstring."""
    from transformers import DeepseekV3ForCausalLM

    wide_cfg = spec.wide_config()
    wide_cfg.num_hidden_layers = narrow.config.num_hidden_layers
    shapes = wide_shapes(wide_cfg)
    out = {
        name: widen_tensor(
            name, t.detach().float(), narrow.config, shapes[template(name, wide_cfg.first_k_dense_replace)]
        )
        for name, t in narrow.state_dict().items()
    }
    wide = DeepseekV3ForCausalLM(wide_cfg).float()
    wide.load_state_dict(out)  # strict: a tensor without a rule, or missing, fails here
    return wide.eval()


OUTPUT_PROJECTIONS = ("self_attn.o_proj.weight", "mlp.down_proj.weight", "mlp.experts.down_proj",
                      "mlp.shared_experts.down_proj.weight")  # fmt: skip
"""A wide layer's tensors that write the residual stream: zero in an inserted layer."""
INIT_STD = 0.02


def inserted_layer(i: int, wide_cfg, seed: int = 0, device: str = "cpu", dtype=torch.bfloat16) -> dict:
    """Layer ``i`` of the wide target where no trained layer goes: random weights of the real
    shapes (seeded by ``seed`` and ``i``: the same bytes on every rebuild on one device), so that
    it costs what a real layer costs, routing included, and every output projection
    (:data:`OUTPUT_PROJECTIONS`) exactly zero, so that it adds nothing to the residual stream.
    Norm weights are one, the routing bias zero. HF names (transformers 5: fused experts)."""
    first_k_dense = wide_cfg.first_k_dense_replace
    kind = f"model.layers.{0 if i < first_k_dense else first_k_dense}."
    generator = torch.Generator(device).manual_seed(seed * 100_003 + i)
    out = {}
    for name, shape in wide_shapes(wide_cfg).items():
        if not name.startswith(kind):
            continue
        local = name[len(kind) :]
        if local.endswith(OUTPUT_PROJECTIONS) or local.endswith("e_score_correction_bias"):
            tensor = torch.zeros(shape, device=device, dtype=dtype)
        elif local.endswith("norm.weight"):
            tensor = torch.ones(shape, device=device, dtype=dtype)
        else:
            tensor = (torch.randn(shape, generator=generator, device=device) * INIT_STD).to(dtype)
        out[f"model.layers.{i}.{local}"] = tensor
    return out


ROUTED = re.compile(r"^(model\.layers\.\d+\.mlp\.experts)\.(gate_up_proj|down_proj)$")


def checkpoint_tensors(tensors: dict, quantize: bool = True) -> dict:
    """HF tensors (transformers 5) in Kimi-K2.5's checkpoint layout: under ``language_model.``, the
    fused routed experts split into ``experts.{e}.{gate,up,down}_proj``, those in compressed-tensors
    INT4 (``doctor.quantized.quantize_int4``: ``weight_packed``, ``weight_scale``, ``weight_shape``)
    when ``quantize``, the routing bias float32 and everything else bf16."""
    from sglang_eagle3_embed.doctor.quantized import quantize_int4

    out = {}
    for name, tensor in tensors.items():
        match = ROUTED.match(name)
        if not match:
            keep = torch.float32 if name.endswith("e_score_correction_bias") else torch.bfloat16
            out[f"language_model.{name}"] = tensor.to(keep)
            continue
        prefix, which = match.groups()
        for e in range(tensor.shape[0]):
            if which == "gate_up_proj":
                half = tensor.shape[1] // 2
                parts = {"gate_proj": tensor[e, :half], "up_proj": tensor[e, half:]}
            else:
                parts = {"down_proj": tensor[e]}
            for proj, weight in parts.items():
                base = f"language_model.{prefix}.{e}.{proj}."
                if quantize:
                    out.update({base + k: v for k, v in quantize_int4(weight).items()})
                else:
                    out[base + "weight"] = weight.to(torch.bfloat16).contiguous()
    return out


def place_trained(num_layers: int, ids=SEED_IDS, config_ids=SEED_CONFIG_IDS) -> tuple[int, ...]:
    """Layers to train so that the draft's ``ids`` read outputs of trained layers and every tensor
    stock SGLang reads for ``config_ids`` (its first-id heuristic) is another one: layer 0 (the
    dense layer, whose output the first stock read holds where the embedding was trained), each of
    ``ids``' layers, and one layer between each trained id and the stock read after it (so that
    the inserted layers do not pass the trained tensor on to the stock read)."""
    plan = resolve_capture_plan({"eagle_config": {IDS_FIELD: list(ids)}}, num_layers).indices
    stock = stock_reading({"eagle_config": {IDS_FIELD: list(config_ids)}}, num_layers).indices
    trained = {0} | {i - 1 for i in plan if i > 0}
    for want, got in zip(plan, stock, strict=True):
        if (
            got > want
            and capture_map(sorted(trained), num_layers)[got]
            == capture_map(sorted(trained), num_layers)[want]
        ):
            trained.add((want + got) // 2)
    placed = tuple(sorted(trained))
    cls = capture_map(placed, num_layers)
    clash = [(w, g) for w, g in zip(plan, stock, strict=True) if cls[w] == cls[g]]
    if clash:
        raise ValueError(f"capture indices {clash} hold one tensor with trained layers at {list(placed)}")
    return placed
