"""``probe``: measure a draft offline under each candidate wiring and name the one it was trained for.

The target runs the prompts greedily; every hidden state a candidate wiring needs is captured once;
the draft then runs the greedy chain of :mod:`sglang_eagle3_embed.doctor.chain` under each wiring. Three
backends deliver the same thing (greedy sequences and the captured states), one scoring core uses it:

- ``hf``: HF transformers (``output_hidden_states``), CPU or one GPU;
- ``sglang-cpu``: SGLang 0.5.23's own DeepSeek model on CPU, capturing through the plugin;
- ``engine``: an SGLang engine on the GPU in capture-only mode (``--enable-return-aux-hidden-states``),
  for targets that only fit there.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from statistics import NormalDist

import torch

from sglang_eagle3_embed import FAMILY
from sglang_eagle3_embed.core.deployment import text_config
from sglang_eagle3_embed.core.errors import InputError
from sglang_eagle3_embed.doctor.chain import ChainScore, score, simulate
from sglang_eagle3_embed.doctor.weights import read_safetensors, read_tensor
from sglang_eagle3_embed.doctor.wirings import PLUGIN, STOCK, Wiring

__all__ = ["ProbeReport", "WiringResult", "load_draft", "make_backend", "run_probe"]


def load_draft(folder: Path, device: str = "cpu"):
    """The draft as a :class:`~sglang_eagle3_embed.doctor.tiny_draft.Eagle3Draft` twin and its token map
    (``d2t``: draft vocab index -> target token id, or None when the vocabularies are equal). The
    number of captures it reads comes from its fc weight, which is what it was trained on."""
    from sglang_eagle3_embed.doctor.tiny_draft import Eagle3Draft

    config = json.loads((Path(folder) / "config.json").read_text())
    if "LlamaForCausalLMEagle3" not in (config.get("architectures") or []):
        raise InputError(
            f"{folder}: probe reads LlamaForCausalLMEagle3 drafts, got {config.get('architectures')}"
        )
    missing = [
        k for k in ("hidden_size", "vocab_size", "num_attention_heads") if not isinstance(config.get(k), int)
    ]
    if missing:
        raise InputError(f"{folder}/config.json has no integer {', '.join(missing)}")
    config.setdefault("draft_vocab_size", config["vocab_size"])
    config.setdefault("target_hidden_size", config["hidden_size"])
    weights = {}
    for name, tensor in read_safetensors(folder).items():
        name = name.removeprefix("model.").replace("layers.0.", "midlayer.")
        weights[name] = tensor
    d2t = weights.pop("d2t", None)
    weights.pop("t2d", None)
    fc = weights.get("fc.weight")
    target_hidden = config["target_hidden_size"]
    if fc is None or fc.dim() != 2 or fc.shape[1] % target_hidden:
        shape = None if fc is None else tuple(fc.shape)
        raise InputError(
            f"{folder}: its fc.weight {shape} does not read a whole number of captures of "
            f"target_hidden_size {target_hidden}"
        )
    config["eagle_config"] = {"eagle_aux_hidden_state_layer_ids": list(range(fc.shape[1] // target_hidden))}
    draft = Eagle3Draft(config)
    try:
        missing, unexpected = draft.load_state_dict(weights, strict=False)
    except RuntimeError as exc:
        raise InputError(f"{folder}: its weights do not match its config.json: {exc}") from None
    missing = [m for m in missing if not m.startswith("rotary") and m != "embed_tokens.weight"]
    if missing or [u for u in unexpected if u != "embed_tokens.weight"]:
        raise InputError(
            f"{folder}: weights do not match the draft config: missing {missing}, unexpected {unexpected}"
        )
    token_map = None if d2t is None else (torch.arange(d2t.numel()) + d2t).to(device)
    return draft.to(device).eval(), token_map


def _chunks(n: int, size: int):
    for start in range(0, n, size):
        yield slice(start, min(n, start + size))


def text_model(folder: Path, config: dict):
    """The DeepSeek-V3 text model of a Kimi-K2.5 folder in HF transformers: the weights under
    ``language_model.``, loaded through ``from_pretrained`` (which converts per-expert checkpoint
    names) from a temporary folder; the vision tower is not needed to score text."""
    import tempfile

    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM

    weights = {}
    for name, tensor in read_safetensors(folder).items():
        name = name.replace("language_model.layers.", "language_model.model.layers.")  # NVFP4 names
        if name.startswith("language_model."):
            weights[name.removeprefix("language_model.")] = tensor.contiguous()
    if not weights:
        raise ValueError("it has no weights under language_model.")
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "config.json").write_text(json.dumps(config))
        save_file(weights, str(Path(tmp) / "model.safetensors"))
        return AutoModelForCausalLM.from_pretrained(tmp, torch_dtype=torch.float32)


class HFBackend:
    """HF transformers: greedy ``generate`` and ``output_hidden_states`` (index i = input of layer i)."""

    name = "hf"

    def __init__(self, target: Path, device: str = "cpu"):
        from transformers import AutoModelForCausalLM

        config = json.loads((Path(target) / "config.json").read_text())
        text = text_config(config)
        try:
            if text is not config:  # Kimi-K2.5: the text model inside
                self.model = text_model(Path(target), dict(text))
            else:
                self.model = AutoModelForCausalLM.from_pretrained(target, torch_dtype=torch.float32)
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

        config = json.loads((Path(target) / "config.json").read_text())
        arch = (config.get("architectures") or ["?"])[0]
        cls = getattr(models, arch, None)
        if cls is None or not hasattr(cls, "set_eagle3_layers_to_capture") or arch.startswith("Kimi"):
            raise ValueError(
                f"the sglang-cpu backend runs DeepseekV2/V3/V32 targets, not {arch}; use --backend hf "
                f"(the text model, on the CPU) or --backend engine (SGLang's own model, on a GPU)"
            )
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
        from sglang_eagle3_embed.core.draft_config import CapturePlan
        from sglang_eagle3_embed.core.ids import Convention
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
        config = json.loads((Path(target) / "config.json").read_text())
        self.target = Path(target)
        self.num_layers = text_config(config)["num_hidden_layers"]
        self.engine_args = engine_args or {}
        self.device = device
        self.engine = None
        self.order: list[int] = []
        embed = read_tensor(target, "embed_tokens.weight")
        self.embedding = torch.nn.Embedding.from_pretrained(embed.float()).to(device)

    def _start(self, order: list[int]):
        import sglang

        if self.engine is not None and self.order == order:
            return
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

    def generate(self, prompts: torch.Tensor, new_tokens: int) -> torch.Tensor:
        self._start(self.order or [0])
        outs = self.engine.generate(
            input_ids=prompts.tolist(),
            sampling_params={"temperature": 0, "max_new_tokens": new_tokens, "ignore_eos": True},
        )
        return torch.tensor([p + o["output_ids"] for p, o in zip(prompts.tolist(), outs)])

    def states(self, tokens: torch.Tensor, indices: list[int]) -> dict[int, torch.Tensor]:
        order = sorted(set(indices) | {0})
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


@dataclass(frozen=True)
class WiringResult:
    wiring: Wiring
    score: ChainScore | None
    deficit: float = 0.0
    """Accept length below the best wiring's, per prompt, averaged (paired over the same prompts)."""
    deficit_se: float = 0.0

    def as_dict(self) -> dict:
        out = {"names": list(self.wiring.names), "capture_indices": self.wiring.indices}
        out["tensors"] = self.wiring.describe()
        if self.score is None:
            out["fails"] = self.wiring.failure
        else:
            out.update(self.score.as_dict(), deficit=self.deficit, deficit_se=self.deficit_se)
        return out


