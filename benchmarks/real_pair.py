"""A benchmark-only "realistic pair": a DeepSeek-V2-Lite-shaped target whose function is trained and
whose cost per step is the real model's, and an EAGLE-3 draft of the real shape on ``[-1, a, b]``.

    python -m benchmarks.real_pair OUT [--quick] [--device cpu|cuda] [--reuse]

Three folders are built into ``OUT``, each published whole (``doctor.cache``: a manifest written
last, then a rename), and each step's time is printed:

1. ``OUT/shallow``: a SHALLOW target of the real width (:meth:`RealPairSpec.shallow_config`:
   hidden 2048, MLA with kv_lora_rank 512 + qk_rope 64, 16 heads, 64 routed experts top-6, 2
   shared, moe_intermediate_size 1408, a dense first layer of 10944) trained on the tiny target's
   synthetic language by the tiny target's own recipe (``doctor.tiny_target.train_target``).
2. ``OUT/target``: that target DEEPENED to 27 layers (:func:`deepen`): the trained layers keep their
   weights at the positions :func:`spread` gives them, and the inserted layers are random (so they
   cost full compute, routing included) with every output projection zero (attention ``o_proj``,
   each routed expert's ``down_proj``, the shared experts' ``down_proj``, a dense MLP's
   ``down_proj``), so they add exactly nothing to the residual stream: its logits equal the shallow
   target's, which the command checks (:func:`compare`) and prints.
3. ``OUT/draft``: an EAGLE-3 draft (``LlamaForCausalLMEagle3``, the project's
   ``doctor.tiny_draft.train_draft``) on ``[-1, a, b]`` of the deep target, ``a`` and ``b`` trained
   layers chosen by :func:`pick_ids` so that stock SGLang's default reading (capture indices
   ``[2, L//2, L-3]``: the outputs of layers 1, 12, 23 of 27) reads another tensor at every
   position. It is trained on the *compact* target (:func:`compact`: the trained layers plus one
   zero-output layer), whose hidden states are, bit for bit, the deep target's at the draft's ids
   (checked on the same batch): the same training data from 4 layers instead of 27.

The model's vocabulary is the real 102400 (embedding, ``lm_head`` and the draft's ``lm_head`` cost
what they cost), but the language uses its first ``language_vocab`` tokens: it has ``groups x
language_vocab`` random transitions to learn, and a budget of a few thousand steps of 2048 tokens
teaches 8 x 4096 of them (about a hundred sightings each), not 8 x 102400 (about one). The other
tokens never occur, so the target learns never to predict them. The step counts and learning rates
are a budget guess, so the command prints how often the shallow target's greedy token is the
language's likeliest one and how often the draft's first guess is the target's greedy token.

On one H200 the build fits one 10-minute device command, and ``--reuse`` keeps the folders a
stopped command completed, so a second command finishes the rest; each step's seconds are recorded
in ``OUT/real_pair.json``. The deepening holds the shallow, compact and 27-layer fp32 models on the GPU
at once (about 80 GB) and writes 38 GB under ``OUT``. Serving it is
:mod:`benchmarks.real_speedup`'s.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import re
import shutil
import sys
import time
from dataclasses import asdict, dataclass
from itertools import combinations
from pathlib import Path

import torch

from sglang_eagle3_embed.core.capture.draft_config import resolve_capture_plan
from sglang_eagle3_embed.core.capture.ids import IDS_FIELD, describe_capture_indices
from sglang_eagle3_embed.core.capture.stock_sglang import stock_reading
from sglang_eagle3_embed.doctor import cache, tiny_target
from sglang_eagle3_embed.doctor.eagle3_draft import load_draft
from sglang_eagle3_embed.doctor.pair import TRAINED_ON
from sglang_eagle3_embed.doctor.tiny_draft import agreement, draft_config_dict, train_draft
from sglang_eagle3_embed.doctor.tiny_target import Language, TargetSpec, train_target
from sglang_eagle3_embed.doctor.tokenizer import write_tokenizer

__all__ = [
    "RealPairSpec",
    "build",
    "capture_map",
    "compact",
    "compare",
    "deepen",
    "layer_map",
    "name_tensor",
    "pick_ids",
    "spread",
    "stock_default",
    "train_shallow",
]

RECORD = "real_pair.json"
"""In each folder: the spec it was built from and what the step made (layout, ids)."""
DEEPENED_FROM = "deepened_from.json"
"""In the deep target's folder: the shallow folder's manifest digest (``doctor.cache.write_origin``)."""
OUTPUT_PROJECTIONS = ("o_proj.weight", "down_proj", "down_proj.weight")
"""Name endings of a decoder layer's output projections: attention ``o_proj``, the routed experts'
``down_proj`` (one 3-D parameter in transformers 5, ``experts.{e}.down_proj.weight`` before), the
shared experts' and a dense MLP's ``down_proj.weight``."""
_LAYER = re.compile(r"^model\.layers\.(\d+)\.")


@dataclass(frozen=True)
class PairRecipe:
    """The language and the training shared by the real-shape pairs (this one and
    ``kimi_pair.KimiPairSpec``): the tiny target's language over the first ``language_vocab``
    tokens, the target's and the draft's training."""

    language_vocab: int = 4096
    """Tokens the language uses (the first ones of the vocabulary): what the training budget can teach."""
    groups: int = 8
    embed_std: float = 0.005
    growth: float = 1.5
    p_best: float = 0.85
    steps: int = 1500
    batch: int = 32
    seq_len: int = 64
    lr: float = 5e-4
    draft_steps: int = 1500
    draft_lr: float = 5e-4
    ttt_steps: int = 3
    seed: int = 0

    def language(self) -> dict:
        """The :class:`TargetSpec` fields of the language and the target's training."""
        return dict(
            vocab=self.language_vocab, groups=self.groups, embed_std=self.embed_std, growth=self.growth,
            p_best=self.p_best, steps=self.steps, batch=self.batch, seq_len=self.seq_len, lr=self.lr,
            seed=self.seed,
        )  # fmt: skip


