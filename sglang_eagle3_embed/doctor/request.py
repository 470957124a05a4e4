"""What ``probe`` is asked to do, as typed data, and the checks of that input.

The command line builds one :class:`ProbeRequest` from its flags (``cli/probe.py``); nothing below
it sees an argparse namespace. Every check raises :class:`InputError` naming the flag or path and
what to do, before any forward pass: the numbers when the request is made, the engine arguments and
``--output`` as the command line reads them, the device and backend against the machine, the
folders' roles, the target's layers against its weights, the draft's weights and its fc against its
ids (configs and weights' headers, before any model loads), and the draft's widths against the
target once they are read (:func:`sglang_eagle3_embed.doctor.probe.probe_folders`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import torch

from sglang_eagle3_embed import FAMILY, MODEL_IMPL
from sglang_eagle3_embed.core import rule_ids
from sglang_eagle3_embed.core.atomic import check_writable
from sglang_eagle3_embed.core.capture.draft_config import DRAFT_ARCHS, fc_captures, resolve_capture_plan
from sglang_eagle3_embed.core.errors import DraftConfigError, InputError, positive_int
from sglang_eagle3_embed.core.findings import Severity
from sglang_eagle3_embed.core.readers.model_folder import (
    DRAFT_LAYER_PREFIXES,
    FC_WEIGHT_NAMES,
    INDEX,
    ModelFolder,
    ModelFolderError,
    fc_in_features,
    read_json,
    text_config,
)
from sglang_eagle3_embed.core.rules.weights import fc_width_mismatch
from sglang_eagle3_embed.doctor.wirings import candidate_wirings

__all__ = [
    "ProbeRequest", "check_capture", "check_device", "check_draft_weights", "check_output", "check_roles",
    "check_rules", "check_widths", "load_prompts", "parse_engine_args",
]  # fmt: skip


@dataclass(frozen=True)
class ProbeRequest:
    """A probe of the draft in ``draft`` against the target in ``target`` (the command's flags)."""

    target: Path
    draft: Path
    backend: str = "hf"
    device: str | None = None
    """cpu or cuda (None: the backend's default)."""
    engine_args: Mapping[str, object] = field(default_factory=dict)
    """``sglang.Engine`` arguments for the engine backend."""
    prompts: Path | None = None
    """A file of prompts, else the tiny target's language, else uniform random tokens."""
    num_prompts: int = 128
    prompt_len: int = 8
    new_tokens: int = 40
    num_steps: int = 7
    seed: int = 1234
    progress: bool = True

    def __post_init__(self):
        for flag, value, least, why in (
            ("--num-prompts", self.num_prompts, 1, ""),
            ("--num-steps", self.num_steps, 1, ""),
            ("--new-tokens", self.new_tokens, 2, ": a chain starts after the first greedy token"),
            ("--prompt-len", self.prompt_len, 2, ": the first chain reads the prompt's last two tokens"),
        ):
            if value < least:
                raise InputError(f"{flag} {value}: must be at least {least}{why}")


def parse_engine_args(items) -> dict:
    """``--engine-arg KEY=VALUE`` items as keyword arguments (VALUE parsed as JSON where it can be)."""
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


def check_output(path: str | None) -> Path | None:
    """The ``--output`` file, checked before the run: a file can be created in its folder
    (:func:`~sglang_eagle3_embed.core.atomic.check_writable`); it is written with
    :func:`~sglang_eagle3_embed.core.atomic.write_atomic`."""
    return check_writable(path, "--output") if path else None


def check_device(request: ProbeRequest) -> None:
    """Before anything loads: ``--device`` names a device the backend runs on and this machine has
    (``cpu``, or ``cuda``/``cuda:N`` where torch sees a CUDA device); ``--backend engine`` runs on a
    GPU, ``--backend sglang-cpu`` on the CPU."""
    device, backend = request.device, request.backend
    if backend == "engine":
        if device is not None and device.split(":")[0] != "cuda":
            raise InputError(
                f"--backend engine --device {device}: the engine backend runs SGLang on a CUDA GPU; drop "
                f"--device, or use --backend hf (or sglang-cpu) to run on the CPU"
            )
        if not torch.cuda.is_available():
            raise InputError(
                f"--backend engine runs SGLang on a CUDA GPU, but no CUDA device is visible to torch "
                f"{_no_cuda()}; use --backend hf (or sglang-cpu) to run on the CPU, or run on a machine "
                f"with a GPU"
            )
    elif backend == "sglang-cpu" and device not in (None, "cpu"):
        raise InputError(
            f"--backend sglang-cpu --device {device}: the sglang-cpu backend runs on the CPU only; drop "
            f"--device, or use --backend hf --device {device}"
        )
    if device is None or device == "cpu":
        return
    kind, colon, number = device.partition(":")
    if kind != "cuda" or (colon and not (number.isascii() and number.isdigit())):
        raise InputError(f"--device {device}: use cpu or cuda (cuda:N for one GPU of several)")
    if not torch.cuda.is_available():
        raise InputError(
            f"--device {device}: no CUDA device is visible to torch {_no_cuda()}; use --device cpu, "
            f"or run on a machine with a GPU"
        )
    if colon and int(number) >= torch.cuda.device_count():
        count = torch.cuda.device_count()
        raise InputError(
            f"--device {device}: torch sees {count} CUDA device{'s' if count > 1 else ''} "
            f"(cuda:0-{count - 1}); use --device cuda, or a device it sees"
        )


def _no_cuda() -> str:
    """Why torch sees no CUDA device, as far as torch tells."""
    if torch.version.cuda is None:
        return f"(torch {torch.__version__} is built without CUDA)"
    return "(torch.cuda.is_available() is False: no GPU, no driver, or CUDA_VISIBLE_DEVICES hides it)"


def _weights(folder: ModelFolder) -> tuple[str, str]:
    """The weights of ``folder`` as a message names them, and the verb that agrees with it."""
    files = folder.weight_files()
    if (folder.path / INDEX).is_file():
        return f"the shards {INDEX} names", "hold"
    if len(files) == 1:
        return files[0].name, "holds"
    return f"its {len(files)} *.safetensors files", "hold"


PROBE_LAUNCH = {
    "speculative_algorithm": "EAGLE3",
    "speculative_num_steps": 3,
    "speculative_eagle_topk": 1,
    "speculative_num_draft_tokens": 4,
    "model_impl": MODEL_IMPL,
}
"""The launch ``probe`` reads a pair as: the plugin serving the draft (the flags matter to no rule
that :data:`REFUSED` holds)."""

REFUSED = {
    rule_ids.TARGET_CONFIG: "--target",
    rule_ids.TARGET_LAYER_COUNT: "--target",
    rule_ids.DRAFT_ARCHITECTURE: "--draft",
    rule_ids.DRAFT_TARGET_HIDDEN: "--draft",
    rule_ids.DRAFT_VOCAB: "--draft",
}
"""The rules whose errors leave nothing to score, with the flag of the folder they judge: a target
without a usable layer count, or whose weights lack layers its config counts (the model would run
them on uninitialised weights) or hold layers it does not (left out): another model than the one
the draft was trained on; a draft that is not an EAGLE-3 draft, or one built for a target of
another width or vocabulary. The draft's ids are what probe scores, so the rules on them never
refuse a probe."""


def check_rules(target: ModelFolder, draft: ModelFolder) -> None:
    """Before any model loads: the pair read as ``check`` reads it (``launch_snapshot.read_models``),
    refused on an error of a :data:`REFUSED` rule, in that rule's words."""
    from sglang_eagle3_embed.core.rules.table import Stage, evaluate
    from sglang_eagle3_embed.patch.launch_snapshot import read_models

    launch = {**PROBE_LAUNCH, "speculative_draft_model_path": str(draft.path)}
    d = read_models(target.path, draft.path, launch)
    for f in evaluate(d, Stage.POST):  # every rule of REFUSED runs after SGLang's resolution
        if f.rule in REFUSED and f.severity is Severity.ERROR:
            flag = REFUSED[f.rule]
            raise InputError(f"{flag} {target.path if flag == '--target' else draft.path}: {f.message}")


def check_draft_weights(draft: ModelFolder, names=None) -> None:
    """Before any model loads: the draft's weights (``names``: its tensors; else read from their
    headers) hold the two parts every EAGLE-3 draft has, its ``fc.weight`` (which reads the target's
    hidden states) and its decoder layer (``midlayer.*``, or ``layers.0.*``)."""
    if names is None:
        names = draft.check_weights()
    names = list(names)
    weights, verb = _weights(draft)
    fix = "pass the EAGLE-3 draft's folder, or download the draft again"
    if not any(name in FC_WEIGHT_NAMES for name in names):
        raise ModelFolderError(
            draft.path,
            f"{weights} {verb} no fc.weight, the layer of an EAGLE-3 draft that reads the target's "
            f"hidden states",
            fix,
            draft.what,
        )
    if not any(name.startswith(DRAFT_LAYER_PREFIXES) for name in names):
        raise ModelFolderError(
            draft.path,
            f"{weights} {verb} no midlayer.* (or layers.0.*) tensors, the decoder layer of an EAGLE-3 draft",
            fix,
            draft.what,
        )


def check_roles(target: ModelFolder, draft: ModelFolder) -> None:
    """A DeepSeek-family target and an EAGLE-3 draft, not in the other order (a draft of another
    kind is rule ``draft-architecture``'s, :func:`check_rules`)."""
    if any(a in DRAFT_ARCHS for a in target.architectures) or any(a in FAMILY for a in draft.architectures):
        raise InputError(
            f"--target {target.path} is {target.architectures} and --draft {draft.path} is "
            f"{draft.architectures}: did you swap --target and --draft?"
        )


def check_capture(target: ModelFolder, draft: ModelFolder) -> None:
    """Before any model loads: the target has layers (a positive ``num_hidden_layers``), and the
    draft's fc (its weights' headers) reads as many target states as its ids capture (rule
    ``draft-fc-width``'s test and words); where the plugin refuses the ids, some reading of them
    must still fit the fc, or there is nothing to score. A fc that is missing is refused before
    (:func:`check_draft_weights`); one that does not divide by the target's hidden size is named
    once the draft loads (:func:`~sglang_eagle3_embed.doctor.eagle3_draft.load_draft`)."""
    num_layers = target.num_layers
    hidden = text_config(target.config).get("hidden_size")
    fc = fc_in_features(draft.path, "--draft")
    declared = draft.config.get("target_hidden_size")
    known = fc is not None and positive_int(hidden) and declared in (None, hidden)
    if not known or (captures := fc_captures(fc, hidden)) is None:
        return
    where = (
        f"--draft {draft.path} (ids in {draft.config_path}, fc.weight in its weights) with --target "
        f"{target.path} ({num_layers} layers, hidden size {hidden})"
    )
    try:
        plan = resolve_capture_plan(draft.config, num_layers)
    except DraftConfigError as exc:
        if not any(w.indices for w in candidate_wirings(draft.config, num_layers, captures)):
            raise InputError(
                f"{where}: the plugin refuses the ids ({exc}) and no other reading of them gives the "
                f"{captures} captures the draft's fc reads ({fc} features): nothing to compare. "
                f"Fix the ids or the checkpoint."
            ) from None
        return
    mismatch = fc_width_mismatch(fc, plan, hidden)
    if mismatch:
        raise InputError(f"{where}: {mismatch}")


def check_widths(request: ProbeRequest, backend, draft, token_map) -> None:
    """Before any forward, what the configs do not say: the draft's twin reads the target's token
    embeddings, so its own width must be the target's, and its token map must stay in the target's
    vocabulary. A draft built for a target of another width or vocabulary is refused before
    (:func:`check_rules`: ``draft-target-hidden``, ``draft-vocab``)."""
    hidden = backend.embedding.embedding_dim
    vocab = backend.embedding.num_embeddings
    if draft.config.hidden_size != hidden:
        raise InputError(
            f"--draft {request.draft} has hidden size {draft.config.hidden_size} but reads the token "
            f"embeddings of --target {request.target}, of width {hidden}: not this target's draft."
        )
    draft_vocab = draft.lm_head.out_features
    mapped = int(token_map.max()) + 1 if token_map is not None else draft_vocab
    if mapped > vocab:
        raise InputError(
            f"--draft {request.draft} predicts token ids up to {mapped - 1}, but --target {request.target} "
            f"has a vocabulary of {vocab}: not this target's draft."
        )


def load_prompts(request: ProbeRequest) -> torch.Tensor:
    """``[N, P]`` prompt tokens: from ``request.prompts`` (JSON token lists, or text through the
    target's tokenizer, cut to the shortest), else the tiny target's own language, else uniform
    random tokens."""
    if request.prompts:
        return _prompts_file(request)
    gen = torch.Generator().manual_seed(request.seed)
    spec_file = Path(request.target) / "tiny_target_spec.json"
    if spec_file.exists():
        from sglang_eagle3_embed.doctor.tiny_target import Language, TargetSpec

        spec = TargetSpec(**read_json(spec_file, "--target"))
        return Language(spec).sample(request.num_prompts, request.prompt_len, gen)
    vocab = ModelFolder.read(request.target, "--target").integer("vocab_size", "pass --prompts FILE")
    return torch.randint(vocab, (request.num_prompts, request.prompt_len), generator=gen)


def _prompts_file(request: ProbeRequest) -> torch.Tensor:
    file = Path(request.prompts)
    hint = "one prompt per line: text, or a JSON list of token ids"
    try:
        if file.exists() and not file.is_file():  # a FIFO or a device would block or never end
            raise InputError(f"--prompts {file} is not a regular file; pass a file ({hint})")
        lines = [line for line in file.read_text().splitlines() if line.strip()]
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"--prompts {file} cannot be read: {exc}") from None
    if not lines:
        raise InputError(f"--prompts {file} holds no prompts ({hint})")
    if all(line.lstrip().startswith("[") for line in lines):
        try:
            rows = [json.loads(line) for line in lines]
        except (ValueError, RecursionError) as exc:  # JSONDecodeError; too deep; too many digits
            raise InputError(f"--prompts {file}: a line is not a JSON list ({exc}); {hint}") from None
        if not all(isinstance(r, list) and all(type(t) is int and t >= 0 for t in r) for r in rows):
            raise InputError(f"--prompts {file}: every JSON line must be a list of token ids (integers >= 0)")
    else:
        from transformers import AutoTokenizer

        try:
            tokenizer = AutoTokenizer.from_pretrained(request.target)
        except Exception as exc:
            raise InputError(
                f"--prompts {file} holds text, but the target {request.target} has no tokenizer that "
                f"loads ({type(exc).__name__}); write each prompt as a JSON list of token ids"
            ) from None
        rows = [tokenizer(line)["input_ids"] for line in lines]
    width = min(len(r) for r in rows)
    if width < 2:
        raise InputError(f"--prompts {file}: every prompt needs at least 2 tokens")
    return torch.tensor([r[:width] for r in rows[: request.num_prompts]])
