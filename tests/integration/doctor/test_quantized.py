"""Quantized targets as the official checkpoints ship them (``doctor/quantized.py``), written from the
tiny pair: the formats checked against their public configs and against the libraries that read
them, the padding that makes the kernels' widths exact, the CPU backends dequantizing them against
the unquantized original, and ``check`` / ``ids`` on the sharded folders without a false finding."""

import json
import re

import pytest
import torch

from sglang_eagle3_embed.core.readers.model_folder import (
    INDEX,
    decoder_layers,
    safetensors_header,
    weight_files,
)
from sglang_eagle3_embed.doctor import quantized
from sglang_eagle3_embed.doctor.quantized import (
    FP8_QUANTIZED,
    ROUTED_EXPERT,
    dequantize_fp8,
    dequantized_weights,
    pack_int4,
    quantize_fp8,
    quantize_int4,
    unpack_int4,
    write_fp8_target,
    write_int4_target,
)
from sglang_eagle3_embed.doctor.weights import read_safetensors
from tests.support import cli, in_process

# Copied from the public configs, as JSON:
# deepseek-ai/DeepSeek-V3, config.json (and README_WEIGHTS.md, "FP8 Configuration"),
# https://huggingface.co/deepseek-ai/DeepSeek-V3/blob/main/config.json
DEEPSEEK_V3_QUANTIZATION = json.loads(
    '{"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8", "weight_block_size": [128, 128]}'
)
# moonshotai/Kimi-K2.5, config.json, text_config.quantization_config,
# https://huggingface.co/moonshotai/Kimi-K2.5/blob/main/config.json
KIMI_K25_QUANTIZATION = json.loads(
    '{"config_groups": {"group_0": {"input_activations": null, "output_activations": null, '
    '"targets": ["Linear"], "weights": {"actorder": null, "block_structure": null, "dynamic": false, '
    '"group_size": 32, "num_bits": 4, "observer": "minmax", "observer_kwargs": {}, "strategy": "group", '
    '"symmetric": true, "type": "int"}}}, "format": "pack-quantized", "ignore": ["lm_head", '
    '"re:.*self_attn.*", "re:.*shared_experts.*", "re:.*mlp\\\\.(gate|up|gate_up|down)_proj.*"], '
    '"kv_cache_scheme": null, "quant_method": "compressed-tensors", "quantization_status": "compressed"}'
)
SHARD = 256 << 10
"""Small shards: the tiny targets are written as several shards with an index, as the real ones are."""


@pytest.fixture(scope="module")
def fp8(tiny_pair, tmp_path_factory):
    return write_fp8_target(tiny_pair.target, tmp_path_factory.mktemp("q") / "fp8", SHARD)


@pytest.fixture(scope="module")
def int4(tiny_kimi_pair, tmp_path_factory):
    return write_int4_target(tiny_kimi_pair.target, tmp_path_factory.mktemp("q") / "int4", SHARD)


def headers(folder) -> dict:
    return {name: info for file in weight_files(folder) for name, info in safetensors_header(file).items()}


def config(folder) -> dict:
    return json.loads((folder / "config.json").read_text())


@pytest.mark.releases
def test_the_configs_are_the_official_ones(fp8, int4):
    assert config(fp8)["quantization_config"] == DEEPSEEK_V3_QUANTIZATION
    kimi = config(int4)
    assert kimi["text_config"]["quantization_config"] == KIMI_K25_QUANTIZATION
    assert "quantization_config" not in kimi  # Kimi-K2.5 writes it in text_config only


@pytest.mark.releases
def test_the_folders_are_sharded_with_an_index(fp8, int4):
    for folder in (fp8, int4):
        index = json.loads((folder / INDEX).read_text())
        files = sorted({*index["weight_map"].values()})
        assert len(files) > 1 and files == sorted(p.name for p in folder.glob("*.safetensors"))
        assert set(index["weight_map"]) == set(headers(folder))