@dataclass(frozen=True)
class RealPairSpec(PairRecipe):
    """The pair's shape and training; the defaults are DeepSeek-V2-Lite's shape on 27 layers."""

    hidden: int = 2048
    heads: int = 16
    kv_lora_rank: int = 512
    qk_rope: int = 64
    qk_nope: int = 128
    v_head: int = 128
    experts: int = 64
    top_k: int = 6
    shared_experts: int = 2
    moe_intermediate: int = 1408
    intermediate: int = 10944
    first_k_dense: int = 1
    vocab: int = 102400
    max_positions: int = 2048
    num_layers: int = 27
    """The deep target's layers."""
    trained_layers: int = 3
    """The shallow target's layers (the first ``first_k_dense`` dense, the rest MoE)."""
    draft_batch: int = 32
    save_dtype: str = "bfloat16"
    """The deep target's weights on disk (bf16 halves 63 GB of fp32; the check runs before the cast)."""

    @classmethod
    def quick(cls) -> RealPairSpec:
        """Tiny dims for one CPU core: 3 trained layers deepened to 8, 8 experts top-2, vocab 128."""
        return cls(
            hidden=64, heads=4, kv_lora_rank=16, qk_rope=8, qk_nope=16, v_head=16, experts=8, top_k=2,
            shared_experts=1, moe_intermediate=32, intermediate=128, vocab=128, max_positions=512,
            num_layers=8, trained_layers=3, language_vocab=128, steps=60, batch=16, seq_len=32, lr=3e-3,
            draft_steps=30, draft_batch=16, draft_lr=3e-3, save_dtype="float32",
        )  # fmt: skip

    def target_spec(self) -> TargetSpec:
        """The tiny target's spec for the shallow target: its language and training recipe."""
        return TargetSpec(
            num_layers=self.trained_layers, hidden=self.hidden, heads=self.heads, experts=self.experts,
            kv_lora_rank=self.kv_lora_rank, qk_rope=self.qk_rope, qk_nope=self.qk_nope, v_head=self.v_head,
            **self.language(),
        )  # fmt: skip

    def shallow_config(self):
        """``target_config`` of :meth:`target_spec` with what ``TargetSpec`` has no field for: the
        MoE sizes, top-k, shared experts, the dense width, the vocabulary, the context length."""
        config = tiny_target.target_config(self.target_spec())
        for name, value in self._overrides().items():
            setattr(config, name, value)
        return config

    def _overrides(self) -> dict:
        return {
            "vocab_size": self.vocab,
            "intermediate_size": self.intermediate,
            "moe_intermediate_size": self.moe_intermediate,
            "n_shared_experts": self.shared_experts,
            "num_experts_per_tok": self.top_k,
            "first_k_dense_replace": self.first_k_dense,
            "max_position_embeddings": self.max_positions,
        }

    @property
    def trained_at(self) -> tuple[int, ...]:
        return spread(self.trained_layers, self.num_layers)

    @property
    def inserted(self) -> tuple[int, ...]:
        return tuple(i for i in range(self.num_layers) if i not in self.trained_at)

    def validate(self) -> None:
        self.target_spec().validate()
        if not 1 <= self.first_k_dense < self.trained_layers < self.num_layers:
            raise ValueError(
                f"need 1 <= first_k_dense ({self.first_k_dense}) < trained_layers "
                f"({self.trained_layers}) < num_layers ({self.num_layers})"
            )
        if self.language_vocab > self.vocab:
            raise ValueError(f"language_vocab {self.language_vocab} exceeds vocab {self.vocab}")