CONFIG_READINGS = (PLUGIN, "ids as layer outputs", "ids as HF hidden_states")
"""The names of the wirings the config itself describes (the plugin's reading, the literal ids)."""


@dataclass
class ProbeReport:
    """The scored wirings and what they allow to conclude.

    The report names the wiring the draft was trained for only when it is ``determined``: at least
    two wirings were scored, one of them a reading of the config itself, and the best is clear of
    every other by more than ``z`` standard errors of their paired difference, where ``z`` bounds
    the chance of any false separation among the comparisons made to 5% (Bonferroni: about 2.8 for
    10 other wirings). Otherwise the verdict is "undetermined", with the reason."""

    results: list[WiringResult]
    steps: int
    prompts: int
    new_tokens: int
    backend: str
    best: WiringResult | None = field(init=False)
    ties: list[WiringResult] = field(init=False)

    def __post_init__(self):
        scored = [r for r in self.results if r.score is not None]
        self.best = max(scored, key=lambda r: r.score.accept_length) if scored else None
        z = self.z
        self.ties = [r for r in scored if r is not self.best and r.deficit < z * max(r.deficit_se, 1e-9)]

    @property
    def z(self) -> float:
        """Standard errors within which a wiring ties with the best (5% family-wise, two-sided)."""
        comparisons = max(1, sum(r.score is not None for r in self.results) - 1)
        return NormalDist().inv_cdf(1 - 0.05 / (2 * comparisons))

    @property
    def scored(self) -> list[WiringResult]:
        return [r for r in self.results if r.score is not None]

    def result(self, name: str) -> WiringResult:
        return next(r for r in self.results if name in r.wiring.names)

    def is_named(self, result: WiringResult) -> bool:
        """The best wiring or one indistinguishable from it."""
        return result.score is not None and (result is self.best or result in self.ties)

    @property
    def undetermined_because(self) -> str | None:
        """Why the report cannot name the trained wiring, or None when it can."""
        if len(self.scored) < 2:
            return (
                f"only one wiring could be scored ({self.best.wiring.name})"
                if self.best
                else "no wiring could be scored"
            )
        if not any(set(r.wiring.names) & set(CONFIG_READINGS) for r in self.scored):
            return "the config's own reading could not be scored (see the plugin's line below)"
        if self.ties:
            names = "; ".join(r.wiring.name for r in [self.best, *self.ties])
            return (
                f"{names} score alike (within {self.z:.1f} standard errors of their paired difference "
                f"over {self.prompts} prompts); probe more prompts (--num-prompts) to separate them"
            )
        return None

    @property
    def determined(self) -> bool:
        return self.undetermined_because is None

    @property
    def plugin_ok(self) -> bool:
        """The plugin's reading was scored and is the best, alone or tied: nothing found wrong."""
        return self.is_named(self.result(PLUGIN))

    def verdict(self) -> list[str]:
        best = self.best
        if self.determined:
            lines = [
                f"The draft was trained for: {best.wiring.describe()} (capture indices "
                f"{list(best.wiring.indices)}; predicted accept length {best.score.accept_length:.2f})."
            ]
        else:
            lines = [f"Undetermined which wiring the draft was trained for: {self.undetermined_because}."]
            if best is not None and not self.ties:
                lines.append(
                    f"Best scored: {best.wiring.describe()} (predicted accept length "
                    f"{best.score.accept_length:.2f}); not evidence that the draft was trained on it."
                )
        for name, who in ((PLUGIN, "--model-impl sglang_eagle3_embed"), (STOCK, "stock SGLang")):
            r = self.result(name)
            if r.score is None:
                lines.append(f"{who}: {r.wiring.failure}")
            elif self.is_named(r) and self.determined:
                lines.append(f"{who} reads the config as the draft was trained: OK.")
            elif self.is_named(r):
                lines.append(
                    f"{who} reads the config as one of the best-scoring wirings: nothing found wrong."
                )
            else:
                lines.append(
                    f"{who} reads the config as [{r.wiring.describe()}]: NOT what the draft was trained "
                    f"for (predicted accept length {r.score.accept_length:.2f} instead of "
                    f"{best.score.accept_length:.2f})."
                )
        return lines

    def as_dict(self) -> dict:
        best = [self.best, *self.ties] if self.best else []
        return {
            "backend": self.backend,
            "num_steps": self.steps,
            "prompts": self.prompts,
            "new_tokens": self.new_tokens,
            "status": "determined" if self.determined else "undetermined",
            "undetermined_because": self.undetermined_because,
            "trained_for": list(self.best.wiring.indices) if self.determined else None,
            "best": [list(r.wiring.indices) for r in best],
            "plugin_ok": self.plugin_ok,
            "wirings": [r.as_dict() for r in self.results],
            "verdict": self.verdict(),
        }

    def table(self) -> str:
        nw = max(len(r.wiring.name) for r in self.results)
        tw = max((len(r.wiring.describe()) for r in self.scored), default=10)
        head = f"{'wiring':{nw}}  {'tensors (in the draft order)':{tw}}  {'top-1':>5}  {'accept':>6}  per-step acceptance"
        lines = [head, "-" * len(head)]
        for r in self.results:
            if r.score is None:
                lines.append(f"{r.wiring.name:{nw}}  {r.wiring.failure[:200]}")
                continue
            steps = " ".join(f"{a:.2f}" for a in r.score.acceptance)
            mark = "  <- best" if r is self.best else "  <- tied" if r in self.ties else ""
            lines.append(
                f"{r.wiring.name:{nw}}  {r.wiring.describe():{tw}}  {r.score.agreement:5.3f}  "
                f"{r.score.accept_length:6.2f}  {steps}{mark}"
            )
        return "\n".join([*lines, "", *self.verdict()])


