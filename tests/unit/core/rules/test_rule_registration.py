"""Every rule is declared one way: the ``@rule(ID)`` decorator on a module-level check in a module
of ``RULE_MODULES`` or the PD pair's module, joined to its entry in ``core/rules/catalog.py``
(CONTRIBUTING.md, "Adding a validation rule").

Read from the source with ``ast`` (a call of ``rule`` that is not the decorator of a module-level
function, a ``Rule`` built or a registry written outside ``core/rules/registry.py``), and from the
registry itself (each check is the module-level function the decorator was applied to, never a
lambda or a closure made in a loop). ``test_a_planted_second_registration_style_is_caught`` shows
each check failing on a planted second way.
"""

from __future__ import annotations

import ast
import sys
from importlib import import_module

import pytest

from sglang_eagle3_embed.core.findings import Severity
from sglang_eagle3_embed.core.rules import registry as rule_registry
from sglang_eagle3_embed.core.rules.catalog import CATALOG, Entry
from sglang_eagle3_embed.core.rules.registry import REGISTERED, Rule, Stage, rule
from sglang_eagle3_embed.core.rules.table import PAIR_RULE_MODULE, RULE_MODULES, RULES, every_rule
from tests.support import ROOT

PACKAGE = ROOT / "sglang_eagle3_embed"
REGISTRY = rule_registry.__name__
REGISTRIES = {"REGISTERED", "RULES", "PAIR_RULES"}
DECLARING = (*RULE_MODULES, import_module(PAIR_RULE_MODULE))
"""Every module that declares rules: the launch's, then the PD pair's."""


def _name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    return node.attr if isinstance(node, ast.Attribute) else None


def package_sources() -> dict[str, str]:
    return {
        ".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"): p.read_text()
        for p in PACKAGE.rglob("*.py")
    }


def registration_problems(sources: dict[str, str]) -> list[str]:
    """Every place in ``sources`` (module -> text) that registers a rule another way than the
    ``@rule(...)`` decorator on a module-level function."""
    found = []
    for module, text in sources.items():
        tree = ast.parse(text)
        decorators = {
            id(d) for node in tree.body if isinstance(node, ast.FunctionDef) for d in node.decorator_list
        }
        for node in ast.walk(tree):
            where = f"{module}:{getattr(node, 'lineno', '?')}"
            if isinstance(node, ast.Call) and _name(node.func) == "rule" and id(node) not in decorators:
                found.append(f"{where}: rule(...) is not the decorator of a module-level function")
            if module == REGISTRY:
                continue
            if isinstance(node, ast.Call) and _name(node.func) == "Rule":
                found.append(f"{where}: a Rule built outside the decorator")
            targets = node.targets if isinstance(node, ast.Assign) else []
            if any(isinstance(t, ast.Subscript) and _name(t.value) in REGISTRIES for t in targets):
                found.append(f"{where}: a rule registry written outside the decorator")
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and _name(node.func.value) in REGISTRIES
                and node.func.attr in ("update", "setdefault", "__setitem__")
            ):
                found.append(f"{where}: a rule registry written outside the decorator")
    return found


def decorated_checks(sources: dict[str, str]) -> int:
    """How many module-level functions of the rule modules carry ``@rule(...)``."""
    return sum(
        1
        for module in DECLARING
        for node in ast.parse(sources[module.__name__]).body
        if isinstance(node, ast.FunctionDef)
        for d in node.decorator_list
        if isinstance(d, ast.Call) and _name(d.func) == "rule"
    )


def registry_problems(registered: dict[str, Rule]) -> list[str]:
    """Rules of ``registered`` that do not have the shape the decorator gives."""
    modules = {m.__name__ for m in DECLARING}
    found = []
    for rule_id, r in registered.items():
        check = r.check
        module = getattr(check, "__module__", None)
        if module not in modules:
            found.append(f"{rule_id}: its check is in {module}, not in a module that declares rules")
        elif getattr(sys.modules[module], getattr(check, "__qualname__", ""), None) is not check:
            found.append(f"{rule_id}: its check {check!r} is not a module-level function of {module}")
        if r.id != rule_id or not isinstance(r.stage, Stage) or not isinstance(r.severity, Severity):
            found.append(f"{rule_id}: not the shape the decorator gives: {r!r}")
        if r.severity is Severity.NOT_CHECKED or not r.title or not r.silent:
            found.append(f"{rule_id}: a rule needs a severity, a title and what SGLang does without it")
    return found


