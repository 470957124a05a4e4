"""The service behind ``sglang-eagle3-embed check``: the startup rules on any launch command line,
without a GPU.

SGLang parses the arguments and resolves them on the CPU (configs only, no weights); the rules of
``docs/validation.md`` run on the same snapshot the launch hook builds
(:func:`sglang_eagle3_embed.patch.speculative_validation.snapshot`); the findings render as a table
or as JSON. Imports sglang only when run. Used by the command (``cli/check.py``), the tools and the
benchmarks.
"""

from __future__ import annotations

import json
import os
import textwrap
from importlib.metadata import entry_points

from sglang_eagle3_embed.core.errors import PluginInactiveError, ValidationError
from sglang_eagle3_embed.core.findings import Finding, Severity
from sglang_eagle3_embed.core.releases import installed_sglang_version, release
from sglang_eagle3_embed.core.rules import RULES, Stage, evaluate, not_checked, refused

__all__ = [
    "LaunchArgumentsError",
    "parse_launch",
    "plugin_status",
    "render_json",
    "render_table",
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
    """SGLang's own parser refused the launch arguments (its message, without its usage text)."""


def parse_launch(args: list[str]):
    """SGLang's ``prepare_server_args``, with its argparse exit turned into :class:`LaunchArgumentsError`
    (SGLang would print its whole usage text and exit 2)."""
    import contextlib
    import io

    from sglang.srt.server_args import prepare_server_args

    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            return prepare_server_args(args)
    except SystemExit as exc:
        lines = [line for line in err.getvalue().splitlines() if "error:" in line]
        message = lines[-1].split("error:", 1)[1].strip() if lines else f"exit status {exc.code}"
        raise LaunchArgumentsError(
            f"{message} (the arguments of python -m sglang.launch_server; see its --help)"
        ) from None


def run_check(argv: list[str]) -> list[Finding]:
    """Parse ``argv`` like ``sglang.launch_server``, resolve it without a GPU, run every rule. A rule
    of a stage that could not run is reported as not checked, never as passed."""
    from sglang_eagle3_embed.patch.speculative_validation import snapshot

    args = list(argv)
    if not any(a == "--device" or a.startswith("--device=") for a in args):
        args += ["--device", "cpu"]  # SGLang's resolution needs a device; cpu needs no accelerator
    server_args = parse_launch(args)
    active, reason = plugin_status()
    passed = snapshot(server_args, resolved=False, plugin_active=active, plugin_reason=reason)
    findings = evaluate(passed, Stage.PRE)
    if any(f.severity is Severity.ERROR for f in findings):
        # SGLang's own resolution would stop on the same problem, less clearly
        return findings + not_checked(Stage.POST, "SGLang's resolution was not run after the errors above")
    try:
        server_args.resolve_once()
    except ValidationError as exc:  # the plugin's launch hook, when loaded in this process
        return findings + exc.findings
    except Exception as exc:  # SGLang's own refusal: the rules of the resolution stage report it
        return [
            *findings,
            *evaluate(refused(passed, exc), Stage.RESOLUTION),
            *not_checked(Stage.POST, "SGLang's resolution refused the launch"),
        ]
    return findings + evaluate(
        snapshot(server_args, resolved=True, plugin_active=active, plugin_reason=reason), Stage.POST
    )


RANK = {"ok": 0, Severity.NOT_CHECKED.value: 1, Severity.WARNING.value: 2, Severity.ERROR.value: 3}


def verdicts(findings: list[Finding]) -> dict[str, str]:
    """Every rule's verdict: ``ok``, ``not checked``, ``warning`` or ``error`` (the gravest)."""
    result = dict.fromkeys(RULES, "ok")
    for f in findings:
        if RANK[f.severity.value] > RANK[result.get(f.rule, "ok")]:
            result[f.rule] = f.severity.value
    return result


def render_table(findings: list[Finding]) -> str:
    width = max(len(r) for r in RULES)
    lines = [f"{'rule':<{width}}  {'verdict':<11}  message", f"{'-' * width}  {'-' * 11}  -------"]
    messages: dict[str, list[str]] = {}
    for f in findings:
        messages.setdefault(f.rule, []).append(f.message)
    for rule_id, verdict in verdicts(findings).items():
        texts = messages.get(rule_id) or [""]
        for i, text in enumerate(texts):
            wrapped = textwrap.wrap(text, 100) or [""]
            head = f"{rule_id if i == 0 else '':<{width}}  {verdict if i == 0 else '':<11}  "
            lines.append(head + wrapped[0])
            lines.extend(" " * len(head) + w for w in wrapped[1:])
    counts = list(verdicts(findings).values())
    errors, warnings = counts.count("error"), counts.count("warning")
    unchecked = counts.count(Severity.NOT_CHECKED.value)
    lines.append(f"\n{errors} error(s), {warnings} warning(s), {unchecked} rule(s) not checked")
    return "\n".join(lines)


def render_json(findings: list[Finding]) -> str:
    return json.dumps(
        {
            "ok": not any(f.severity is Severity.ERROR for f in findings),
            "findings": [
                {"rule": f.rule, "severity": f.severity.value, "message": f.message} for f in findings
            ],
            "rules": verdicts(findings),
        },
        indent=2,
    )