def test_fp8_holds_every_linear_of_a_layer_in_float8_with_a_scale_per_block(fp8, tiny_pair):
    held, original = headers(fp8), headers(tiny_pair.target)
    quantized_names = {n for n in original if FP8_QUANTIZED.search(n)}
    assert {n for n, info in held.items() if info.dtype == "F8_E4M3"} == quantized_names
    assert any(".experts." in n for n in quantized_names) and any("kv_b_proj" in n for n in quantized_names)
    for name in quantized_names:
        rows, cols = held[name].shape
        assert held[f"{name}_scale_inv"] == ("F32", (-(-rows // 128), -(-cols // 128))), name
    kept = {n: i.dtype for n, i in held.items() if n in original and n not in quantized_names}
    assert {n for n, d in kept.items() if d == "F32"} == {
        n for n in kept if n.endswith("e_score_correction_bias")
    }
    assert all(d == "BF16" for n, d in kept.items() if not n.endswith("e_score_correction_bias"))
    assert any(n.endswith("mlp.gate.weight") for n in kept) and "lm_head.weight" in kept


@pytest.mark.releases
def test_int4_holds_the_routed_experts_only_packed_eight_per_int32(int4, tiny_kimi_pair):
    held = headers(int4)
    experts = {n for n in headers(tiny_kimi_pair.target) if ROUTED_EXPERT.search(n)}
    assert experts and {n.removesuffix("_packed") for n in held if n.endswith("weight_packed")} == experts
    for name in experts:
        rows, cols = held[f"{name}_packed"].shape
        assert held[f"{name}_packed"].dtype == "I32" and held[f"{name}_scale"] == (
            "BF16",
            (rows, cols * 8 // 32),
        )
        assert held[f"{name}_shape"] == ("I32", (2,))
    ignored = [n for n in held if re.search(r"self_attn|shared_experts|mlp\.(gate|up|down)_proj|lm_head", n)]
    assert ignored and all(held[n].dtype == "BF16" for n in ignored)


def test_the_mlp_widths_are_padded_to_what_the_kernels_take(fp8, tiny_pair):
    before, after = config(tiny_pair.target), config(fp8)
    assert before["moe_intermediate_size"] % 128 and after["moe_intermediate_size"] % 128 == 0
    assert after["intermediate_size"] % 128 == 0


def test_padding_leaves_the_function_exactly_as_it_was(tiny_pair, tmp_path):
    """Zero units in every MLP: the padded model's logits equal the original's, bit for bit; a padded
    unit whose gate and up projections are not zero changes them."""
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM

    def logits(weights, text) -> torch.Tensor:
        folder = tmp_path / str(len(list(tmp_path.iterdir())))
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps(text))
        save_file({k: v.contiguous() for k, v in weights.items()}, str(folder / "model.safetensors"))
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
        with torch.no_grad():
            return model(tokens).logits

    tokens = torch.randint(0, 128, (4, 16), generator=torch.Generator().manual_seed(0))
    original = read_safetensors(tiny_pair.target)
    reference = logits(original, config(tiny_pair.target))
    weights, text = quantized.pad_mlp(original, config(tiny_pair.target))
    assert text["moe_intermediate_size"] == 128 and torch.equal(logits(weights, text), reference)
    weights["model.layers.1.mlp.experts.0.gate_proj.weight"][-1] = 1.0
    weights["model.layers.1.mlp.experts.0.up_proj.weight"][-1] = 1.0
    weights["model.layers.1.mlp.experts.0.down_proj.weight"][:, -1] = 1.0
    assert not torch.equal(logits(weights, text), reference)


def test_int4_is_packed_and_scaled_as_the_format_specifies():
    # compressed-tensors packs and quantizes (pack_int4, quantize_int4); this checks its output
    # against the format as written: value + 8 in nibble i % 8 of word i // 8, lowest bits first;
    # the scale the group's absolute maximum / 7.5
    values = torch.tensor([[-8, -7, -1, 0, 1, 2, 6, 7, 3, -3, 5, -5, 4, -4, 0, 7]], dtype=torch.int8)
    words = [sum((int(v) + 8) << (4 * i) for i, v in enumerate(values[0, w * 8 : w * 8 + 8])) for w in (0, 1)]
    expected = torch.tensor([[w - 2**32 if w >= 2**31 else w for w in words]], dtype=torch.int32)
    assert torch.equal(pack_int4(values), expected)
    assert torch.equal(unpack_int4(expected, 16), values)
    weight = torch.zeros(2, 64)
    weight[0, :32] = torch.linspace(-1.5, 1.5, 32)  # group maximum 1.5: scale 0.2
    q = quantize_int4(weight)
    assert q["weight_scale"].shape == (2, 2) and q["weight_scale"][0, 0].item() == pytest.approx(
        0.2, rel=1e-2
    )
    assert q["weight_scale"][1, 0] == torch.finfo(torch.bfloat16).eps  # a zero group
    restored = unpack_int4(q["weight_packed"], 64)[0, :32].float() * q["weight_scale"][0, 0].float()
    assert (restored - weight[0, :32]).abs().max() <= 0.55 * 0.2  # half a step, and bf16 rounding


@pytest.mark.releases
def test_fp8_dequantizes_as_sglang_does():
    from sglang.srt.layers.quantization.fp8_utils import block_quant_dequant

    weight = torch.randn(300, 200, generator=torch.Generator().manual_seed(0))
    q, scale_inv = quantize_fp8(weight)
    assert q.dtype == torch.float8_e4m3fn and scale_inv.shape == (3, 2)
    assert torch.equal(
        dequantize_fp8(q, scale_inv), block_quant_dequant(q, scale_inv, [128, 128], torch.float32)
    )
    error = (dequantize_fp8(q, scale_inv) - weight).abs()
    assert error.max() <= weight.abs().max() / 16  # e4m3 keeps 3 mantissa bits


@pytest.mark.releases
def test_dequantized_weights_are_the_originals_within_the_formats_precision(fp8, int4, tiny_pair):
    original = read_safetensors(tiny_pair.target)
    for folder, prefix, pattern, bound in (
        (fp8, "", FP8_QUANTIZED, 1 / 16),
        (int4, "language_model.", ROUTED_EXPERT, 1 / 7),
    ):
        restored = dequantized_weights(read_safetensors(folder))
        for name, tensor in original.items():
            if not pattern.search(name):
                continue
            back = restored[prefix + name][: tensor.shape[0], : tensor.shape[1]]
            assert (back - tensor).abs().max() <= bound * tensor.abs().max() + 1e-6, name


def predicted(target, draft, backend: str = "hf") -> float:
    """``probe``'s accept length for the plugin's reading of the draft (32 prompts, in this process)."""
    code, out, err = in_process(
        "probe", "--target", target, "--draft", draft, "--backend", backend, "--num-prompts", 32, "--json",
        "--no-progress",
    )  # fmt: skip
    assert code == 0, err[-2000:]
    return next(w["accept_length"] for w in json.loads(out)["wirings"] if "plugin" in w["names"])


@pytest.fixture(scope="module")
def unquantized(tiny_pair) -> float:
    return predicted(tiny_pair.target, tiny_pair.draft)


@pytest.mark.releases
@pytest.mark.parametrize("fmt", ["fp8", "int4"])
def test_the_hf_backend_probes_the_dequantized_target_as_the_original(fmt, fp8, int4, tiny_pair, unquantized):
    """Within 10% of the unquantized original's prediction for the trained wiring (the Kimi-K2.5
    wrapper holds the same text model)."""
    value = predicted(fp8 if fmt == "fp8" else int4, tiny_pair.draft)
    assert abs(value - unquantized) <= 0.10 * unquantized, (fmt, value, unquantized)


@pytest.mark.releases
def test_the_sglang_cpu_backend_dequantizes_as_the_hf_backend(fp8, tiny_pair):
    assert predicted(fp8, tiny_pair.draft, "sglang-cpu") == predicted(fp8, tiny_pair.draft)


def test_the_cpu_backends_refuse_a_quantization_they_cannot_read(tiny_pair, tmp_path):
    import shutil

    folder = tmp_path / "awq"
    shutil.copytree(tiny_pair.target, folder)
    data = config(folder)
    data["quantization_config"] = {"quant_method": "awq", "bits": 4}
    (folder / "config.json").write_text(json.dumps(data))
    code, _, err = in_process("probe", "--target", folder, "--draft", tiny_pair.draft, "--num-prompts", 4)
    assert code == 2 and "'awq'" in err and "--backend engine" in err


@pytest.mark.releases
@pytest.mark.parametrize("fmt", ["fp8", "int4"])
def test_check_and_ids_read_the_sharded_quantized_folders_without_a_finding(fmt, fp8, int4, tiny_pair):
    folder = fp8 if fmt == "fp8" else int4
    run = cli(
        "check", "--json", "--model-path", folder, "--model-impl", "sglang_eagle3_embed",
        "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", tiny_pair.draft,
        "--speculative-num-steps", 3, "--speculative-eagle-topk", 1, "--speculative-num-draft-tokens", 4,
        *(["--trust-remote-code"] if fmt == "int4" else []),
    )  # fmt: skip
    report = json.loads(run.stdout)
    assert run.returncode == 0 and report["findings"] == [], report
    assert report["rules"]["target-layer-count"] == "ok"  # its layers were read from the shards
    code, out, _ = in_process("ids", tiny_pair.draft, "--target", folder, "--json")
    assert code == 0 and json.loads(out)["capture_indices"] == [0, 3, 5], out
    layers = decoder_layers(headers(folder), ("model.layers.", "language_model.model.layers."))
    assert sorted(layers) == list(range(config(tiny_pair.target)["num_hidden_layers"]))
