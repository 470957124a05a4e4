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
from dataclasses import dataclass, field
from pathlib import Path

import torch

from sglang_eagle3_embed.core.draft_config import read_draft_ids
from sglang_eagle3_embed.doctor.chain import ChainScore, score, simulate
from sglang_eagle3_embed.doctor.weights import read_safetensors, read_tensor
from sglang_eagle3_embed.doctor.wirings import PLUGIN, STOCK, Wiring

__all__ = ["ProbeReport", "WiringResult", "load_draft", "make_backend", "run_probe"]


def load_draft(folder: Path, device: str = "cpu"):
    """The draft as a :class:`~sglang_eagle3_embed.doctor.tiny_draft.Eagle3Draft` twin and its token map
    (``d2t``: draft vocab index -> target token id, or None when the vocabularies are equal)."""
    from sglang_eagle3_embed.doctor.tiny_draft import Eagle3Draft

    config = json.loads((Path(folder) / "config.json").read_text())
    if "LlamaForCausalLMEagle3" not in (config.get("architectures") or []):
        raise ValueError(
            f"{folder}: probe reads LlamaForCausalLMEagle3 drafts, got {config.get('architectures')}"
        )
    config.setdefault("draft_vocab_size", config["vocab_size"])
    config.setdefault("target_hidden_size", config["hidden_size"])
    weights = {}
    for name, tensor in read_safetensors(folder).items():
        name = name.removeprefix("model.").replace("layers.0.", "midlayer.")
        weights[name] = tensor
    d2t = weights.pop("d2t", None)
    weights.pop("t2d", None)
    width = read_draft_ids(config).draft_num_aux
    config["eagle_config"] = {"eagle_aux_hidden_state_layer_ids": list(range(width))}
    draft = Eagle3Draft(config)
    missing, unexpected = draft.load_state_dict(weights, strict=False)
    missing = [m for m in missing if not m.startswith("rotary") and m != "embed_tokens.weight"]
    if missing or [u for u in unexpected if u != "embed_tokens.weight"]:
        raise ValueError(
            f"{folder}: weights do not match the draft config: missing {missing}, unexpected {unexpected}"
        )
    token_map = None if d2t is None else (torch.arange(d2t.numel()) + d2t).to(device)
    return draft.to(device).eval(), token_map


def _chunks(n: int, size: int):
    for start in range(0, n, size):
        yield slice(start, min(n, start + size))


class HFBackend:
    """HF transformers: greedy ``generate`` and ``output_hidden_states`` (index i = input of layer i)."""

    name = "hf"

    def __init__(self, target: Path, device: str = "cpu"):
        from transformers import AutoModelForCausalLM

        self.model = AutoModelForCausalLM.from_pretrained(target, torch_dtype=torch.float32).to(device).eval()
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
            raise ValueError(f"the sglang-cpu backend runs DeepseekV2/V3/V32 targets, not {arch}")
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
        text = config.get("text_config") or config
        self.target = Path(target)
        self.num_layers = text["num_hidden_layers"]
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