def catalogued(monkeypatch, *rule_ids: str) -> None:
    """Give the planted ``rule_ids`` catalog entries for this test."""
    for rule_id in rule_ids:
        monkeypatch.setitem(CATALOG, rule_id, Entry(Severity.ERROR, Stage.POST, "t", "s"))


def test_every_rule_is_declared_by_the_decorator():
    sources = package_sources()
    assert registration_problems(sources) == []
    assert registry_problems(REGISTERED) == []
    assert decorated_checks(sources) == len(REGISTERED) == len(every_rule())
    by_module = [r.id for m in DECLARING for r in REGISTERED.values() if r.check.__module__ == m.__name__]
    assert sorted(every_rule()) == sorted(by_module)
    assert list(RULES) == [r for r in every_rule() if every_rule()[r].stage is not Stage.PAIR]


def test_one_check_carries_several_rules_each_getting_its_id(monkeypatch):
    """The capture plan's rules are one check under stacked decorators: each rule runs it with its
    own id, so each finding lands under the rule it belongs to."""
    monkeypatch.setattr(rule_registry, "REGISTERED", dict(REGISTERED))
    catalogued(monkeypatch, "planted-a", "planted-b")

    @rule("planted-a")
    @rule("planted-b")
    def _check(d, rule_id):
        yield f"{rule_id} on {d}"

    planted = rule_registry.REGISTERED
    assert list(planted["planted-a"].run("D")) == ["planted-a on D"]
    assert list(planted["planted-b"].run("D")) == ["planted-b on D"]
    plans = [r for r in RULES.values() if r.check.__name__ == "_from_plan"]
    assert len(plans) == 7 and len({r.id for r in plans}) == 7


def test_the_catalog_describes_the_declared_rules_and_no_other_in_the_order_of_the_ids():
    assert list(CATALOG) == list(every_rule())
    assert all((r.severity, r.stage, r.title, r.silent) == CATALOG[i] for i, r in REGISTERED.items())


def test_a_rule_without_a_catalog_entry_is_refused():
    with pytest.raises(ValueError, match=r"rule 'planted' has no entry in core/rules/catalog.py"):
        rule("planted")


def test_a_rule_is_declared_once():
    with pytest.raises(ValueError, match="declared twice"):
        rule("sglang-resolution")(lambda d: ())


MODES = "sglang_eagle3_embed.core.rules.modes"
PLANTED = {
    "a call, not a decorator": (
        'rule("planted")(_two_batch_overlap)\n',
        "rule(...) is not the decorator",
    ),
    "a loop over a table": (
        'for _id in ("a", "b"):\n    rule(_id)(_json_override)\n',
        "rule(...) is not the decorator",
    ),
    "decorated checks made in a loop": (
        'for _id in ("a", "b"):\n\n    @rule(_id)\n    def _check(d):\n        return ()\n',
        "rule(...) is not the decorator",
    ),
    "a Rule built by hand": (
        'REGISTERED["planted"] = Rule("planted", Severity.ERROR, Stage.POST, "t", "s", _json_override)\n',
        "a Rule built outside the decorator",
    ),
    "a registry written by hand": (
        "RULES.update(planted=None)\n",
        "a rule registry written outside the decorator",
    ),
}


@pytest.mark.parametrize("case", list(PLANTED))
def test_a_planted_second_registration_style_is_caught(case):
    line, expected = PLANTED[case]
    sources = package_sources()
    sources[MODES] += "\n\n" + line
    found = registration_problems(sources)
    assert any(expected in problem for problem in found), found


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda: lambda d: (), "is not a module-level function"),
        (lambda: rule_registry.refused, "not in a module that declares rules"),
    ],
    ids=["lambda", "a function of another module"],
)
def test_a_rule_registered_at_run_time_another_way_is_caught(monkeypatch, make, expected):
    planted = dict(REGISTERED)
    monkeypatch.setattr(rule_registry, "REGISTERED", planted)
    catalogued(monkeypatch, "planted")
    check = make()
    if getattr(check, "__name__", "") == "<lambda>":
        check.__module__ = MODES  # a lambda in a rule module: call style
    rule("planted")(check)
    assert any(expected in problem for problem in registry_problems(planted))