def run_probe(
    backend,
    draft,
    token_map,
    wirings: list[Wiring],
    prompts: torch.Tensor,
    *,
    new_tokens: int = 40,
    steps: int = 7,
    batch: int = 64,
    progress: bool | None = None,
) -> ProbeReport:
    """Score every wiring over the target's greedy continuation of ``prompts`` (``[N, P]``)."""
    from tqdm.auto import tqdm

    prompt_len = prompts.shape[1]
    needed = sorted({i for w in wirings if w.indices is not None for i in w.indices})
    scored = [w for w in wirings if w.indices is not None]
    runs = {w.indices: [] for w in scored}
    hits = {w.indices: [] for w in scored}
    bar = tqdm(
        total=prompts.shape[0], desc="probe", unit="prompt", disable=True if progress is False else None
    )
    for part in _chunks(prompts.shape[0], batch):
        # steps more tokens, so that every start within the new_tokens has a whole chain to check
        tokens = backend.generate(prompts[part], new_tokens + steps).to(backend.device)
        states = backend.states(tokens, needed)
        for w in scored:
            aux = torch.cat([states[i] for i in w.indices], dim=-1).to(backend.device)
            seq_runs, seq_hits = simulate(
                draft, backend.embedding, tokens, aux, steps, prompt_len - 1, new_tokens - 1, token_map
            )
            runs[w.indices].extend(seq_runs)
            hits[w.indices].append(seq_hits)
        bar.update(part.stop - part.start)
    bar.close()
    scores = {k: score(torch.cat(runs[k]), torch.cat(hits[k]), steps) for k in runs}
    best = max(scores, key=lambda k: scores[k].accept_length)
    per_sequence = {k: torch.stack([1 + r.double().mean() for r in runs[k]]) for k in runs}
    results = []
    for w in wirings:
        if w.indices is None:
            results.append(WiringResult(w, None))
            continue
        diff = per_sequence[best] - per_sequence[w.indices]  # paired over the same prompts
        se = (diff.std() / diff.numel() ** 0.5).item() if diff.numel() > 1 else 0.0
        results.append(WiringResult(w, scores[w.indices], diff.mean().item(), se))
    return ProbeReport(results, steps, prompts.shape[0], new_tokens, backend.name)


