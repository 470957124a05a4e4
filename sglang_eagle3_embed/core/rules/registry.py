"""How a startup rule is declared: :class:`Rule` and the :func:`rule` decorator, the only way a rule
is registered, which joins a check to its entry in :mod:`~sglang_eagle3_embed.core.rules.catalog`
(severity, :class:`Stage`, title, what SGLang does without it). Pure module.

The rules of one launch live in this package's ``flags``, ``draft``, ``weights``, ``modes`` and
``pd``; :data:`sglang_eagle3_embed.core.rules.table.RULES` lists them in the order of
``docs/validation.md`` and :mod:`sglang_eagle3_embed.core.rules.table` runs them. The rules of a PD pair
live in ``pair`` (:data:`~sglang_eagle3_embed.core.rules.pair.PAIR_RULES`), which only
``check --pd-peer`` imports.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass, fields

from sglang_eagle3_embed.core import rule_ids
from sglang_eagle3_embed.core.findings import NotChecked, Severity
from sglang_eagle3_embed.core.readers.deployment import Deployment
from sglang_eagle3_embed.core.rules.catalog import CATALOG, Stage

__all__ = ["REGISTERED", "Refused", "Rule", "Stage", "declared_in", "refused", "rule"]


@dataclass(frozen=True)
class Refused(Deployment):
    """A launch that SGLang's own argument resolution refused: what the :attr:`Stage.RESOLUTION`
    rules read (:func:`refused` builds it)."""

    refusal: BaseException | None = None
    """The error SGLang's resolution raised."""


def refused(d: Deployment, error: BaseException) -> Refused:
    """``d`` (the launch as passed), refused by SGLang's resolution with ``error``."""
    return Refused(**{f.name: getattr(d, f.name) for f in fields(Deployment)}, refusal=error)


@dataclass(frozen=True)
class Rule:
    id: str
    severity: Severity
    stage: Stage
    title: str
    silent: str
    """What SGLang 0.5.23 does when the rule would fire, with the source line."""
    check: Callable[..., Iterable[str | NotChecked]]
    """Yields a message per problem, or :class:`NotChecked` when it lacks what it reads. It reads
    what its stage gives: a :class:`Deployment`, a :class:`Refused`, or a PD pair; a check that
    takes a second parameter gets the rule's id too (one check declared under several ids)."""
    takes_id: bool = False
    """The check takes ``(subject, rule_id)`` (read from its signature once, when it is declared)."""

    def run(self, subject) -> Iterable[str | NotChecked]:
        """The check's messages on ``subject`` (what the rule's stage reads)."""
        return self.check(subject, self.id) if self.takes_id else self.check(subject)


REGISTERED: dict[str, Rule] = {}
"""Every rule the decorator declared, by id (:data:`sglang_eagle3_embed.core.rules.table.RULES` orders them)."""


def rule(rule_id: str):
    """Decorator: the function is the check of the rule ``rule_id``, a constant of
    :mod:`~sglang_eagle3_embed.core.rule_ids` (where every id is written once) whose entry in
    :data:`~sglang_eagle3_embed.core.rules.catalog.CATALOG` gives its severity, stage, title and
    what SGLang does without it. The function is returned unchanged, so that one check taking
    ``(d, rule_id)`` can carry several rules, one decorator each (a table of the rules whose
    findings one reading gives)."""
    entry = CATALOG.get(rule_id)
    if entry is None:
        raise ValueError(
            f"rule {rule_id!r} has no entry in core/rules/catalog.py: add its severity, stage, title "
            f"and what SGLang does without it there"
        )

    def register(check):
        if rule_id in REGISTERED:
            raise ValueError(f"rule {rule_id!r} is declared twice")
        takes_id = len(inspect.signature(check, follow_wrapped=False).parameters) == 2
        REGISTERED[rule_id] = Rule(id=rule_id, check=check, takes_id=takes_id, **entry._asdict())
        return check

    return register


def declared_in(*modules: str) -> dict[str, Rule]:
    """The rules whose checks the named ``modules`` declare, by id, in the order of
    :mod:`~sglang_eagle3_embed.core.rule_ids` (stacked decorators register bottom-up, so the order
    of registration is not the order to show)."""
    return {
        i: REGISTERED[i]
        for name, i in vars(rule_ids).items()
        if name.isupper() and i in REGISTERED and REGISTERED[i].check.__module__ in modules
    }
