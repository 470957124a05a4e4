"""Targets in the on-disk formats of the official quantized checkpoints, and their dequantization
(torch + safetensors).

- **FP8 block-wise**, as DeepSeek-V3/R1 and Kimi-K2 ship it (:data:`FP8_CONFIG`): every linear
  weight of a decoder layer (attention projections, dense MLP, routed and shared experts) is
  ``float8_e4m3fn`` with a float32 ``{name}_scale_inv`` per 128 x 128 block, the multiplier that
  turns the block back into real values; the embedding, ``lm_head``, the norms and the router
  (``mlp.gate.weight``, ``e_score_correction_bias``) stay unquantized.
- **INT4**, as Kimi-K2.5 ships it (:func:`int4_config`): compressed-tensors ``pack-quantized``,
  routed experts only, symmetric int4 in groups of 32 along the input dimension, eight values per
  int32 (``weight_packed``, ``weight_scale``, ``weight_shape``); the rest bf16.

:func:`write_fp8_target` and :func:`write_int4_target` write such a folder from a tiny pair's
target (sharded, with ``model.safetensors.index.json``, as the official checkpoints are). The MLP
widths are first padded with zeros to what the formats' kernels take (a multiple of 128), which
leaves the function unchanged: a padded unit computes ``act(0) * 0`` and its ``down_proj`` column
is zero. :func:`dequantized_weights` reads either format back into float32 (the ``hf`` probe
backend); :func:`quantization_of` names a folder's format.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import torch

from sglang_eagle3_embed.core.readers.model_folder import INDEX, read_config, text_config
from sglang_eagle3_embed.doctor import cache

__all__ = [
    "FP8_BLOCK", "FP8_CONFIG", "INT4_GROUP", "QUANTIZATIONS", "dequantize_fp8", "dequantized_weights",
    "int4_config", "pack_int4", "quantization_of", "quantize_fp8", "quantize_int4", "unpack_int4",
    "write_fp8_target", "write_int4_target",
]  # fmt: skip

FP8_BLOCK = 128
FP8_CONFIG = {
    "activation_scheme": "dynamic",
    "fmt": "e4m3",
    "quant_method": "fp8",
    "weight_block_size": [FP8_BLOCK, FP8_BLOCK],
}
"""``quantization_config`` of deepseek-ai/DeepSeek-V3's ``config.json`` (DeepSeek-R1 and
moonshotai/Kimi-K2-Instruct carry the same)."""
FP8_MAX = 448.0
"""The largest finite ``float8_e4m3fn``: a block's absolute maximum maps to it."""

INT4_GROUP = 32
PACK = 8
"""int4 values per int32 (compressed-tensors packs along the input dimension, lowest bits first)."""

QUANTIZATIONS = ("fp8", "int4")
MLP_MULTIPLE = 128
"""Expert and dense MLP widths are padded to a multiple of this: the FP8 MoE kernel needs the
block size to divide them, Marlin's int4 MoE kernel a multiple of 128 along its input."""

FP8_QUANTIZED = re.compile(
    r"layers\.\d+\.(self_attn\.(q_proj|q_a_proj|q_b_proj|kv_a_proj_with_mqa|kv_b_proj|o_proj)"
    r"|mlp\.((experts\.\d+|shared_experts)\.)?(gate_proj|up_proj|down_proj))\.weight$"
)
"""The weights DeepSeek-V3's FP8 checkpoint stores in float8 (every other tensor stays bf16, the
router's bias float32)."""
ROUTED_EXPERT = re.compile(r"layers\.\d+\.mlp\.experts\.\d+\.(gate_proj|up_proj|down_proj)\.weight$")
"""The weights Kimi-K2.5's checkpoint stores in int4: the routed experts' projections."""


def int4_config() -> dict:
    """``quantization_config`` of moonshotai/Kimi-K2.5's ``config.json``: compressed-tensors,
    ``pack-quantized``, int4 symmetric in groups of 32 on every ``Linear`` but those ``ignore``
    names (attention, shared experts, the dense MLP, ``lm_head``). Kimi-K2.5 writes it in its
    ``text_config``; SGLang copies it to the top (``srt/configs/kimi_k25.py:157-159``)."""
    return {
        "config_groups": {
            "group_0": {
                "input_activations": None,
                "output_activations": None,
                "targets": ["Linear"],
                "weights": {
                    "actorder": None,
                    "block_structure": None,
                    "dynamic": False,
                    "group_size": INT4_GROUP,
                    "num_bits": 4,
                    "observer": "minmax",
                    "observer_kwargs": {},
                    "strategy": "group",
                    "symmetric": True,
                    "type": "int",
                },
            }
        },
        "format": "pack-quantized",
        "ignore": [
            "lm_head",
            "re:.*self_attn.*",
            "re:.*shared_experts.*",
            "re:.*mlp\\.(gate|up|gate_up|down)_proj.*",
        ],
        "kv_cache_scheme": None,
        "quant_method": "compressed-tensors",
        "quantization_status": "compressed",
    }