def check_output(path: str | None) -> Path | None:
    """The ``--output`` file, checked before the run (its folder exists and can be written)."""
    if not path:
        return None
    out = Path(path).expanduser()
    if out.is_dir():
        raise InputError(f"--output {path} is a folder; name a file in it")
    if not out.parent.is_dir():
        raise InputError(f"--output {path}: the folder {out.parent} does not exist; create it first")
    if not os.access(out.parent, os.W_OK):
        raise InputError(f"--output {path}: the folder {out.parent} cannot be written")
    return out


def _check_numbers(args) -> None:
    for flag, value, least, why in (
        ("--num-prompts", args.num_prompts, 1, ""),
        ("--num-steps", args.num_steps, 1, ""),
        ("--new-tokens", args.new_tokens, 2, ": a chain starts after the first greedy token"),
        ("--prompt-len", args.prompt_len, 2, ": the first chain reads the prompt's last two tokens"),
    ):
        if value < least:
            raise InputError(f"{flag} {value}: must be at least {least}{why}")


def read_model_config(path: str, flag: str) -> dict:
    """The ``config.json`` of a model folder given as ``flag``, with its weights' headers readable."""
    from safetensors import safe_open

    folder = Path(path).expanduser()
    if not folder.is_dir():
        what = "is a file, not a model folder" if folder.exists() else "no such folder"
        raise InputError(f"{flag} {path}: {what}")
    file = folder / "config.json"
    try:
        config = json.loads(file.read_text())
    except FileNotFoundError:
        raise InputError(f"{flag} {path} has no config.json: pass the model folder") from None
    except (OSError, ValueError) as exc:
        raise InputError(f"{flag} {file} cannot be read as JSON ({exc}); download it again") from None
    if not isinstance(config, dict):
        raise InputError(f"{flag} {file} is not a JSON object")
    weights = sorted(folder.glob("*.safetensors"))
    if not weights:
        raise InputError(f"{flag} {path} has no *.safetensors weights")
    for weight in weights:
        try:
            with safe_open(str(weight), framework="pt"):
                pass
        except Exception as exc:
            raise InputError(
                f"{flag} weights {weight} cannot be read ({type(exc).__name__}: {exc}); an interrupted "
                f"download? Download the model again."
            ) from None
    return config


