"""The startup validation rules: one table, one source of truth. Pure module.

Each rule has a stable id, a severity, a :class:`Stage`, what SGLang 0.5.23 does without it (one
row of ``core/rules/catalog.py``), and a check that reads a
:class:`~sglang_eagle3_embed.core.readers.deployment.Deployment` (what the user passed, what SGLang
resolved, the target's and the draft's configs) and returns findings whose messages name the flag
or field, the value, what SGLang would have done silently, and the fix. Every rule is
declared one way, with the :func:`rule` decorator on its check (``core/rules/registry.py``), in the
module of its subject in this package: ``flags`` (the launch flags), ``draft`` (the draft and how
it fits the target), ``weights`` (what the weights' headers hold), ``modes`` (what the plugin
supports, and SGLang's own resolution refusing the launch), ``pd`` (a PD-disaggregated side and the
other side it cannot see); the rules of a PD pair (both command lines compared) live in ``pair``,
loaded only where two command lines are checked.
``docs/validation.md`` is generated from :func:`every_rule` (``python -m tools.validation_docs``);
a test keeps them in sync.

Rules run in stages: :attr:`Stage.PRE` on the flags as passed, before SGLang's speculative
resolution (which would otherwise stop on a bare ``assert``), :attr:`Stage.POST` after it,
:attr:`Stage.RESOLUTION` when SGLang's own resolution refuses the launch (on a :class:`Refused`),
and :attr:`Stage.PAIR` on the two sides of a PD pair.
"""

from __future__ import annotations

from sglang_eagle3_embed.core.findings import Finding, NotChecked, Severity
from sglang_eagle3_embed.core.readers.deployment import Deployment
from sglang_eagle3_embed.core.rules import draft as rules_draft
from sglang_eagle3_embed.core.rules import flags as rules_flags
from sglang_eagle3_embed.core.rules import modes as rules_modes
from sglang_eagle3_embed.core.rules import pd as rules_pd
from sglang_eagle3_embed.core.rules import weights as rules_weights
from sglang_eagle3_embed.core.rules.registry import Refused, Rule, Stage, declared_in, refused, rule

__all__ = [
    "PAIR_RULE_MODULE",
    "RULES",
    "RULE_MODULES",
    "Refused",
    "Rule",
    "Stage",
    "evaluate",
    "every_rule",
    "not_checked",
    "refused",
    "rule",
    "verdicts",
]

RULE_MODULES = (rules_flags, rules_draft, rules_weights, rules_modes, rules_pd)
"""The modules that declare rules, in the order of :data:`RULES`."""

RULES: dict[str, Rule] = declared_in(*(m.__name__ for m in RULE_MODULES))
"""Every rule of one launch by id, in the order of the findings, of ``check``'s table and of
docs/validation.md: the order of :mod:`~sglang_eagle3_embed.core.rule_ids` (by module, as
:data:`RULE_MODULES` lists them)."""


PAIR_RULE_MODULE = "sglang_eagle3_embed.core.rules.pair"
"""The module of the PD pair's rules (:attr:`Stage.PAIR`, its ``PAIR_RULES``): imported by
``check --pd-peer`` and :func:`every_rule` only, since no server compares two command lines."""


def every_rule() -> dict[str, Rule]:
    """Every rule by id: :data:`RULES`, then the PD pair's (the order of ``docs/validation.md``)."""
    from importlib import import_module

    return {**RULES, **import_module(PAIR_RULE_MODULE).PAIR_RULES}


def evaluate(d: Deployment, stage: Stage, rules: dict[str, Rule] = RULES) -> list[Finding]:
    """Run every rule of ``stage`` in ``rules`` on ``d`` (a :class:`Refused` for
    :attr:`Stage.RESOLUTION`, a PD pair for :attr:`Stage.PAIR` with the pair's rules)."""
    stage = Stage(stage)
    findings = []
    for r in rules.values():
        if r.stage is stage:
            findings.extend(_finding(r, item) for item in r.run(d))
    return findings


def _finding(r: Rule, item: str | NotChecked) -> Finding:
    if isinstance(item, NotChecked):
        return Finding(r.id, Severity.NOT_CHECKED, f"not checked: {item.why}")
    return Finding(r.id, r.severity, item)


def not_checked(stage: Stage, why: str) -> list[Finding]:
    """Every rule of ``stage``, reported as not checked (the stage did not run)."""
    stage = Stage(stage)
    return [
        Finding(r.id, Severity.NOT_CHECKED, f"not checked: {why}") for r in RULES.values() if r.stage is stage
    ]


RANK = {"ok": 0, Severity.NOT_CHECKED.value: 1, Severity.WARNING.value: 2, Severity.ERROR.value: 3}


def verdicts(findings: list[Finding], rules: dict[str, Rule] = RULES) -> dict[str, str]:
    """Every rule's verdict: ``ok``, ``not checked``, ``warning`` or ``error`` (the gravest)."""
    result = dict.fromkeys(rules, "ok")
    for f in findings:
        if RANK[f.severity.value] > RANK[result.get(f.rule, "ok")]:
            result[f.rule] = f.severity.value
    return result