# --- the formats, tensor by tensor ------------------------------------------------------------


def _blocks(shape: tuple[int, int]) -> tuple[int, int]:
    return -(-shape[0] // FP8_BLOCK), -(-shape[1] // FP8_BLOCK)


def quantize_fp8(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(float8 weight, float32 scale_inv)``: each 128 x 128 block divided by its absolute
    maximum / 448, the maximum taken as at least 1e-4 (DeepSeek-V3's ``act_quant``), so that a block
    of zeros stays zero."""
    rows, cols = weight.shape
    br, bc = _blocks((rows, cols))
    padded = torch.zeros(br * FP8_BLOCK, bc * FP8_BLOCK, dtype=torch.float32)
    padded[:rows, :cols] = weight.float()
    blocks = padded.view(br, FP8_BLOCK, bc, FP8_BLOCK)
    scale = blocks.abs().amax(dim=(1, 3)).clamp(min=1e-4) / FP8_MAX
    q = (blocks / scale[:, None, :, None]).clamp(-FP8_MAX, FP8_MAX)
    q = q.view(br * FP8_BLOCK, bc * FP8_BLOCK)[:rows, :cols].to(torch.float8_e4m3fn)
    return q.contiguous(), scale.contiguous()


def dequantize_fp8(weight: torch.Tensor, scale_inv: torch.Tensor) -> torch.Tensor:
    """Real values of an FP8 block-wise weight: each block times its ``scale_inv``."""
    rows, cols = weight.shape
    if tuple(scale_inv.shape) != _blocks((rows, cols)):
        raise ValueError(
            f"a weight of shape {[rows, cols]} has a scale_inv of shape {list(scale_inv.shape)}, "
            f"expected {list(_blocks((rows, cols)))} (one per {FP8_BLOCK} x {FP8_BLOCK} block)"
        )
    scale = scale_inv.float().repeat_interleave(FP8_BLOCK, 0).repeat_interleave(FP8_BLOCK, 1)
    return weight.float() * scale[:rows, :cols]


def pack_int4(values: torch.Tensor) -> torch.Tensor:
    """Signed int4 values ``[rows, cols]`` (-8..7) as int32 ``[rows, cols / 8]``, packed by
    compressed-tensors itself (``pack_to_int32``: each value offset by 8, eight per int32 along a
    row, the first in the lowest four bits)."""
    from compressed_tensors.compressors.pack_quantized.helpers import pack_to_int32

    cols = values.shape[1]
    if cols % PACK:
        raise ValueError(f"{cols} columns do not pack into int32 words of {PACK} int4 values")
    return pack_to_int32(values, 4)


def unpack_int4(packed: torch.Tensor, cols: int) -> torch.Tensor:
    """The inverse of :func:`pack_int4` (compressed-tensors' ``unpack_from_int32``): int8 values
    -8..7, ``[rows, cols]``."""
    from compressed_tensors.compressors.pack_quantized.helpers import unpack_from_int32

    return unpack_from_int32(packed, 4, torch.Size([packed.shape[0], cols])).to(torch.int8)


def quantize_int4(weight: torch.Tensor) -> dict[str, torch.Tensor]:
    """``weight_packed`` (int32), ``weight_scale`` (bf16, one per group of 32 inputs) and
    ``weight_shape`` (int32) of a weight, quantized by compressed-tensors itself as it quantizes a
    bf16 weight for Kimi-K2.5's scheme (``calculate_qparams`` and ``quantize``: symmetric, scale =
    group absolute maximum / 7.5, a zero scale replaced by bf16's eps, rounded, clamped to -8..7)."""
    from compressed_tensors.quantization import QuantizationArgs
    from compressed_tensors.quantization.lifecycle.forward import quantize
    from compressed_tensors.quantization.utils import calculate_qparams

    rows, cols = weight.shape
    if cols % INT4_GROUP:
        raise ValueError(f"{cols} inputs do not split into groups of {INT4_GROUP}")
    args = QuantizationArgs(num_bits=4, type="int", symmetric=True, strategy="group", group_size=INT4_GROUP)
    weight = weight.to(torch.bfloat16)
    groups = weight.view(rows, cols // INT4_GROUP, INT4_GROUP)
    scale, zero = calculate_qparams(groups.amin(-1), groups.amax(-1), args)
    q = quantize(weight, scale, zero, args, dtype=torch.int8)
    return {
        "weight_packed": pack_int4(q),
        "weight_scale": scale.contiguous(),
        "weight_shape": torch.tensor([rows, cols], dtype=torch.int32, device=weight.device),
    }


def dequantize_int4(packed: torch.Tensor, scale: torch.Tensor, shape) -> torch.Tensor:
    rows, cols = (int(x) for x in shape)
    values = unpack_int4(packed, cols).float().view(rows, cols // INT4_GROUP, INT4_GROUP)
    return (values * scale.float()[..., None]).view(rows, cols)


# --- padding the MLP widths -------------------------------------------------------------------


def _round_up(value: int, multiple: int = MLP_MULTIPLE) -> int:
    return -(-value // multiple) * multiple


def _pad_to(tensor: torch.Tensor, dim: int, size: int) -> torch.Tensor:
    if tensor.shape[dim] == size:
        return tensor
    shape = list(tensor.shape)
    shape[dim] = size - shape[dim]
    return torch.cat([tensor, torch.zeros(shape, dtype=tensor.dtype)], dim=dim)


MLP_PROJ = re.compile(r"\.mlp\.((?:experts\.\d+|shared_experts)\.)?(gate_proj|up_proj|down_proj)\.weight$")


def pad_mlp(weights: dict, text: dict) -> tuple[dict, dict]:
    """``weights`` and text config with ``intermediate_size`` and ``moe_intermediate_size`` padded
    with zero units to a multiple of :data:`MLP_MULTIPLE`: gate and up get zero rows, down zero
    columns, so every MLP computes what it did."""
    text = dict(text)
    dense, moe = _round_up(text["intermediate_size"]), _round_up(text["moe_intermediate_size"])
    shared = moe * int(text.get("n_shared_experts") or 1)
    padded = {}
    for name, tensor in weights.items():
        match = MLP_PROJ.search(name)
        if match is None:
            padded[name] = tensor
            continue
        kind, proj = match.groups()
        size = dense if kind is None else shared if kind.startswith("shared") else moe
        padded[name] = _pad_to(tensor, 1 if proj == "down_proj" else 0, size)
    text.update(intermediate_size=dense, moe_intermediate_size=moe)
    return padded, text


# --- writing a folder -------------------------------------------------------------------------


SHARD_BYTES = 4 << 20
"""Shard size of the written checkpoints: small, so that even a tiny target has several shards
and an index, as the official checkpoints do."""


def _write_shards(weights: dict, folder: Path, shard_bytes: int = SHARD_BYTES) -> None:
    from safetensors.torch import save_file

    shards: list[dict] = [{}]
    size = 0
    for name in sorted(weights):
        tensor = weights[name].contiguous()
        nbytes = tensor.numel() * tensor.element_size()
        if shards[-1] and size + nbytes > shard_bytes:
            shards.append({})
            size = 0
        shards[-1][name] = tensor
        size += nbytes
    weight_map, total = {}, 0
    for i, shard in enumerate(shards, 1):
        file = f"model-{i:05d}-of-{len(shards):05d}.safetensors"
        save_file(shard, str(folder / file), metadata={"format": "pt"})
        for name, tensor in shard.items():
            weight_map[name] = file
            total += tensor.numel() * tensor.element_size()
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (folder / INDEX).write_text(json.dumps(index, indent=2))


def _copy_side_files(source: Path, tmp: Path) -> None:
    import shutil

    for file in source.iterdir():
        if file.is_file() and not file.name.endswith(".safetensors") and file.name not in (
            INDEX, "config.json", cache.MANIFEST, BUILT_FROM,
        ):  # fmt: skip
            shutil.copy(file, tmp / file.name)


BUILT_FROM = "built_from.json"
"""In a quantized folder: the folder it was written from and the SHA-256 of that folder's manifest."""


def _build(source: Path, out: Path, convert, shard_bytes: int) -> Path:
    source, out = Path(source), Path(out)

    def build(tmp: Path) -> None:
        from sglang_eagle3_embed.doctor.weights import read_safetensors

        cache.write_origin(tmp, BUILT_FROM, source)  # before the weights are read
        config, weights = convert(read_config(source, folder_only=True), read_safetensors(source))
        _write_shards(weights, tmp, shard_bytes)
        (tmp / "config.json").write_text(json.dumps(config, indent=2))
        _copy_side_files(source, tmp)

    return cache.ensure(out, build, check=lambda: cache.origin_problem(out, BUILT_FROM, source))


def _text_weights(config: dict, weights: dict) -> tuple[str, dict]:
    """The text model's weights without their wrapper prefix (``language_model.`` for Kimi-K2.5)."""
    prefix = "language_model." if text_config(config) is not config else ""
    return prefix, {k[len(prefix) :]: v for k, v in weights.items() if k.startswith(prefix)}


def _with_text(config: dict, text: dict, quantization: dict) -> dict:
    config = json.loads(json.dumps(config))
    if text_config(config) is not config:  # Kimi-K2.5: in its text_config only
        config["text_config"] = {**text, "quantization_config": quantization}
    else:
        config.update(text, quantization_config=quantization)
    config["torch_dtype"] = "bfloat16"
    return config


def _quantized(config: dict, weights: dict, which: re.Pattern, quantize, quantization: dict):
    prefix, text_weights = _text_weights(config, weights)
    text_weights, text = pad_mlp(text_weights, dict(text_config(config)))
    out = {k: v for k, v in weights.items() if not k.startswith(prefix)} if prefix else {}
    for name, tensor in text_weights.items():
        if which.search(name):
            for suffix, part in quantize(tensor).items():
                out[f"{prefix}{name.removesuffix('weight')}{suffix}"] = part
        elif name.endswith("e_score_correction_bias"):
            out[prefix + name] = tensor.float()
        else:
            out[prefix + name] = tensor.to(torch.bfloat16)
    for name, tensor in list(out.items()):
        if not name.startswith(prefix) and tensor.is_floating_point():
            out[name] = tensor.to(torch.bfloat16)
    return _with_text(config, text, quantization), out


def _fp8_parts(tensor: torch.Tensor) -> dict:
    weight, scale_inv = quantize_fp8(tensor)
    return {"weight": weight, "weight_scale_inv": scale_inv}


def write_fp8_target(source: Path, out: Path, shard_bytes: int = SHARD_BYTES) -> Path:
    """An FP8 block-wise copy of the DeepSeek-V3 target in ``source`` (once; cached like a pair)."""
    convert = lambda c, w: _quantized(c, w, FP8_QUANTIZED, _fp8_parts, FP8_CONFIG)  # noqa: E731
    return _build(source, out, convert, shard_bytes)


def write_int4_target(source: Path, out: Path, shard_bytes: int = SHARD_BYTES) -> Path:
    """An INT4 copy (routed experts only) of the target in ``source``, a Kimi-K2.5 folder as the
    official checkpoint is, or a DeepSeek-V3 one (once; cached)."""
    convert = lambda c, w: _quantized(c, w, ROUTED_EXPERT, quantize_int4, int4_config())  # noqa: E731
    return _build(source, out, convert, shard_bytes)


# --- reading back -----------------------------------------------------------------------------


def quantization_of(config: dict) -> str | None:
    """``fp8`` (block-wise), ``int4`` (compressed-tensors pack-quantized), another method's name,
    or None for an unquantized config (the top level or, for Kimi-K2.5, its ``text_config``)."""
    quant = config.get("quantization_config") or text_config(config).get("quantization_config")
    if not isinstance(quant, dict):
        return None
    method = quant.get("quant_method")
    if method == "fp8" and quant.get("weight_block_size") == [FP8_BLOCK, FP8_BLOCK]:
        return "fp8"
    if method == "compressed-tensors" and quant.get("format") == "pack-quantized":
        return "int4"
    return str(method)


def dequantized_weights(weights: dict) -> dict:
    """Every quantized weight of ``weights`` (either format) as float32 under its plain name
    (``...weight``), the rest as they are."""
    out = {}
    for name, tensor in weights.items():
        if name.endswith("_scale_inv") or name.endswith(("weight_scale", "weight_shape")):
            continue
        if name.endswith("weight") and f"{name}_scale_inv" in weights:
            out[name] = dequantize_fp8(tensor, weights[f"{name}_scale_inv"])
        elif name.endswith("weight_packed"):
            base = name.removesuffix("_packed")
            out[base] = dequantize_int4(tensor, weights[f"{base}_scale"], weights[f"{base}_shape"])
        else:
            out[name] = tensor
    return out