def _archs(config: dict) -> list:
    archs = config.get("architectures")
    return archs if isinstance(archs, list) else []


def _check_roles(args, target: dict, draft: dict) -> None:
    if "LlamaForCausalLMEagle3" in _archs(target) or any(a in FAMILY for a in _archs(draft)):
        raise InputError(
            f"--target {args.target} is {_archs(target)} and --draft {args.draft} is {_archs(draft)}: "
            f"did you swap --target and --draft?"
        )
    if "LlamaForCausalLMEagle3" not in _archs(draft):
        raise InputError(
            f"--draft {args.draft}: probe reads LlamaForCausalLMEagle3 drafts, not {_archs(draft)}"
        )


def _check_widths(args, backend, draft, token_map) -> None:
    """Before any forward: the draft must read this target's hidden states and vocabulary."""
    hidden = backend.embedding.embedding_dim
    vocab = backend.embedding.num_embeddings
    fc_in, declared = draft.fc.in_features, draft.target_hidden
    if declared != hidden or fc_in % hidden:
        raise InputError(
            f"--draft {args.draft} was built for another target: its fc reads {fc_in} features "
            f"(target_hidden_size {declared}), but --target {args.target} has hidden size {hidden}. "
            f"Pass the target the draft was trained for."
        )
    if draft.config.hidden_size != hidden:
        raise InputError(
            f"--draft {args.draft} has hidden size {draft.config.hidden_size} but reads the token "
            f"embeddings of --target {args.target}, of width {hidden}: not this target's draft."
        )
    draft_vocab = draft.lm_head.out_features
    mapped = int(token_map.max()) + 1 if token_map is not None else draft_vocab
    if mapped > vocab:
        raise InputError(
            f"--draft {args.draft} predicts token ids up to {mapped - 1}, but --target {args.target} "
            f"has a vocabulary of {vocab}: not this target's draft."
        )