@dataclass
class ProbeReport:
    results: list[WiringResult]
    steps: int
    prompts: int
    new_tokens: int
    backend: str
    best: WiringResult = field(init=False)
    ties: list[WiringResult] = field(init=False)

    def __post_init__(self):
        scored = [r for r in self.results if r.score is not None]
        self.best = max(scored, key=lambda r: r.score.accept_length)
        self.ties = [r for r in scored if r is not self.best and r.deficit < 2 * max(r.deficit_se, 1e-9)]

    def result(self, name: str) -> WiringResult:
        return next(r for r in self.results if name in r.wiring.names)

    def is_named(self, result: WiringResult) -> bool:
        """The best wiring or one indistinguishable from it: what the draft may have been trained for."""
        return result.score is not None and (result is self.best or result in self.ties)

    def verdict(self) -> list[str]:
        best = self.best
        what = "The draft reads best" if self.ties else "The draft was trained for"
        lines = [
            f"{what}: {best.wiring.describe()} (capture indices {list(best.wiring.indices)}; "
            f"predicted accept length {best.score.accept_length:.2f})."
        ]
        if self.ties:
            lines.append(
                "Indistinguishable from it at this sample size (within 2 standard errors), so either "
                "may be the trained wiring: "
                + "; ".join(f"{r.wiring.name} [{r.wiring.describe()}]" for r in self.ties)
                + ". Probe more prompts to separate them."
            )
        for name, who in ((PLUGIN, "--model-impl sglang_eagle3_embed"), (STOCK, "stock SGLang 0.5.23")):
            r = self.result(name)
            if r.score is None:
                lines.append(f"{who}: {r.wiring.failure}")
            elif self.is_named(r):
                lines.append(f"{who} reads the config as the draft was trained: OK.")
            else:
                lines.append(
                    f"{who} reads the config as [{r.wiring.describe()}]: NOT what the draft was trained "
                    f"for (predicted accept length {r.score.accept_length:.2f} instead of "
                    f"{best.score.accept_length:.2f})."
                )
        return lines

    def as_dict(self) -> dict:
        return {
            "backend": self.backend,
            "num_steps": self.steps,
            "prompts": self.prompts,
            "new_tokens": self.new_tokens,
            "trained_for": list(self.best.wiring.indices),
            "ties": [list(r.wiring.indices) for r in self.ties],
            "wirings": [r.as_dict() for r in self.results],
            "verdict": self.verdict(),
        }

    def table(self) -> str:
        nw = max(len(r.wiring.name) for r in self.results)
        tw = max(len(r.wiring.describe()) for r in self.results if r.score is not None)
        head = f"{'wiring':{nw}}  {'tensors (in the draft order)':{tw}}  {'top-1':>5}  {'accept':>6}  per-step acceptance"
        lines = [head, "-" * len(head)]
        for r in self.results:
            if r.score is None:
                lines.append(f"{r.wiring.name:{nw}}  {r.wiring.failure[:200]}")
                continue
            steps = " ".join(f"{a:.2f}" for a in r.score.acceptance)
            mark = "  <- best" if r is self.best else ""
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


def load_prompts(args) -> torch.Tensor:
    """``[N, P]`` prompt tokens: from ``--prompts`` (JSON token lists, or text through the target's
    tokenizer, cut to the shortest), else the tiny target's own language, else uniform random tokens."""
    if args.prompts:
        lines = [line for line in Path(args.prompts).read_text().splitlines() if line.strip()]
        if all(line.lstrip().startswith("[") for line in lines):
            rows = [json.loads(line) for line in lines]
        else:
            from transformers import AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(args.target)
            rows = [tokenizer(line)["input_ids"] for line in lines]
        width = min(len(r) for r in rows)
        if width < 2:
            raise ValueError(f"{args.prompts}: every prompt needs at least 2 tokens")
        return torch.tensor([r[:width] for r in rows[: args.num_prompts]])
    gen = torch.Generator().manual_seed(args.seed)
    spec_file = Path(args.target) / "tiny_target_spec.json"
    if spec_file.exists():
        from sglang_eagle3_embed.doctor.tiny_target import Language, TargetSpec

        spec = TargetSpec(**json.loads(spec_file.read_text()))
        return Language(spec).sample(args.num_prompts, args.prompt_len, gen)
    config = json.loads((Path(args.target) / "config.json").read_text())
    vocab = (config.get("text_config") or config)["vocab_size"]
    return torch.randint(vocab, (args.num_prompts, args.prompt_len), generator=gen)


def probe_folders(args, prompts: torch.Tensor) -> ProbeReport:
    """The CLI's probe: backend, draft and candidate wirings from the folders in ``args``."""
    from sglang_eagle3_embed.doctor.wirings import candidate_wirings

    engine_args = {}
    for item in args.engine_arg or []:
        key, _, value = item.partition("=")
        try:
            engine_args[key.replace("-", "_")] = json.loads(value)
        except json.JSONDecodeError:
            engine_args[key.replace("-", "_")] = value
    backend = make_backend(args.backend, Path(args.target), args.device, engine_args)
    draft, token_map = load_draft(Path(args.draft), backend.device)
    config = json.loads((Path(args.draft) / "config.json").read_text())
    wirings = candidate_wirings(config, backend.num_layers)
    try:
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
