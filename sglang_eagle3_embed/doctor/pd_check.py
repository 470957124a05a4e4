"""The service behind ``sglang-eagle3-embed check ARGS --pd-peer PEER_ARGS``: both command lines of a
PD-disaggregated deployment checked as ``check`` checks one (:mod:`sglang_eagle3_embed.doctor.check`),
then compared by the pair's rules (:mod:`sglang_eagle3_embed.core.rules.pair`), all in one table form.
Imports sglang only when run.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass

from sglang_eagle3_embed.core.errors import InputError
from sglang_eagle3_embed.core.findings import Finding, Severity
from sglang_eagle3_embed.core.rule_ids import PD_PEER
from sglang_eagle3_embed.core.rules.pair import COMPARED, PAIR_RULES, Pair, Side
from sglang_eagle3_embed.core.rules.table import Stage, evaluate
from sglang_eagle3_embed.doctor.check import (
    Check,
    LaunchArgumentsError,
    check_launch,
    findings_json,
    render_table,
    rule_table,
)

__all__ = ["FIRST", "PEER", "PairCheck", "check_pair", "render_pair_json", "render_pair_table"]

FIRST, PEER = "the command line", "the --pd-peer command line"
PD_PEER_RULE = PD_PEER
"""The one-sided rule that names the other side: its warning is answered by the comparison."""


@dataclass(frozen=True)
class PairCheck:
    """Both sides' checks, prefill first when the two are one prefill and one decode, and what
    comparing them found."""

    sides: tuple[tuple[str, str, Check], ...]
    """``(name, given_as, check)`` per side: ``the prefill side``, ``the command line``, its check."""
    findings: list[Finding]
    """What the pair's rules (:data:`~sglang_eagle3_embed.core.rules.pair.PAIR_RULES`) found."""

    @property
    def ok(self) -> bool:
        errors = [f for _, _, c in self.sides for f in c.findings if f.severity is Severity.ERROR]
        return not errors and not any(f.severity is Severity.ERROR for f in self.findings)


def _side(argv: list[str], gpu: str | None, given_as: str) -> tuple[Check, Side]:
    try:
        found = check_launch(argv, gpu)
    except (LaunchArgumentsError, InputError) as exc:
        raise InputError(f"{given_as}: {exc}") from None
    args = found.server_args
    raw = getattr(args, "_raw_input", None) or {}
    if found.resolved:
        from sglang.srt.arg_groups.overrides import resolution_result

        settings = {name: resolution_result(args, name) for name in COMPARED}
    else:
        settings = {name: raw.get(name, getattr(args, name, None)) for name in COMPARED}
    backend = "disaggregation_transfer_backend"  # as passed: SGLang rewrites mooncake_tcp
    settings[backend] = raw.get(backend, getattr(args, backend, None))
    return found, Side(given_as, found.deployment, settings, found.resolved)


def check_pair(argv: list[str], peer_argv: list[str], gpu: str | None = None) -> PairCheck:
    """Check ``argv`` and ``peer_argv`` (the other side's launch arguments) each as ``check`` does,
    then compare them. The ``pd-peer`` warning of each side gives way to the comparison."""
    first_check, first = _side(argv, gpu, FIRST)
    peer_check, peer = _side(peer_argv, gpu, PEER)
    pair = Pair.of(first, peer)
    checks = {FIRST: first_check, PEER: peer_check}
    sides = tuple((side.name, side.given_as, _without_pd_peer(checks[side.given_as])) for side in pair.sides)
    return PairCheck(sides, evaluate(pair, Stage.PAIR, PAIR_RULES))


def _without_pd_peer(found: Check) -> Check:
    return dataclasses.replace(found, findings=[f for f in found.findings if f.rule != PD_PEER_RULE])


def render_pair_table(pair: PairCheck) -> str:
    blocks = []
    for name, given_as, check in pair.sides:
        title = f"{name} ({given_as})" if name != given_as else name
        blocks.append(f"== {title} ==\n{render_table(check)}")
    blocks.append(
        f"== the pair: the two command lines compared ==\n\n{rule_table(pair.findings, PAIR_RULES)}"
    )
    return "\n\n".join(blocks)


def render_pair_json(pair: PairCheck) -> str:
    return json.dumps(
        {
            "ok": pair.ok,
            "resolved_as": pair.sides[0][2].resolved_as,
            "sides": [
                {
                    "side": name,
                    "given_as": given_as,
                    "ok": not any(f.severity is Severity.ERROR for f in check.findings),
                    "not_checked_here": list(check.not_checked_here),
                    **findings_json(check.findings),
                }
                for name, given_as, check in pair.sides
            ],
            "pair": findings_json(pair.findings, PAIR_RULES),
        },
        indent=2,
    )
