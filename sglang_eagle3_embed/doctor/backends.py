"""The probe's three target backends. Each delivers the same two things, which one scoring core
(:mod:`sglang_eagle3_embed.doctor.probe`) uses: greedy continuations (``generate``) and the
hidden states a wiring reads (``states``: capture index -> ``[B, T, H]``, index ``i`` the input of
layer ``i``), with the target's ``embedding``, ``num_layers`` and ``device``.

- ``hf``: HF transformers (``output_hidden_states``), CPU or one GPU;
- ``sglang-cpu``: SGLang 0.5.23's own DeepSeek model on CPU, capturing through the plugin;
- ``engine``: an SGLang engine on the GPU in capture-only mode (``--enable-return-aux-hidden-states``),
  for targets that only fit there.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from sglang_eagle3_embed.core.errors import InputError
from sglang_eagle3_embed.core.readers.model_folder import ModelFolder, read_config, text_config
from sglang_eagle3_embed.doctor.quantized import QUANTIZATIONS, dequantized_weights, quantization_of
from sglang_eagle3_embed.doctor.weights import read_safetensors, read_tensor

__all__ = ["BACKENDS", "EngineBackend", "HFBackend", "SGLangCpuBackend", "make_backend"]


def hf_model(folder: Path):
    """The target of ``folder`` in HF transformers, float32. A Kimi-K2.5 folder gives its DeepSeek-V3
    text model (the weights under ``language_model.``; the vision tower is not needed to score
    text); a quantized folder is dequantized first (:func:`~sglang_eagle3_embed.doctor.quantized.
    dequantized_weights`). Both load through ``from_pretrained`` (which converts per-expert
    checkpoint names) from a temporary folder."""
    import tempfile

    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM

    config = read_config(folder, folder_only=True)
    text = text_config(config)
    quantization = dequantizable(config, "hf")
    if text is config and quantization is None:
        return AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    weights = read_safetensors(folder)
    if text is not config:
        weights = {
            name.replace("language_model.layers.", "language_model.model.layers.").removeprefix(
                "language_model."
            ): tensor  # NVFP4 names
            for name, tensor in weights.items()
            if name.startswith("language_model.")
        }
        if not weights:
            raise ValueError("it has no weights under language_model.")
    weights = {k: v.contiguous() for k, v in dequantized_weights(weights).items()}
    plain = {k: v for k, v in text.items() if k != "quantization_config"}
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "config.json").write_text(json.dumps(plain))
        save_file(weights, str(Path(tmp) / "model.safetensors"))
        return AutoModelForCausalLM.from_pretrained(tmp, dtype=torch.float32)


def dequantizable(config: dict, backend: str) -> str | None:
    """The target's quantization (``fp8``, ``int4`` or None), which the CPU backends dequantize;
    an :class:`InputError` for another method, whose kernels only SGLang on a GPU has."""
    quantization = quantization_of(config)
    if quantization not in (None, *QUANTIZATIONS):
        raise InputError(
            f"--backend {backend}: the target is quantized with {quantization!r}, which the CPU "
            f"backends cannot dequantize (they read FP8 block-wise and compressed-tensors int4 "
            f"pack-quantized checkpoints); use --backend engine, SGLang's own kernels on a GPU"
        )
    return quantization


class HFBackend:
    """HF transformers: greedy ``generate`` and ``output_hidden_states`` (index i = input of layer i)."""

    name = "hf"

    def __init__(self, target: Path, device: str = "cpu"):
        try:
            self.model = hf_model(Path(target))
        except InputError:
            raise
        except RuntimeError:  # transformers' report (logged above) of weights that do not fit the config
            raise ValueError(
                "a weight's shape differs from what its config.json describes (transformers lists them "
                "above); download the model again, or fix config.json"
            ) from None
        self.model = self.model.to(device).eval()
        self.device = device
        self.num_layers = self.model.config.num_hidden_layers
        self.embedding = self.model.get_input_embeddings()

    def generate(self, prompts: torch.Tensor, new_tokens: int) -> torch.Tensor:
        """Greedy, one full forward per token (``generate`` would stop at, or with
        ``min_new_tokens`` ban, the config's eos id: no such thing in a probe)."""
        tokens = prompts.to(self.device)
        with torch.no_grad():
            for _ in range(new_tokens):
                following = self.model(tokens).logits[:, -1].argmax(-1)
                tokens = torch.cat([tokens, following[:, None]], dim=1)
        return tokens

    def states(self, tokens: torch.Tensor, indices: list[int]) -> dict[int, torch.Tensor]:
        with torch.no_grad():
            hidden = self.model(tokens.to(self.device), output_hidden_states=True).hidden_states
        return {i: hidden[i] for i in indices}


class SGLangCpuBackend:
    """SGLang 0.5.23's DeepSeek model on CPU; captures through the plugin's capture path."""

    name = "sglang-cpu"

    def __init__(self, target: Path, device: str = "cpu"):
        from sglang_eagle3_embed.doctor import sglang_cpu
        from sglang_eagle3_embed.patch import deepseek_models as models

        config = read_config(target, folder_only=True)
        arch = (config.get("architectures") or ["?"])[0]
        cls = getattr(models, arch, None)
        if cls is None or not hasattr(cls, "set_eagle3_layers_to_capture") or arch.startswith("Kimi"):
            raise ValueError(
                f"the sglang-cpu backend runs DeepseekV2/V3/V32 targets, not {arch}; use --backend hf "
                f"(the text model, on the CPU) or --backend engine (SGLang's own model, on a GPU)"
            )
        dequantizable(config, self.name)
        self.model, self.config = sglang_cpu.load_model(cls, target)
        self.num_layers = self.config.num_hidden_layers
        self.embedding = self.model.model.embed_tokens
        self.device = "cpu"

    def generate(self, prompts: torch.Tensor, new_tokens: int) -> torch.Tensor:
        from sglang_eagle3_embed.doctor.sglang_cpu import CpuRuntime

        self.model.capture_aux_hidden_states = False
        rows = list(range(1, prompts.shape[0] + 1))
        runtime = CpuRuntime.for_batch(self.config, prompts.shape[0], prompts.shape[1] + new_tokens)
        out = [prompts]
        with torch.no_grad():
            batch = runtime.extend(rows, prompts.tolist())
            for step in range(new_tokens):
                hidden = self.model.model(batch.input_ids, batch.positions, batch)
                hidden = hidden[0] if isinstance(hidden, tuple) else hidden
                if step == 0:
                    hidden = hidden[(batch.extend_start_loc + batch.extend_seq_lens - 1).long()]
                following = (hidden @ self.model.lm_head.weight.T).argmax(-1)
                out.append(following[:, None])
                if step + 1 < new_tokens:
                    batch = runtime.decode(rows, following.tolist())
        return torch.cat(out, dim=1)

    def states(self, tokens: torch.Tensor, indices: list[int]) -> dict[int, torch.Tensor]:
        from sglang_eagle3_embed.core.capture.draft_config import CapturePlan
        from sglang_eagle3_embed.core.capture.ids import Convention
        from sglang_eagle3_embed.doctor.sglang_cpu import prefill_captures
        from sglang_eagle3_embed.patch.deepseek_capture import apply_plan

        order = sorted(indices)
        apply_plan(self.model, CapturePlan(None, "probe", Convention.HIDDEN_STATES, tuple(order)))
        aux = prefill_captures(self.model, self.config, tokens)
        aux = aux.view(tokens.shape[0], tokens.shape[1], len(order), -1)
        return {i: aux[:, :, k] for k, i in enumerate(order)}


class EngineBackend:
    """An SGLang engine on the GPU, capture-only (``--enable-return-aux-hidden-states``): stock
    SGLang captures raw layer indices when the first listed one is not 1, so index 0 always leads."""

    name = "engine"

    def __init__(self, target: Path, device: str = "cuda", engine_args: dict | None = None):
        self.target = Path(target)
        self.num_layers = ModelFolder.read(target).num_layers
        self.engine_args = engine_args or {}
        self.device = device
        self.engine = None
        self.order: list[int] = []
        embed = read_tensor(target, "embed_tokens.weight")
        self.embedding = torch.nn.Embedding.from_pretrained(embed.float()).to(device)

    def expect(self, indices: list[int]) -> None:
        """The capture indices ``states`` will be asked for: an engine not yet started captures
        them from its start, so ``generate`` and ``states`` share it (each start loads the target)."""
        if self.engine is None:
            self.order = self._capture_order(indices)

    @staticmethod
    def _capture_order(indices) -> list[int]:
        """What the engine captures for ``indices``: ascending, index 0 leading (see the class)."""
        return sorted(set(indices) | {0})

    def _start(self, order: list[int]):
        self._release_cached_memory()
        if self.engine is not None and self.order == order:
            return
        import sglang

        if self.engine is not None:
            self.engine.shutdown()
        self.order = order
        self.engine = sglang.Engine(
            **{
                "model_path": str(self.target),
                "skip_tokenizer_init": True,  # token ids in, token ids out
                "disable_cuda_graph": True,  # a few passes: capturing graphs would cost minutes
                **self.engine_args,
                "enable_return_aux_hidden_states": True,
                "speculative_algorithm": "EAGLE3",  # names the capture convention only
                "return_aux_hidden_state_layer_ids": order,
            }
        )

    @staticmethod
    def _release_cached_memory():
        """The engine's scheduler shares the GPU with this process, whose caching allocator keeps
        what the draft's last batch used: the engine's next batch needs that memory back."""
        if torch.cuda.is_available():
            torch.cuda.empty_cache()

    def generate(self, prompts: torch.Tensor, new_tokens: int) -> torch.Tensor:
        self._start(self.order or [0])
        outs = self.engine.generate(
            input_ids=prompts.tolist(),
            sampling_params={"temperature": 0, "max_new_tokens": new_tokens, "ignore_eos": True},
        )
        return torch.tensor([p + o["output_ids"] for p, o in zip(prompts.tolist(), outs)])

    def states(self, tokens: torch.Tensor, indices: list[int]) -> dict[int, torch.Tensor]:
        order = self._capture_order(indices)
        self._start(order)
        outs = self.engine.generate(
            input_ids=tokens.tolist(),
            sampling_params={"temperature": 0, "max_new_tokens": 1},
            return_hidden_states=True,
        )
        rows = []
        length = tokens.shape[1]
        for o in outs:
            pieces = [torch.as_tensor(p, dtype=torch.float32) for p in o["meta_info"]["hidden_states"]]
            flat = torch.cat([p if p.dim() == 2 else p[None] for p in pieces])
            if flat.shape[0] < length or flat.shape[1] != len(order) * self.embedding.embedding_dim:
                raise ValueError(
                    f"unexpected return_hidden_states layout: {[tuple(p.shape) for p in pieces][:4]} for "
                    f"{length} tokens and {len(order)} captures of width {self.embedding.embedding_dim}"
                )
            rows.append(flat[:length].view(length, len(order), -1))
        aux = torch.stack(rows).to(self.device)
        return {i: aux[:, :, order.index(i)] for i in indices}

    def close(self):
        if self.engine is not None:
            self.engine.shutdown()


BACKENDS = {"hf": HFBackend, "sglang-cpu": SGLangCpuBackend, "engine": EngineBackend}


def make_backend(name: str, target: Path, device: str | None = None, engine_args: dict | None = None):
    if name not in BACKENDS:
        raise ValueError(f"unknown backend {name!r}; choose one of {sorted(BACKENDS)}")
    if name == "engine":
        from sglang_eagle3_embed.core.releases import current

        installed = current()
        if not installed.capture_only:
            raise InputError(
                f"--backend engine runs SGLang's capture-only mode (--enable-return-aux-hidden-states), "
                f"which SGLang {installed.version} lacks (it came with 0.5.23); use --backend hf or "
                f"--backend sglang-cpu"
            )
        return EngineBackend(target, device or "cuda", engine_args)
    if engine_args:
        raise ValueError("--engine-arg only applies to --backend engine")
    return BACKENDS[name](target, device or "cpu")
