"""The service behind ``sglang-eagle3-embed check``: the startup rules on any launch command line,
without a GPU.

SGLang parses the arguments and resolves them on the CPU (configs only, no weights); the rules of
``docs/validation.md`` run on the same snapshot the launch hook builds
(:func:`sglang_eagle3_embed.patch.launch_snapshot.snapshot`); the findings render as a table
or as JSON. Imports sglang only when run. Used by the command (``cli/check.py``), the tools and the
benchmarks.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import textwrap
from dataclasses import dataclass, field
from importlib.metadata import entry_points

from sglang_eagle3_embed.core.errors import (
    InputError,
    PluginInactiveError,
    ValidationError,
    flag,
    positive_int,
)
from sglang_eagle3_embed.core.findings import Finding, Severity
from sglang_eagle3_embed.core.readers.deployment import Deployment
from sglang_eagle3_embed.core.readers.overrides import override_error
from sglang_eagle3_embed.core.releases import installed_sglang_version, release
from sglang_eagle3_embed.core.rules.table import RULES, Rule, Stage, evaluate, not_checked, refused, verdicts

__all__ = [
    "Check",
    "LaunchArgumentsError",
    "check_launch",
    "findings_json",
    "locate_models",
    "parse_launch",
    "plugin_status",
    "render_json",
    "render_table",
    "rule_table",
    "run_check",
    "verdicts",
]

ENTRY_POINT = "eagle3_embed"


def plugin_status() -> tuple[bool, str]:
    """Whether SGLang would activate the plugin in a new process, and why not."""
    if ENTRY_POINT not in {ep.name for ep in entry_points(group="sglang.srt.plugins")}:
        return (
            False,
            "its sglang.srt.plugins entry point is not installed (install it from this checkout: pip install -e .)",
        )
    allowed = os.environ.get("SGLANG_PLUGINS", "")
    if allowed and ENTRY_POINT not in {x.strip() for x in allowed.split(",")}:
        return False, f"SGLANG_PLUGINS={allowed} does not list {ENTRY_POINT}, so SGLang skips it"
    try:
        release(installed_sglang_version())
    except PluginInactiveError as exc:
        return False, str(exc)
    return True, ""


class LaunchArgumentsError(ValueError):
    """SGLang's own parser refused the launch arguments (its message, without its usage text), or
    a value no launch can run with (the flag, the value and the fix)."""


SEE = "the arguments of python -m sglang.launch_server; see its --help"
TRIPLE = "--speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4"

POSITIVE = {
    "speculative_num_steps": "the number of draft steps",
    "speculative_eagle_topk": "the draft tokens kept at each step",
    "speculative_num_draft_tokens": "the tokens verified at each step",
    "tp_size": "the tensor-parallel size (GPUs per model replica)",
    "dp_size": "the number of data-parallel replicas",
    "pp_size": "the number of pipeline stages",
    "ep_size": "the expert-parallel size",
    "moe_dp_size": "the MoE data-parallel size",
    "attn_dp_size": "the number of attention data-parallel groups",
    "nnodes": "the number of nodes",
    "page_size": "the tokens per KV-cache page",
    "max_running_requests": "the cap on running requests",
    "cuda_graph_max_bs_decode": "the largest decode batch captured in a CUDA graph",
}
"""Integer launch arguments below 1 that SGLang's parser takes and no launch can run with:
field -> what it counts. SGLang's own resolution passes them silently on the CPU."""


def _config_file(args: list[str]) -> str | None:
    """The ``--config`` file among ``args`` (SGLang reads the one after the exact token), checked to
    be a regular file before SGLang opens it: a FIFO would block the check forever."""
    if "--config" not in args:
        return None
    i = args.index("--config")
    if i + 1 >= len(args):
        return None  # SGLang's parser names the missing value
    path = args[i + 1]
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError) as exc:
        why = getattr(exc, "strerror", None) or str(exc)
        raise LaunchArgumentsError(
            f"--config {path}: cannot be read ({why}). Fix: pass a YAML file of launch arguments"
        ) from None
    if not stat.S_ISREG(mode):
        kind = "a folder" if stat.S_ISDIR(mode) else "not a regular file"
        raise LaunchArgumentsError(
            f"--config {path}: is {kind}. Fix: pass a YAML file of launch arguments"
        ) from None
    return path


def _check_values(server_args) -> None:
    """Refuse what SGLang's parser took but no launch can run with: a count below 1, a
    ``--json-model-override-args`` that is not a JSON object."""
    for name, what in POSITIVE.items():
        value = getattr(server_args, name, None)
        if value is None:
            continue
        if not positive_int(value):
            if name.startswith("speculative_"):
                fix = f"{flag(name)} 1 or more, e.g. {TRIPLE}"
            else:
                fix = f"{flag(name)} 1 or more, or leave it out (SGLang's default)"
            raise LaunchArgumentsError(f"{flag(name)} {value}: {what} must be at least 1. Fix: pass {fix}")
    error = override_error(getattr(server_args, "json_model_override_args", None))
    if error:
        raise LaunchArgumentsError(error)


