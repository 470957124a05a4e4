"""A rule id is written once: as a constant of ``core/rule_ids.py``. The decorator that declares a
rule, the errors and warnings that carry it, the code that examines a finding's rule and the rule
examples all name it by that constant (issue #41).

Read from the source of the package and of the harness (whose ``rule_examples`` key every rule's
examples) with ``ast``: a string literal equal to a registered rule id anywhere else in
``sglang_eagle3_embed`` or ``harness`` is a second spelling that can drift from the first.
``test_a_planted_duplicate_literal_is_caught`` shows the scan failing on one.
"""

from __future__ import annotations

import ast
import pickle
from pathlib import Path

import pytest

from harness.rule_examples import EXAMPLES
from sglang_eagle3_embed.core import rule_ids
from sglang_eagle3_embed.core.capture.draft_config import resolve_capture_plan
from sglang_eagle3_embed.core.errors import DraftConfigError, RuleError, UnsupportedModeError
from sglang_eagle3_embed.core.rules.registry import REGISTERED
from sglang_eagle3_embed.core.rules.table import every_rule
from tests.support import ROOT, python_sources

HOME = Path(rule_ids.__file__).relative_to(ROOT).as_posix()
CONSTANTS = {name: value for name, value in vars(rule_ids).items() if name.isupper()}


def package_sources() -> dict[str, str]:
    """Every module of the package and of the harness (where a rule id may be written, once, in
    ``rule_ids``, or named), by its path in the repository."""
    return python_sources("sglang_eagle3_embed", "harness")


def rule_id_literals(sources: dict[str, str], ids) -> dict[str, list[str]]:
    """For each of ``ids``, where in ``sources`` a string literal equal to it is written
    (``path:line``); f-string parts count."""
    found: dict[str, list[str]] = {i: [] for i in ids}
    for path, text in sources.items():
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in found:
                found[node.value].append(f"{path}:{node.lineno}")
    return found


def written_twice(sources: dict[str, str]) -> list[str]:
    """Each registered rule id not written exactly once, in ``core/rule_ids.py``."""
    return [
        f"{rule_id!r} is written at {', '.join(where) or 'no place'}; write it once, in {HOME}"
        for rule_id, where in rule_id_literals(sources, REGISTERED).items()
        if len(where) != 1 or not where[0].startswith(f"{HOME}:")
    ]


def test_every_rule_id_is_written_once_in_rule_ids():
    assert written_twice(package_sources()) == []


def test_rule_ids_holds_exactly_the_registered_rules_in_their_order():
    assert list(CONSTANTS.values()) == list(every_rule())
    assert set(CONSTANTS.values()) == set(REGISTERED)
    assert all(name == value.upper().replace("-", "_") for name, value in CONSTANTS.items())
    assert set(EXAMPLES) == set(every_rule())


@pytest.mark.parametrize(
    ("module", "planted"),
    [
        ("sglang_eagle3_embed/cli/ids.py", 'MALFORMED = ("draft-config-shape", "draft-ids-invalid")\n'),
        (
            "sglang_eagle3_embed/core/capture/draft_config.py",
            'raise DraftConfigError("x", rule="draft-ids-range")\n',
        ),
        ("harness/rule_examples.py", 'EXAMPLES["pd-peer"] = EXAMPLES[rule_ids.PD_PEER]\n'),
        (
            "sglang_eagle3_embed/doctor/check.py",
            'NOT_DEEPSEEK = [f for f in () if f.rule == f"target-not-deepseek"]\n',
        ),
    ],
    ids=["a tuple of ids", "an error's rule", "an example key", "an f-string compared"],
)
def test_a_planted_duplicate_literal_is_caught(module, planted):
    sources = package_sources()
    sources[module] += "\n\n" + planted
    problems = written_twice(sources)
    assert problems and all(f"{module}:" in p for p in problems), problems


def test_a_rule_id_written_only_outside_rule_ids_is_caught():
    """A rule declared with its id spelled in the decorator, with no constant, is caught too."""
    sources = package_sources()
    sources[HOME] = sources[HOME].replace('PD_PEER = "pd-peer"', 'PD_PEER = "pd" + "-peer"')
    pd = "sglang_eagle3_embed/core/rules/pd.py"
    sources[pd] = sources[pd].replace("@rule(PD_PEER)", '@rule("pd-peer")')
    [problem] = written_twice(sources)
    assert problem.startswith(f"'pd-peer' is written at {pd}:"), problem


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ([], rule_ids.DRAFT_CONFIG_SHAPE),
        ({"eagle_config": 3}, rule_ids.DRAFT_CONFIG_SHAPE),
        ({"eagle_config": {"use_aux_hidden_state": "yes"}}, rule_ids.DRAFT_CONFIG_SHAPE),
        ({"num_aux_hidden_states": 0}, rule_ids.DRAFT_CONFIG_SHAPE),
        ({"eagle_aux_hidden_state_layer_ids": [1, 1]}, rule_ids.DRAFT_IDS_INVALID),
        ({"eagle_aux_hidden_state_layer_ids": [-1, 2, 99]}, rule_ids.DRAFT_IDS_RANGE),
    ],
)
def test_a_capture_plan_error_carries_its_rule(config, expected):
    with pytest.raises(DraftConfigError) as caught:
        resolve_capture_plan(config, 8)
    assert caught.value.rule == expected


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (UnsupportedModeError.not_deepseek("LlamaForCausalLM"), rule_ids.TARGET_NOT_DEEPSEEK),
        (UnsupportedModeError.pipeline_parallel(2, "EAGLE3"), rule_ids.PIPELINE_PARALLEL),
        (UnsupportedModeError.two_batch_overlap("EAGLE3"), rule_ids.TWO_BATCH_OVERLAP),
        (DraftConfigError("m", rule=rule_ids.DRAFT_IDS_CONFLICT), rule_ids.DRAFT_IDS_CONFLICT),
    ],
    ids=["not-deepseek", "pipeline-parallel", "two-batch-overlap", "draft-config"],
)
def test_an_error_carries_its_rule_across_pickling(error, expected):
    """A scheduler process's error keeps its rule and its message when it crosses processes."""
    assert isinstance(error, RuleError)
    assert error.rule == expected
    back = pickle.loads(pickle.dumps(error))
    assert (type(back), str(back), back.rule) == (type(error), str(error), expected)
