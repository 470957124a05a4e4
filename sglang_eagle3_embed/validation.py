"""Run the validation rules on SGLang's own argument resolution (glue; docs/patches.md §6).

At launch, a wrapper of the ``handle_speculative_decoding`` resolution step runs the ``pre`` rules,
then SGLang's step, then the ``post`` rules, comparing what the user passed (``_raw_input``,
``srt/arg_groups/pipeline.py:28-31``) with what SGLang resolved (``resolution_result``,
``srt/arg_groups/overrides.py:178-192``). It runs in the launcher before any subprocess or GPU
work, only for launches with ``--model-impl sglang_eagle3_embed``. ``sglang-eagle3-embed check``
runs the same rules on any launch command line, without a GPU.
"""

from __future__ import annotations

import json
import logging
import os
from importlib.metadata import entry_points
from pathlib import Path

from sglang_eagle3_embed.compat import check_sglang_version, installed_sglang_version
from sglang_eagle3_embed.errors import PluginInactiveError, ValidationError
from sglang_eagle3_embed.findings import Finding, Severity
from sglang_eagle3_embed.rules import WATCHED, Deployment, evaluate

__all__ = ["plugin_status", "run_check", "snapshot", "validate_launch"]

logger = logging.getLogger("sglang_eagle3_embed")

ENTRY_POINT = "eagle3_embed"
FC_WEIGHT_NAMES = ("fc.weight", "model.fc.weight")


def read_config(path: str | None, revision: str | None = None) -> tuple[dict | None, str | None]:
    """``config.json`` of a local folder or a cached hub repo: (config, None) or (None, why not)."""
    if not path:
        return None, None
    folder = Path(path)
    try:
        if folder.is_dir():
            file = folder / "config.json"
        else:
            from transformers.utils import cached_file

            file = Path(cached_file(path, "config.json", revision=revision))
        config = json.loads(file.read_text())
    except Exception as exc:  # any failure to read is reported as a finding
        return None, f"{path}: {type(exc).__name__}: {exc}"
    return config, None


def fc_in_features(path: str | None) -> int | None:
    """The draft fc's input width from the safetensors headers of a local folder (no tensor is read)."""
    folder = Path(path) if path else None
    if folder is None or not folder.is_dir():
        return None
    from safetensors import safe_open

    index = folder / "model.safetensors.index.json"
    if index.exists():
        weight_map = json.loads(index.read_text()).get("weight_map", {})
        files = sorted({folder / weight_map[n] for n in FC_WEIGHT_NAMES if n in weight_map})
    else:
        files = sorted(folder.glob("*.safetensors"))
    for file in files:
        with safe_open(str(file), framework="pt") as f:
            names = set(f.keys())
            for name in FC_WEIGHT_NAMES:
                if name in names:
                    return int(f.get_slice(name).get_shape()[1])
    return None


def plugin_status() -> tuple[bool, str]:
    """Whether SGLang would activate the plugin in a new process, and why not."""
    if ENTRY_POINT not in {ep.name for ep in entry_points(group="sglang.srt.plugins")}:
        return False, "its sglang.srt.plugins entry point is not installed (pip install sglang-eagle3-embed)"
    allowed = os.environ.get("SGLANG_PLUGINS", "")
    if allowed and ENTRY_POINT not in {x.strip() for x in allowed.split(",")}:
        return False, f"SGLANG_PLUGINS={allowed} does not list {ENTRY_POINT}, so SGLang skips it"
    try:
        check_sglang_version(installed_sglang_version())
    except PluginInactiveError as exc:
        return False, str(exc)
    return True, ""


def snapshot(server_args, *, resolved: bool, plugin_active: bool, plugin_reason: str = "") -> Deployment:
    """A :class:`Deployment` of ``server_args`` (``resolved``: after SGLang's resolution)."""
    import msgspec
    from sglang.srt.arg_groups.overrides import resolution_result

    defaults = {f.name: f.default for f in msgspec.structs.fields(type(server_args))}
    raw_input = getattr(server_args, "_raw_input", None) or {}
    raw = {n: raw_input.get(n, getattr(server_args, n, None)) for n in WATCHED}
    draft_path = raw["speculative_draft_model_path"]
    target, _ = read_config(server_args.model_path, getattr(server_args, "revision", None))
    draft, draft_error = read_config(
        draft_path, getattr(server_args, "speculative_draft_model_revision", None)
    )
    return Deployment(
        raw=raw,
        explicit=frozenset(n for n in WATCHED if raw[n] != defaults.get(n)),
        resolved={n: resolution_result(server_args, n) for n in WATCHED} if resolved else {},
        target=target if isinstance(target, dict) else None,
        draft=draft,
        draft_error=draft_error,
        draft_fc_in_features=fc_in_features(draft_path) if draft is not None else None,
        plugin_active=plugin_active,
        plugin_reason=plugin_reason,
    )


_LOGGED: set[Finding] = set()


def _report(findings: list[Finding]) -> None:
    for finding in findings:
        if finding.severity is Severity.WARNING and finding not in _LOGGED:
            _LOGGED.add(finding)
            logger.warning("sglang_eagle3_embed: [%s] %s", finding.rule, finding.message)
    errors = [f for f in findings if f.severity is Severity.ERROR]
    if errors:
        raise ValidationError(errors)


def validate_launch(server_args, previous) -> None:
    """Resolution-step wrapper: rules before and after SGLang's speculative resolution."""
    from sglang_eagle3_embed.hooks import State, requested

    if not requested(server_args):
        previous(server_args)
        return
    state = dict(plugin_active=State.active, plugin_reason=State.reason)
    _report(evaluate(snapshot(server_args, resolved=False, **state), "pre"))
    previous(server_args)
    _report(evaluate(snapshot(server_args, resolved=True, **state), "post"))


def run_check(argv: list[str]) -> list[Finding]:
    """Parse ``argv`` like ``sglang.launch_server``, resolve it without a GPU, run every rule."""
    from sglang.srt.server_args import prepare_server_args

    args = list(argv)
    if not any(a == "--device" or a.startswith("--device=") for a in args):
        args += ["--device", "cpu"]  # SGLang's resolution needs a device; cpu needs no accelerator
    server_args = prepare_server_args(args)
    active, reason = plugin_status()
    findings = evaluate(
        snapshot(server_args, resolved=False, plugin_active=active, plugin_reason=reason), "pre"
    )
    if any(f.severity is Severity.ERROR for f in findings):
        return findings  # SGLang's own resolution would stop on the same problem, less clearly
    try:
        server_args.resolve_once()
    except ValidationError as exc:  # the plugin's launch hook, when loaded in this process
        return findings + exc.findings
    except Exception as exc:  # SGLang's own refusal, reported as a finding
        return [*findings, Finding("sglang-resolution", Severity.ERROR, f"{type(exc).__name__}: {exc}")]
    return findings + evaluate(
        snapshot(server_args, resolved=True, plugin_active=active, plugin_reason=reason), "post"
    )
