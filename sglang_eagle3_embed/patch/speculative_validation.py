"""Wrapper of the ``handle_speculative_decoding`` resolution step: the startup validator
(docs/patches.md §6).

At launch it runs the ``pre`` rules, then SGLang's step, then the ``post`` rules, comparing what the
user passed (``_raw_input``, ``srt/arg_groups/pipeline.py:29-32``) with what SGLang resolved
(``resolution_result``, ``srt/arg_groups/overrides.py:178-192``). It runs in the launcher before any
subprocess or GPU work, only for launches with ``--model-impl sglang_eagle3_embed``.
``sglang-eagle3-embed check`` (the service :mod:`sglang_eagle3_embed.doctor.check`) runs the same rules on the
same :func:`snapshot` of any launch command line, without a GPU.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import stat

from sglang_eagle3_embed.activation import State, requested
from sglang_eagle3_embed.core import model_folder
from sglang_eagle3_embed.core.deployment import WATCHED, Deployment
from sglang_eagle3_embed.core.errors import ValidationError
from sglang_eagle3_embed.core.findings import Finding, Severity
from sglang_eagle3_embed.core.model_folder import ModelFolderError, looks_local
from sglang_eagle3_embed.core.rule_registry import Stage
from sglang_eagle3_embed.core.rules import evaluate

__all__ = ["STEP", "WHAT", "register", "snapshot", "validate_launch"]

STEP = "handle_speculative_decoding"
WHAT = f"the resolution step {STEP!r}"

logger = logging.getLogger("sglang_eagle3_embed")


def read_config(path: str | None, revision: str | None = None) -> tuple[dict | None, str | None]:
    """``config.json`` of a local folder or a cached hub repo, as a JSON object: ``(config, None)``,
    ``(None, None)`` without a path, or ``(None, why not)`` (a missing or damaged file, or JSON
    that is not an object: the file and what is wrong with it)."""
    if not path:
        return None, None
    try:
        if looks_local(path):
            file = model_folder.config_file(path, folder_only=True)
        else:
            from transformers.utils import cached_file

            try:
                file = cached_file(path, "config.json", revision=revision)
            except Exception as exc:  # not cached, no such repo, offline: a finding, not a traceback
                return None, f"{path}: {type(exc).__name__}: {exc}"
            if file is None:
                return None, f"{path}: has no config.json"
        config = model_folder.read_json(file)
    except ModelFolderError as exc:
        return None, exc.reason
    if not isinstance(config, dict):
        return None, f"{file}: is not a JSON object but a {type(config).__name__}"
    return config, None


def _gguf(path: str | None) -> bool:
    """A GGUF file as the model path: SGLang reads its config from the file itself (a FIFO or a
    folder is never opened)."""
    try:
        if not path or not stat.S_ISREG(os.stat(path).st_mode):
            return False
        if path.endswith(".gguf"):
            return True
        with open(path, "rb") as f:
            return f.read(4) == b"GGUF"
    except (OSError, ValueError):
        return False


def draft_weights(path: str | None) -> tuple[int | None, str | None, tuple[str, ...]]:
    """The draft fc's input width from the safetensors headers of a local folder (no tensor is
    read, :func:`~sglang_eagle3_embed.core.model_folder.fc_in_features`), why the checkpoint cannot
    be read (a damaged one), and the weight files read: ``(None, None, ())`` when there is nothing
    local to read."""
    if not path or not looks_local(path):
        return None, None, ()
    try:
        files = model_folder.weight_files(path)
        return model_folder.fc_in_features(path), None, tuple(str(f) for f in files)
    except ModelFolderError as exc:
        return None, exc.reason, ()


def target_layers(path: str | None, config) -> dict[int, frozenset[str]] | None:
    """The decoder layers (and their modules) that a local target's safetensors headers hold, no
    tensor read; None when there is nothing local to read or it cannot be read (a damaged
    checkpoint fails at load with safetensors' own error)."""
    if not path or not looks_local(path) or not isinstance(config, dict):
        return None
    try:
        names = [n for f in model_folder.weight_files(path) for n in model_folder.safetensors_header(f)]
    except ModelFolderError:
        return None
    return model_folder.decoder_layers(names, model_folder.layer_prefixes(config))


def snapshot(server_args, *, resolved: bool, plugin_active: bool, plugin_reason: str = "") -> Deployment:
    """A :class:`Deployment` of ``server_args`` (``resolved``: after SGLang's resolution)."""
    import msgspec
    from sglang.srt.arg_groups.overrides import resolution_result

    defaults = {f.name: f.default for f in msgspec.structs.fields(type(server_args))}
    raw_input = getattr(server_args, "_raw_input", None) or {}
    raw = {n: raw_input.get(n, getattr(server_args, n, None)) for n in WATCHED}
    draft_path = raw["speculative_draft_model_path"]
    target, target_error = (
        (None, None)
        if _gguf(server_args.model_path)
        else read_config(server_args.model_path, getattr(server_args, "revision", None))
    )
    draft, draft_error = read_config(
        draft_path, getattr(server_args, "speculative_draft_model_revision", None)
    )
    fc_width, weights_error, weight_files = (
        draft_weights(draft_path) if draft is not None else (None, None, ())
    )
    deployment = Deployment(
        raw=raw,
        explicit=frozenset(n for n in WATCHED if raw[n] != defaults.get(n)),
        resolved={n: resolution_result(server_args, n) for n in WATCHED} if resolved else {},
        target=target,
        target_error=target_error,
        draft=draft,
        draft_error=draft_error,
        draft_fc_in_features=fc_width,
        draft_weights_error=weights_error,
        draft_weight_files=weight_files,
        plugin_active=plugin_active,
        plugin_reason=plugin_reason,
    )
    if not deployment.drafts_from_target:
        return deployment
    return dataclasses.replace(deployment, target_layers=target_layers(server_args.model_path, target))


_LOGGED: set[Finding] = set()


def _report(findings: list[Finding]) -> None:
    for finding in findings:
        if finding.severity is not Severity.ERROR and finding not in _LOGGED:
            _LOGGED.add(finding)
            logger.warning("sglang_eagle3_embed: [%s] %s", finding.rule, finding.message)
    errors = [f for f in findings if f.severity is Severity.ERROR]
    if errors:
        raise ValidationError(errors)


def validate_launch(server_args, previous) -> None:
    """Resolution-step wrapper: rules before and after SGLang's speculative resolution."""
    if not requested(server_args):
        previous(server_args)
        return
    state = dict(plugin_active=State.active, plugin_reason=State.reason)
    _report(evaluate(snapshot(server_args, resolved=False, **state), Stage.PRE))
    previous(server_args)
    _report(evaluate(snapshot(server_args, resolved=True, **state), Stage.POST))


def register() -> None:
    from sglang.srt.arg_groups.resolution_hooks import register_resolution_hook

    register_resolution_hook(STEP)(validate_launch)
