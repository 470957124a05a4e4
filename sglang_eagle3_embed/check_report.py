"""Render ``check`` findings as a table or JSON. Pure module."""

from __future__ import annotations

import json
import textwrap

from sglang_eagle3_embed.findings import Finding, Severity
from sglang_eagle3_embed.rules import RULES

__all__ = ["render_json", "render_table", "verdicts"]


def verdicts(findings: list[Finding]) -> dict[str, str]:
    """Every rule's verdict: ``ok``, ``warning`` or ``error``."""
    result = dict.fromkeys(RULES, "ok")
    for f in findings:
        if result.get(f.rule) != Severity.ERROR.value:
            result[f.rule] = f.severity.value
    return result


def render_table(findings: list[Finding]) -> str:
    width = max(len(r) for r in RULES)
    lines = [f"{'rule':<{width}}  verdict  message", f"{'-' * width}  -------  -------"]
    messages: dict[str, list[str]] = {}
    for f in findings:
        messages.setdefault(f.rule, []).append(f.message)
    for rule_id, verdict in verdicts(findings).items():
        texts = messages.get(rule_id) or [""]
        for i, text in enumerate(texts):
            wrapped = textwrap.wrap(text, 100) or [""]
            head = f"{rule_id if i == 0 else '':<{width}}  {verdict if i == 0 else '':<7}  "
            lines.append(head + wrapped[0])
            lines.extend(" " * len(head) + w for w in wrapped[1:])
    errors = sum(f.severity is Severity.ERROR for f in findings)
    warnings = sum(f.severity is Severity.WARNING for f in findings)
    lines.append(f"\n{errors} error(s), {warnings} warning(s)")
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
