"""What ``probe`` is asked to do, as typed data, and the checks of that input.

The command line builds one :class:`ProbeRequest` from its flags (``cli/probe.py``); nothing below
it sees an argparse namespace. Every check raises :class:`InputError` naming the flag or path and
what to do, before any forward pass: the numbers when the request is made, the engine arguments and
``--output`` as the command line reads them, the folders' roles, the target's layers and the
draft's fc against its ids (configs and weights' headers, before any model loads), and the draft's
widths against the target once they are read (:func:`sglang_eagle3_embed.doctor.probe.probe_folders`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import torch

from sglang_eagle3_embed import FAMILY
from sglang_eagle3_embed.core.atomic import check_writable
from sglang_eagle3_embed.core.draft_config import resolve_capture_plan
from sglang_eagle3_embed.core.errors import DraftConfigError, InputError
from sglang_eagle3_embed.core.model_folder import ModelFolder, fc_in_features, read_json, text_config
from sglang_eagle3_embed.core.rules_draft import fc_width_mismatch
from sglang_eagle3_embed.doctor.wirings import candidate_wirings

__all__ = [
    "ProbeRequest", "check_capture", "check_output", "check_roles", "check_widths", "load_prompts",
    "parse_engine_args",
]  # fmt: skip

DRAFT_ARCH = "LlamaForCausalLMEagle3"


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


def check_roles(target: ModelFolder, draft: ModelFolder) -> None:
    """A DeepSeek-family target and an EAGLE-3 draft, in that order."""
    if DRAFT_ARCH in target.architectures or any(a in FAMILY for a in draft.architectures):
        raise InputError(
            f"--target {target.path} is {target.architectures} and --draft {draft.path} is "
            f"{draft.architectures}: did you swap --target and --draft?"
        )
    if DRAFT_ARCH not in draft.architectures:
        raise InputError(f"--draft {draft.path}: probe reads {DRAFT_ARCH} drafts, not {draft.architectures}")


def check_capture(target: ModelFolder, draft: ModelFolder) -> None:
    """Before any model loads: the target has layers (a positive ``num_hidden_layers``), and the
    draft's fc (its weights' headers) reads as many target states as its ids capture (rule
    ``draft-fc-width``'s test and words); where the plugin refuses the ids, some reading of them
    must still fit the fc, or there is nothing to score. A fc that is missing, or that does not
    divide by the target's hidden size, is named once the draft loads (:func:`check_widths`)."""
    num_layers = target.num_layers
    hidden = text_config(target.config).get("hidden_size")
    fc = fc_in_features(draft.path, "--draft")
    declared = draft.config.get("target_hidden_size")
    known = fc is not None and isinstance(hidden, int) and hidden > 0 and declared in (None, hidden)
    if not known or fc % hidden:
        return
    where = (
        f"--draft {draft.path} (ids in {draft.config_path}, fc.weight in its weights) with --target "
        f"{target.path} ({num_layers} layers, hidden size {hidden})"
    )
    try:
        plan = resolve_capture_plan(draft.config, num_layers)
    except DraftConfigError as exc:
        if not any(w.indices for w in candidate_wirings(draft.config, num_layers, fc // hidden)):
            raise InputError(
                f"{where}: the plugin refuses the ids ({exc}) and no other reading of them gives the "
                f"{fc // hidden} captures the draft's fc reads ({fc} features): nothing to compare. "
                f"Fix the ids or the checkpoint."
            ) from None
        return
    mismatch = fc_width_mismatch(fc, plan, hidden)
    if mismatch:
        raise InputError(f"{where}: {mismatch}")


def check_widths(request: ProbeRequest, backend, draft, token_map) -> None:
    """Before any forward: the draft must read this target's hidden states and vocabulary."""
    hidden = backend.embedding.embedding_dim
    vocab = backend.embedding.num_embeddings
    fc_in, declared = draft.fc.in_features, draft.target_hidden
    if declared != hidden or fc_in % hidden:
        raise InputError(
            f"--draft {request.draft} was built for another target: its fc reads {fc_in} features "
            f"(target_hidden_size {declared}), but --target {request.target} has hidden size {hidden}. "
            f"Pass the target the draft was trained for."
        )
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