# --- layout: where the trained layers go, and which tensors the draft reads ---------------------


def spread(trained_layers: int, num_layers: int) -> tuple[int, ...]:
    """Deep positions of the trained layers, evenly spread from 0 (the dense first layer stays
    first): ``i * num_layers // trained_layers``. Inserted layers fill the gaps after each one."""
    return tuple(i * num_layers // trained_layers for i in range(trained_layers))


def layer_map(shallow_layers: int, num_layers: int, positions) -> dict[int, int]:
    """Shallow layer -> deep layer, the inserted layers taking ``positions`` (deep indices)."""
    inserted = sorted(set(positions))
    if len(inserted) != len(list(positions)) or any(not 0 <= p < num_layers for p in inserted):
        raise ValueError(f"positions {list(positions)}: distinct layer indices in [0, {num_layers}) expected")
    if num_layers - len(inserted) != shallow_layers:
        raise ValueError(
            f"{len(inserted)} inserted layers + {shallow_layers} trained ones do not make {num_layers}"
        )
    kept = [i for i in range(num_layers) if i not in set(inserted)]
    return dict(enumerate(kept))


def capture_map(trained_at, num_layers: int) -> dict[int, int]:
    """Deep capture index (the input of layer ``i``; 0 = embedding output) -> the shallow capture
    index holding the same tensor: the number of trained layers before ``i``. Index
    ``num_layers`` (HF's normed last state) maps to the shallow one's."""
    return {i: sum(t < i for t in trained_at) for i in range(num_layers + 1)}


def name_tensor(capture_index: int, trained_at) -> str:
    """What a deep capture index holds, named by the trained layers: the embedding output, or the
    output of trained layer ``k`` (a layer of the shallow target), which the inserted layers after
    it pass on unchanged."""
    k = sum(t < capture_index for t in trained_at)
    return "embedding output" if k == 0 else f"output of trained layer {k - 1}"


def stock_default(num_layers: int, ids=(-1, 0, 1)):
    """Stock SGLang 0.5.23's reading of a draft whose ids sit at the top level, where it never reads
    them (``core.stock_sglang``): its defaults ``[2, L//2, L-3]``, served or failing."""
    config = {IDS_FIELD: list(ids), "eagle_config": {"use_aux_hidden_state": True}}
    return stock_reading(config, num_layers)


def pick_ids(trained_at, num_layers: int) -> tuple[int, int, int]:
    """``(-1, a, b)``: ``a < b`` deep ids of trained layers whose outputs the DeepSeek family can
    capture (``b <= L - 2``), such that stock SGLang's default reading holds another tensor at
    every position (:func:`capture_map` classes: an inserted layer passes its input on, so two
    capture indices can hold one tensor); where the defaults fail at startup, every pair does.
    The deepest such pair (largest ``b``, then ``a``); ``ValueError`` when the layout admits none."""
    cls = capture_map(trained_at, num_layers)
    stock = stock_default(num_layers).indices
    pairs = [
        (a, b)
        for a, b in combinations(sorted(t for t in trained_at if t <= num_layers - 2), 2)
        if stock is None or all(cls[o] != cls[s] for o, s in zip((0, a + 1, b + 1), stock))
    ]
    if not pairs:
        raise ValueError(
            f"no two trained layers at {list(trained_at)} of {num_layers} differ from stock SGLang's "
            f"default reading [{describe_capture_indices(stock or ())}] at every position; "
            f"move the trained layers or add one"
        )
    a, b = max(pairs, key=lambda p: (p[1], p[0]))
    return (-1, a, b)


# --- the targets --------------------------------------------------------------------------------


def train_shallow(spec: RealPairSpec, device: str = "cpu"):
    """The shallow target, trained by ``tiny_target.train_target`` on its language in the real
    shape (:meth:`RealPairSpec.shallow_config`); eval mode, CPU."""
    spec.validate()
    return train_target(spec.target_spec(), device, config=spec.shallow_config())


def _load(folder: Path):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()


def deepen(model_or_folder, num_layers: int, positions, *, seed: int = 0, device: str | None = None):
    """A ``num_layers``-layer copy of a trained HF ``DeepseekV3ForCausalLM`` (a model, or its
    folder) with zero-output layers inserted at the deep indices ``positions``: the trained layers'
    weights renumbered (``model.layers.{i}`` -> :func:`layer_map`), embedding, final norm and
    ``lm_head`` copied, the inserted layers random (seeded) but with every output projection
    (:data:`OUTPUT_PROJECTIONS`) exactly zero. ``first_k_dense_replace`` moves with the last dense
    trained layer: an inserted layer is dense only before it, MoE after it, as the real model's
    layers beyond the first are. On ``device`` (default: the model's), in its dtype, eval mode."""
    shallow = _load(Path(model_or_folder)) if isinstance(model_or_folder, (str, Path)) else model_or_folder
    config = shallow.config
    mapping = layer_map(config.num_hidden_layers, num_layers, positions)
    dense = min(config.first_k_dense_replace, config.num_hidden_layers)
    deep_config = copy.deepcopy(config)
    deep_config.num_hidden_layers = num_layers
    deep_config.first_k_dense_replace = mapping[dense - 1] + 1 if dense else 0
    first = next(shallow.parameters())
    device = torch.device(device or first.device)
    with torch.random.fork_rng(devices=[torch.cuda.current_device()] if device.type == "cuda" else []):
        torch.manual_seed(seed)
        with torch.device(device):
            deep = type(shallow)(deep_config)
    deep.to(first.dtype)
    params = deep.state_dict()
    with torch.no_grad():
        for name, tensor in shallow.state_dict().items():
            match = _LAYER.match(name)
            if match:
                name = f"model.layers.{mapping[int(match.group(1))]}.{name[match.end() :]}"
            if params[name].shape != tensor.shape:
                raise ValueError(f"{name}: shape {tuple(tensor.shape)} vs {tuple(params[name].shape)}")
            params[name].copy_(tensor)
        for i in sorted(set(positions)):
            outputs = {
                n: p for n, p in deep.model.layers[i].named_parameters() if n.endswith(OUTPUT_PROJECTIONS)
            }
            if not any(n.startswith("self_attn.") for n in outputs) or not any("mlp." in n for n in outputs):
                raise RuntimeError(f"layer {i}: no attention or MLP output projection among {list(outputs)}")
            for p in outputs.values():
                p.zero_()
    return deep.eval()


def compact(shallow, *, seed: int = 0, device: str | None = None):
    """The shallow target plus one zero-output layer at the end: HF's ``output_hidden_states``
    normalises the last entry, so this is the smallest model whose raw states include the last
    trained layer's output; every deep capture index ``i`` holds its state ``capture_map[i]``."""
    n = shallow.config.num_hidden_layers
    return deepen(shallow, n + 1, [n], seed=seed, device=device)


def _states(model, tokens):
    with torch.no_grad():
        out = model(tokens.to(next(model.parameters()).device), output_hidden_states=True)
    return out.logits, list(out.hidden_states)


def _diff(a, b) -> float:
    return (a.float().cpu() - b.float().cpu()).abs().max().item()


def compare(reference, deep, trained_at, tokens) -> dict:
    """Max |difference| between ``deep`` and ``reference`` (the shallow target, or a deepening of
    it whose first layers are the trained ones, as :func:`compact`) on ``tokens``: the logits, and
    every deep hidden state against the reference state holding the same tensor
    (:func:`capture_map`; raw states the reference has, and the two normed last ones)."""
    L, n = deep.config.num_hidden_layers, reference.config.num_hidden_layers
    cls = capture_map(trained_at, L)
    (deep_logits, deep_h), (ref_logits, ref_h) = _states(deep, tokens), _states(reference, tokens)
    pairs = [(i, cls[i]) for i in range(L) if cls[i] < n] + [(L, n)]
    hidden = max(_diff(deep_h[i], ref_h[j]) for i, j in pairs)
    logits = _diff(deep_logits, ref_logits)
    return {"logits": logits, "hidden": hidden, "states": len(pairs), "exact": logits == hidden == 0.0}


def language_accuracy(model, language: Language, tokens) -> float:
    """How often the model's greedy next token is the language's likeliest one (positions 1 on,
    where the rule ``table[topic][previous token]`` applies): how far training taught the function."""
    with torch.no_grad():
        greedy = model(tokens.to(next(model.parameters()).device)).logits.argmax(-1).cpu()
    best = language.best_next(tokens[:, :1], tokens[:, 1:-1])
    return (greedy[:, 1:-1] == best).float().mean().item()


def language_hits(language: Language, prompts: list, outputs: list) -> float:
    """The share of ``outputs`` (each the continuation of its prompt) that are the language's
    likeliest token after the one before."""
    tokens = torch.tensor([p + o for p, o in zip(prompts, outputs, strict=True)])
    n = len(prompts[0])
    best = language.best_next(tokens[:, :1], tokens[:, n - 1 : -1])
    return (tokens[:, n:] == best).float().mean().item()


def serving_rows(language: Language, requests) -> torch.Tensor:
    """The rows a serving benchmark's requests are cut from (``configs.Requests``): prompt plus
    output tokens of the language, as many as a timed run may send, from the requests' seed."""
    length = requests.prompt_len + requests.output_len
    return language.sample(requests.dataset_size, length, torch.Generator().manual_seed(requests.seed))


# --- building the folders -----------------------------------------------------------------------


def _record(folder: Path, spec: RealPairSpec, **made) -> None:
    (folder / RECORD).write_text(json.dumps({"spec": asdict(spec), **made}, indent=2) + "\n")


def _made_from(folders: dict, spec, name: str, record: str, source: str):
    """The check of ``folders[name]``: built for ``spec``, from the current ``folders[source]``."""

    def problem() -> str | None:
        return _spec_problem(folders[name], spec)() or cache.origin_problem(
            folders[name], record, folders[source]
        )

    return problem


def _spec_problem(folder: Path, spec: RealPairSpec):
    def check() -> str | None:
        try:
            recorded = json.loads((folder / RECORD).read_text())["spec"]
        except (OSError, ValueError, KeyError) as exc:
            return f"{folder / RECORD}: {exc}"
        return None if recorded == asdict(spec) else f"{folder} was built from another spec"

    return check


def _save_target(model, folder: Path, spec: RealPairSpec, dtype: torch.dtype) -> None:
    model.to(dtype).save_pretrained(folder, safe_serialization=True, max_shard_size="5GB")
    write_tokenizer(folder, spec.vocab)


@dataclass(frozen=True)
class RealPair:
    """What :func:`build` made: the three folders, the draft's ids, where the trained layers sit in
    the deep target, each step's seconds and the equivalence checks (empty for a reused target)."""

    shallow: Path
    target: Path
    draft: Path
    ids: tuple[int, int, int]
    trained_at: tuple[int, ...]
    timings: dict
    checks: dict


@contextlib.contextmanager
def _timed(timings: dict, step: str):
    start = time.perf_counter()
    yield
    timings[step] = round(time.perf_counter() - start, 3)


def build(out: Path, spec: RealPairSpec, device: str = "cpu", *, reuse: bool = False, log=print) -> RealPair:
    """Shallow target -> deep target -> draft into ``out/{shallow,target,draft}``; each step's
    seconds in the result's ``timings``. ``reuse``: keep a folder that is complete, built from
    ``spec`` and (deep target, draft) from the folder now before it; else every folder is rebuilt."""
    spec.validate()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    folders = {name: out / name for name in ("shallow", "target", "draft")}
    if not reuse:
        for folder in folders.values():
            shutil.rmtree(folder, ignore_errors=True)
    trained_at, inserted, L = spec.trained_at, spec.inserted, spec.num_layers
    ids = pick_ids(trained_at, L)
    language = Language(spec.target_spec())
    timings: dict = {}
    made: dict = {}

    def build_shallow(tmp: Path) -> None:
        with _timed(timings, "shallow: train"):
            made["shallow"] = train_shallow(spec, device)
        with _timed(timings, "shallow: save"):
            _save_target(made["shallow"], tmp, spec, torch.float32)
            _record(tmp, spec, layers=spec.trained_layers)

    with _timed(timings, "shallow: in all"):
        cache.ensure(folders["shallow"], build_shallow, _spec_problem(folders["shallow"], spec))
    shallow = (made.get("shallow") or _load(folders["shallow"])).to(device)
    log(
        f"shallow target: {spec.trained_layers} layers, hidden {spec.hidden}, {spec.steps} steps: "
        + _took(timings, "shallow", folders["shallow"])
    )
    tokens = language.sample(8, spec.seq_len, torch.Generator().manual_seed(spec.seed + 3))  # held out
    quality = {"target": language_accuracy(shallow, language, tokens)}
    log(
        f"  its greedy token is the language's likeliest at {quality['target']:.0%} of positions "
        f"(the language picks it with p_best {spec.p_best})"
    )
    small = compact(shallow, seed=spec.seed + 5, device=device)  # the draft's training target
    checks: dict = {}

    def build_target(tmp: Path) -> None:
        with _timed(timings, "target: deepen"):
            deep = deepen(shallow, L, inserted, seed=spec.seed + 4, device=device)
        with _timed(timings, "target: check"):
            checks.update(_check(shallow, small, deep, trained_at, tokens, device))
        if device == "cpu" and not all(c["exact"] for c in checks.values()):  # never published
            _log_checks(checks, log)
            raise RuntimeError("the deep target's fp32 forward on the CPU differs from the shallow one's")
        with _timed(timings, "target: save"):
            cache.write_origin(tmp, DEEPENED_FROM, folders["shallow"])
            _save_target(deep, tmp, spec, getattr(torch, spec.save_dtype))
            _record(tmp, spec, layers=L, trained_at=list(trained_at), inserted=list(inserted))

    with _timed(timings, "target: in all"):
        cache.ensure(
            folders["target"], build_target, _made_from(folders, spec, "target", DEEPENED_FROM, "shallow")
        )
    log(
        f"deep target: {L} layers, trained ones at {list(trained_at)}, zero-output ones at "
        f"{list(inserted)} (first_k_dense_replace {_config(folders['target'])['first_k_dense_replace']}): "
        + _took(timings, "target", folders["target"])
    )
    _log_checks(checks, log)

    on = [capture_map(trained_at, L)[i + 1] - 1 for i in ids]  # the same tensors in the compact target

    def build_draft(tmp: Path) -> None:
        cache.write_origin(tmp, TRAINED_ON, folders["target"])  # the deep target, as served with it
        with _timed(timings, "draft: train"):
            made["draft"] = train_draft(
                small, language, on, steps=spec.draft_steps, ttt_steps=spec.ttt_steps,
                batch=spec.draft_batch, seq_len=spec.seq_len, lr=spec.draft_lr, seed=spec.seed, device=device,
            )  # fmt: skip
        with _timed(timings, "draft: save"):
            _save_draft(made["draft"], tmp, spec, ids, on)

    with _timed(timings, "draft: in all"):
        cache.ensure(folders["draft"], build_draft, _made_from(folders, spec, "draft", TRAINED_ON, "target"))
    log(
        f"draft on {list(ids)} = [{', '.join(name_tensor(i + 1, trained_at) for i in ids)}], "
        f"{spec.draft_steps} steps: " + _took(timings, "draft", folders["draft"])
    )
    draft = (made.get("draft") or load_draft(folders["draft"])[0]).to(device)
    quality["draft"] = agreement(draft, small.to(device), tokens.to(device), [i + 1 for i in on])
    log(f"  its first guess is the target's greedy token at {quality['draft']:.0%} of positions")
    _log_readings(spec, ids, folders["draft"], log)
    pair = RealPair(folders["shallow"], folders["target"], folders["draft"], ids, trained_at, timings, checks)
    record = {
        "spec": asdict(spec),
        "ids": list(ids),
        "timings": timings,
        "checks": checks,
        "quality": quality,
    }
    (out / RECORD).write_text(json.dumps(record, indent=2) + "\n")
    return pair


def _took(timings: dict, step: str, folder: Path) -> str:
    mine = {k.split(": ")[1]: v for k, v in timings.items() if k.startswith(step + ":")}
    if len(mine) == 1:  # only "in all": the folder was complete
        return f"reused {folder} (verified in {mine['in all']:.1f} s)"
    return ", ".join(f"{k} {v:.1f} s" for k, v in mine.items()) + f" -> {folder}"


def _config(folder: Path) -> dict:
    return json.loads((folder / "config.json").read_text())


def _check(shallow, small, deep, trained_at, tokens, device: str) -> dict:
    """Deep vs shallow (logits and every state they share), deep vs compact (all states, those the
    draft trains on included), and, on a GPU, the shallow target against itself (run-to-run noise)."""
    checks = {"deep vs shallow": compare(shallow, deep, trained_at, tokens)}
    checks["deep vs compact"] = compare(small, deep, trained_at, tokens)
    if device != "cpu":
        again = _diff(_states(shallow, tokens)[0], _states(shallow, tokens)[0])
        checks["shallow vs shallow (run to run)"] = {"logits": again}
    return checks


def _log_checks(checks: dict, log) -> None:
    for name, c in checks.items():
        if "hidden" in c:
            log(
                f"  check {name}: max |logits diff| {c['logits']:.3g}, max |state diff| {c['hidden']:.3g} "
                f"over {c['states']} states{' (exactly equal)' if c['exact'] else ''}"
            )
        else:
            log(f"  check {name}: max |logits diff| {c['logits']:.3g}")


def _save_draft(draft, folder: Path, spec: RealPairSpec, ids, on) -> None:
    from safetensors.torch import save_file

    save_file(draft.checkpoint(), str(folder / "model.safetensors"))
    config = draft_config_dict(spec.hidden, spec.vocab, spec.heads, list(ids), spec.hidden)
    config["max_position_embeddings"] = spec.max_positions  # the target's: SGLang refuses a shorter draft
    (folder / "config.json").write_text(json.dumps(config, indent=2))
    _record(folder, spec, ids=list(ids), trained_on_compact_ids=list(on))


def _log_readings(spec: RealPairSpec, ids, draft: Path, log) -> None:
    """What the plugin and stock SGLang capture for the draft, named by the trained layers."""
    L, trained_at = spec.num_layers, spec.trained_at

    def named(indices) -> str:
        return ", ".join(name_tensor(i, trained_at) for i in indices)

    plan = resolve_capture_plan(_config(draft), L)
    log(f"  the plugin captures [{describe_capture_indices(plan.indices)}] = [{named(plan.indices)}]")
    stock = stock_default(L, ids)
    log(f"  stock SGLang, ids at the top level (its defaults): {stock.outcome}")
    if stock.serves:
        same = [
            k
            for k, (i, j) in enumerate(zip(plan.indices, stock.indices))
            if name_tensor(i, trained_at) == name_tensor(j, trained_at)
        ]
        verdict = "another tensor at every position" if not same else f"the same tensor at positions {same}"
        log(f"    = [{named(stock.indices)}]: {verdict}")
    log(f"  stock SGLang, ids nested as written: {stock_reading(_config(draft), L).outcome}")


def main(argv=None) -> RealPair:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out", type=Path, help="folder for shallow/, target/ and draft/")
    p.add_argument("--quick", action="store_true", help="tiny dims: the whole pipeline on one CPU core")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--reuse", action="store_true", help="keep folders a previous run completed")
    args = p.parse_args(argv)
    from transformers.utils import logging

    logging.disable_progress_bar()  # the shard writer's bars; the steps print their own lines
    if args.device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True  # training speed; both targets use the same kernels
    spec = RealPairSpec.quick() if args.quick else RealPairSpec()
    if args.quick and args.device == "cpu":
        torch.set_num_threads(1)  # tiny dims: one thread does the work, more stall each other on a busy CPU
    start = time.perf_counter()
    pair = build(args.out, spec, args.device, reuse=args.reuse)
    print(f"total {time.perf_counter() - start:.1f} s")
    return pair


if __name__ == "__main__":
    main(sys.argv[1:])