def parse_launch(args: list[str]):
    """SGLang's ``prepare_server_args``, with its argparse exit turned into :class:`LaunchArgumentsError`
    (SGLang would print its whole usage text and exit 2), an error reading ``--config`` too, then
    the values no launch can run with refused (:func:`_check_values`). Nothing SGLang prints reaches
    stdout (``check --json`` prints one JSON document)."""
    import contextlib
    import io

    from sglang.srt.server_args import prepare_server_args

    config = _config_file(args)
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            server_args = prepare_server_args(args)
    except SystemExit as exc:
        if exc.code == 0:  # an abbreviation of --help, e.g. --hel: SGLang printed its help
            raise LaunchArgumentsError(
                f"SGLang's parser printed its help instead of reading the launch (a --help among the "
                f"arguments?); for check's own usage run sglang-eagle3-embed check --help ({SEE})"
            ) from None
        lines = [line for line in err.getvalue().splitlines() if "error:" in line]
        message = lines[-1].split("error:", 1)[1].strip() if lines else f"exit status {exc.code}"
        raise LaunchArgumentsError(f"{message} ({SEE})") from None
    except Exception as exc:  # SGLang reading --config, or refusing the values it parsed
        text = " ".join(f"{type(exc).__name__}: {exc}".split())
        if config is not None:
            raise LaunchArgumentsError(
                f"--config {config}: SGLang cannot read it ({text}). Fix: pass a .yaml file that maps "
                f"launch arguments to values, e.g. 'tp-size: 2'"
            ) from None
        raise LaunchArgumentsError(f"SGLang refused the launch arguments: {text} ({SEE})") from None
    _check_values(server_args)
    return server_args


def locate_models(server_args) -> None:
    """An :class:`InputError` (exit 2) for a model path that names nothing here: a local path that
    does not exist, or a hub id the local Hugging Face cache does not hold at its revision (``check``
    never downloads; :func:`~sglang_eagle3_embed.core.readers.hub.resolve` names the repo, the revision and
    the fix)."""
    from sglang_eagle3_embed.core.readers import hub

    download_dir = getattr(server_args, "download_dir", None)
    for named, path, revision in (
        ("--model-path", server_args.model_path, getattr(server_args, "revision", None)),
        (
            "--speculative-draft-model-path",
            getattr(server_args, "speculative_draft_model_path", None),
            getattr(server_args, "speculative_draft_model_revision", None),
        ),
    ):
        if not path:
            continue
        folder = hub.locate(path, revision, download_dir, named)
        try:
            present = os.path.lexists(folder)
        except (OSError, ValueError):
            present = False
        if not present:
            raise InputError(
                f"{named} {path}: no such file or folder. Fix: pass the model's folder, or its hub id "
                f"(org/name) to read from the local Hugging Face cache"
            )


@dataclass(frozen=True)
class Check:
    """What ``check`` found: the rules' findings, the GPU SGLang's hardware questions were answered
    as (None: this machine's own), and the steps only the serving machine can show."""

    findings: list[Finding]
    resolved_as: str | None = None
    not_checked_here: tuple[str, ...] = ()
    server_args: object = field(default=None, repr=False, compare=False)
    """SGLang's parsed (and, when :attr:`resolved`, resolved) arguments."""
    deployment: Deployment | None = field(default=None, repr=False, compare=False)
    """The launch as the last stage of rules that ran read it (what ``check --pd-peer`` compares)."""
    resolved: bool = False
    """SGLang's resolution ran to the end."""


def check_launch(argv: list[str], gpu: str | None = None) -> Check:
    """Parse ``argv`` like ``sglang.launch_server``, resolve it as the serving machine would
    (answered as ``gpu`` where this machine lacks it, :mod:`sglang_eagle3_embed.doctor.
    serving_machine`), run every rule."""
    from sglang_eagle3_embed.doctor.serving_machine import ib_devices, serving_gpu

    machine = serving_gpu(gpu)
    args = list(argv)
    if machine is not None and not any(a == "--device" or a.startswith("--device=") for a in args):
        args += ["--device", "cuda"]  # as on the serving machine (--device cpu changes what resolves)
    server_args = parse_launch(args)
    locate_models(server_args)
    here = ()
    if machine is not None and ib_devices(server_args):
        named = [
            f"{flag(f)} {getattr(server_args, f)}"
            for f in ("disaggregation_ib_device", "mooncake_ib_device")
            if getattr(server_args, f, None)
        ]
        here = (
            f"{'; '.join(named)}: SGLang checks at startup that these InfiniBand devices exist on the "
            f"machine it runs on (srt/arg_groups/validation_hook.py:536-547). Run check on the serving "
            f"machine, or compare with ls /sys/class/infiniband there.",
        )
    findings, deployment, resolved = _rules(server_args, machine)
    return Check(findings, machine.describe() if machine else None, here, server_args, deployment, resolved)