def load_prompts(args) -> torch.Tensor:
    """``[N, P]`` prompt tokens: from ``--prompts`` (JSON token lists, or text through the target's
    tokenizer, cut to the shortest), else the tiny target's own language, else uniform random tokens."""
    if args.prompts:
        return _prompts_file(args)
    gen = torch.Generator().manual_seed(args.seed)
    spec_file = Path(args.target) / "tiny_target_spec.json"
    if spec_file.exists():
        from sglang_eagle3_embed.doctor.tiny_target import Language, TargetSpec

        spec = TargetSpec(**json.loads(spec_file.read_text()))
        return Language(spec).sample(args.num_prompts, args.prompt_len, gen)
    config = json.loads((Path(args.target) / "config.json").read_text())
    vocab = text_config(config).get("vocab_size")
    if not isinstance(vocab, int) or vocab < 1:
        raise InputError(f"--target {args.target}: its config has no vocab_size; pass --prompts FILE")
    return torch.randint(vocab, (args.num_prompts, args.prompt_len), generator=gen)


def _prompts_file(args) -> torch.Tensor:
    file = Path(args.prompts).expanduser()
    hint = "one prompt per line: text, or a JSON list of token ids"
    try:
        lines = [line for line in file.read_text().splitlines() if line.strip()]
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"--prompts {file} cannot be read: {exc}") from None
    if not lines:
        raise InputError(f"--prompts {file} holds no prompts ({hint})")
    if all(line.lstrip().startswith("[") for line in lines):
        try:
            rows = [json.loads(line) for line in lines]
        except json.JSONDecodeError as exc:
            raise InputError(f"--prompts {file}: a line is not a JSON list ({exc}); {hint}") from None
        if not all(isinstance(r, list) and all(type(t) is int and t >= 0 for t in r) for r in rows):
            raise InputError(f"--prompts {file}: every JSON line must be a list of token ids (integers >= 0)")
    else:
        from transformers import AutoTokenizer

        try:
            tokenizer = AutoTokenizer.from_pretrained(args.target)
        except Exception as exc:
            raise InputError(
                f"--prompts {file} holds text, but the target {args.target} has no tokenizer that loads "
                f"({type(exc).__name__}); write each prompt as a JSON list of token ids"
            ) from None
        rows = [tokenizer(line)["input_ids"] for line in lines]
    width = min(len(r) for r in rows)
    if width < 2:
        raise InputError(f"--prompts {file}: every prompt needs at least 2 tokens")
    return torch.tensor([r[:width] for r in rows[: args.num_prompts]])


def _engine_args(items) -> dict:
    engine_args = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise InputError(f"--engine-arg {item}: write KEY=VALUE, e.g. dtype=bfloat16")
        try:
            engine_args[key.replace("-", "_")] = json.loads(value)
        except json.JSONDecodeError:
            engine_args[key.replace("-", "_")] = value
    return engine_args


def probe_folders(args) -> ProbeReport:
    """The CLI's probe: every input checked first (flags, folders, weights' headers, the draft's
    widths against the target), then the prompts, backend, draft and candidate wirings from the
    folders in ``args``. Input a user can get wrong raises :class:`InputError`."""
    from sglang_eagle3_embed.doctor.wirings import candidate_wirings

    _check_numbers(args)
    engine_args = _engine_args(args.engine_arg)
    target_config = read_model_config(args.target, "--target")
    draft_config = read_model_config(args.draft, "--draft")
    _check_roles(args, target_config, draft_config)
    prompts = load_prompts(args)
    try:
        backend = make_backend(args.backend, Path(args.target), args.device, engine_args)
    except (OSError, ValueError, KeyError) as exc:
        raise InputError(f"--target {args.target} cannot be loaded: {type(exc).__name__}: {exc}") from None
    try:
        draft, token_map = load_draft(Path(args.draft), backend.device)
        _check_widths(args, backend, draft, token_map)
        vocab = backend.embedding.num_embeddings
        if int(prompts.max()) >= vocab:
            raise InputError(
                f"--prompts: token id {int(prompts.max())} is outside the target's vocabulary of {vocab}"
            )
        wirings = candidate_wirings(
            draft_config, backend.num_layers, width=draft.fc.in_features // draft.target_hidden
        )
        return run_probe(
            backend,
            draft,
            token_map,
            wirings,
            prompts,
            new_tokens=args.new_tokens,
            steps=args.num_steps,
            progress=not args.no_progress and not args.json,
        )
    finally:
        getattr(backend, "close", lambda: None)()