def run_check(argv: list[str], gpu: str | None = None) -> list[Finding]:
    """The rules' findings of :func:`check_launch`. A rule of a stage that could not run is
    reported as not checked, never as passed."""
    return check_launch(argv, gpu).findings


def _rules(server_args, machine) -> tuple[list[Finding], Deployment, bool]:
    """The findings, the launch as the last stage that ran read it, and whether SGLang's
    resolution ran to the end. Both stages read the same weights, each header once."""
    from sglang_eagle3_embed.core.readers.model_folder import headers_read_once

    with headers_read_once():
        return _stages(server_args, machine)


def _stages(server_args, machine) -> tuple[list[Finding], Deployment, bool]:
    from sglang_eagle3_embed.doctor.serving_machine import as_serving_machine, ib_devices
    from sglang_eagle3_embed.patch.launch_snapshot import snapshot

    active, reason = plugin_status()
    passed = snapshot(server_args, resolved=False, plugin_active=active, plugin_reason=reason)
    findings = evaluate(passed, Stage.PRE)
    if any(f.severity is Severity.ERROR for f in findings):
        # SGLang's own resolution would stop on the same problem, less clearly
        return (
            findings + not_checked(Stage.POST, "SGLang's resolution was not run after the errors above"),
            passed,
            False,
        )
    if passed.target_error:
        # SGLang's resolution reads the same config.json first and stops on it, with a message that
        # names neither the file nor what is wrong with it
        return (
            [
                *findings,
                *evaluate(refused(passed, InputError(passed.target_error)), Stage.RESOLUTION),
                *not_checked(
                    Stage.POST, "SGLang's resolution was not run: the target's config.json cannot be read"
                ),
            ],
            passed,
            False,
        )
    emulated = as_serving_machine(machine, ib_devices(server_args)) if machine else contextlib.nullcontext()
    try:
        with emulated:
            server_args.resolve_once()
    except ValidationError as exc:  # the plugin's launch hook, when loaded in this process
        return findings + exc.findings, passed, False
    except Exception as exc:  # SGLang's own refusal: the rules of the resolution stage report it
        return (
            [
                *findings,
                *evaluate(refused(passed, exc), Stage.RESOLUTION),
                *not_checked(Stage.POST, "SGLang's resolution refused the launch"),
            ],
            passed,
            False,
        )
    resolved = snapshot(server_args, resolved=True, plugin_active=active, plugin_reason=reason)
    return findings + evaluate(resolved, Stage.POST), resolved, True


def _machine(check: Check) -> list[str]:
    lines = [
        f"SGLang's resolution answered as on an {check.resolved_as} (--gpu names the serving machine's GPU)"
        if check.resolved_as
        else "SGLang's resolution ran on this machine's GPU"
    ]
    for step in check.not_checked_here:
        lines += textwrap.wrap(f"not checked here: {step}", 110, subsequent_indent="  ")
    return lines


def render_table(check: Check | list[Finding]) -> str:
    check = check if isinstance(check, Check) else Check(check)
    return "\n".join([*_machine(check), "", rule_table(check.findings)])


def rule_table(findings: list[Finding], rules: dict[str, Rule] = RULES) -> str:
    """The one table of findings: every rule of ``rules``, its verdict and its messages, then the
    counts (``check``'s table of one launch, and of a PD pair for ``check --pd-peer``)."""
    width = max(len(r) for r in rules)
    lines = [f"{'rule':<{width}}  {'verdict':<11}  message", f"{'-' * width}  {'-' * 11}  -------"]
    messages: dict[str, list[str]] = {}
    for f in findings:
        messages.setdefault(f.rule, []).append(f.message)
    shown = verdicts(findings, rules)
    for rule_id, verdict in shown.items():
        texts = messages.get(rule_id) or [""]
        for i, text in enumerate(texts):
            wrapped = textwrap.wrap(text, 100) or [""]
            head = f"{rule_id if i == 0 else '':<{width}}  {verdict if i == 0 else '':<11}  "
            lines.append(head + wrapped[0])
            lines.extend(" " * len(head) + w for w in wrapped[1:])
    counts = list(shown.values())
    errors, warnings = counts.count("error"), counts.count("warning")
    unchecked = counts.count(Severity.NOT_CHECKED.value)
    lines.append(f"\n{errors} error(s), {warnings} warning(s), {unchecked} rule(s) not checked")
    return "\n".join(lines)


def findings_json(findings: list[Finding], rules: dict[str, Rule] = RULES) -> dict:
    """The findings and every rule's verdict, as ``check --json`` reports them."""
    return {
        "findings": [{"rule": f.rule, "severity": f.severity.value, "message": f.message} for f in findings],
        "rules": verdicts(findings, rules),
    }


def render_json(check: Check | list[Finding]) -> str:
    check = check if isinstance(check, Check) else Check(check)
    findings = check.findings
    return json.dumps(
        {
            "ok": not any(f.severity is Severity.ERROR for f in findings),
            "resolved_as": check.resolved_as,
            "not_checked_here": list(check.not_checked_here),
            **findings_json(findings),
        },
        indent=2,
    )
